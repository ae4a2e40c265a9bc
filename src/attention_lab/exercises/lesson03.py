"""Lesson 03 · scaling (notebooks/03_scaling.ipynb): the variance of q·k, and attention
written with ``torch.einsum`` (scaled by √d_head; the mask argument is the one lesson 04 builds).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..masks import causal_mask, sliding_window_mask
from ._core import _call, _close, _masked_softmax, _tensor, _Wrong, checker

# --- exercise 5 of exercises.ipynb: predict the variance of q·k ------------------------------


@checker("03", "return a number: the variance you predict for these d_head and scaled")
def check_score_variance(fn) -> str:
    """``fn(d_head, scaled) -> float``: Var(q·k) for q, k with independent N(0, 1) entries."""
    for d_head in (1, 4, 16, 64):
        for scaled in (False, True):
            want = 1.0 if scaled else float(d_head)
            answer = _call(fn, d_head, scaled)
            try:
                got = float(answer)
            except (TypeError, ValueError):
                raise _Wrong(
                    f"for d_head={d_head} your function returned a {type(answer).__name__}, "
                    "not a number",
                    "return a float (or an int)",
                ) from None
            if math.isclose(got, want, rel_tol=1e-6):
                continue
            case = f"d_head={d_head}, {'scaled' if scaled else 'not scaled'}"
            if math.isclose(got, math.sqrt(want), rel_tol=1e-6) and d_head > 1:
                raise _Wrong(
                    f"for {case} you predict {got:g}: that is the standard deviation",
                    "the variance of a sum of d_head independent terms, each of variance 1, "
                    "is d_head",
                )
            if scaled and math.isclose(got, 1 / math.sqrt(d_head), rel_tol=1e-6):
                raise _Wrong(
                    f"for {case} you predict {got:g}",
                    "dividing by √d_head divides the variance by (√d_head)² = d_head",
                )
            raise _Wrong(
                f"for {case} you predict {got:g}; the measurement says otherwise",
                "each product q_i·k_i has mean 0 and variance 1, and the d_head products are "
                "independent; a constant c multiplies a variance by c²",
            )
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 20_000, 64, generator=g)  # (N, 64) each
    measured = (q * k).sum(-1).var().item()
    return f"Var(q·k) = d_head, and 1 after scaling (measured at d_head=64: {measured:.0f})"


# --- exercise 6 of exercises.ipynb: attention with torch.einsum ------------------------------


@checker("03", "return (context, weights) from q, k, v of shape (B, H, T, d_head)")
def check_einsum_attention(fn) -> str:
    """``fn(q, k, v, mask=None) -> (context, weights)``; against F.scaled_dot_product_attention."""
    B, H, T, d = 2, 3, 5, 8
    for kind in ("none", "causal", "sliding"):
        q, k, v = torch.randn(3, B, H, T, d)  # (B, H, T, d_head) each
        mask = {"none": None, "causal": causal_mask(T), "sliding": sliding_window_mask(T, 2)}[kind]
        result = _call(fn, q, k, v, mask)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise _Wrong(
                f"your function returned a {type(result).__name__}, not (context, weights)",
                "return context, weights",
            )
        context = _tensor(result[0], "context", (B, H, T, d))
        weights = _tensor(result[1], "weights", (B, H, T, T))
        sdpa_mask = None if mask is None else ~mask  # SDPA: True = may attend
        want_ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=sdpa_mask)  # (B, H, T, d)
        scores = torch.matmul(q, k.transpose(-2, -1))  # (B, H, T, T), unscaled
        blocked = torch.zeros(T, T, dtype=torch.bool) if mask is None else mask
        want_w = _masked_softmax(scores / math.sqrt(d), blocked)  # (B, H, T, T)
        if _close(weights, want_w, 1e-5) and _close(context, want_ctx, 1e-5):
            continue
        where = f"with mask={kind}"
        if _close(weights, _masked_softmax(scores, blocked)):
            raise _Wrong(
                f"{where}, the scores are not scaled",
                f"divide q·k by √d_head (here √{d}) before the softmax",
            )
        if _close(weights, _masked_softmax(scores / d, blocked)):
            raise _Wrong(
                f"{where}, the scores are divided by d_head", "divide by √d_head, not d_head"
            )
        if _close(weights, _masked_softmax(scores.transpose(-2, -1) / math.sqrt(d), blocked)):
            raise _Wrong(
                f"{where}, the scores are transposed: keys on the rows, queries on the columns",
                "the query index comes first: torch.einsum('bhqd,bhkd->bhqk', q, k)",
            )
        if mask is not None:
            if _close(weights, _masked_softmax(scores / math.sqrt(d), ~mask)):
                raise _Wrong(
                    f"{where}, your mask blocks the past and lets the future through",
                    "True means blocked: masked_fill(mask, float('-inf'))",
                )
            if _close(weights, _masked_softmax(scores / math.sqrt(d), torch.zeros_like(mask))):
                raise _Wrong(f"{where}, the mask was ignored", "apply it before the softmax")
        if not _close(weights, want_w, 1e-5):
            raise _Wrong(
                f"{where}, the weights differ from the reference by up to "
                f"{(weights - want_w).abs().max().item():.3f}",
                "softmax over the keys, dim=-1",
            )
        raise _Wrong(
            f"{where}, the weights are right but the context is not",
            "context = torch.einsum('bhqk,bhkd->bhqd', weights, v)",
        )
    return "equal to F.scaled_dot_product_attention, with no mask, causal and sliding masks"
