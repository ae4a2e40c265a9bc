"""``LatentAttention``: DeepSeek's multi-head latent attention, MLA (notebook
12_attention_in_todays_llms).

Grouped-query attention shrinks the cache by sharing key/value heads. MLA keeps every head
its own keys and values, but caches neither: each token is squeezed into one small latent
vector c of width ``d_latent``, and the keys and values are made from it when needed.

    c = kv_down(x)                     # (B, T, d_latent): all the cache holds
    k = k_up(c), v = v_up(c)           # (B, T, D) each, split into H heads
    attention as in MultiHeadSelfAttention, then out_proj

The "absorbed" form never makes k or v. A score is q_h · (W_UK_h c) = (W_UK_hᵀ q_h) · c, so
the K up-projection folds into the query: each head's query becomes a d_latent-wide vector
scored directly against the cached latents (multi-query attention over c, with the scale of
d_head). And out_proj(concat_h W_UV_h u_h) = sum_h (W_O_h W_UV_h) u_h, with u_h the
weighted average of the latents: the V up-projection folds into the output projection. The
tests hold the two forms equal to 1e-5; generation from a cache uses the absorbed one.

Without RoPE: a rotation R(m) sits between the query and the folded matrix,
q_mᵀ R(m)ᵀ W_UK_h c_n with R depending on the position, so W_UK can no longer be absorbed
into one fixed query matrix; DeepSeek-V2 therefore adds a separate small "decoupled" key
that carries RoPE beside the latent. That key is not built here: ``rope=True`` is refused.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._checks import check_dropout, check_heads, check_input, check_positive
from .functional import attention
from .fused import check_cache
from .i18n import error_text
from .kv_cache import LayerCache
from .masks import build_mask, offset_mask, to_sdpa_mask
from .multihead import merge_heads, split_heads


def check_latent_rope(rope: bool) -> None:
    """Latent attention with RoPE needs DeepSeek's decoupled key, which is not built here."""
    if rope:
        raise ValueError(
            error_text(
                "latent attention (d_latent) cannot take RoPE here: the rotation sits between "
                "the query and the folded key up-projection and depends on the position, so "
                "the absorbed form breaks (DeepSeek-V2 adds a separate decoupled RoPE key); "
                "use learned positions or none with d_latent"
            )
        )


