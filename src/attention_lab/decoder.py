"""One decoder stack for ``TinyLM`` and ``CharLM`` (notebooks 08-11; its switches: notebook
12_attention_in_todays_llms).

token embedding (+ a learned position table) -> ``n_layers`` blocks -> (final layer norm) ->
LM head. What the blocks are is the config's (config.py):

* attention only (``TinyLM``'s, ``mlp=False``): ``attn(x)``, or ``x + attn(x)`` on a
  residual stream (``AttentionLayer``);
* GPT-2's pre-layer-norm block (``CharLM``'s, ``mlp=True``): ``x + attn(ln1(x))``, then
  ``x + mlp(ln2(x))`` (``Block``), and ``ln_f`` before the LM head.

Each block's attention is a ``MultiHeadSelfAttention`` (with ``n_kv_heads``, RoPE, a window)
or, with ``d_latent``, a ``LatentAttention``. ``forward(ids, cache=model.new_cache())`` runs
the next tokens from a KV cache: the model hands each layer its own entry, ``cache[i]``, and
each layer updates it (Hugging Face's design). ``generate(..., use_cache=True)`` decodes one
token at a time from it.

Where the layers live: ``model.blocks[i].attn``; the chapter's one-layer attention-only
model keeps its one layer at ``model.attn`` (so its checkpoints, keys ``attn.*``, and its
printed form stay as notebook 08 shows them). ``model.attention_layers()`` lists them in
forward order either way. Modules are built in forward order -- token and position
embeddings, each block (its attention, then its MLP), the final layer norm, the LM head --
so a seeded model draws the same initial weights as before the stack was shared.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn as nn

from ._checks import check_positive, check_token_ids
from .config import DecoderConfig
from .fused import MultiHeadSelfAttention
from .i18n import error_text
from .kv_cache import KVCache, LayerCache
from .latent import LatentAttention


def make_attention(
    d_model: int,
    n_heads: int,
    context_length: int,
    *,
    d_latent: int | None = None,
    n_kv_heads: int | None = None,
    rope: bool = False,
    rope_base: float = 10_000.0,
    smear_keys: bool = False,
    **options,
) -> MultiHeadSelfAttention | LatentAttention:
    """One block's attention: ``LatentAttention`` with ``d_latent``, else
    ``MultiHeadSelfAttention``; ``options`` are dropout, biases, mask_kind and window.
    ``smear_keys`` (smear.py) applies to ``MultiHeadSelfAttention`` only (the config
    refuses it with ``d_latent``)."""
    if d_latent is not None and smear_keys:
        raise ValueError(
            error_text(
                "smear_keys=True does not apply with d_latent: latent attention makes its "
                "keys from a cached latent; leave one of them out"
            )
        )
    if d_latent is not None:
        return LatentAttention(d_model, n_heads, context_length, d_latent, rope=rope, **options)
    return MultiHeadSelfAttention(
        d_model,
        n_heads,
        context_length,
        n_kv_heads=n_kv_heads,
        rope=rope,
        rope_base=rope_base,
        smear_keys=smear_keys,
        **options,
    )


def _attend(attn: nn.Module, x: torch.Tensor, return_weights: bool, cache: LayerCache | None):
    """``attn(x)`` as (out, weights or None). Without a cache it is called exactly as before
    caches existed, so an intervention that swaps a block's ``forward`` still works."""
    extra = {} if cache is None else {"cache": cache}
    if return_weights:
        return attn(x, return_weights=True, **extra)  # (B, T, D), (B, H, T, T_k)
    return attn(x, **extra), None  # (B, T, D)


