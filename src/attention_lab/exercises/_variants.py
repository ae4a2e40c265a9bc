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
    for options in _choices(steps, names, MAX_MISTAKES):
        mistakes = [option for option in options if option.label]
        if not mistakes:
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


def _choices(steps: dict[str, list[Option]], names: list[str], limit: int):
    """The combinations of ``itertools.product`` over the steps' options, in its order, with
    at most ``limit`` wrong options (the product of every option grows too fast to filter)."""
    if not names:
        yield ()
        return
    for option in steps[names[0]]:
        left = limit - (1 if option.label else 0)
        if left >= 0:
            for rest in _choices(steps, names[1:], left):
                yield (option, *rest)


# --- the steps of one head, and of several -----------------------------------------------------


def scale_options(
    d: int, d_model: int, model_name: str, T: int | None = None, n_heads: int | None = None
) -> list[Option]:
    """How the scores are scaled: by √d_head (right), or one of the usual slips.
    ``model_name`` is how the lesson calls the input width (d_in in 02 and 05, d_model in 06);
    ``T`` (the probe's length) and ``n_heads`` add the slips that use them, when they differ
    from d_head.
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
    # d ** 1 / 2 is (d ** 1) / 2: scores / d ** 1 / 2 divides by 2d, scores / (d ** 1 / 2) by d / 2
    for key, divisor in (("half_low", 2 * d), ("half_high", d / 2)):
        if not math.isclose(divisor, math.sqrt(d)) and divisor not in (1, d):
            options.append(
                Option(
                    key,
                    _(
                        "the scores are divided by {divisor:g}, not by √d_head: ** binds tighter "
                        "than /, so d_head ** 1 / 2 is d_head / 2"
                    ).format(divisor=divisor),
                    _("write the square root as d_head ** 0.5 or math.sqrt(d_head)"),
                )
            )
    if T is not None and T != d:
        options.append(
            Option(
                "sqrt_T",
                _(
                    "scaled by √T = √{T}, the number of positions, instead of √d_head = √{d}: "
                    "d_head is the last axis of k"
                ).format(T=T, d=d),
                _("d_head is k.shape[-1]; k.shape[1] is T, the length of the sequence"),
            )
        )
    if n_heads is not None and n_heads != d:
        options.append(
            Option(
                "sqrt_H",
                _("scaled by √n_heads = √{H} instead of √d_head = √{d}").format(H=n_heads, d=d),
                _("each head's scores are divided by the head's width: d_head ** 0.5"),
            )
        )
    return options


def output_options() -> list[Option]:
    """The output as weights @ v gives it (right), or divided by √d_head once more."""
    return [
        Option("as_is"),
        Option(
            "divided",
            _("the output is divided by √d_head: the scaling belongs to the scores"),
            _(
                "scale the scores before the softmax, softmax(q @ kᵀ / √d_head); "
                "the output is weights @ v as it is"
            ),
        ),
    ]


def scores_options() -> list[Option]:
    """Which two tensors make the scores: q @ kᵀ (right), or a slip with the layers."""
    return [
        Option("qk"),
        Option(
            "kq",
            _(
                "the scores are K @ Qᵀ, not Q @ Kᵀ (or q and k come from each other's layers): "
                "row i holds key i against every query"
            ),
            _(
                "queries on the rows: scores = q @ k.transpose(-2, -1), with q from W_q and k "
                "from W_k"
            ),
        ),
        Option(
            "qq",
            _("the keys come from W_q: the scores are Q @ Qᵀ"),
            _("k = self.W_k(x): the keys have their own layer"),
        ),
        Option(
            "kk",
            _("the queries come from W_k: the scores are K @ Kᵀ"),
            _("q = self.W_q(x): the queries have their own layer"),
        ),
    ]


def product_options() -> list[Option]:
    """How the weights meet the values: weights @ v (right), or the weights transposed."""
    return [
        Option("wv"),
        Option(
            "wTv",
            _(
                "the output is weightsᵀ @ v: the weights were transposed, so output i mixes "
                "what every query gave key i"
            ),
            _(
                "out = weights @ v, with the weights as the softmax gives them "
                "(queries on the rows)"
            ),
        ),
    ]


def across_options() -> list[Option]:
    """Whether each sequence attends within itself (right) or across the whole batch."""
    return [
        Option("rows"),
        Option(
            "batch",
            _(
                "the sequences of the batch attend to each other: the batch was flattened into "
                "one long sequence"
            ),
            _(
                "keep the batch axis: q @ k.transpose(-2, -1) is (B, T, T), one (T, T) block per "
                "sequence"
            ),
        ),
    ]


def softmax_options(heads: bool = False) -> list[Option]:
    """How the scores become weights; ``heads``: the scores have a head axis, dim=1."""
    hint = _("softmax over the keys, the last dimension: torch.softmax(scores, dim=-1)")
    options = [
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
        Option(
            "batch",
            _(
                "softmax over dim=0, the batch: each weight is shared out between the sequences, "
                "not between the keys"
            ),
            hint,
        ),
        Option(
            "log",
            _(
                "log_softmax instead of softmax: the weights are logarithms (negative), not "
                "shares that sum to 1"
            ),
            _("weights = torch.softmax(scores, dim=-1): each row of the weights sums to 1"),
        ),
        Option(
            "sigmoid",
            _(
                "sigmoid instead of softmax: each weight is squashed on its own, so the rows "
                "don't sum to 1"
            ),
            _("weights = torch.softmax(scores, dim=-1): each row of the weights sums to 1"),
        ),
    ]
    if heads:
        options.insert(
            2,
            Option(
                "heads",
                _(
                    "softmax over dim=1, the heads: each weight is shared out between the heads, "
                    "not between the keys"
                ),
                hint,
            ),
        )
    return options


def mask_options(causal: bool) -> list[Option]:
    """The causal mask (05, 06) and the ways it goes wrong; a head of 02 has no mask."""
    if not causal:
        return [
            Option("none"),
            Option(
                "causal",
                _(
                    "your head masks the future: the head of notebook 02 lets every query see "
                    "every key"
                ),
                _("no mask here: the causal mask comes in notebooks 04 and 05"),
            ),
        ]
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
                "the causal mask is inverted (~self.mask, or tril where triu belongs): it blocks "
                "the past and the diagonal and lets the future through"
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
            "ahead",
            _("the mask lets each position see the next one (triu with diagonal=2)"),
            _("block only j > i: torch.triu(..., diagonal=1); a position may look at itself"),
        ),
        Option(
            "plus_inf",
            _(
                "the future scores are +inf, not -inf (masked_fill with +inf, or a -inf mask "
                "subtracted): softmax turns them into NaN"
            ),
            _(
                "the blocked scores must be -inf: scores.masked_fill(mask, float('-inf')), or "
                "add (not subtract) a float mask of -inf"
            ),
        ),
        Option(
            "added_bool",
            _(
                "the bool mask was added to the scores: True counts as 1, so the future gets its "
                "score + 1 instead of -inf"
            ),
            _(
                "a bool mask selects, it is not a number: "
                "scores.masked_fill(self.mask[:T, :T], float('-inf'))"
            ),
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
        Option("x", _("the values are x itself: W_v is never applied"), hint),
    ]


def attend(
    q,
    k,
    v,
    *,
    d_model: int,
    scale: str = "sqrt_d",
    softmax: str = "keys",
    mask: str = "none",
    values: str = "v",
    scores: str = "qk",
    product: str = "wv",
    across: str = "rows",
    output: str = "as_is",
    x=None,
    d: int | None = None,
    n_heads: int = 1,
):
    """One head, or every head at once: q, k, v of shape (..., T, d) -> (..., T, d), with the
    options' mistakes built in. ``x`` is the input where the values option "x" needs it (of
    v's shape); ``d`` the head width the learner scales by, when it is not q's last axis (heads
    split the wrong way)."""
    if across == "batch":  # every sequence of the batch in one: (1, B*T, d)
        flat = [None if t is None else t.reshape(1, -1, t.shape[-1]) for t in (q, k, v, x)]
        out = attend(
            *flat[:3],
            x=flat[3],
            d_model=d_model,
            scale=scale,
            softmax=softmax,
            mask=mask,
            values=values,
            scores=scores,
            product=product,
            output=output,
            d=d,
            n_heads=n_heads,
        )  # (1, B*T, d)
        return out.reshape(v.shape)  # (B, T, d)
    T = q.shape[-2]
    d = q.shape[-1] if d is None else d
    masks = _masks(T)
    future = masks["causal"]  # (T, T), True = blocked
    left, right = {"qk": (q, k), "kq": (k, q), "qq": (q, q), "kk": (k, k)}[scores]
    scores_ = left @ right.transpose(-2, -1)  # (..., T, T)
    if scale == "times":
        scores_ = scores_ * math.sqrt(d)
    else:
        divisor = {
            "sqrt_d": math.sqrt(d),
            "d": float(d),
            "d_model": math.sqrt(d_model),
            "sqrt_T": math.sqrt(T),
            "sqrt_H": math.sqrt(n_heads),
            "half_low": 2.0 * d,
            "half_high": d / 2,
        }.get(scale, 1.0)  # "none", "after": the scores are not divided
        scores_ = scores_ / divisor
    blocked = masks.get(mask)
    if blocked is not None:
        scores_ = scores_.masked_fill(blocked, float("-inf"))
    elif mask == "zero":
        scores_ = scores_.masked_fill(future, 0.0)
    elif mask == "plus_inf":
        scores_ = scores_.masked_fill(future, float("inf"))
    elif mask == "added_bool":
        scores_ = scores_ + future
    weights = {
        "keys": lambda s: torch.softmax(s, dim=-1),
        "queries": lambda s: torch.softmax(s, dim=-2),
        "none": lambda s: s,
        "heads": lambda s: torch.softmax(s, dim=1),
        "batch": lambda s: torch.softmax(s, dim=0),
        "log": lambda s: torch.log_softmax(s, dim=-1),
        "sigmoid": torch.sigmoid,
    }[softmax](scores_)  # (..., T, T)
    if mask == "after":
        weights = weights.masked_fill(future, 0.0)
    if scale == "after":
        weights = weights / math.sqrt(d)
    if product == "wTv":
        weights = weights.transpose(-2, -1)
    if values == "x" and (x is None or x.shape != v.shape):
        raise ValueError("the values option 'x' needs x of v's shape")
    out = weights @ {"v": v, "k": k, "q": q, "x": x}[values]  # (..., T, d)
    return out / math.sqrt(d) if output == "divided" else out


@functools.lru_cache(maxsize=8)
def _masks(T: int) -> dict[str, torch.Tensor]:
    """The right causal mask and its wrong twins, (T, T) each, True = blocked."""
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    return {
        "causal": future,
        "inverted": ~future,
        "past": torch.ones(T, T, dtype=torch.bool).tril(-1),
        "diagonal": torch.ones(T, T, dtype=torch.bool).triu(0),
        "ahead": torch.ones(T, T, dtype=torch.bool).triu(2),
    }
