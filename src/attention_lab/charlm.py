"""A character-level language model on real text (notebook 11).

The chapter's ``MultiHeadSelfAttention`` (causal) inside a full Transformer block:
``x = x + attn(ln1(x))``, then ``x = x + mlp(ln2(x))`` (pre-layer-norm, residual connections,
a 2-layer MLP on each position). ``CharLM`` stacks ``n_layers`` blocks between token +
position embeddings and a final layer norm + LM head. Also here: ``train_charlm`` (AdamW on
seeded random windows, a tqdm bar), ``evaluate_loss`` on held-out text, ``CharLM.generate``
(sampling with a temperature and a ``torch.Generator``) and ``head_shares``, which measures
where each head looks. The text, vocabulary and bigram baseline are in ``attention_lab.text``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._checks import check_dropout, check_heads, check_positive, check_token_ids
from .device import cpu_threads
from .fused import MultiHeadSelfAttention
from .i18n import _, error_text
from .masks import causal_mask
from .text import get_batch, word_starts
from .tiny_lm import run_blocks


@dataclass(frozen=True)
class CharLMConfig:
    """Sizes of a ``CharLM``. ``n_layers`` blocks of ``n_heads`` heads, each d_model wide.

    ``window``: None (default) for causal attention over the whole context; k for a sliding
    window (notebook 04's mask), each position seeing itself and the k - 1 characters before
    it. ``window=1`` is the control of notebook 11: attention that sees only the current
    character, so nothing reaches a position from any other.
    """

    vocab_size: int
    context_length: int = 32
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    dropout: float = 0.0
    window: int | None = None

    def __post_init__(self) -> None:
        for name in ("vocab_size", "context_length", "d_model", "n_heads", "n_layers"):
            object.__setattr__(self, name, check_positive(name, getattr(self, name)))
        check_heads(self.d_model, self.n_heads)
        object.__setattr__(self, "dropout", check_dropout(self.dropout))
        if self.window is not None:
            object.__setattr__(self, "window", check_positive("window", self.window))


class Block(nn.Module):
    """Pre-layer-norm block: x + attn(ln1(x)), then x + mlp(ln2(x)); (B, T, D) in and out."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        context_length: int,
        dropout: float = 0.0,
        window: int | None = None,
    ):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        kind = "causal" if window is None else "sliding"  # window=1: only the current position
        self.attn = MultiHeadSelfAttention(
            d_model, n_heads, context_length, dropout=dropout, mask_kind=kind, window=window
        )
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(  # per position: D -> 4D -> D
            nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model)
        )

    def forward(self, x: torch.Tensor, return_weights: bool = False):
        """(B, T, D) -> (B, T, D), and the attention weights (B, H, T, T) if asked."""
        if return_weights:
            a, weights = self.attn(self.ln1(x), return_weights=True)  # (B, T, D), (B, H, T, T)
        else:
            a, weights = self.attn(self.ln1(x)), None  # (B, T, D)
        x = x + a  # (B, T, D): the residual stream keeps x, attention adds to it
        x = x + self.mlp(self.ln2(x))  # (B, T, D)
        return (x, weights) if return_weights else x


