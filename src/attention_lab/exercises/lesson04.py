"""Lesson 04 · the causal mask (notebooks/04_causal_mask.ipynb): mask then softmax (and the
two shortcuts beside it), the sliding-window mask, and padding combined with the causal mask.
"""

from __future__ import annotations

import torch

from ..masks import causal_mask, sliding_window_mask
from ._core import (
    _call,
    _close,
    _diagnose_causal_weights,
    _example_scores,
    _masked_softmax,
    _tensor,
    _Wrong,
    checker,
)

# --- exercise 1 of exercises.ipynb: mask then softmax, or tril then softmax? -----------------


@checker("04", "take `scores` of shape (..., T, T) and return weights of the same shape")
def check_mask_then_softmax(fn) -> str:
    """``fn(scores) -> weights``: the causal softmax, masking the future with -inf first."""
    for shape in ((6, 6), (2, 5, 5), (2, 3, 4, 4), (1, 1)):
        scores = _example_scores(*shape)
        got = _tensor(_call(fn, scores.clone()), "the weights", shape)
        want = _masked_softmax(scores, causal_mask(shape[-1]))  # (..., T, T)
        if not _close(got, want):
            _diagnose_causal_weights(got, scores, "the weights")
            raise _Wrong(
                f"for scores of shape {shape} the weights differ from mask-then-softmax by up "
                f"to {(got - want).abs().max().item():.3f}",
                "mask with -inf first, then softmax over the last dimension",
            )
    return "the future gets weight exactly 0 and every row sums to 1"


@checker("04", "take `scores` of shape (..., T, T) and return weights of the same shape")
def check_tril_then_softmax(fn) -> str:
    """``fn(scores) -> weights``: the shortcut of the exercise, tril of the scores then softmax."""
    worst = 0.0
    for shape in ((6, 6), (2, 5, 5)):
        scores = _example_scores(*shape)
        got = _tensor(_call(fn, scores.clone()), "the weights", shape)
        T = shape[-1]
        want = torch.softmax(scores.masked_fill(causal_mask(T), 0.0), dim=-1)  # (..., T, T)
        if _close(got, _masked_softmax(scores, causal_mask(T))):
            raise _Wrong(
                "this is the correct mask-then-softmax; this function is the shortcut to test",
                "keep the lower triangle with torch.tril(scores), then softmax it, no -inf",
            )
        if not _close(got, want):
            raise _Wrong(
                f"for scores of shape {shape} your weights are not softmax(tril(scores)); "
                f"they differ by up to {(got - want).abs().max().item():.3f}",
                "torch.tril keeps j <= i and writes 0 above the diagonal; then softmax over dim=-1",
            )
        worst = max(worst, got.masked_select(causal_mask(T).expand_as(got)).max().item())
    return (
        "this is the shortcut, and it is not causal: a future key still gets up to "
        f"{worst:.2f} of a row's weight"
    )


@checker("04", "take `scores` of shape (..., T, T) and return weights of the same shape")
def check_softmax_then_renormalise(fn) -> str:
    """``fn(scores) -> weights``: softmax over all keys, zero the future, renormalise."""
    for shape in ((6, 6), (2, 5, 5), (2, 3, 4, 4)):
        scores = _example_scores(*shape)
        got = _tensor(_call(fn, scores.clone()), "the weights", shape)
        T = shape[-1]
        want = _masked_softmax(scores, causal_mask(T))  # (..., T, T)
        if not _close(got, want):
            unnormalised = torch.softmax(scores, -1).masked_fill(causal_mask(T), 0.0)
            if _close(got, unnormalised):
                raise _Wrong(
                    "the future is zeroed, but the rows no longer sum to 1 "
                    f"(row 0 sums to {got.reshape(-1, T, T)[0, 0].sum().item():.2f})",
                    "divide each row by its sum: w / w.sum(dim=-1, keepdim=True)",
                )
            _diagnose_causal_weights(got, scores, "the weights")
            raise _Wrong(
                f"the weights differ from mask-then-softmax by up to "
                f"{(got - want).abs().max().item():.3f}",
                "softmax over dim=-1, then masked_fill(mask, 0.0), then divide by the row sums",
            )
    return "softmax, zero the future, renormalise: equal to mask-then-softmax"


# --- exercise 3 of exercises.ipynb: the sliding-window mask ----------------------------------


