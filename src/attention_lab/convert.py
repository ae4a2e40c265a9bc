"""Weight converters of ``MultiHeadSelfAttention`` (notebook 07), kept apart from the block.

The fused ``qkv.weight`` (3D, D) has the layout of ``torch.nn.MultiheadAttention``'s
``in_proj_weight``: rows [0:D] make Q, rows [D:2D] make K, rows [2D:3D] make V, and within
each block head h owns rows h*d_head:(h+1)*d_head. So weights convert both ways:

* ``from_torch`` / ``to_torch``: to and from ``torch.nn.MultiheadAttention``;
* ``from_separate`` / ``to_separate``: to and from this library's ``MultiHeadAttention``
  (three projections W_q, W_k, W_v, notebook 06).

The block calls them as ``MultiHeadSelfAttention.from_torch(mha, T)``, ``block.to_torch()``
and so on; ``from_*`` take the class to build as their first argument (``block_cls``), so
this module does not import the block's module. Every conversion keeps dtype, device,
dropout and training mode.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from .i18n import error_text
from .multihead import MultiHeadAttention


def from_torch(block_cls, mha: nn.MultiheadAttention, context_length: int, mask_kind, window):
    """A ``block_cls`` (``MultiHeadSelfAttention``) holding the weights of ``mha``."""
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
    block = block_cls(
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


def to_torch(block) -> nn.MultiheadAttention:
    """A ``torch.nn.MultiheadAttention(batch_first=True)`` with the weights of ``block``."""
    if block.mask_kind != "causal":
        raise ValueError(
            error_text(
                "to_torch() converts causal blocks only; this block has "
                "mask_kind={kind}. nn.MultiheadAttention keeps no mask: copy the "
                "weights yourself and pass attn_mask=block.mask[:T, :T] on every call"
            ).format(kind=repr(block.mask_kind))
        )
    has_bias = block.qkv.bias is not None
    if has_bias != (block.out_proj.bias is not None):
        raise ValueError(
            error_text(
                "nn.MultiheadAttention has one bias flag for both projections, but this block "
                "has qkv_bias={qkv_bias} and out_bias={out_bias}; build the block with "
                "qkv_bias == out_bias to convert it"
            ).format(qkv_bias=has_bias, out_bias=not has_bias)
        )
    w = block.qkv.weight
    mha = nn.MultiheadAttention(
        block.d_model,
        block.n_heads,
        dropout=block.dropout.p,
        bias=has_bias,
        batch_first=True,
        device=w.device,
        dtype=w.dtype,
    )
    with torch.no_grad():
        mha.in_proj_weight.copy_(w)
        mha.out_proj.weight.copy_(block.out_proj.weight)
        if has_bias:
            mha.in_proj_bias.copy_(block.qkv.bias)
            mha.out_proj.bias.copy_(block.out_proj.bias)
    return mha.train(block.training)  # same mode: same dropout behaviour


def from_separate(block_cls, mha: MultiHeadAttention):
    """A ``block_cls`` whose ``qkv`` stacks the W_q, W_k, W_v of ``mha`` (biases mirrored)."""
    if not isinstance(mha, MultiHeadAttention):
        raise TypeError(
            error_text("expected attention_lab.MultiHeadAttention, got {type}").format(
                type=type(mha).__name__
            )
        )
    w = mha.W_q.weight
    layers = (mha.W_q, mha.W_k, mha.W_v)
    qkv_bias = mha.W_q.bias is not None
    block = block_cls(
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


def to_separate(block) -> MultiHeadAttention:
    """A ``MultiHeadAttention`` whose W_q, W_k, W_v are the three row blocks of ``qkv``."""
    if block.mask_kind != "causal":
        raise ValueError(
            error_text(
                "MultiHeadAttention is always causal; this block has mask_kind={kind}"
            ).format(kind=repr(block.mask_kind))
        )
    w = block.qkv.weight
    qkv_bias = block.qkv.bias is not None
    mha = MultiHeadAttention(
        block.d_model,
        block.n_heads,
        block.context_length,
        dropout=block.dropout.p,
        qkv_bias=qkv_bias,
        out_bias=block.out_proj.bias is not None,
    ).to(device=w.device, dtype=w.dtype)
    D = block.d_model
    with torch.no_grad():
        for i, layer in enumerate((mha.W_q, mha.W_k, mha.W_v)):
            layer.weight.copy_(w[i * D : (i + 1) * D])
            if qkv_bias:
                layer.bias.copy_(block.qkv.bias[i * D : (i + 1) * D])
        mha.W_o.weight.copy_(block.out_proj.weight)
        if block.out_proj.bias is not None:
            mha.W_o.bias.copy_(block.out_proj.bias)
    return mha.train(block.training)  # same mode: same dropout behaviour
