"""Write every learner version of the exercises from the solutions notebook (`make exercises`).

    python -m tools.make_exercises            # write the learner versions and run them
    python -m tools.make_exercises --no-run   # write the sources only (outputs are cleared)
    python -m tools.make_exercises --check    # exit 1 if any learner version is out of date
    python -m tools.make_exercises --learner-only   # write (and run) exercises.ipynb only,
                                                    # leaving the lesson notebooks alone
    python -m tools.make_exercises --lessons 10 12  # write (and run) the blocks of lessons 10
                                                    # and 12 only, leaving exercises.ipynb and
                                                    # the other lessons alone
    python -m tools.make_exercises --learner-only --lessons 09 11   # exercises.ipynb and the
                                                    # blocks of 09 and 11

One source, many learner versions. notebooks/exercises_solutions.ipynb is grouped by lesson:
every cell of lesson NN's exercises carries the tag ``lesson-NN``. From it this tool writes

* notebooks/exercises.ipynb: every exercise of the chapter, learner form;
* the end of each lesson notebook NN_*.ipynb: an "Exercises" block with that lesson's
  exercises in learner form, placed before the notebook's last cell (the link to the next
  notebook). The block's cells carry the tag ``lesson-exercises``; running the tool again
  replaces them, so a lesson notebook is never edited by hand there.

In the solutions notebook:

* in a code cell, the lines from `### BEGIN SOLUTION` to `### END SOLUTION` (markers
  included) become one stub line, `raise NotImplementedError`, at the marker's indentation.
  A block must sit inside a function body, so that the learner notebook still runs clean;
* a cell tagged "solution" (a worked demo or an explanation) is left out;
* in a markdown cell, text between `<!-- BEGIN SOLUTION -->` and `<!-- END SOLUTION -->`
  is left out (it may sit inside one line, e.g. in the title).

The Colab badge is rewritten for exercises.ipynb (tools/badges.py). The learner notebook is
committed with the outputs of its own clean run, like every notebook; `--check` compares
sources only (cell types, sources, tags), so it does not need a kernel.
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "notebooks" / "exercises_solutions.ipynb"
LEARNER = ROOT / "notebooks" / "exercises.ipynb"
BLOCK_TAG = "lesson-exercises"
LESSON_TAG = re.compile(r"^lesson-(\d\d)$")
BLOCK_INTRO = """## Exercises

