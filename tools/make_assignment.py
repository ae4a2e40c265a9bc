"""Turn the exercises into an nbgrader assignment (`make assignment`).

    python -m tools.make_assignment                      # build/course/source/attention_lab/
    python -m tools.make_assignment --course DIR --points 2
    python -m tools.make_assignment --edition zh-CN      # build/course/source/attention_lab_zh/
    cd build/course && nbgrader generate_assignment attention_lab --force   # the release

From notebooks/exercises_solutions.ipynb this writes an nbgrader *source* assignment,
``COURSE/source/ASSIGNMENT/exercises.ipynb``, and ``COURSE/nbgrader_config.py`` (run every
nbgrader command from COURSE). COURSE is made private, mode 0700 whatever it was, and so are
the files written here (0600); the command line also sets umask 077, as ``make assignment``
does for nbgrader. It holds the solutions, and later the gradebook and every submission:
``make grade`` refuses a course folder that other users can read. Nothing here names an
exercise: every rule reads the markers, tags and checker calls of the solutions notebook, so
the assignment follows the exercise set.

``--edition zh-CN`` (``make assignment LANG_EDITION=zh-CN``) builds the Simplified Chinese
assignment, ``attention_lab_zh``, beside the English one in the same course, from
notebooks/zh-CN/exercises_solutions.ipynb: the same answer and test cells (the same grade_ids),
its prose in Chinese, the grading note and the test cells' comments in Chinese, and a locked
first cell that calls ``attention_lab.set_language("zh_CN")``, so the checkers' verdicts and
hints, printed in the notebook and in nbgrader's feedback, are Chinese (✅ 通过, ❌ 还没通过).
The test is the same in both: the verdict's status, the code "passed", whatever the language.

* A code cell with ``### BEGIN SOLUTION`` / ``### END SOLUTION`` becomes an autograded answer
  cell (nbgrader ``solution``); ``nbgrader generate_assignment`` replaces the marked lines
  with its stub, ``raise NotImplementedError()``. Its grade_id is ``answer-<name it defines>``.
* A code cell made only of checker calls, ``check_x(fn)``, becomes one autograded test cell
  per call (``grade``, locked, ``--points`` each, grade_id ``lessonNN-x``): it runs the
  library's own checker of exercise x, ``attention_lab.exercises._record.graded_check("x",
  fn)`` (never the name ``check_x`` that the notebook bound, which an answer cell could
  rebind), which prints its verdict, and raises AssertionError unless the verdict is
  "passed", so nbgrader gives the points only then. A call with ``record=False`` is a
  demonstration and stays an ordinary cell.
* Markdown cells and the cells that import the checkers become read-only (locked), so
  ``nbgrader autograde`` restores them as released.
* As in the learner notebook (tools/make_exercises.py): cells tagged ``solution`` (worked
  demos) are left out, and so is markdown between ``<!-- BEGIN SOLUTION -->`` and
  ``<!-- END SOLUTION -->``; so are the Colab badge and setup cells, and every output.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "notebooks" / "exercises_solutions.ipynb"
COURSE = ROOT / "build" / "course"
ASSIGNMENT = "attention_lab"
# edition -> (solutions notebook, assignment name)
EDITION_DEFAULTS = {
    "en": (SOLUTIONS, ASSIGNMENT),
    "zh-CN": (ROOT / "notebooks" / "zh-CN" / "exercises_solutions.ipynb", "attention_lab_zh"),
}
NOTEBOOK = "exercises.ipynb"

if not __package__:  # run as a file, not as the module tools.make_assignment
    raise SystemExit("run it from the repository root as a module: python -m tools.make_assignment")
from tools.assignment_cells import EDITIONS, AssignmentError, graded, source_notebook  # noqa: E402
from tools.notebook_io import write_notebook  # noqa: E402

CONFIG = """\
# Written by tools/make_assignment.py (`make assignment`); run nbgrader from this directory.
import os

c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "attention_lab"
# this directory, whatever a global nbgrader_config.py says
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
# A cell may train a small model (lesson 08): give a slow, busy machine time.
c.Execute.timeout = 300
"""


def write_course(
    course: Path = COURSE,
    solutions_path: Path = SOLUTIONS,
    assignment: str = ASSIGNMENT,
    points: float = 1.0,
    points_for: dict[str, float] | None = None,
    edition: str = "en",
) -> Path:
    """Write COURSE/nbgrader_config.py and the source assignment; return the notebook's path.
    ``edition`` is the language of ``solutions_path`` ("en" or "zh-CN")."""
    nb = source_notebook(
        nbformat.read(solutions_path, as_version=4), points, points_for, edition=edition
    )
    if not graded(nb):
        raise AssignmentError(f"{solutions_path.name} has no checker calls: nothing to grade")
    course.mkdir(parents=True, exist_ok=True)
    os.chmod(course, 0o700)  # private, whatever it was: see the docstring
    target = course / "source" / assignment / NOTEBOOK
    target.parent.mkdir(parents=True, exist_ok=True)
    write_notebook(nb, target)
    (course / "nbgrader_config.py").write_text(CONFIG)
    for path in (course / "source", target.parent):
        os.chmod(path, 0o700)
    for path in (target, course / "nbgrader_config.py"):
        os.chmod(path, 0o600)
    return target


def _points_for(items: list[str]) -> dict[str, float]:
    result = {}
    for item in items:
        name, _, value = item.partition("=")
        if not value:
            raise SystemExit(f"--points-for takes EXERCISE=POINTS, not {item!r}")
        result[name] = float(value)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--edition",
        choices=EDITIONS,
        default="en",
        help="the language: en (default) or zh-CN (assignment attention_lab_zh)",
    )
    parser.add_argument("--solutions", type=Path, help="default: the edition's solutions")
    parser.add_argument("--course", type=Path, default=COURSE, help="the nbgrader course dir")
    parser.add_argument("--assignment", help="default: attention_lab (zh-CN: attention_lab_zh)")
    parser.add_argument("--points", type=float, default=1.0, help="points per exercise")
    parser.add_argument(
        "--points-for",
        action="append",
        default=[],
        metavar="EXERCISE=POINTS",
        help="points of one exercise (its checker's name without check_)",
    )
    args = parser.parse_args(argv)
    os.umask(0o077)  # everything this run writes is the owner's only
    solutions, assignment = EDITION_DEFAULTS[args.edition]
    target = write_course(
        args.course,
        args.solutions or solutions,
        args.assignment or assignment,
        args.points,
        _points_for(args.points_for),
        edition=args.edition,
    )
    rows = graded(nbformat.read(target, as_version=4))
    lessons = dict.fromkeys(lesson for _, lesson, _ in rows)
    total = sum(p for _, _, p in rows)
    print(
        f"wrote {target.relative_to(Path.cwd()) if target.is_relative_to(Path.cwd()) else target}:"
        f" {len(rows)} graded exercises in {len(lessons)} lessons, {total:g} points"
    )
    for lesson in lessons:
        ids = [f"{gid} ({p:g})" for gid, les, p in rows if les == lesson]
        print(f"  lesson {lesson}: {', '.join(ids)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
