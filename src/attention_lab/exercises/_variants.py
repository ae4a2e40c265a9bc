"""Wrong answers learners typically write, as reference variants that name themselves.

A variant is the learner's computation with one or more known mistakes built in, computed
from the learner's own layers: a head scaled by √d_in instead of √d_head, a softmax over the
queries, a mask that was never assigned back, heads merged without the transpose back, ...
Each mistake is one option of one step ("scale", "softmax", "mask", ...); a variant picks
one option per step, so up to two mistakes at once are recognised too. ``name_the_mistake`` runs
every variant on the probe input, keeps those within the checker's tolerance of the
learner's output, and raises ``Wrong`` naming the mistakes of the closest one (the fewest
mistakes first). It returns quietly when no variant explains the output: the checker then
falls back to "differs by up to x".

The labels and hints are built with ``_`` when a checker runs, so they come out in the
language of the moment.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..i18n import _
from .core import Wrong

# --- the matching ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Option:
    """One way of doing a step: ``key`` for the computation, ``label``/``hint`` for a mistake
    (both empty for the right way)."""

    key: str
    label: str = ""
    hint: str = ""


MAX_MISTAKES = 2  # variants with more mistakes at once are not tried


def _gap(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b|, with NaN equal to NaN (and NaN against a number infinitely far)."""
    a, b = a.detach().double(), b.detach().double()
    if a.shape != b.shape or not torch.equal(a.isnan(), b.isnan()):
        return math.inf
    finite = ~a.isnan()
    if not torch.equal(a[finite].isinf(), b[finite].isinf()):
        return math.inf
    both = finite & ~a.isinf()
    return (a[both] - b[both]).abs().max().item() if both.any() else 0.0


