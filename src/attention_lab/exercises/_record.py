"""The checkers as the library defined them, for grading (tools/make_assignment.py).

A notebook calls a checker by a name it imported, ``check_x(fn)``, and so can any cell after
it rebind that name, or the attribute of ``attention_lab.exercises`` it came from. An
nbgrader test cell must not trust either. ``register`` (called by ``core.checker`` once per
checker, at import, before any learner code runs) keeps the checker the library built and
returns it wrapped so that every run records its verdict here; ``graded_check`` runs that
kept checker, never a name the notebook or a module attribute holds, and accepts its verdict
only when it is the one the wrapper recorded for this very run, a ``Verdict`` of the library.

When a sandboxed grading run (hub/grading/grade.py, which sets ``ATTENTION_LAB_GRADING=1`` in
the kernel) calls ``graded_check``, the verdict is also handed to the grader as data: a
display output of type ``application/vnd.attention-lab.verdict+json`` (status, message,
hint, the printed line, the language), from which the grader builds the feedback page
without reading anything else the notebook printed.

What this does not stop: code in the same kernel that patches the library's own internals
(this module, ``core``, ``torch``) before the test cell runs. teaching/grading.md says what
nbgrader can and cannot guarantee.
"""

from __future__ import annotations

import functools
import os
import sys
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
VERDICT_MIME = "application/vnd.attention-lab.verdict+json"


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
    _hand_to_grader(exercise, verdict)
    return verdict


def _hand_to_grader(exercise: str, verdict: Verdict) -> None:
    """In a grading kernel (``ATTENTION_LAB_GRADING=1``, an IPython kernel), publish the
    verdict as a display output of type VERDICT_MIME; elsewhere, nothing."""
    if os.environ.get("ATTENTION_LAB_GRADING") != "1" or "IPython" not in sys.modules:
        return
    from IPython import get_ipython
    from IPython.display import display

    if get_ipython() is None:
        return
    from ..i18n import get_language

    data = {
        "exercise": exercise,
        "status": verdict.status,
        "message": verdict.message,
        "hint": verdict.hint,
        "text": str(verdict),
        "language": get_language(),
    }
    display({VERDICT_MIME: data, "text/plain": f"{exercise}: {verdict.status}"}, raw=True)
