"""Scaled dot-product attention written out in full (notebooks 02-04).

``attention`` is the explicit maths that every module in this library uses when it
must hand back the attention weights. It is checked against
``torch.nn.functional.scaled_dot_product_attention`` in the tests.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._checks import check_dropout, check_float_tensor, check_mask


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q kᵀ / sqrt(d_k)) v, returned with the weights.

    Args:
        q: (..., T_q, d_k) queries. Any leading dimensions (batch, heads) are kept.
        k: (..., T_k, d_k) keys.
        v: (..., T_k, d_v) values.
        mask: optional bool, broadcastable to (..., T_q, T_k); True = blocked.
        dropout_p: probability of zeroing a weight (the rest are scaled by 1/(1-p)).
            Applied whenever it is > 0, like ``F.scaled_dot_product_attention``:
            modules pass 0.0 in eval mode.

    Returns:
        context (..., T_q, d_v) and weights (..., T_q, T_k). The weights are those
        before dropout, so each row sums to 1. A row whose keys are all blocked
        has no defined softmax and comes back as NaN.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_float_tensor(t, name)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q has d_k={q.shape[-1]} but k has d_k={k.shape[-1]}; queries and keys must have "
            "the same last dimension to take their dot product"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k has {k.shape[-2]} positions but v has {v.shape[-2]}; each key needs one value"
        )
    check_dropout(dropout_p)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T_q, T_k)
    if mask is not None:
        check_mask(mask, q.shape[-2], k.shape[-2])
        _check_mask_broadcasts(mask, scores.shape)
        scores = scores.masked_fill(mask, float("-inf"))  # (..., T_q, T_k)
    weights = torch.softmax(scores, dim=-1)  # (..., T_q, T_k)
    dropped = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
    return dropped @ v, weights  # (..., T_q, d_v), (..., T_q, T_k)


def _check_mask_broadcasts(mask: torch.Tensor, scores_shape: torch.Size) -> None:
    """The mask's leading dimensions must broadcast to the scores' without growing them."""
    try:
        fits = torch.broadcast_shapes(mask.shape, scores_shape) == scores_shape
    except RuntimeError:
        fits = False
    if not fits:
        lead = tuple(scores_shape[:-2])
        raise ValueError(
            f"mask has shape {tuple(mask.shape)}, which does not broadcast to the scores "
            f"{tuple(scores_shape)}; pass a ({scores_shape[-2]}, {scores_shape[-1]}) mask, or "
            f"give it leading dimensions of size 1 or equal to {lead}"
        )
