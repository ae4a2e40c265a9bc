"""What the checkers found and what the learner sees of it: ``Verdict`` (one check's
result), the registry of results (``EXERCISES``, ``RESULTS``) that the ``checker`` decorator of
``core`` fills, and ``summary``/``reset``, the learner's table of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..i18n import _, pgettext

LESSONS = ("01", "02", "03", "04", "05", "06", "07", "08", "09", "10", "11", "12")

# the statuses are keys (compared, recorded in RESULTS and Summary.rows): English always;
# status_text gives the word the learner reads
PASSED, FAILED, NOT_ATTEMPTED = "passed", "not yet", "not attempted yet"
_MARKS = {PASSED: "✅", FAILED: "❌", NOT_ATTEMPTED: "⏳"}


def status_text(status: str) -> str:
    """The status word the learner reads, in the current language."""
    if status == PASSED:
        return pgettext("checker status", "passed")
    if status == FAILED:
        return pgettext("checker status", "not yet")
    if status == NOT_ATTEMPTED:
        return pgettext("checker status", "not attempted yet")
    return status


@dataclass
class Verdict:
    """What a checker found. ``bool(verdict)`` is True when the answer passed."""

    status: str  # "passed", "not yet" or "not attempted yet"
    message: str
    hint: str = ""

    def __bool__(self) -> bool:
        return self.status == PASSED

    def __str__(self) -> str:
        text = _("{mark} {status}: {message}").format(
            mark=_MARKS[self.status], status=status_text(self.status), message=self.message
        )
        return (
            _("{verdict}\n   hint: {hint}").format(verdict=text, hint=self.hint)
            if self.hint
            else text
        )

    def _ipython_display_(self) -> None:
        """Show nothing when a cell ends with a check: the checker has printed already."""


# --- the registry behind summary() -----------------------------------------------------------

# lesson -> the names of its exercises: the checkers of lessonNN.py, in the order defined
EXERCISES: dict[str, list[str]] = {}
# (lesson, exercise name) -> the Verdict of the most recent check in this kernel
RESULTS: dict[tuple[str, str], Verdict] = {}


@dataclass
class Summary:
    """The learner's table: one ``(lesson, exercise, status)`` row per exercise."""

    rows: list[tuple[str, str, str]] = field(default_factory=list)
    note: str = ""

    @property
    def passed(self) -> int:
        return sum(status == PASSED for _les, _name, status in self.rows)

    def __bool__(self) -> bool:
        return bool(self.rows) and self.passed == len(self.rows)

    def __str__(self) -> str:
        if not self.rows:
            return self.note
        lines = []
        for lesson in dict.fromkeys(lesson for lesson, _name, _status in self.rows):
            rows = [(name, status) for les, name, status in self.rows if les == lesson]
            done = sum(status == PASSED for _name, status in rows)
            lines.append(
                _("lesson {lesson}: {passed} of {total} exercises pass").format(
                    lesson=lesson, passed=done, total=len(rows)
                )
            )
            width = max(len(name) for name, _status in rows)
            lines += [
                f"  {_MARKS[status]} {name:<{width}}  {status_text(status)}"
                for name, status in rows
            ]
        return "\n".join(lines + ([self.note] if self.note else []))

    def _ipython_display_(self) -> None:
        """Show nothing when a cell ends with summary(): it has printed already."""


def _lesson_key(lesson: Any) -> str | None:
    text = str(lesson).strip().lower().removeprefix("lesson").strip()
    return text.zfill(2) if text.isdigit() and text.zfill(2) in LESSONS else None


def summary(lesson: str | int | None = None, show: bool = True) -> Summary:
    """Which exercises pass: of one lesson (``"04"``, ``4``) or, with no lesson, of all.

    Each exercise shows the verdict of its most recent check in this kernel: ✅ passed,
    ❌ not yet, ⏳ not attempted yet (also when its check has not run). Prints the table
    unless ``show=False``, returns it as a ``Summary``, and never raises."""
    if lesson is None:
        lessons = [les for les in LESSONS if EXERCISES.get(les)]
    else:
        key = _lesson_key(lesson)
        if key is None:
            note = _("no lesson {lesson!r}: use one of {lessons}").format(
                lesson=lesson, lessons=", ".join(LESSONS)
            )
            result = Summary(note=note)
            if show:
                print(f"{result}\n", end="", flush=True)
            return result
        lessons = [key]
    rows = []
    for les in lessons:
        for name in EXERCISES.get(les, []):
            verdict = RESULTS.get((les, name))
            rows.append((les, name, NOT_ATTEMPTED if verdict is None else verdict.status))
    note = (
        "" if rows else _("lesson {lesson} has no checked exercises yet").format(lesson=lessons[0])
    )
    result = Summary(rows, note)
    if show:
        print(f"{result}\n", end="", flush=True)
    return result


def reset(lesson: str | int | None = None) -> None:
    """Forget the recorded verdicts (of one lesson, or all): every exercise shows ⏳ again."""
    key = None if lesson is None else _lesson_key(lesson)
    for les, name in list(RESULTS):
        if key is None or les == key:
            del RESULTS[(les, name)]
