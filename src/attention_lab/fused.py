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
``MultiHeadAttention``, three projections, notebook 06). Every conversion keeps dtype,
device, dropout and training mode.

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
from .functional import attention
from .i18n import error_text
from .kv_cache import LayerCache
from .masks import build_mask, offset_mask, to_sdpa_mask
from .multihead import MultiHeadAttention, merge_heads, split_heads
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


class MultiHeadSelfAttention(nn.Module):
    """Multi-head self-attention with a fused QKV projection.

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

    # --- weight conversion ---------------------------------------------------------------
    # The blocks built by from_torch and from_separate have n_kv_heads = H and no RoPE (the
    # sources have neither). to_torch and to_separate give the same function for any
    # n_kv_heads: each key/value head's rows are copied to every query head of its group
    # (repeat_kv on the weights), so the copy has H key/value heads and the memory of plain
    # multi-head attention. A block with RoPE or smeared keys converts to neither: they have
    # no rotation and no smear.

    def _refuse_rope(self, method: str, target: str) -> None:
        if self.rope:
            raise ValueError(
                error_text(
                    "{method}() cannot convert a block with rope=True: {target} has no rotary "
                    "positions, so no weights give the same function; keep this block, or "
                    "build one with rope=False"
                ).format(method=method, target=target)
            )
        if self.smear_keys:
            raise ValueError(
                error_text(
                    "{method}() cannot convert a block with smear_keys=True: {target} makes "
                    "each key from its own token only, so no weights give the same function; "
                    "keep this block, or build one with smear_keys=False"
                ).format(method=method, target=target)
            )

    def _expanded_qkv(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``qkv``'s weight (3D, D) and bias (3D,) with each key/value head's rows repeated
        for the query heads of its group: plain multi-head attention, the same function."""
        w, b = self.qkv.weight, self.qkv.bias
        if self.n_kv_heads == self.n_heads:
            return w, b
        kv_dim, n_rep = self.n_kv_heads * self.d_head, self.n_heads // self.n_kv_heads

        def expand(t: torch.Tensor) -> torch.Tensor:  # (D + 2 kv_dim, ...) -> (3D, ...)
            q, k, v = t.split([self.d_model, kv_dim, kv_dim])
            k, v = (
                u.unflatten(0, (self.n_kv_heads, self.d_head))  # (n_kv, d_head, ...)
                .repeat_interleave(n_rep, dim=0)  # (H, d_head, ...): head h gets kv head h // g
                .flatten(0, 1)  # (D, ...)
                for u in (k, v)
            )
            return torch.cat([q, k, v])  # (3D, ...)

        return expand(w), None if b is None else expand(b)

    @classmethod
    def from_torch(
        cls,
        mha: nn.MultiheadAttention,
        context_length: int,
        mask_kind: str = "causal",
        window: int | None = None,
    ) -> MultiHeadSelfAttention:
        """Build a block holding the weights of a ``torch.nn.MultiheadAttention`` (with
        n_kv_heads = H and no RoPE: the module has neither).

        ``nn.MultiheadAttention`` keeps no mask (it takes one per call), so say which mask
        the new block uses: ``mask_kind`` and ``window`` as in the constructor.
        PyTorch calls H ``num_heads``; this library calls it ``n_heads``.
        """
        if not isinstance(mha, nn.MultiheadAttention):
            raise TypeError(
                error_text("expected torch.nn.MultiheadAttention, got {type}").format(
                    type=type(mha).__name__
                )
            )
        if not mha._qkv_same_embed_dim or mha.bias_k is not None or mha.add_zero_attn:
            raise ValueError(
                error_text(
                    "only a plain nn.MultiheadAttention converts: kdim == vdim == embed_dim, "
                    "add_bias_kv=False and add_zero_attn=False"
                )
            )
        w = mha.in_proj_weight
        has_bias = mha.in_proj_bias is not None
        block = cls(
            mha.embed_dim,
            mha.num_heads,
            context_length,
            dropout=mha.dropout,
            qkv_bias=has_bias,
            out_bias=mha.out_proj.bias is not None,
            mask_kind=mask_kind,
            window=window,
        ).to(device=w.device, dtype=w.dtype)
        with torch.no_grad():
            block.qkv.weight.copy_(w)
            block.out_proj.weight.copy_(mha.out_proj.weight)
            if has_bias:
                block.qkv.bias.copy_(mha.in_proj_bias)
            if mha.out_proj.bias is not None:
                block.out_proj.bias.copy_(mha.out_proj.bias)
        return block.train(mha.training)  # same mode: same dropout behaviour

    def to_torch(self) -> nn.MultiheadAttention:
        """A ``torch.nn.MultiheadAttention(batch_first=True)`` with these weights.

        Call it with ``attn_mask=attention_lab.causal_mask(T)``: for a boolean mask it uses
        our convention, True = blocked. Only causal blocks convert (the mask is the one thing
        ``nn.MultiheadAttention`` does not keep), and only when ``qkv`` and ``out_proj``
        both have biases or both have none (it has one ``bias`` flag for the two). With
        n_kv_heads < H each key/value head's rows are repeated for its group (the same
        function, H key/value heads); a block with RoPE does not convert.
        """
        self._refuse_rope("to_torch", "nn.MultiheadAttention")
        if self.mask_kind != "causal":
            raise ValueError(
                error_text(
                    "to_torch() converts causal blocks only; this block has "
                    "mask_kind={kind}. nn.MultiheadAttention keeps no mask: copy the "
                    "weights yourself and pass attn_mask=block.mask[:T, :T] on every call"
                ).format(kind=repr(self.mask_kind))
            )
        has_bias = self.qkv.bias is not None
        if has_bias != (self.out_proj.bias is not None):
            raise ValueError(
                error_text(
                    "nn.MultiheadAttention has one bias flag for both projections, but this block "
                    "has qkv_bias={qkv_bias} and out_bias={out_bias}; build the block with "
                    "qkv_bias == out_bias to convert it"
                ).format(qkv_bias=has_bias, out_bias=not has_bias)
            )
        w, qkv_b = self._expanded_qkv()  # (3D, D), (3D,): H key/value heads
        mha = nn.MultiheadAttention(
            self.d_model,
            self.n_heads,
            dropout=self.dropout.p,
            bias=has_bias,
            batch_first=True,
            device=w.device,
            dtype=w.dtype,
        )
        with torch.no_grad():
            mha.in_proj_weight.copy_(w)
            mha.out_proj.weight.copy_(self.out_proj.weight)
            if has_bias:
                mha.in_proj_bias.copy_(qkv_b)
                mha.out_proj.bias.copy_(self.out_proj.bias)
        return mha.train(self.training)  # same mode: same dropout behaviour

    @classmethod
    def from_separate(cls, mha: MultiHeadAttention) -> MultiHeadSelfAttention:
        """Stack the W_q, W_k, W_v of a ``MultiHeadAttention`` into one fused ``qkv`` weight.

        Biases are mirrored: ``qkv`` has one exactly when W_q, W_k, W_v have them, and
        ``out_proj`` exactly when W_o has one, so ``to_separate`` gives back the same keys.
        """
        if not isinstance(mha, MultiHeadAttention):
            raise TypeError(
                error_text("expected attention_lab.MultiHeadAttention, got {type}").format(
                    type=type(mha).__name__
                )
            )
        w = mha.W_q.weight
        layers = (mha.W_q, mha.W_k, mha.W_v)
        qkv_bias = mha.W_q.bias is not None
        block = cls(
            mha.d_model,
            mha.n_heads,
            mha.context_length,
            dropout=mha.dropout.p,
            qkv_bias=qkv_bias,
            out_bias=mha.W_o.bias is not None,
        ).to(device=w.device, dtype=w.dtype)
        with torch.no_grad():
            block.qkv.weight.copy_(torch.cat([layer.weight for layer in layers]))  # (3D, D)
            if qkv_bias:
                block.qkv.bias.copy_(torch.cat([layer.bias for layer in layers]))  # (3D,)
            block.out_proj.weight.copy_(mha.W_o.weight)
            if mha.W_o.bias is not None:
                block.out_proj.bias.copy_(mha.W_o.bias)
        return block.train(mha.training)  # same mode: same dropout behaviour

    def to_separate(self) -> MultiHeadAttention:
        """Cut ``qkv`` back into W_q, W_k, W_v of a ``MultiHeadAttention`` (causal blocks only;
        with n_kv_heads < H, W_k and W_v hold each key/value head once per query head)."""
        self._refuse_rope("to_separate", "MultiHeadAttention")
        if self.mask_kind != "causal":
            raise ValueError(
                error_text(
                    "MultiHeadAttention is always causal; this block has mask_kind={kind}"
                ).format(kind=repr(self.mask_kind))
            )
        w, qkv_b = self._expanded_qkv()  # (3D, D), (3D,): H key/value heads
        qkv_bias = qkv_b is not None
        mha = MultiHeadAttention(
            self.d_model,
            self.n_heads,
            self.context_length,
            dropout=self.dropout.p,
            qkv_bias=qkv_bias,
            out_bias=self.out_proj.bias is not None,
        ).to(device=w.device, dtype=w.dtype)
        D = self.d_model
        with torch.no_grad():
            for i, layer in enumerate((mha.W_q, mha.W_k, mha.W_v)):
                layer.weight.copy_(w[i * D : (i + 1) * D])
                if qkv_bias:
                    layer.bias.copy_(qkv_b[i * D : (i + 1) * D])
            mha.W_o.weight.copy_(self.out_proj.weight)
            if self.out_proj.bias is not None:
                mha.W_o.bias.copy_(self.out_proj.bias)
        return mha.train(self.training)  # same mode: same dropout behaviour
