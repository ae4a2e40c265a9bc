"""Write the learner exercises notebook from the solutions notebook (`make exercises`).

    python tools/make_exercises.py            # write notebooks/exercises.ipynb and run it
    python tools/make_exercises.py --no-run   # write the sources only (outputs are cleared)
    python tools/make_exercises.py --check    # exit 1 if exercises.ipynb is out of date

One source, two notebooks. In notebooks/exercises_solutions.ipynb:

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

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = "raise NotImplementedError"
SOLUTION_TAG = "solution"
# a block on lines of its own goes with its line break; a block inside a line leaves the line
MARKDOWN_BLOCK = re.compile(
    r"^<!-- BEGIN SOLUTION -->.*?<!-- END SOLUTION -->[ \t]*(\n|$)", re.DOTALL | re.MULTILINE
)
MARKDOWN_INLINE = re.compile(r"<!-- BEGIN SOLUTION -->.*?<!-- END SOLUTION -->", re.DOTALL)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from badges import badge_source  # noqa: E402


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only report if out of date")
    parser.add_argument("--no-run", action="store_true", help="write without executing")
    args = parser.parse_args(argv)
    if args.check:
        problems = stale_cells()
        for problem in problems:
            print(problem)
        if problems:
            print(f"{LEARNER.name} is out of date: run `make exercises`")
            return 1
        print(f"{LEARNER.name} is up to date")
        return 0
    from run_notebooks import run, write_clean

    nb = learner_notebook(nbformat.read(SOLUTIONS, as_version=4))
    write_clean(nb, LEARNER)
    print(f"wrote {LEARNER.relative_to(ROOT)}")
    if not args.no_run:
        print(f"{run(LEARNER):6.1f} s  {LEARNER.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
