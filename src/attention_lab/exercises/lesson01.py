"""Lesson 01 · a weighted average (notebooks/01_weighted_average.ipynb): a softmax written by
hand that survives large scores, and a running average whose weights fade with distance."""

from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.nn.functional as F

from ..i18n import N_, _
from .core import Wrong, answer_tensor, call, checker, close, require_rows_sum_to_one

# --- exercise 1.1: a softmax by hand that does not overflow ----------------------------------


@contextmanager
def _watch_softmax():
    """Count calls to torch's own softmax while the learner's function runs."""
    calls = []
    originals = (torch.softmax, F.softmax, torch.Tensor.softmax)

    def spy(original):
        def wrapped(*args, **kwargs):
            calls.append(1)
            return original(*args, **kwargs)

        return wrapped

    own = "softmax" in vars(torch.Tensor)  # else Tensor inherits it from its C base
    torch.softmax, F.softmax, torch.Tensor.softmax = (spy(f) for f in originals)
    try:
        yield calls
    finally:
        torch.softmax, F.softmax = originals[:2]
        if own:
            torch.Tensor.softmax = originals[2]
        else:
            del torch.Tensor.softmax


@checker("01", N_("take scores of shape (..., n) and return weights of the same shape"))
def check_stable_softmax(fn) -> str:
    """``fn(scores) -> weights``: softmax over the last axis, written with torch.exp; it must
    survive scores of 1000 and rows whose scores differ wildly, and give -inf a weight of 0."""
    inf = float("inf")
    # the case names are keys (compared below); _(what) is the name the learner reads
    cases = [
        (N_("ordinary scores"), torch.randn(4, 6) * 2),
        (N_("a batch of score matrices"), torch.randn(2, 3, 5)),
        (
            N_("scores with -inf (blocked keys)"),
            torch.tensor([[1.0, -inf, 2.0], [0.5, 0.5, -inf]]),
        ),
        (N_("large scores"), torch.tensor([[1000.0, 999.0, 998.0], [1001.0, 1000.0, 990.0]])),
        (N_("rows of very different size"), torch.tensor([[1000.0, 990.0], [1.0, 2.0]])),
    ]
    for what, scores in cases:
        shown = _(what)
        with _watch_softmax() as calls:
            got = call(fn, scores.clone())
        if calls:
            raise Wrong(
                _("your function calls torch's own softmax; this exercise writes it by hand"),
                _("use torch.exp and a sum over the last axis: e / e.sum(dim=-1, keepdim=True)"),
            )
        got = answer_tensor(
            got, _("the weights for {what}").format(what=shown), tuple(scores.shape)
        )
        want = torch.softmax(scores.double(), dim=-1)  # (..., n)
        if close(got, want):
            continue
        if torch.isnan(got).any():
            if what == "rows of very different size":
                raise Wrong(
                    _(
                        "a row far below the largest score of the whole tensor comes out as NaN: "
                        "you subtracted one maximum for every row"
                    ),
                    _("subtract each row's own maximum: scores.max(dim=-1, keepdim=True).values"),
                )
            if what == "large scores":
                raise Wrong(
                    _(
                        "for {what} the weights are NaN: exp(1000) overflows to inf, and "
                        "inf / inf is NaN"
                    ).format(what=shown),
                    _("subtract the row's maximum first; softmax(s - c) = softmax(s) for any c"),
                )
            raise Wrong(
                _("for {what} some weights are NaN").format(what=shown),
                _(
                    "a blocked score of -inf must give exp(-inf) = 0; subtract each row's "
                    "maximum (keepdim=True), which is always finite here"
                ),
            )
        other = torch.softmax(scores.double(), dim=0) if scores.dim() == 2 else None
        if other is not None and close(got, other):
            raise Wrong(
                _("for {what} each column sums to 1, not each row").format(what=shown),
                _("sum over the last axis: e.sum(dim=-1, keepdim=True)"),
            )
        require_rows_sum_to_one(
            got,
            _("for {what}").format(what=shown),
            _("divide each exp by the sum of its row: e / e.sum(dim=-1, keepdim=True)"),
        )
        raise Wrong(
            _("for {what} your weights differ from the softmax by up to {gap:.3g}").format(
                what=shown, gap=(got.double() - want).abs().max().item()
            ),
            _("weights = exp(s - max) / sum of exp(s - max), row by row"),
        )
    return _("equal to torch.softmax, also for scores of 1000 and for -inf")


# --- exercise 1.2: a running average that forgets --------------------------------------------


def _reference_decay(T: int, r: float) -> torch.Tensor:
    """Loop version: row i gives key j <= i the weight r**(i - j), normalised to sum 1."""
    want = torch.zeros(T, T, dtype=torch.float64)
    for i in range(T):
        row = [r ** (i - j) for j in range(i + 1)]
        for j, w in enumerate(row):
            want[i, j] = w / sum(row)
    return want


@checker("01", N_("return a (T, T) float tensor of weights"))
def check_decay_weights(fn) -> str:
    """``fn(T, r) -> (T, T)``: row i gives key j <= i a weight proportional to r**(i - j) and
    the future 0; each row sums to 1. r = 1 is the equal running mean of Version 2."""
    for T, r in ((6, 0.5), (5, 1.0), (8, 0.9), (1, 0.3)):
        got = answer_tensor(
            call(fn, T, r), _("the weights for T={T}, r={r}").format(T=T, r=r), (T, T)
        )
        want = _reference_decay(T, r)  # (T, T)
        if close(got, want):
            continue
        where = _("with T={T}, r={r}").format(T=T, r=r)
        w = got.detach().double()
        future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        if T > 1 and w[future].abs().max().item() > 1e-6:
            raise Wrong(
                _("{where}, a future key (j > i) gets weight up to {weight:.2f}").format(
                    where=where, weight=w[future].abs().max()
                ),
                _("position i looks only at j <= i: give j > i the weight 0 (or the score -inf)"),
            )
        if close(w, _reference_decay(T, 1 / r).tril()):
            raise Wrong(
                _(
                    "{where}, the oldest token gets the most weight: the distance is counted the "
                    "wrong way round"
                ).format(where=where),
                _("the weight of key j for query i is r ** (i - j): 1 for j = i, r one step back"),
            )
        unnormalised = torch.tensor(
            [[r ** (i - j) if j <= i else 0.0 for j in range(T)] for i in range(T)]
        )
        if close(w, unnormalised):
            raise Wrong(
                _(
                    "{where}, the rows sum to more than 1 (row {row} sums to {total:.2f}): "
                    "the weights are not normalised"
                ).format(where=where, row=T - 1, total=w[-1].sum().item()),
                _("divide each row by its sum: w / w.sum(dim=-1, keepdim=True)"),
            )
        require_rows_sum_to_one(w, where, _("a weighted average needs rows that sum to 1"))
        raise Wrong(
            _(
                "{where}, the weights differ from r ** (i - j), normalised, by up to {gap:.3f}"
            ).format(where=where, gap=(w - want).abs().max().item()),
            _("build the distance i - j with torch.arange, then r ** distance, then normalise"),
        )
    newest = _reference_decay(6, 0.5)[5, 5].item()
    return _(
        "each step back counts r times less: at r = 0.5 the newest of 6 tokens holds "
        "{share:.0%} of its row, and r = 1 gives the equal weights of Version 2"
    ).format(share=newest)