class AttentionLayer(nn.Module):
    """One attention-only layer (``TinyLM``): its ``attn``, on the residual stream or not.

    (B, T, D) -> (B, T, D): ``x + attn(x)`` with ``residual``, else ``attn(x)``; and the
    (B, H, T, T_k) weights if asked. ``cache``: this layer's ``LayerCache``.
    """

    def __init__(self, attn: nn.Module, residual: bool):
        super().__init__()
        self.attn, self.residual = attn, residual

    def forward(self, x: torch.Tensor, return_weights: bool = False, cache=None):
        out, weights = _attend(self.attn, x, return_weights, cache)  # (B, T, D)
        if self.residual:
            out = x + out  # (B, T, D): the stream keeps x, attention adds to it
        return (out, weights) if return_weights else out


class Block(nn.Module):
    """Pre-layer-norm block: x + attn(ln1(x)), then x + mlp(ln2(x)); (B, T, D) in and out.

    ``window``: None for causal attention, k for a sliding window. ``options`` go to the
    attention (``make_attention``): n_kv_heads, rope, rope_base, d_latent, biases.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        context_length: int,
        dropout: float = 0.0,
        window: int | None = None,
        **options,
    ):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        kind = "causal" if window is None else "sliding"  # window=1: only the current position
        options.setdefault("mask_kind", kind)
        self.attn = make_attention(
            d_model, n_heads, context_length, dropout=dropout, window=window, **options
        )
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(  # per position: D -> 4D -> D
            nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model)
        )

    def forward(self, x: torch.Tensor, return_weights: bool = False, cache=None):
        """(B, T, D) -> (B, T, D), and the attention weights (B, H, T, T_k) if asked."""
        a, weights = _attend(self.attn, self.ln1(x), return_weights, cache)  # (B, T, D)
        x = x + a  # (B, T, D): the residual stream keeps x, attention adds to it
        x = x + self.mlp(self.ln2(x))  # (B, T, D)
        return (x, weights) if return_weights else x


class Decoder(nn.Module):
    """Token ids (B, T) -> next-token logits (B, T, vocab_size): the stack ``TinyLM`` and
    ``CharLM`` share, built from a ``DecoderConfig``."""

    def __init__(self, config: DecoderConfig):
        super().__init__()
        self.config = c = config
        self.vocab_size, self.context_length = c.vocab_size, c.context_length
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        # None without a learned table: no rows that would get no gradient
        self.pos_emb = (
            nn.Embedding(c.context_length, c.d_model) if c.positions == "learned" else None
        )
        self.residual = c.uses_residual
        options = c.attention_options()
        if c.mlp:
            self.blocks = nn.ModuleList(
                Block(c.d_model, c.n_heads, c.context_length, **options) for _ in range(c.n_layers)
            )
        elif c.n_layers == 1:  # the chapter's model: its checkpoints keep the keys attn.*
            self.attn = make_attention(c.d_model, c.n_heads, c.context_length, **options)
            # the stack's one layer, a view of self.attn, kept out of the module tree
            self._only = (AttentionLayer(self.attn, self.residual),)
        else:
            self.blocks = nn.ModuleList(
                AttentionLayer(
                    make_attention(c.d_model, c.n_heads, c.context_length, **options),
                    self.residual,
                )
                for _ in range(c.n_layers)
            )
        self.ln_f = nn.LayerNorm(c.d_model) if c.mlp else None
        self.lm_head = nn.Linear(c.d_model, c.vocab_size)

    def layers(self) -> tuple[nn.Module, ...] | nn.ModuleList:
        """The blocks in forward order (``blocks``, or the one layer around ``attn``)."""
        return self._only if "blocks" not in self._modules else self.blocks

    def attention_layers(self) -> list[nn.Module]:
        """The attention of every block in forward order: ``[self.attn]``, or each
        ``blocks[i].attn``."""
        return [block.attn for block in self.layers()]

    def new_cache(self) -> KVCache:
        """An empty KV cache for this model: one ``LayerCache`` per layer."""
        return KVCache(self.config.n_layers, self.context_length)

    def forward(
        self, idx: torch.Tensor, return_weights: bool = False, cache: KVCache | None = None
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """(B, T) int64 ids -> (B, T, vocab) logits, and the weights if asked: (B, L, H, T, T),
        or (B, H, T, T) for the one-layer attention-only model (notebook 08).

        ``cache`` (``new_cache()``): the ids are the next T tokens after those the cache has
        seen, at positions cache.position, ...; each layer extends ``cache[i]``, and the
        weights are over the T_k positions kept, (B, L, H, T, T_k).
        """
        check_token_ids(idx, self.vocab_size, self.context_length, type(self).__name__)
        return self._forward(idx, return_weights, cache)

    def _forward(self, idx: torch.Tensor, return_weights: bool = False, cache=None):
        """``forward`` after the id check (``generate`` feeds the ids it picked itself)."""
        T = idx.shape[1]
        start = 0 if cache is None else self._check_cache(cache).start(T)
        x = self.tok_emb(idx)  # (B, T, D)
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(start, start + T, device=idx.device))  # (B, T, D)
        weights = []
        for i, block in enumerate(self.layers()):
            if cache is not None:
                x = block(x, return_weights, cache=cache[i])  # (B, T, D), and weights
            else:
                x = block(x, True) if return_weights else block(x)  # (B, T, D), and weights
            if return_weights:
                x, w = x  # (B, T, D), (B, H, T, T_k)
                weights.append(w)
        if self.ln_f is not None:
            x = self.ln_f(x)  # (B, T, D)
        logits = self.lm_head(x)  # (B, T, vocab)
        if not return_weights:
            return logits
        if "blocks" not in self._modules:
            return logits, weights[0]  # (B, H, T, T_k): notebook 08's one layer
        return logits, torch.stack(weights, dim=1)  # (B, L, H, T, T_k)

    def _check_cache(self, cache) -> KVCache:
        if not isinstance(cache, KVCache) or len(cache) != self.config.n_layers:
            got = (
                f"KVCache(n_layers={len(cache)})"
                if isinstance(cache, KVCache)
                else type(cache).__name__
            )
            raise TypeError(
                error_text(
                    "cache must be this model's KVCache with one entry per layer "
                    "({n_layers}), got {got}; make one with model.new_cache()"
                ).format(n_layers=self.config.n_layers, got=got)
            )
        return cache

    def _generate(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        pick: Callable[[torch.Tensor], torch.Tensor],
        use_cache: bool,
    ) -> torch.Tensor:
        """Append ``max_new_tokens`` ids, each ``pick(logits of the last position)`` (B, 1).

        Without a cache each step runs the last ``context_length`` ids again; with one, the
        prompt runs once (prefill) and then each new id alone (one token per step). Both run
        under ``torch.inference_mode`` (no autograd bookkeeping: a quarter of a cached step's
        time at notebook 11's size) and return an ordinary tensor.
        """
        n = check_positive("max_new_tokens", max_new_tokens)
        was_training = self.training
        self.eval()
        try:
            with torch.inference_mode():
                idx = self._decode(idx, n, pick, use_cache)
        finally:
            self.train(was_training)
        return idx.clone()  # out of inference mode: a tensor that can be edited in place

    def _decode(self, idx, n, pick, use_cache):
        if not use_cache:
            for _ in range(n):
                logits = self(idx[:, -self.context_length :])  # (B, T, vocab)
                next_id = pick(logits[:, -1])  # (B, 1)
                idx = torch.cat([idx, next_id], dim=1)  # (B, T + 1)
            return idx
        cache = self.new_cache()
        prompt = idx[:, -self.context_length :]  # (B, T0)
        cache.start(prompt.shape[1] + n - 1)  # room for all of them, or say so now
        logits = self(prompt, cache=cache)  # (B, T0, vocab): the prefill, its ids checked
        for step in range(n):
            next_id = pick(logits[:, -1])  # (B, 1), an id < vocab_size by construction
            idx = torch.cat([idx, next_id], dim=1)  # (B, T + 1)
            if step < n - 1:
                logits = self._forward(next_id, cache=cache)  # (B, 1, vocab): one token
        return idx
