"""``MultiHeadSelfAttention``: the chapter's block, with one fused QKV projection (notebook 07).

Two parameterised layers only: ``qkv = Linear(D, 3D)`` and ``out_proj = Linear(D, D)``.
The mask is derived from the configuration (``mask_kind``, ``window``, ``context_length``):
a non-persistent buffer, sliced to (T, T) on every call and never saved in ``state_dict``.
A checkpoint therefore holds the two projections only: it loads into a block of any
``context_length`` or mask kind, and the loading block keeps its own mask on both paths.

Weight layout of ``qkv.weight`` (3D, D) -- the same as ``torch.nn.MultiheadAttention``'s
``in_proj_weight``: rows [0:D] make Q, rows [D:2D] make K, rows [2D:3D] make V, and
within each block head h owns rows h*d_head:(h+1)*d_head. So weights convert both ways:
``from_torch`` / ``to_torch`` (``torch.nn.MultiheadAttention``) and ``from_separate`` /
``to_separate`` (this library's ``MultiHeadAttention``, three projections, notebook 06). Every
conversion keeps dtype, device, dropout and training mode.

Two paths compute the same thing (the tests hold them equal):
* ``forward(x)`` uses ``F.scaled_dot_product_attention`` -- fused kernels, no weights;
* ``forward(x, return_weights=True)`` uses the explicit maths of ``functional.attention``
  and also returns the (B, H, T, T) weights.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._checks import check_dropout, check_heads, check_input, check_positive
from .functional import attention
from .i18n import error_text
from .masks import build_mask, to_sdpa_mask
from .multihead import MultiHeadAttention, merge_heads, split_heads


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
    ):
        super().__init__()
        self.d_head = check_heads(d_model, n_heads)
        self.d_model, self.n_heads = int(d_model), int(n_heads)
        self.context_length = check_positive("context_length", context_length)
        self.dropout = nn.Dropout(check_dropout(dropout))
        self.window = None if window is None else check_positive("window", window)
        mask = build_mask(mask_kind, self.context_length, self.window)  # (ctx, ctx), True = blocked
        self.mask_kind = mask_kind
        self.qkv = nn.Linear(self.d_model, 3 * self.d_model, bias=qkv_bias)
        self.out_proj = nn.Linear(self.d_model, self.d_model, bias=out_bias)
        self.register_buffer("mask", mask, persistent=False)

    def forward(
        self, x: torch.Tensor, return_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """(B, T, D) -> (B, T, D), and the (B, H, T, T) weights if ``return_weights``.

        Without weights it runs ``F.scaled_dot_product_attention`` (fused kernels); with
        them, the explicit ``functional.attention``. Both use this block's mask.
        """
        B, T = check_input(x, self.d_model, self.context_length)
        q, k, v = self.qkv(x).split(self.d_model, dim=-1)  # 3 x (B, T, D)
        q = split_heads(q, self.n_heads)  # (B, H, T, d_head)
        k = split_heads(k, self.n_heads)  # (B, H, T, d_head)
        v = split_heads(v, self.n_heads)  # (B, H, T, d_head)
        p = self.dropout.p if self.training else 0.0
        mask = self.mask[:T, :T]  # (T, T), True = blocked
        if return_weights:
            ctx, weights = attention(q, k, v, mask, dropout_p=p)  # (B, H, T, d_head)
        elif self.mask_kind == "causal":
            ctx = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        else:  # SDPA's boolean mask means "may attend": the opposite of ours
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=to_sdpa_mask(mask), dropout_p=p)
        out = self.out_proj(merge_heads(ctx))  # (B, T, D)
        return (out, weights) if return_weights else out

    def extra_repr(self) -> str:
        window = f", window={self.window}" if self.mask_kind == "sliding" else ""
        return (
            f"d_model={self.d_model}, n_heads={self.n_heads}, d_head={self.d_head}, "
            f"context_length={self.context_length}, mask_kind={self.mask_kind!r}{window}"
        )

    # --- weight conversion ---------------------------------------------------------------

    @classmethod
    def from_torch(
        cls,
        mha: nn.MultiheadAttention,
        context_length: int,
        mask_kind: str = "causal",
        window: int | None = None,
    ) -> MultiHeadSelfAttention:
        """Build a block holding the weights of a ``torch.nn.MultiheadAttention``.

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
        both have biases or both have none (it has one ``bias`` flag for the two).
        """
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
        w = self.qkv.weight
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
                mha.in_proj_bias.copy_(self.qkv.bias)
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
        """Cut ``qkv`` back into W_q, W_k, W_v of a ``MultiHeadAttention`` (causal blocks only)."""
        if self.mask_kind != "causal":
            raise ValueError(
                error_text(
                    "MultiHeadAttention is always causal; this block has mask_kind={kind}"
                ).format(kind=repr(self.mask_kind))
            )
        w = self.qkv.weight
        qkv_bias = self.qkv.bias is not None
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
                    layer.bias.copy_(self.qkv.bias[i * D : (i + 1) * D])
            mha.W_o.weight.copy_(self.out_proj.weight)
            if self.out_proj.bias is not None:
                mha.W_o.bias.copy_(self.out_proj.bias)
        return mha.train(self.training)  # same mode: same dropout behaviour