@checker("04", "return torch.triu(...) | torch.tril(...) as a (T, T) bool tensor")
def check_sliding_mask(fn) -> str:
    """``fn(T, window) -> (T, T) bool``, True = blocked; checked against sliding_window_mask."""
    for T, window in ((12, 8), (10, 3), (6, 1), (5, 8), (8, 8)):
        got = _tensor(_call(fn, T, window), f"the mask for T={T}, window={window}", (T, T))
        want = sliding_window_mask(T, window)  # (T, T)
        if got.dtype != torch.bool:
            raise _Wrong(
                f"the mask has dtype {got.dtype}, but masks are torch.bool (True = blocked)",
                "build it from a bool tensor, or finish with .bool()",
            )
        if torch.equal(got, want):
            continue
        where = f"with T={T}, window={window}"
        if torch.equal(got, ~want):
            raise _Wrong(
                f"{where}, your mask is the exact opposite: it blocks the positions a token may "
                "see and lets the future through",
                "True means blocked: the future (torch.triu(..., diagonal=1)) and everything "
                "`window` or more steps back (torch.tril(..., diagonal=-window))",
            )
        future = causal_mask(T)
        if not got[future].all():
            raise _Wrong(
                f"{where}, some future positions are not blocked",
                "every j > i must be True: torch.triu(ones, diagonal=1)",
            )
        if got.diagonal().any():
            raise _Wrong(
                f"{where}, the diagonal is blocked: a position cannot see itself",
                "the diagonal must stay False; check the diagonal= offsets",
            )
        seen, expected = (~got).sum(-1), (~want).sum(-1)  # (T,), (T,)
        row = int((seen != expected).nonzero()[0])
        raise _Wrong(
            f"{where}, row {row} sees {int(seen[row])} positions; it should see "
            f"{int(expected[row])} (itself and the {window - 1} before it)",
            "the old positions are j <= i - window: torch.tril(ones, diagonal=-window)",
        )
    return "equal to attention_lab.sliding_window_mask for 5 sizes, window >= T included"


# --- exercise 10 of exercises.ipynb: padding mask combined with the causal mask --------------


def _reference_padded_mask(lengths: list[int], T: int) -> torch.Tensor:
    """Loop version: left padding; key j is blocked if j > i, or if j is padding and j != i."""
    want = torch.zeros(len(lengths), 1, T, T, dtype=torch.bool)
    for b, n in enumerate(lengths):
        first_real = T - n
        for i in range(T):
            for j in range(T):
                want[b, 0, i, j] = j > i or (j < first_real and j != i)
    return want


@checker("04", "return a (B, 1, T, T) bool tensor, True = blocked")
def check_padded_causal_mask(fn) -> str:
    """``fn(lengths, T) -> (B, 1, T, T)`` for left-padded rows (padding first, then lengths[b]
    real tokens): key j is blocked if it is in the future (j > i) or padding (j < T - lengths[b]),
    except that every position may see itself, so no row is blocked entirely."""
    for lengths, T in (([5, 3, 1], 5), ([4, 4], 4), ([2, 6, 3], 6)):
        B = len(lengths)
        got = _call(fn, torch.tensor(lengths), T)
        if isinstance(got, torch.Tensor) and tuple(got.shape) == (B, T, T):
            raise _Wrong(
                f"the mask is (B, T, T) = {tuple(got.shape)}; it must broadcast over heads",
                "add a head axis: mask[:, None] gives (B, 1, T, T)",
            )
        got = _tensor(got, "the mask", (B, 1, T, T))
        if got.dtype != torch.bool:
            raise _Wrong(f"the mask has dtype {got.dtype}", "masks are torch.bool, True = blocked")
        want = _reference_padded_mask(lengths, T)  # (B, 1, T, T)
        if torch.equal(got, want):
            continue
        where = f"with lengths={lengths}, T={T}"
        j = torch.arange(T)  # (T,)
        future = causal_mask(T)  # (T, T)
        eye = torch.eye(T, dtype=torch.bool)  # (T, T)
        left = j[None, :] < T - torch.tensor(lengths)[:, None]  # (B, T), padding keys
        right = j[None, :] >= torch.tensor(lengths)[:, None]  # (B, T), padding at the end
        if torch.equal(got, ~want):
            raise _Wrong(
                f"{where}, your mask blocks exactly what should be seen",
                "True means blocked: future keys and padding keys",
            )
        if torch.equal(got, (future | left[:, None, :])[:, None]):
            raise _Wrong(
                f"{where}, rows made only of padding have every key blocked: their softmax "
                "would be NaN",
                "let every position see itself: (future | padding) & ~torch.eye(T, dtype=bool)",
            )
        if torch.equal(got[:, 0], (future | (right[:, None, :] & ~eye))) or torch.equal(
            got[:, 0], future | right[:, None, :]
        ):
            raise _Wrong(
                f"{where}, you blocked padding at the end of each row",
                "the padding is on the left: positions j < T - lengths[b]",
            )
        if torch.equal(got[:, 0], future & left[:, None, :]):
            raise _Wrong(
                f"{where}, a key is blocked only when it is both in the future and padding",
                "either reason is enough: combine the two masks with |, not &",
            )
        if torch.equal(got[:, 0], (future | left[:, :, None]) & ~eye):
            raise _Wrong(
                f"{where}, the padding blocks query rows, not key columns",
                "padding must be invisible as a key: padding[:, None, :] (B, 1, T) blocks columns",
            )
        if torch.equal(got[:, 0], future.expand(B, T, T)):
            raise _Wrong(
                f"{where}, only the future is blocked: real tokens still read the padding",
                "also block keys j < T - lengths[b]",
            )
        raise _Wrong(
            f"{where}, the mask differs from the expected one in {int((got != want).sum())} places",
            "blocked = ((j > i) | (j < T - lengths[b])) & (j != i), built with broadcasting",
        )
    return "future keys and padding keys are blocked, and no row is blocked entirely"