Practise what this notebook built. Replace each `raise NotImplementedError` with your code,
then run the check below it: it prints ✅ passed, ❌ not yet (with a hint) or ⏳ not attempted
yet, and never crashes. The last cell shows your progress in this lesson. Worked answers are in
[exercises_solutions.ipynb](exercises_solutions.ipynb); all the chapter's exercises are in
[exercises.ipynb](exercises.ipynb)."""

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = "raise NotImplementedError"
SOLUTION_TAG = "solution"
# a block on lines of its own goes with its line break; a block inside a line leaves the line
MARKDOWN_BLOCK = re.compile(
    r"^<!-- BEGIN SOLUTION -->.*?<!-- END SOLUTION -->[ \t]*(\n|$)", re.DOTALL | re.MULTILINE
)
MARKDOWN_INLINE = re.compile(r"<!-- BEGIN SOLUTION -->.*?<!-- END SOLUTION -->", re.DOTALL)

if not __package__:  # run as a file, not as the module tools.make_exercises
    raise SystemExit("run it from the repository root as a module: python -m tools.make_exercises")
from tools.badges import badge_source  # noqa: E402


class MarkerError(ValueError):
    """A solution block that cannot be turned into a stub."""


def stub_code(source: str, where: str = "a cell") -> str:
    """Replace every marked solution block in ``source`` with one stub line."""
    out: list[str] = []
    indent = None  # the indentation of the open block's BEGIN line
    for number, line in enumerate(source.split("\n"), start=1):
        stripped = line.strip()
        if stripped == BEGIN:
            if indent is not None:
                raise MarkerError(f"{where}, line {number}: {BEGIN} inside another block")
            indent = line[: len(line) - len(line.lstrip())]
            if not indent:
                raise MarkerError(
                    f"{where}, line {number}: a solution block must sit inside a function body "
                    "(indented), or the learner notebook would stop at the stub"
                )
            out.append(f"{indent}{STUB}")
        elif stripped == END:
            if indent is None:
                raise MarkerError(f"{where}, line {number}: {END} without {BEGIN}")
            indent = None
        elif indent is None:
            out.append(line)
    if indent is not None:
        raise MarkerError(f"{where}: {BEGIN} is never closed by {END}")
    return "\n".join(out)


def stub_markdown(source: str) -> str:
    return MARKDOWN_INLINE.sub("", MARKDOWN_BLOCK.sub("", source))


def learner_notebook(solutions):
    """The learner version of a solutions notebook (a new NotebookNode, outputs cleared)."""
    nb = copy.deepcopy(solutions)
    cells = []
    for index, cell in enumerate(nb.cells):
        tags = cell.get("metadata", {}).get("tags", [])
        if SOLUTION_TAG in tags:
            continue
        if cell.cell_type == "code":
            cell.source = stub_code(cell.source, where=f"cell {index}")
            cell.outputs, cell.execution_count = [], None
        elif cell.cell_type == "markdown":
            cell.source = stub_markdown(cell.source)
        if "colab-badge" in tags:
            cell.source = badge_source(LEARNER.name)
        cells.append(cell)
    nb.cells = cells
    return nb


def lesson_of(cell) -> str | None:
    """ "04" for a cell tagged ``lesson-04``, else None."""
    for tag in cell.get("metadata", {}).get("tags", []):
        match = LESSON_TAG.match(tag)
        if match:
            return match.group(1)
    return None


def lesson_blocks(solutions) -> dict[str, list]:
    """``{"04": [cells]}``: each lesson's exercise cells in learner form, ready to insert.

    The solutions' own lesson heading (the first cell of a lesson) becomes a plain
    "Exercises" heading; every cell is tagged ``lesson-exercises`` and gets slideshow
    metadata (the heading is a slide, the rest is for working, not presenting: skip).
    """
    learner = learner_notebook(solutions)
    blocks: dict[str, list] = {}
    for cell in learner.cells:
        lesson = lesson_of(cell)
        if lesson is None:
            continue
        cell = copy.deepcopy(cell)
        first = lesson not in blocks
        if first:
            if cell.cell_type != "markdown":
                raise MarkerError(f"lesson {lesson}'s exercises must start with a heading cell")
            cell = nbformat.v4.new_markdown_cell(BLOCK_INTRO)
        cell["id"] = f"lesson{lesson}-exercises-{len(blocks.get(lesson, [])):02d}"  # stable ids
        cell.metadata["tags"] = [BLOCK_TAG]
        cell.metadata["slideshow"] = {"slide_type": "slide" if first else "skip"}
        blocks.setdefault(lesson, []).append(cell)
    return blocks


def lesson_path(lesson: str, notebooks: Path) -> Path:
    matches = sorted(notebooks.glob(f"{lesson}_*.ipynb"))
    if len(matches) != 1:
        raise FileNotFoundError(f"expected one notebook {lesson}_*.ipynb in {notebooks}")
    return matches[0]


def with_block(nb, block: list):
    """``nb`` with its ``lesson-exercises`` cells replaced by ``block``, before the last cell."""
    nb = copy.deepcopy(nb)
    kept = [c for c in nb.cells if BLOCK_TAG not in c.get("metadata", {}).get("tags", [])]
    if not kept:
        raise MarkerError("a lesson notebook needs at least its closing cell")
    nb.cells = kept[:-1] + [copy.deepcopy(c) for c in block] + kept[-1:]
    return nb


def stale_lessons(
    solutions_path: Path = SOLUTIONS,
    notebooks: Path | None = None,
    lessons: list[str] | None = None,
) -> list[str]:
    """Lesson notebooks whose exercises block differs from what the solutions would give
    (``lessons``: only those, e.g. ["10", "12"])."""
    notebooks = notebooks or solutions_path.parent
    problems = []
    for lesson, block in lesson_blocks(nbformat.read(solutions_path, as_version=4)).items():
        if lessons is not None and lesson not in lessons:
            continue
        path = lesson_path(lesson, notebooks)
        have = nbformat.read(path, as_version=4)
        want = with_block(have, block)
        if _sources(have) != _sources(want):
            problems.append(f"{path.name}: its exercises block is out of date or misplaced")
    return problems


def _sources(nb) -> list[tuple[str, str, tuple[str, ...]]]:
    return [
        (cell.cell_type, cell.source, tuple(cell.get("metadata", {}).get("tags", [])))
        for cell in nb.cells
    ]


def stale_cells(solutions_path: Path = SOLUTIONS, learner_path: Path = LEARNER) -> list[str]:
    """What differs between the learner notebook and the one the solutions would give."""
    want = _sources(learner_notebook(nbformat.read(solutions_path, as_version=4)))
    if not learner_path.exists():
        return [f"{learner_path.name} does not exist"]
    have = _sources(nbformat.read(learner_path, as_version=4))
    problems = [
        f"cell {i}: {h[0]} cell differs ({h[1][:40]!r}... vs {w[1][:40]!r}...)"
        for i, (h, w) in enumerate(zip(have, want))
        if h != w
    ]
    if len(have) != len(want):
        problems.append(f"{learner_path.name} has {len(have)} cells, expected {len(want)}")
    return problems


def _chosen_lessons(parser, args, solutions) -> list[str] | None:
    """``args.lessons`` as two-digit lessons of the solutions notebook ("9" -> "09"), or None;
    a lesson the solutions do not have is refused with the list of those they have."""
    if args.lessons is None:
        return None
    have = sorted({lesson for cell in solutions.cells if (lesson := lesson_of(cell))})
    chosen = []
    for name in args.lessons:
        lesson = name.zfill(2) if name.isdigit() else name
        if lesson not in have:
            parser.error(f"--lessons {name}: no such lesson in the solutions; use some of {have}")
        chosen.append(lesson)
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only report if out of date")
    parser.add_argument("--no-run", action="store_true", help="write without executing")
    parser.add_argument(
        "--learner-only",
        action="store_true",
        help="write notebooks/exercises.ipynb only; leave the lesson notebooks' blocks alone "
        "(with --check: check exercises.ipynb only)",
    )
    parser.add_argument(
        "--lessons",
        nargs="+",
        metavar="NN",
        help="write (or with --check: check) the exercises blocks of these lessons only, e.g. "
        "--lessons 10 12; exercises.ipynb is left alone unless --learner-only is given too",
    )
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="the repository (its notebooks/ folder is used)"
    )
    args = parser.parse_args(argv)
    notebooks = args.root / "notebooks"
    solutions_path, learner_path = notebooks / SOLUTIONS.name, notebooks / LEARNER.name
    solutions = nbformat.read(solutions_path, as_version=4)
    lessons = _chosen_lessons(parser, args, solutions)  # None: every lesson
    learner = args.learner_only or lessons is None
    if args.check:
        problems = stale_cells(solutions_path, learner_path) if learner else []
        if not args.learner_only or lessons is not None:
            problems += stale_lessons(solutions_path, notebooks, lessons)
        for problem in problems:
            print(problem)
        if problems:
            print("the learner exercises are out of date: run `make exercises`")
            return 1
        print("the learner exercises are up to date")
        return 0
    from tools.notebook_io import write_notebook
    from tools.run_notebooks import run

    written = []
    if learner:
        write_notebook(learner_notebook(solutions), learner_path)
        written.append(learner_path)
    blocks = {} if args.learner_only and lessons is None else lesson_blocks(solutions)
    for lesson, block in blocks.items():
        if lessons is not None and lesson not in lessons:
            continue
        path = lesson_path(lesson, notebooks)
        old = nbformat.read(path, as_version=4)
        new = with_block(old, block)
        if _sources(new) != _sources(old):
            write_notebook(new, path)
            written.append(path)
    for path in written:
        print(f"wrote {path.relative_to(args.root)}")
    if not args.no_run:
        for path in written:
            print(f"{run(path):6.1f} s  {path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
