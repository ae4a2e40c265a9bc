"""The machinery every exercise checker shares: the ``checker`` decorator and helpers that
diagnose typical mistakes, public names the lesson modules import. ``Verdict``, the
registry of results and ``summary`` live in ``_summary``.

A checker is written as ``grade(fn, ...) -> pass message``: it calls the learner's function
through ``call``, raises ``Wrong(message, hint)`` at the first mistake it recognises, and
returns the sentence to print when everything holds. ``@checker(lesson, error_hint)`` turns
it into the function a notebook calls: it seeds and restores the random state, turns every
outcome into a ``Verdict``, prints it, records it for ``summary`` and never raises.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from ..i18n import _
from . import _record
from ._summary import EXERCISES, FAILED, LESSONS, NOT_ATTEMPTED, PASSED, RESULTS, Verdict

# --- machinery -------------------------------------------------------------------------------


class _NotAttempted(Exception):
    """The learner's function still raises NotImplementedError."""


class LearnerError(Exception):
    """The learner's function raised; ``.error`` holds what it raised."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


class Wrong(Exception):
    """The answer is wrong: ``message`` says what, ``hint`` says how to fix it."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.message, self.hint = message, hint


def call(fn: Callable, *args, **kwargs) -> Any:
    """Call the learner's function, sorting its exceptions into 'not attempted' and 'raised'."""
    try:
        return fn(*args, **kwargs)
    except NotImplementedError as error:
        raise _NotAttempted from error
    except Exception as error:  # noqa: BLE001 - any learner error becomes a message
        raise LearnerError(error) from error


def _short(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    first = text[0] if text else ""
    return first if len(first) <= 160 else first[:157] + "..."


def _name(fn: Any) -> str:
    name = getattr(fn, "__name__", None)
    return _("your function") if name is None else name


def checker(lesson: str, error_hint: str):
    """Turn ``grade(fn, ...) -> pass message`` into the checker of one exercise of ``lesson``.

    ``error_hint`` is English marked with ``N_`` (the decorator runs at import time); it is
    translated when a verdict shows it. The grade function builds its messages with ``_`` as
    it runs, so they come out in the language of the moment.

    The checker prints a Verdict, records it in ``RESULTS[(lesson, name)]`` (``name`` is the
    grade function's name without ``check_``) and returns it; it never raises. Pass
    ``record=False`` to grade a function without recording it (a demonstration of a wrong
    answer should not replace the learner's own verdict in ``summary``)."""
    if lesson not in LESSONS:
        raise ValueError(f"lesson={lesson!r} is not one of {LESSONS}")

    def wrap(grade: Callable[..., str]) -> Callable[..., Verdict]:
        name = grade.__name__.removeprefix("check_")
        # the exercises of lesson NN are the checkers of lessonNN.py, in order; a checker
        # defined elsewhere (modules.py: the skeletons inside a lesson) prints and records
        # its verdict like any other, but it is not one of the lesson's exercises
        if grade.__module__.endswith(f".lesson{lesson}"):
            if name not in EXERCISES.setdefault(lesson, []):
                EXERCISES[lesson].append(name)

        @functools.wraps(grade)
        def check(fn, *args, record: bool = True, **kwargs) -> Verdict:
            verdict = _grade(grade, error_hint, fn, *args, **kwargs)
            if record:
                RESULTS[(lesson, name)] = verdict
            print(f"{verdict}\n", end="", flush=True)  # one write: one stream output
            return verdict

        check.lesson, check.exercise = lesson, name
        return _record.register(check)  # kept for grading: _record.graded_check

    return wrap


def _grade(grade, error_hint: str, fn, *args, **kwargs) -> Verdict:
    name = _name(fn)
    if not callable(fn):
        return Verdict(
            FAILED,
            _("the checker needs your function itself, but got a {type}").format(
                type=type(fn).__name__
            ),
            _("pass the function's name without calling it, e.g. check_x(my_function)"),
        )
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(1234)
            return Verdict(PASSED, grade(fn, *args, **kwargs))
    except _NotAttempted:
        return Verdict(
            NOT_ATTEMPTED,
            _("`{name}` still raises NotImplementedError; replace it with your code").format(
                name=name
            ),
        )
    except Wrong as wrong:
        return Verdict(FAILED, wrong.message, wrong.hint)
    except LearnerError as raised:
        error = raised.error
        return Verdict(
            FAILED,
            _("`{name}` raised {error}: {detail}").format(
                name=name, error=type(error).__name__, detail=_short(error)
            ),
            _(error_hint),
        )
    except Exception as error:  # noqa: BLE001 - a checker never raises
        return Verdict(
            FAILED,
            _("your answer could not be checked ({error}: {detail})").format(
                error=type(error).__name__, detail=_short(error)
            ),
            _(error_hint),
        )


def answer_tensor(value: Any, what: str, shape: tuple[int, ...] | None = None) -> torch.Tensor:
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], torch.Tensor):
        raise Wrong(
            _("{what} should be one tensor, but your function returned a pair").format(what=what),
            _("return only the tensor the exercise asks for"),
        )
    if not isinstance(value, torch.Tensor):
        raise Wrong(
            _("{what} should be a torch.Tensor, but your function returned a {type}").format(
                what=what, type=type(value).__name__
            ),
            _("did you forget the `return` line?") if value is None else _("return a tensor"),
        )
    if shape is not None and tuple(value.shape) != tuple(shape):
        raise Wrong(
            _("{what}: the shape is {shape}, expected {expected}").format(
                what=what, shape=tuple(value.shape), expected=tuple(shape)
            ),
            _("print the shape after each line to see where it changes"),
        )
    return value


def answer_number(value: Any, where: str, hint: str) -> float:
    """``value`` as a float (a one-number tensor counts); anything else is ``Wrong``: "{where},
    your function returned a {type}, not a number", with ``hint`` (for ``None``, the hint
    about a forgotten ``return``)."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Wrong(
            _("{where}, your function returned a {type}, not a number").format(
                where=where, type=type(value).__name__
            ),
            _("did you forget the `return` line?") if value is None else hint,
        )
    return float(value)


def close(a: torch.Tensor, b: torch.Tensor, atol: float = 1e-5) -> bool:
    if a.shape != b.shape:
        return False
    return torch.allclose(
        a.detach().double(), b.detach().double(), atol=atol, rtol=1e-4, equal_nan=True
    )


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The reference: add a float mask of -inf (a different formulation from masked_fill)."""
    minus_inf = torch.zeros(mask.shape, dtype=scores.dtype).masked_fill(mask, float("-inf"))
    return torch.softmax(scores + minus_inf, dim=-1)  # (..., T, T)


def require_rows_sum_to_one(w: torch.Tensor, what: str, hint: str) -> None:
    """Raise Wrong (naming the range of the row sums) unless every row of ``w`` sums to 1."""
    sums = w.detach().double().sum(dim=-1)
    if not torch.allclose(sums, torch.ones_like(sums), atol=1e-4):
        raise Wrong(
            _("{what}: the rows sum to values between {low:.3g} and {high:.3g}, not to 1").format(
                what=what, low=sums.min().item(), high=sums.max().item()
            ),
            hint,
        )


def example_scores(*shape: int, scale: float = 2.0) -> torch.Tensor:
    return torch.randn(*shape) * scale
