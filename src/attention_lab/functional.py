"""Scaled dot-product attention written out in full (notebooks 02-04).

``attention`` is the explicit maths that every module in this library uses when it
must hand back the attention weights. It is checked against
``torch.nn.functional.scaled_dot_product_attention`` in the tests.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._checks import check_dropout, check_qkv, check_scores_mask


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
    check_qkv(q, k, v)
    check_dropout(dropout_p)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T_q, T_k)
    if mask is not None:
        check_scores_mask(mask, scores.shape)
        scores = scores.masked_fill(mask, float("-inf"))  # (..., T_q, T_k)
    weights = torch.softmax(scores, dim=-1)  # (..., T_q, T_k)
    dropped = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
    return dropped @ v, weights  # (..., T_q, d_v), (..., T_q, T_k)
