"""Freezing one layer's attention to given weights (``attention_lab.interventions``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F

from .._checks import check_input
from ..fused import MultiHeadSelfAttention, repeat_kv
from ..i18n import error_text
from ..multihead import merge_heads
from .layers import active, layer_at, swapped_forward


def _check_weights(block: MultiHeadSelfAttention, weights: torch.Tensor) -> torch.Tensor:
    """Raise unless ``weights`` are (T, T), (H, T, T) or (B, H, T, T) rows of a softmax."""
    shape = tuple(getattr(weights, "shape", ()))
    ok = isinstance(weights, torch.Tensor) and torch.is_floating_point(weights)
    ok = ok and 2 <= len(shape) <= 4 and shape[-1] == shape[-2] <= block.context_length
    ok = ok and (len(shape) < 3 or shape[-3] in (1, block.n_heads))
    if not ok:
        raise ValueError(
            error_text(
                "weights have shape {shape}, but this layer takes float weights (T, T), "
                "(H, T, T) or (B, H, T, T) with H={n_heads} and T <= {context_length}; "
                "build them with even_weights(T) or mean_weights(model, ids)"
            ).format(shape=shape, n_heads=block.n_heads, context_length=block.context_length)
        )
    T = shape[-1]
    blocked = block.mask[:T, :T].to(weights.device)  # (T, T), True = blocked
    leak = weights.masked_fill(~blocked, 0).abs().max().item()
    sums = weights.sum(dim=-1)  # (..., T)
    worst = (sums - 1).abs().max().item()
    finite = bool(torch.isfinite(weights).all())
    if not finite or weights.min().item() < 0 or leak > 1e-6 or worst > 1e-4:
        raise ValueError(
            error_text(
                "weights must be >= 0, zero on the keys the {mask_kind} mask blocks, and each "
                "row must sum to 1; got a minimum of {low:.3g}, {leak:.3g} on blocked keys and a "
                "row summing to {row:.4g}; mask, then normalise: w / w.sum(-1, keepdim=True)"
            ).format(
                mask_kind=block.mask_kind,
                low=weights.min().item(),
                leak=leak,
                row=sums.flatten()[(sums - 1).abs().flatten().argmax()].item(),
            )
        )
    return weights


@contextlib.contextmanager
def freeze_attention(
    model: nn.Module, weights: torch.Tensor, *, layer: int = 0
) -> Iterator[nn.Module]:
    """Inside the ``with``, layer ``layer`` attends with ``weights`` instead of its softmax.

    ``weights``: (T, T), (H, T, T) or (B, H, T, T), broadcast over the batch and heads; each
    row sums to 1 over the keys the layer's mask allows. Inputs shorter than T use the top-left
    corner (causal and sliding masks only: their rows keep summing to 1). The values,
    ``out_proj`` and everything after are the model's own, and ``return_weights=True`` returns
    the frozen weights (B, H, T, T). On exit the layer's own ``forward`` is back.
    """
    block = layer_at(model, layer)
    frozen = _check_weights(block, weights).detach()
    Tw = frozen.shape[-1]

    def forward(x: torch.Tensor, return_weights: bool = False):
        B, T = check_input(x, block.d_model, block.context_length)
        if T > Tw or (T < Tw and block.mask_kind == "none"):
            raise ValueError(
                error_text(
                    "the frozen weights are for T={Tw} positions, but the input has T={T}; "
                    "freeze with weights built for T={T}"
                ).format(Tw=Tw, T=T)
            )
        if frozen.dim() == 4 and frozen.shape[0] not in (1, B):
            raise ValueError(
                error_text(
                    "the frozen weights are for a batch of {Bw} rows, but the input has B={B}; "
                    "freeze with (T, T) or (H, T, T) weights, or with (B, H, T, T) for this batch"
                ).format(Bw=frozen.shape[0], B=B)
            )
        w = frozen[..., :T, :T].to(x).expand(B, block.n_heads, T, T)  # (B, H, T, T)
        _, _, v = block.project(x)  # (B, n_kv, T, d_head): the block's own values
        v = repeat_kv(v, block.n_heads // v.shape[1])  # (B, H, T, d_head)
        p = block.dropout.p if block.training else 0.0
        dropped = F.dropout(w, p=p) if p > 0 else w  # (B, H, T, T)
        out = block.out_proj(merge_heads(dropped @ v))  # (B, T, D)
        return (out, w) if return_weights else out

    with swapped_forward(block, forward), active([block]):
        yield model