def _close_enough(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The checkers' tolerance (``core._close``), NaN equal to NaN."""
    return a.shape == b.shape and torch.allclose(
        a.detach().double(), b.detach().double(), atol=1e-5, rtol=1e-4, equal_nan=True
    )


def name_the_mistake(
    got: torch.Tensor,
    steps: dict[str, list[Option]],
    compute: Callable[..., torch.Tensor],
    where: str,
) -> None:
    """Raise ``Wrong`` naming the mistakes of the variant closest to ``got``, if one is close.

    ``steps`` maps each step to its options, the right one first; ``compute(**choice)`` is
    the output with ``choice[step]`` the key of the option taken at each step. Variants with
    one or two mistakes are tried; the one with every step right is skipped (the checker has
    already found ``got`` differs from it).
    """
    names = list(steps)
    best = None
    for options in itertools.product(*(steps[name] for name in names)):
        mistakes = [option for option in options if option.label]
        if not 0 < len(mistakes) <= MAX_MISTAKES:
            continue
        try:
            with torch.no_grad():
                variant = compute(**{name: option.key for name, option in zip(names, options)})
        except (RuntimeError, ValueError):  # a combination that cannot be computed
            continue
        if not _close_enough(got, variant):
            continue
        key = (len(mistakes), _gap(got, variant))
        if best is None or key < best[0]:
            best = (key, mistakes)
    if best is None:
        return
    mistakes = best[1]
    raise Wrong(
        _("{where}: {mistakes}").format(
            where=where, mistakes=_("; ").join(option.label for option in mistakes)
        ),
        _("; ").join(dict.fromkeys(option.hint for option in mistakes)),
    )


# --- the steps of one head, and of several -----------------------------------------------------


def scale_options(d: int, d_model: int, model_name: str) -> list[Option]:
    """How the scores are scaled: by √d_head (right), or one of the usual slips.
    ``model_name`` is how the lesson calls the input width (d_in in 02 and 05, d_model in 06).
    """
    options = [
        Option("sqrt_d"),
        Option(
            "none",
            _("no scaling: the scores are not scaled by √d_head"),
            _(
                "divide q @ k.transpose(-2, -1) by √d_head (here √{d_head}) before the softmax"
            ).format(d_head=d),
        ),
        Option(
            "times",
            _("the scores are multiplied by √d_head instead of divided by it"),
            _("divide the scores by √d_head: scores / k.shape[-1] ** 0.5"),
        ),
        Option(
            "after",
            _("the weights are divided by √d_head after the softmax, not the scores before it"),
            _("scale the scores before the softmax: softmax(q @ kᵀ / √d_head)"),
        ),
    ]
    if d > 1:
        options.append(
            Option(
                "d",
                _("the scores are divided by d_head = {d}, not by √d_head").format(d=d),
                _("divide by √d_head"),
            )
        )
    if d_model != d:
        options.append(
            Option(
                "d_model",
                _(
                    "scaled by √{name} = √{d_model} instead of √d_head = √{d}: "
                    "{name} is the input width, not the head's"
                ).format(name=model_name, d_model=d_model, d=d),
                _("d_head is the width of q and k: k.shape[-1] ** 0.5, not x.shape[-1] ** 0.5"),
            )
        )
    return options


def softmax_options() -> list[Option]:
    return [
        Option("keys"),
        Option(
            "queries",
            _(
                "softmax over the wrong axis (queries instead of keys): each column of the "
                "weights sums to 1, not each row"
            ),
            _("softmax over the keys, the last dimension: torch.softmax(scores, dim=-1)"),
        ),
        Option(
            "none",
            _("no softmax: the scaled scores are used as the weights"),
            _("weights = torch.softmax(scores, dim=-1): each row of the weights sums to 1"),
        ),
    ]


def mask_options(causal: bool) -> list[Option]:
    """The causal mask (05, 06) and the ways it goes wrong; a head of 02 has no mask."""
    if not causal:
        return [Option("none")]
    return [
        Option("causal"),
        Option(
            "none",
            _(
                "forgot the causal mask (or masked_fill's result was never assigned): "
                "the future leaks in"
            ),
            _(
                "scores = scores.masked_fill(self.mask[:T, :T], float('-inf')) before the "
                "softmax; masked_fill returns a new tensor"
            ),
        ),
        Option(
            "inverted",
            _(
                "the causal mask is inverted (~self.mask): it blocks the past and the diagonal "
                "and lets the future through"
            ),
            _("True means blocked: masked_fill(self.mask[:T, :T], float('-inf')), not ~self.mask"),
        ),
        Option(
            "past",
            _("the mask blocks the past and lets the future through (tril instead of triu)"),
            _(
                "True means blocked, and the future is above the diagonal: "
                "torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)"
            ),
        ),
        Option(
            "diagonal",
            _(
                "the mask also blocks the diagonal (triu with diagonal=0): "
                "position 0 has no key left"
            ),
            _("block only j > i: torch.triu(..., diagonal=1); a position may look at itself"),
        ),
        Option(
            "zero",
            _("the future scores are set to 0, not to -inf, so the future still gets weight"),
            _(
                "exp(0) = 1, so a zero score still gets weight; use "
                "scores.masked_fill(mask, float('-inf'))"
            ),
        ),
        Option(
            "after",
            _("the future is zeroed after the softmax, so rows no longer sum to 1"),
            _("mask the scores with -inf before the softmax (notebook 04)"),
        ),
    ]


def values_options() -> list[Option]:
    hint = _("the output is weights @ v, with v from W_v")
    return [
        Option("v"),
        Option("k", _("used the head's K where V belongs: weights @ k"), hint),
        Option("q", _("used the head's Q where V belongs: weights @ q"), hint),
    ]


def attend(q, k, v, *, scale: str, softmax: str, mask: str, values: str, d_model: int):
    """One head, or every head at once: q, k, v of shape (..., T, d) -> (..., T, d), with the
    options' mistakes built in."""
    T, d = q.shape[-2], q.shape[-1]
    masks = _masks(T)
    future = masks["causal"]  # (T, T), True = blocked
    scores = q @ k.transpose(-2, -1)  # (..., T, T)
    divisor = {"sqrt_d": math.sqrt(d), "none": 1.0, "after": 1.0, "d": float(d)}.get(scale)
    if scale == "times":
        scores = scores * math.sqrt(d)
    elif scale == "d_model":
        scores = scores / math.sqrt(d_model)
    else:
        scores = scores / divisor
    blocked = masks.get(mask)
    if blocked is not None:
        scores = scores.masked_fill(blocked, float("-inf"))
    elif mask == "zero":
        scores = scores.masked_fill(future, 0.0)
    if softmax == "keys":
        weights = torch.softmax(scores, dim=-1)  # (..., T, T)
    elif softmax == "queries":
        weights = torch.softmax(scores, dim=-2)
    else:
        weights = scores
    if mask == "after":
        weights = weights.masked_fill(future, 0.0)
    if scale == "after":
        weights = weights / math.sqrt(d)
    return weights @ {"v": v, "k": k, "q": q}[values]  # (..., T, d)


@functools.lru_cache(maxsize=8)
def _masks(T: int) -> dict[str, torch.Tensor]:
    """The right causal mask and its wrong twins, (T, T) each, True = blocked."""
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    return {
        "causal": future,
        "inverted": ~future,
        "past": torch.ones(T, T, dtype=torch.bool).tril(-1),
        "diagonal": torch.ones(T, T, dtype=torch.bool).triu(0),
    }
