"""Lesson 02 · query, key, value (notebooks/02_query_key_value.ipynb): the forward pass of one
attention head, written as a function and checked against ``SingleHeadAttention``."""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from ..heads import SingleHeadAttention
from ._core import _call, _close, _tensor, _Wrong, checker

# --- new: the forward of SingleHeadAttention -------------------------------------------------


@checker("02", "return (out, weights) computed from x and the three nn.Linear layers")
def check_single_head_forward(fn) -> str:
    """``fn(x, W_q, W_k, W_v) -> (out, weights)``: x is (B, T, d_in), each W_* an
    ``nn.Linear(d_in, d_head, bias=False)``; out is (B, T, d_head), weights (B, T, T)."""
    for B, T, d_in, d_head in ((2, 5, 8, 8), (1, 7, 6, 4)):
        head = SingleHeadAttention(d_in, d_head).eval()
        x = torch.randn(B, T, d_in)  # (B, T, d_in)
        with torch.no_grad():
            want_out, want_w = head(x, return_weights=True)  # (B, T, d_head), (B, T, T)
            layers = [_copy(layer) for layer in (head.W_q, head.W_k, head.W_v)]
            result = _call(fn, x.clone(), *layers)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise _Wrong(
                f"your function returned a {type(result).__name__}, not (out, weights)",
                "return out, weights",
            )
        out = _tensor(result[0], "out", (B, T, d_head))
        weights = _tensor(result[1], "weights", (B, T, T))
        if _close(weights, want_w) and _close(out, want_out):
            continue
        where = f"with d_in={d_in}, d_head={d_head}"
        q, k, v = (layer.weight for layer in (head.W_q, head.W_k, head.W_v))  # (d_head, d_in)
        scores = (x @ q.T) @ (x @ k.T).transpose(-2, -1)  # (B, T, T), unscaled
        if _close(weights, torch.softmax(scores, dim=-1)):
            raise _Wrong(
                f"{where}, the scores are not scaled",
                f"divide q @ k.transpose(-2, -1) by √d_head (here √{d_head}) before the softmax",
            )
        if d_head > 1 and _close(weights, torch.softmax(scores / d_head, dim=-1)):
            raise _Wrong(
                f"{where}, the scores are divided by d_head", "divide by √d_head, not by d_head"
            )
        if _close(weights, torch.softmax(scores / math.sqrt(d_head), dim=-2)):
            raise _Wrong(
                f"{where}, each column of the weights sums to 1, not each row",
                "softmax over the keys, the last dimension: torch.softmax(scores, dim=-1)",
            )
        if _close(weights, torch.softmax(scores.transpose(-2, -1) / math.sqrt(d_head), dim=-1)):
            raise _Wrong(
                f"{where}, the scores are transposed: keys on the rows, queries on the columns",
                "row i holds query i: scores = q @ k.transpose(-2, -1)",
            )
        raw = (x @ q) @ (x @ k).transpose(-2, -1) if d_in == d_head else None  # (B, T, T)
        if raw is not None and _close(weights, torch.softmax(raw / math.sqrt(d_head), dim=-1)):
            raise _Wrong(
                f"{where}, x is multiplied by the weight matrices, not by their transposes",
                "nn.Linear stores (d_head, d_in): call the layer, W_q(x), or use x @ W_q.weight.T",
            )
        if not _close(weights, want_w):
            raise _Wrong(
                f"{where}, the weights differ from SingleHeadAttention's by up to "
                f"{(weights - want_w).abs().max().item():.3f}",
                "q = W_q(x), k = W_k(x); weights = softmax(q @ k.transpose(-2, -1) / √d_head)",
            )
        raise _Wrong(
            f"{where}, the weights are right but out is not",
            "out is the weighted average of the values: weights @ W_v(x)",
        )
    return "the same weights and output as SingleHeadAttention, for square and narrow heads"


def _copy(layer: nn.Linear) -> nn.Linear:
    """A copy of ``layer`` for the learner, so that nothing it does changes the reference."""
    twin = nn.Linear(layer.in_features, layer.out_features, bias=layer.bias is not None)
    twin.load_state_dict(layer.state_dict())
    return twin
