"""The checkers as the library defined them, for grading (tools/make_assignment.py).

A notebook calls a checker by a name it imported, ``check_x(fn)``, and so can any cell after
it rebind that name, or the attribute of ``attention_lab.exercises`` it came from. An
nbgrader test cell must not trust either. ``register`` (called by ``core.checker`` once per
checker, at import, before any learner code runs) keeps the checker the library built and
returns it wrapped so that every run records its verdict here; ``graded_check`` runs that
kept checker, never a name the notebook or a module attribute holds, and accepts its verdict
only when it is the one the wrapper recorded for this very run, a ``Verdict`` of the library.

What this does not stop: code in the same kernel that patches the library's own internals
(this module, ``core``, ``torch``) before the test cell runs. teaching/grading.md says what
nbgrader can and cannot guarantee.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ._summary import FAILED, NOT_ATTEMPTED, PASSED, Verdict

_STATUSES = (PASSED, FAILED, NOT_ATTEMPTED)
_VERDICT_TYPE = Verdict
# exercise name -> the checker as the library built it (before any notebook ran)
_CHECKERS: dict[str, list[Callable[..., Verdict]]] = {}
# exercise name -> (run number, the function checked, the verdict) of its latest run
_LATEST: dict[str, tuple[int, Any, Verdict]] = {}
_RUNS = [0]


def register(check: Callable[..., Verdict]) -> Callable[..., Verdict]:
    """Keep ``check`` (a checker from ``core.checker``, with ``.exercise``) and return it
    wrapped: the same call, the same verdict, recorded here."""
    name = check.exercise

    @functools.wraps(check)
    def recorded(fn, *args, **kwargs) -> Verdict:
        verdict = check(fn, *args, **kwargs)
        _RUNS[0] += 1
        _LATEST[name] = (_RUNS[0], fn, verdict)
        return verdict

    _CHECKERS.setdefault(name, []).append(recorded)
    return recorded


def graded_check(exercise: str, fn, *args, **kwargs) -> Verdict:
    """Run the library's own checker of ``exercise`` (its name without ``check_``) on ``fn``
    and return its verdict; raise RuntimeError when the verdict is not the one the checker
    recorded for this run (the library was tampered with), so the test cell scores 0."""
    checks = _CHECKERS.get(exercise, [])
    if len(checks) != 1:
        raise LookupError(
            f"exercise={exercise!r} names {len(checks)} checkers of attention_lab.exercises; "
            "give the name of one checker without check_ (tools/make_assignment.py writes it)"
        )
    before = _RUNS[0]
    verdict = checks[0](fn, *args, **kwargs)
    run, checked, recorded = _LATEST.get(exercise, (before, None, None))
    if not (
        run > before
        and checked is fn
        and recorded is verdict
        and type(verdict) is _VERDICT_TYPE
        and verdict.status in _STATUSES
    ):
        raise RuntimeError(
            f"the verdict of check_{exercise} is not the one attention_lab's checker recorded "
            f"for this run ({verdict!r}): the library was changed in this kernel; "
            "grade this notebook by reading it"
        )
    return verdict
