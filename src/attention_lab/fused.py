"""``MultiHeadSelfAttention``: the chapter's block, with one fused QKV projection (notebook 07),
and the switches of today's LLMs (notebook 12_attention_in_todays_llms).

Two parameterised layers only: ``qkv = Linear(D, D + 2 * n_kv_heads * d_head)`` and
``out_proj = Linear(D, D)``; with the default ``n_kv_heads = n_heads`` that is ``Linear(D, 3D)``.
The mask is derived from the configuration (``mask_kind``, ``window``, ``context_length``):
a non-persistent buffer, sliced to (T, T) on every call and never saved in ``state_dict``.
A checkpoint therefore holds the two projections only: it loads into a block of any
``context_length`` or mask kind, and the loading block keeps its own mask on both paths.

Weight layout of ``qkv.weight`` -- with n_kv_heads = H the same as
``torch.nn.MultiheadAttention``'s ``in_proj_weight``: rows [0:D] make Q, the next
n_kv_heads * d_head rows make K, the last ones V, and within each block head h owns rows
h*d_head:(h+1)*d_head. So weights convert both ways: ``from_torch`` / ``to_torch``
(``torch.nn.MultiheadAttention``) and ``from_separate`` / ``to_separate`` (this library's
``MultiHeadAttention``, three projections, notebook 06), which the block inherits from
convert.py. Every conversion keeps dtype, device, dropout and training mode.

Today's switches (each equal to the chapter's block in its limit case, tested):

* ``n_kv_heads``: grouped-query attention. Each group of n_heads // n_kv_heads query heads
  shares one key/value head (query heads 0..g-1 use kv head 0, as in Llama: ``repeat_kv``);
  1 is multi-query attention. The cache shrinks by n_heads / n_kv_heads.
* ``rope=True``: rotary positions (rope.py) on q and k after the head split, at absolute
  positions.
* ``cache=``: a ``LayerCache`` (kv_cache.py) -- the block appends this call's keys and
  values, and the new tokens attend over everything kept (a sliding window keeps its
  window only). A chunk of several tokens (prefill) works too.
* ``smear_keys=True``: Olsson et al.'s smeared keys (smear.py, notebook 10): each key a
  learned mix of its own token's key and the previous token's, one α per key/value head
  (the parameter ``smear_alpha``). The cache keeps the keys before the smear and smears
  them after each update; a sliding window with a cache is refused (the first key kept
  would need the one before it, already dropped).

Two paths compute the same thing (the tests hold them equal):
* ``forward(x)`` uses ``F.scaled_dot_product_attention`` -- fused kernels, no weights
  (``enable_gqa=True`` when key/value heads are shared);
* ``forward(x, return_weights=True)`` uses the explicit maths of ``functional.attention``
  on ``repeat_kv``'s keys and values, and also returns the (B, H, T, T) weights.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._checks import (
    check_dropout,
    check_heads,
    check_input,
    check_kv_heads,
    check_positive,
    check_rope_base,
)
from .convert import WeightConversions
from .functional import attention
from .i18n import error_text
from .kv_cache import LayerCache
from .masks import build_mask, offset_mask, to_sdpa_mask
from .multihead import merge_heads, split_heads
from .rope import apply_rope, check_rope_width, rope_cos_sin
from .smear import check_smear
from .smear import smear_keys as smear


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(B, n_kv, T, d) -> (B, n_kv * n_rep, T, d): each key/value head repeated for its group.

    Query heads 0 .. n_rep - 1 get kv head 0, the next n_rep get kv head 1, and so on
    (Hugging Face's Llama ``repeat_kv``; ``x.repeat_interleave(n_rep, dim=1)``). Tiling,
    ``x.repeat(1, n_rep, 1, 1)``, would give query head 1 kv head 1: a different model.
    """
    if n_rep == 1:
        return x
    B, n_kv, T, d = x.shape
    return x[:, :, None].expand(B, n_kv, n_rep, T, d).reshape(B, n_kv * n_rep, T, d)