class CharLM(nn.Module):
    """Character ids (B, T) -> next-character logits (B, T, vocab_size)."""

    def __init__(self, config: CharLMConfig):
        super().__init__()
        if not isinstance(config, CharLMConfig):
            raise TypeError(
                error_text(
                    "CharLM takes a CharLMConfig, got {got}; "
                    "use CharLM(CharLMConfig(vocab_size=len(vocab)))"
                ).format(got=type(config).__name__)
            )
        self.config = c = config
        self.vocab_size, self.context_length = c.vocab_size, c.context_length
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = nn.Embedding(c.context_length, c.d_model)
        self.blocks = nn.ModuleList(
            Block(c.d_model, c.n_heads, c.context_length, c.dropout, c.window)
            for _ in range(c.n_layers)
        )
        self.ln_f = nn.LayerNorm(c.d_model)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size)

    def forward(self, idx: torch.Tensor, return_weights: bool = False):
        """(B, T) ids -> (B, T, vocab) logits, and (B, L, H, T, T) weights if asked."""
        check_token_ids(idx, self.vocab_size, self.context_length, "CharLM")  # one host sync
        pos = torch.arange(idx.shape[1], device=idx.device)  # (T,)
        x = self.tok_emb(idx) + self.pos_emb(pos)  # (B, T, D)
        if return_weights:
            x, weights = run_blocks(self.blocks, x, True)  # (B, T, D), (B, L, H, T, T)
            return self.lm_head(self.ln_f(x)), weights  # (B, T, vocab)
        return self.lm_head(self.ln_f(run_blocks(self.blocks, x)))  # (B, T, vocab)

    @torch.no_grad()
    def generate(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Sample ``max_new_tokens`` characters after ``idx`` (B, T0); returns (B, T0 + n).

        Each step sees the last ``context_length`` ids, divides the logits by ``temperature``
        (below 1: more likely characters, above 1: more varied) and samples with ``generator``,
        so a seeded generator gives the same text every time.
        """
        n = check_positive("max_new_tokens", max_new_tokens)
        if not isinstance(temperature, (int, float)) or temperature <= 0:
            raise ValueError(
                error_text("temperature={temperature} must be > 0; 1.0 samples as trained").format(
                    temperature=repr(temperature)
                )
            )
        was_training = self.training
        self.eval()
        for _step in range(n):
            logits = self(idx[:, -self.context_length :])[:, -1]  # (B, vocab)
            probs = F.softmax(logits / temperature, dim=-1)  # (B, vocab)
            next_id = torch.multinomial(probs, 1, generator=generator)  # (B, 1)
            idx = torch.cat([idx, next_id], dim=1)  # (B, T + 1)
        self.train(was_training)
        return idx


@torch.no_grad()
def evaluate_loss(model: CharLM, ids: torch.Tensor) -> float:
    """Mean cross-entropy (nats) over ``ids`` cut into consecutive windows of context_length.

    Every character of ``ids`` after the first is predicted once (a window's first one from
    less context). Deterministic: no sampling.
    """
    T = model.context_length
    n = (len(ids) - 1) // T
    if n < 1:
        raise ValueError(
            error_text("{n} ids are too few for one window of {T} plus its target").format(
                n=len(ids), T=T
            )
        )
    x = ids[: n * T].view(n, T)  # (n, T)
    y = ids[1 : n * T + 1].view(n, T)  # (n, T)
    was_training = model.training
    model.eval()
    logits = model(x)  # (n, T, vocab)
    model.train(was_training)
    return F.cross_entropy(logits.flatten(0, 1), y.flatten()).item()


@dataclass
class CharLMHistory:
    """What ``train_charlm`` measured; losses in nats."""

    initial_val_loss: float
    step_losses: list[float] = field(default_factory=list)  # training batch, one per step
    final_val_loss: float = math.nan
    steps: int = 0
    seconds: float = 0.0


def train_charlm(
    model: CharLM,
    train_ids: torch.Tensor,
    val_ids: torch.Tensor,
    steps: int = 600,
    batch_size: int = 32,
    lr: float = 3e-3,
    seed: int = 0,
    progress: bool = True,
    threads: int | None = 1,
) -> CharLMHistory:
    """Train ``model`` in place with AdamW on random windows of ``train_ids``.

    Batches come from a ``torch.Generator`` seeded with ``seed``; seed the model's
    initialisation yourself (``torch.manual_seed``). The validation loss on ``val_ids`` is
    measured before and after. ``threads`` CPU threads (restored afterwards; a fixed number
    keeps the result the same from run to run).
    """
    check_positive("steps", steps)
    check_positive("batch_size", batch_size)
    from tqdm.auto import tqdm  # imported here: it pulls in IPython and ipywidgets

    with cpu_threads(threads):
        g = torch.Generator().manual_seed(seed)
        history = CharLMHistory(initial_val_loss=evaluate_loss(model, val_ids), steps=steps)
        optimiser = torch.optim.AdamW(model.parameters(), lr=lr)
        model.train()
        start = time.perf_counter()
        for _step in tqdm(range(steps), desc=_("training"), disable=not progress):
            x, y = get_batch(train_ids, batch_size, model.context_length, g)  # (B, T), (B, T)
            logits = model(x)  # (B, T, vocab)
            loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())  # (): mean over B * T
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            history.step_losses.append(loss.item())
        history.seconds = time.perf_counter() - start
        model.eval()
        history.final_val_loss = evaluate_loss(model, val_ids)
    return history


def head_shares(weights: torch.Tensor, x: torch.Tensor, is_space: torch.Tensor) -> dict:
    """Mean attention weight of every head on four keys, over the queries where each exists.

    ``weights`` (N, L, H, T, T) from ``CharLM(x, return_weights=True)``; ``x`` (N, T) the ids;
    ``is_space`` (vocab,) bool, True for whitespace ids. Returns {name: (L, H)} for
    "current" (key i), "previous" (key i - 1, queries i >= 1), "two back" (key i - 2,
    queries i >= 2) and "word start" (the first character of the word that character i is
    in; only where that word starts inside the window at least three characters back, so
    this key is none of the other three). A key no query has gives NaN.
    """
    N, L, H, T, _ = weights.shape
    i = torch.arange(T).expand(N, T)  # (N, T)
    start = word_starts(x, is_space)  # (N, T), -1 where unknown
    keys = {
        "current": (i, torch.ones(N, T, dtype=torch.bool)),
        "previous": (i - 1, i >= 1),
        "two back": (i - 2, i >= 2),
        "word start": (start, (start >= 0) & (start <= i - 3)),
    }
    shares = {}
    for name, (key, valid) in keys.items():
        index = key.clamp(min=0)[:, None, None, :, None].expand(N, L, H, T, 1)  # (N, L, H, T, 1)
        w = weights.gather(-1, index).squeeze(-1)  # (N, L, H, T): weight of query i on its key
        keep = valid[:, None, None, :].float()  # (N, 1, 1, T)
        shares[name] = (w * keep).sum(dim=(0, 3)) / keep.sum(dim=(0, 3))  # (L, H)
    return shares


def uniform_causal_weights(shape: tuple[int, ...]) -> torch.Tensor:
    """The control: every query spreads its weight evenly over its i + 1 visible keys.

    ``shape`` is (..., T, T); returns a tensor of that shape.
    """
    T = shape[-1]
    w = (~causal_mask(T)).float()  # (T, T): 1 where a query may look
    return (w / w.sum(dim=-1, keepdim=True)).expand(shape)  # (..., T, T)
