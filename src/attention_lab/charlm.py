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
import torch.nn.functional as F

from ._checks import check_positive
from .config import CharLMConfig
from .decoder import Block, Decoder
from .device import cpu_threads
from .i18n import _, error_text
from .masks import causal_mask
from .text import get_batch, word_starts

__all__ = [
    "Block",
    "CharLM",
    "CharLMConfig",
    "CharLMHistory",
    "evaluate_loss",
    "head_shares",
    "train_charlm",
    "uniform_causal_weights",
]


class CharLM(Decoder):
    """Character ids (B, T) -> next-character logits (B, T, vocab_size).

    The stack ``TinyLM`` shares (decoder.py) with GPT-2's block; every switch of notebook
    12_attention_in_todays_llms is a ``CharLMConfig`` field (``n_kv_heads``,
    ``positions="rope"``, ``window``, ``d_latent``).
    """

    def __init__(self, config: CharLMConfig):
        if not isinstance(config, CharLMConfig):
            raise TypeError(
                error_text(
                    "CharLM takes a CharLMConfig, got {got}; "
                    "use CharLM(CharLMConfig(vocab_size=len(vocab)))"
                ).format(got=type(config).__name__)
            )
        super().__init__(config)

    def generate(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        generator: torch.Generator | None = None,
        use_cache: bool = False,
    ) -> torch.Tensor:
        """Sample ``max_new_tokens`` characters after ``idx`` (B, T0); returns (B, T0 + n).

        Each step sees the last ``context_length`` ids, divides the logits by ``temperature``
        (below 1: more likely characters, above 1: more varied) and samples with ``generator``,
        so a seeded generator gives the same text every time. ``use_cache=True`` runs the
        prompt once and then one character per step from a KV cache (while they fit in
        ``context_length``; False by default: notebook 11's samples were made without).
        """
        if not isinstance(temperature, (int, float)) or temperature <= 0:
            raise ValueError(
                error_text("temperature={temperature} must be > 0; 1.0 samples as trained").format(
                    temperature=repr(temperature)
                )
            )

        def sample(logits: torch.Tensor) -> torch.Tensor:  # (B, vocab) -> (B, 1)
            probs = F.softmax(logits / temperature, dim=-1)  # (B, vocab)
            return torch.multinomial(probs, 1, generator=generator)  # (B, 1)

        return self._generate(idx, max_new_tokens, sample, use_cache)


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