def check_cache(cache, mask_kind: str) -> LayerCache:
    """``cache`` if a block can use it: one layer's ``LayerCache``, on a causal or sliding
    block (a cache holds only the past, so it cannot serve attention that sees the future)."""
    if not isinstance(cache, LayerCache):
        raise TypeError(
            error_text(
                "cache must be one layer's LayerCache (block.new_cache(), or cache[i] of a "
                "model's KVCache), got {type}"
            ).format(type=type(cache).__name__)
        )
    if mask_kind == "none":
        raise ValueError(
            error_text(
                "a KV cache holds only the tokens before, but this block has mask_kind='none' "
                "(every position sees the future); build it with mask_kind='causal' or "
                "'sliding' to generate from a cache"
            )
        )
    return cache


class MultiHeadSelfAttention(WeightConversions, nn.Module):
    """Multi-head self-attention with a fused QKV projection. Its weight conversions
    (``from_torch``, ``to_torch``, ``from_separate``, ``to_separate``) are in convert.py.

    Args:
        d_model: D; must be divisible by ``n_heads``.
        n_heads: H; each head works in d_head = D // H dimensions.
        context_length: the longest sequence; the mask buffer is (context_length, context_length).
        dropout: probability of dropping an attention weight in training.
        qkv_bias: whether ``qkv`` has a bias (GPT-2 and nanoGPT's default: yes).
        out_bias: whether ``out_proj`` has a bias (yes by default).
        mask_kind: "causal" (default), "sliding" (needs ``window``) or "none".
        window: with "sliding", each position sees itself and the ``window - 1`` before it.
        n_kv_heads: key/value heads, a divisor of H; None (default) means H, the chapter's
            block; 1 is multi-query attention (notebook 12_attention_in_todays_llms).
        rope: rotate q and k by their positions (RoPE, rope.py); needs an even d_head.
        rope_base: RoPE's base (10,000 as in Llama 2).
        smear_keys: mix each key with the previous token's key, σ(α_h) k_j + (1 - σ(α_h))
            k_{j-1}, one learned α_h per key/value head (``smear_alpha``, starting at 0);
            False (default) adds no parameter (smear.py, notebook 10).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        context_length: int,
        dropout: float = 0.0,
        qkv_bias: bool = True,
        out_bias: bool = True,
        mask_kind: str = "causal",
        window: int | None = None,
        n_kv_heads: int | None = None,
        rope: bool = False,
        rope_base: float = 10_000.0,
        smear_keys: bool = False,
    ):
        super().__init__()
        self.d_head = check_heads(d_model, n_heads)
        self.d_model, self.n_heads = int(d_model), int(n_heads)
        self.n_kv_heads = check_kv_heads(self.n_heads, n_kv_heads)
        self.context_length = check_positive("context_length", context_length)
        self.dropout = nn.Dropout(check_dropout(dropout))
        self.window = None if window is None else check_positive("window", window)
        mask = build_mask(mask_kind, self.context_length, self.window)  # (ctx, ctx), True = blocked
        self.mask_kind = mask_kind
        self.rope = bool(rope)
        if self.rope:
            check_rope_width(self.d_head, self.n_heads)
        self.rope_base = check_rope_base(rope_base)
        kv_dim = self.n_kv_heads * self.d_head
        self.qkv = nn.Linear(self.d_model, self.d_model + 2 * kv_dim, bias=qkv_bias)
        self.out_proj = nn.Linear(self.d_model, self.d_model, bias=out_bias)
        self.register_buffer("mask", mask, persistent=False)
        self.smear_keys = check_smear(smear_keys)
        if self.smear_keys:  # made last and from zeros: the other weights draw as before
            self.smear_alpha = nn.Parameter(torch.zeros(self.n_kv_heads))  # (n_kv,): σ(0) = 1/2

    def project(
        self, x: torch.Tensor, start: int = 0
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x (B, T, D) at positions start .. start + T - 1 -> q (B, H, T, d_head) and k, v
        (B, n_kv_heads, T, d_head); with ``rope``, q and k are rotated (v never is). The keys
        are those before ``smear_keys`` mixes them (``forward`` smears them)."""
        kv_dim = self.n_kv_heads * self.d_head
        q, k, v = self.qkv(x).split([self.d_model, kv_dim, kv_dim], dim=-1)  # (B, T, D|kv_dim)
        q = split_heads(q, self.n_heads)  # (B, H, T, d_head)
        k = split_heads(k, self.n_kv_heads)  # (B, n_kv, T, d_head)
        v = split_heads(v, self.n_kv_heads)  # (B, n_kv, T, d_head)
        if self.rope:
            positions = torch.arange(start, start + x.shape[1], device=x.device)  # (T,)
            dtype = torch.promote_types(x.dtype, torch.float32)  # float64 stays float64
            cos, sin = rope_cos_sin(positions, self.d_head, self.rope_base, dtype)  # (T, d_head)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)  # (B, H|n_kv, T, d_head)
        return q, k, v

    def forward(
        self, x: torch.Tensor, return_weights: bool = False, cache: LayerCache | None = None
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """(B, T, D) -> (B, T, D), and the (B, H, T, T_k) weights if ``return_weights``.

        Without weights it runs ``F.scaled_dot_product_attention`` (fused kernels); with
        them, the explicit ``functional.attention``. Both use this block's mask. With a
        ``cache`` (``new_cache()``), x holds the next T tokens: their keys and values are
        appended, and they attend over the T_k positions kept (T_k = T without a cache).
        """
        B, T = check_input(x, self.d_model, self.context_length)
        start = 0 if cache is None else check_cache(cache, self.mask_kind).start(T)
        q, k, v = self.project(x, start)  # (B, H, T, d_head), 2 x (B, n_kv, T, d_head)
        if cache is None:
            mask = self.mask[:T, :T]  # (T, T), True = blocked
            causal = self.mask_kind == "causal"
        else:
            if self.smear_keys and self.mask_kind == "sliding":
                raise ValueError(
                    error_text(
                        "a sliding window drops old keys from the cache, but with smear_keys "
                        "the first key kept needs the one before it; run this block without "
                        "a cache (generate with use_cache=False), or use mask_kind='causal'"
                    )
                )
            k, v = cache.update(k, v, window=self.window)  # 2 x (B, n_kv, T_k, d_head)
            # one new token sees every key kept (the cache keeps only its window): no mask
            mask = (
                None
                if T == 1
                else offset_mask(self.mask_kind, start, T, k.shape[2], self.window, x.device)
            )
            causal = False
        if self.smear_keys:  # the keys from position 0 on: the call's, or the whole cache's
            k = smear(k, self.smear_alpha)  # (B, n_kv, T_k, d_head)
        n_rep = self.n_heads // self.n_kv_heads
        p = self.dropout.p if self.training else 0.0
        if return_weights:
            k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, H, T_k, d_head)
            ctx, weights = attention(q, k, v, mask, dropout_p=p)  # (B, H, T, d_head)
        else:
            gqa = {"enable_gqa": True} if n_rep > 1 else {}  # SDPA shares the kv heads itself
            if causal:
                ctx = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True, **gqa)
            else:  # SDPA's boolean mask means "may attend": the opposite of ours
                allowed = None if mask is None else to_sdpa_mask(mask)  # (T, T_k)
                ctx = F.scaled_dot_product_attention(
                    q, k, v, attn_mask=allowed, dropout_p=p, **gqa
                )  # (B, H, T, d_head)
        out = self.out_proj(merge_heads(ctx))  # (B, T, D)
        return (out, weights) if return_weights else out

    def new_cache(self) -> LayerCache:
        """An empty cache for this block: ``block(x, cache=cache)`` then fills it."""
        return LayerCache(self.context_length)

    def extra_repr(self) -> str:
        window = f", window={self.window}" if self.mask_kind == "sliding" else ""
        kv = f", n_kv_heads={self.n_kv_heads}" if self.n_kv_heads != self.n_heads else ""
        rope = f", rope=True, rope_base={self.rope_base:g}" if self.rope else ""
        smeared = ", smear_keys=True" if self.smear_keys else ""
        return (
            f"d_model={self.d_model}, n_heads={self.n_heads}, d_head={self.d_head}, "
            f"context_length={self.context_length}, mask_kind={self.mask_kind!r}{window}{kv}"
            f"{rope}{smeared}"
        )