class LatentAttention(nn.Module):
    """Multi-head latent attention: a cached latent of width ``d_latent`` per token.

    Args:
        d_model, n_heads, context_length, dropout, qkv_bias, out_bias, mask_kind, window:
            as in ``MultiHeadSelfAttention`` (``qkv_bias`` switches the biases of
            ``q_proj`` and ``kv_down``; the up-projections have none, so they fold exactly).
        d_latent: the latent's width; the cache holds d_latent numbers per token and layer
            (multi-head attention holds 2 * D).
        rope: refused (see the module docstring).

    Parameters: ``q_proj`` (D -> D), ``kv_down`` (D -> d_latent), ``k_up`` and ``v_up``
    (d_latent -> D, head h owns rows h*d_head:(h+1)*d_head), ``out_proj`` (D -> D).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        context_length: int,
        d_latent: int,
        dropout: float = 0.0,
        qkv_bias: bool = True,
        out_bias: bool = True,
        mask_kind: str = "causal",
        window: int | None = None,
        rope: bool = False,
    ):
        super().__init__()
        self.d_head = check_heads(d_model, n_heads)
        self.d_model, self.n_heads = int(d_model), int(n_heads)
        self.n_kv_heads = self.n_heads  # every head its own keys and values, made from c
        self.d_latent = check_positive("d_latent", d_latent)
        self.context_length = check_positive("context_length", context_length)
        self.dropout = nn.Dropout(check_dropout(dropout))
        self.window = None if window is None else check_positive("window", window)
        mask = build_mask(mask_kind, self.context_length, self.window)  # (ctx, ctx), True = blocked
        self.mask_kind = mask_kind
        check_latent_rope(rope)
        self.rope = False
        D = self.d_model
        self.q_proj = nn.Linear(D, D, bias=qkv_bias)
        self.kv_down = nn.Linear(D, self.d_latent, bias=qkv_bias)
        self.k_up = nn.Linear(self.d_latent, D, bias=False)
        self.v_up = nn.Linear(self.d_latent, D, bias=False)
        self.out_proj = nn.Linear(D, D, bias=out_bias)
        self.register_buffer("mask", mask, persistent=False)

    def project(
        self, x: torch.Tensor, start: int = 0
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x (B, T, D) -> q, k, v (B, H, T, d_head) each, the decompressed form (no cache)."""
        c = self.kv_down(x)  # (B, T, d_latent)
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, H, T, d_head)
        k = split_heads(self.k_up(c), self.n_heads)  # (B, H, T, d_head)
        v = split_heads(self.v_up(c), self.n_heads)  # (B, H, T, d_head)
        return q, k, v

    def forward(
        self,
        x: torch.Tensor,
        return_weights: bool = False,
        cache: LayerCache | None = None,
        absorbed: bool | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """(B, T, D) -> (B, T, D), and the (B, H, T, T_k) weights if ``return_weights``.

        ``absorbed``: score the queries against the latents directly (True), or make each
        head's keys and values first (False); None (default) absorbs exactly when a
        ``cache`` is given, which is what the absorbed form is for. With a cache (a
        ``LayerCache``, ``new_cache()``) the latents of x are appended to it.
        """
        B, T = check_input(x, self.d_model, self.context_length)
        start = 0 if cache is None else check_cache(cache, self.mask_kind).start(T)
        absorbed = cache is not None if absorbed is None else absorbed
        c = self.kv_down(x)  # (B, T, d_latent)
        if cache is None:
            mask = self.mask[:T, :T]  # (T, T), True = blocked
        else:
            (c,) = cache.update(c, window=self.window)  # (B, T_k, d_latent)
            T_k = c.shape[1]
            mask = (
                None
                if T == 1
                else offset_mask(self.mask_kind, start, T, T_k, self.window, x.device)
            )
        p = self.dropout.p if self.training else 0.0
        if absorbed:
            out, weights = self._absorbed(x, c, mask, p, return_weights)  # (B, T, D)
        else:
            q = split_heads(self.q_proj(x), self.n_heads)  # (B, H, T, d_head)
            k = split_heads(self.k_up(c), self.n_heads)  # (B, H, T_k, d_head)
            v = split_heads(self.v_up(c), self.n_heads)  # (B, H, T_k, d_head)
            if return_weights:
                ctx, weights = attention(q, k, v, mask, dropout_p=p)  # (B, H, T, d_head)
            else:
                allowed = None if mask is None else to_sdpa_mask(mask)  # (T, T_k)
                ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=p)
            out = self.out_proj(merge_heads(ctx))  # (B, T, D)
        return (out, weights) if return_weights else out

    def absorbed_weights(self) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """The folded matrices: W_q·k (H, d_latent, D) and its bias (H, d_latent), which make
        each head's latent-wide query from x, and W_o·v (H, D, d_latent), which maps each
        head's average latent straight to the output (out_proj's bias is added after)."""
        H, d_head, d_c, D = self.n_heads, self.d_head, self.d_latent, self.d_model
        W_uk = self.k_up.weight.view(H, d_head, d_c)  # head h: k_h = W_uk[h] @ c
        W_uv = self.v_up.weight.view(H, d_head, d_c)  # head h: v_h = W_uv[h] @ c
        W_q = self.q_proj.weight.view(H, d_head, D)  # head h: q_h = W_q[h] @ x + b_q[h]
        W_qk = torch.einsum("hec,hed->hcd", W_uk, W_q)  # (H, d_latent, D)
        b = self.q_proj.bias
        b_qk = None if b is None else torch.einsum("hec,he->hc", W_uk, b.view(H, d_head))
        W_o = self.out_proj.weight.view(D, H, d_head)  # head h's columns of out_proj
        W_ov = torch.einsum("ohe,hec->hoc", W_o, W_uv)  # (H, D, d_latent)
        return W_qk, b_qk, W_ov

    def _absorbed(self, x, c, mask, p, return_weights):
        W_qk, b_qk, W_ov = self.absorbed_weights()
        q = torch.einsum("btd,hcd->bhtc", x, W_qk)  # (B, H, T, d_latent)
        if b_qk is not None:
            q = q + b_qk[:, None, :]  # (B, H, T, d_latent)
        latents = c[:, None]  # (B, 1, T_k, d_latent): one "key/value head" shared by all
        scale = 1 / math.sqrt(self.d_head)  # the scores are those of d_head-wide heads
        weights = None
        if return_weights:
            scores = q @ latents.transpose(-2, -1) * scale  # (B, H, T, T_k)
            if mask is not None:
                scores = scores.masked_fill(mask, float("-inf"))  # (B, H, T, T_k)
            weights = torch.softmax(scores, dim=-1)  # (B, H, T, T_k)
            dropped = F.dropout(weights, p=p) if p > 0 else weights
            u = dropped @ latents  # (B, H, T, d_latent)
        else:
            allowed = None if mask is None else to_sdpa_mask(mask)  # (T, T_k)
            u = F.scaled_dot_product_attention(
                q, latents, latents, attn_mask=allowed, dropout_p=p, scale=scale, enable_gqa=True
            )  # (B, H, T, d_latent)
        out = torch.einsum("bhtc,hoc->bto", u, W_ov)  # (B, T, D)
        if self.out_proj.bias is not None:
            out = out + self.out_proj.bias  # (B, T, D)
        return out, weights

    def new_cache(self) -> LayerCache:
        """An empty cache for this block: it will hold the latents (B, T, d_latent)."""
        return LayerCache(self.context_length)

    def extra_repr(self) -> str:
        window = f", window={self.window}" if self.mask_kind == "sliding" else ""
        return (
            f"d_model={self.d_model}, n_heads={self.n_heads}, d_head={self.d_head}, "
            f"d_latent={self.d_latent}, context_length={self.context_length}, "
            f"mask_kind={self.mask_kind!r}{window}"
        )
