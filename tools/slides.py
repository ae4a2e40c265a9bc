"""Slides from the chapter's own notebooks: assign slideshow metadata, check slide sizes, build
offline HTML decks (the teacher's timing table from them: tools/teaching_guide.py).

    python -m tools.slides assign [--force] [NOTEBOOK ...]   # fill in metadata.slideshow
    python -m tools.slides check [NOTEBOOK ...]              # every cell has it; slides fit
    python -m tools.slides html [--out build/slides] [NOTEBOOK ...]   # offline reveal.js decks
                                                            # (zh-CN ones in build/slides/zh-CN)
    python -m tools.slides guide-table [--write]             # = tools/teaching_guide.py

With no NOTEBOOK, the chapter: notebooks/01_*.ipynb ... 10_*.ipynb (`guide-table` adds the
explorer); `html` builds the Simplified Chinese decks too, from notebooks/zh-CN/, into
OUT/zh-CN/ (a notebook given from notebooks/zh-CN/ goes there as well). The same metadata
drives both the live slideshow (RISE in JupyterLab, Alt+R) and
the static decks (nbconvert's slides exporter), so the slides are the notebook, not a copy.

How `assign` chooses (first rule that matches wins; one cell is one unit, never split):

 1. The Colab badge cell -> skip. Code cells before the first cell that holds a `##` heading
    and that show no output (the install and import cells) -> skip: run them with "Run All"
    before the talk, they are not lesson content.
 2. A markdown cell that starts with `#` (title) or `##` (section) -> slide; with `###` -> subslide.
    A markdown cell with a `##`/`###` heading further down -> slide/subslide as well: the new
    idea starts there (such a cell should be split by its author; `check` lists it if too big).
 3. A predict-then-run question (a markdown cell that starts with "**Predict.") -> subslide:
    the class reads the question on a screen of its own; the code and its answer follow it.
 4. A markdown cell with no heading and more than LONG_PROSE_LINES non-blank lines, and no
    question in it (no `?` outside code, no <details>) -> notes: the teacher says it, the
    slide keeps the code and the picture.
 5. Any other cell joins the current slide when the slide still fits (at most
    MAX_MARKDOWN_LINES non-blank markdown lines, MAX_CODE_LINES code lines, and an estimated
    SLIDE_HEIGHT_LINES rendered lines counting printed output and figures); a code cell right
    after prose joins as a fragment (the class reads the question, then the code and its
    output appear), a cell after code joins as "-". When it does not fit -> subslide.
    Notes and skipped cells never count towards a slide.

A value already in a cell's metadata (set by hand, or by an earlier run) is kept unless
--force, so `assign` is idempotent and fills in only the cells added since.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

TOOLS = Path(__file__).resolve().parent
if not __package__:  # run as a file, not as the module tools.slides
    raise SystemExit("run it from the repository root as a module: python -m tools.slides")
from tools.notebook_io import write_notebook  # noqa: E402
from tools.slide_cells import (  # noqa: E402
    ROOT,
    SLIDE_TYPES,
    cell_height,
    cell_label,
    chapter_notebooks,
    first_heading,
    has_question,
    heading_levels,
    is_badge,
    nonblank_lines,
    slide_type,
)
from tools.slide_decks import DEFAULT_OUT, ZH, build_html, lang_of, remote_references  # noqa: E402

PREDICT = "**Predict."  # a predict-then-run question starts its own screen
MAX_MARKDOWN_LINES = 15  # non-blank markdown lines on one slide or subslide
MAX_CODE_LINES = 25  # code lines on one slide or subslide
LONG_PROSE_LINES = 15  # a heading-less markdown cell longer than this becomes speaker notes
SLIDE_HEIGHT_LINES = 24  # rendered lines that fit a 960x700 reveal.js slide at 20 px text


# ---------------------------------------------------------------- assign


@dataclass
class _Slide:
    markdown: int = 0
    code: int = 0
    height: float = 0.0
    last_kind: str | None = None

    def add(self, cell) -> None:
        if cell.cell_type == "markdown":
            self.markdown += nonblank_lines(cell.source)
        else:
            self.code += nonblank_lines(cell.source)
        self.height += cell_height(cell)
        self.last_kind = cell.cell_type

    def fits(self, cell) -> bool:
        md = self.markdown + (nonblank_lines(cell.source) if cell.cell_type == "markdown" else 0)
        code = self.code + (nonblank_lines(cell.source) if cell.cell_type == "code" else 0)
        return (
            md <= MAX_MARKDOWN_LINES
            and code <= MAX_CODE_LINES
            and self.height + cell_height(cell) <= SLIDE_HEIGHT_LINES
        )


def choose(cell, slide: _Slide, before_first_section: bool) -> str:
    """The slide type rule 1-5 of the module docstring gives `cell` (see there)."""
    if is_badge(cell):
        return "skip"
    if cell.cell_type == "code":
        if before_first_section and not cell.get("outputs"):
            return "skip"
    elif cell.cell_type == "markdown":
        levels = heading_levels(cell.source)
        if levels:
            return "slide" if min(levels) <= 2 else "subslide"
        if cell.source.lstrip().startswith(PREDICT):
            return "subslide"
        if nonblank_lines(cell.source) > LONG_PROSE_LINES and not has_question(cell.source):
            return "notes"
    else:  # raw cells carry no teaching content
        return "skip"
    if slide.last_kind is not None and slide.fits(cell):
        return "fragment" if cell.cell_type == "code" and slide.last_kind == "markdown" else "-"
    return "subslide"


def assign(nb, force: bool = False) -> int:
    """Set metadata.slideshow.slide_type on every cell by the rules; return how many changed."""
    changed = 0
    slide = _Slide()
    before_first_section = True
    for cell in nb.cells:
        if cell.cell_type == "markdown" and 2 in heading_levels(cell.source):
            before_first_section = False
        current = slide_type(cell)
        if current in SLIDE_TYPES and not force:
            kind = current
        else:
            kind = choose(cell, slide, before_first_section)
            if kind != current:
                cell.setdefault("metadata", {}).setdefault("slideshow", {})["slide_type"] = kind
                changed += 1
        if kind in ("slide", "subslide"):
            slide = _Slide()
            slide.add(cell)
        elif kind in ("fragment", "-"):
            slide.add(cell)
    return changed


# ---------------------------------------------------------------- check


@dataclass
class SlideUnit:
    """One slide or subslide as shown: the cells from a slide/subslide up to the next one."""

    notebook: str
    start: int  # index of its first cell
    cells: list[int] = field(default_factory=list)
    markdown: int = 0
    code: int = 0
    fragments: int = 0
    title: str = ""

    @property
    def too_big(self) -> bool:
        return self.markdown > MAX_MARKDOWN_LINES or self.code > MAX_CODE_LINES


def slide_units(nb, name: str) -> list[SlideUnit]:
    units: list[SlideUnit] = []
    current: SlideUnit | None = None
    for i, cell in enumerate(nb.cells):
        kind = slide_type(cell)
        if kind in (None, "skip", "notes"):
            continue
        if kind in ("slide", "subslide") or current is None:
            current = SlideUnit(name, i, title=first_heading(cell.source) or "")
            units.append(current)
        if kind == "fragment":
            current.fragments += 1
        current.cells.append(i)
        if cell.cell_type == "markdown":
            current.markdown += nonblank_lines(cell.source)
        elif cell.cell_type == "code":
            current.code += nonblank_lines(cell.source)
    return units


def check_notebook(path: Path) -> list[str]:
    """Problems of one notebook, each naming the notebook and the cell index."""
    nb = nbformat.read(path, as_version=4)
    problems = []
    for i, cell in enumerate(nb.cells):
        kind = slide_type(cell)
        if kind is None:
            problems.append(f"{path.name} cell {i}: no metadata.slideshow.slide_type")
        elif kind not in SLIDE_TYPES:
            problems.append(f"{path.name} cell {i}: unknown slide_type {kind!r}")
    for unit in slide_units(nb, path.name):
        if unit.too_big:
            where = f"cells {unit.cells[0]}-{unit.cells[-1]}" if len(unit.cells) > 1 else ""
            where = where or f"cell {unit.start} alone (split the cell)"
            problems.append(
                f"{path.name} {where} ({cell_label(nb.cells[unit.start])!r}): "
                f"{unit.markdown} markdown lines (max {MAX_MARKDOWN_LINES}), "
                f"{unit.code} code lines (max {MAX_CODE_LINES})"
            )
    return problems


# ---------------------------------------------------------------- command line


def _paths(args_paths: list[str]) -> list[Path]:
    if not args_paths:
        return chapter_notebooks()
    paths = [Path(p) for p in args_paths]
    for p in paths:
        if not p.exists():
            raise SystemExit(
                f"notebook {p} does not exist; give a path such as notebooks/02_*.ipynb"
            )
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_assign = sub.add_parser("assign", help="fill in metadata.slideshow by the rules")
    p_assign.add_argument("--force", action="store_true", help="recompute hand-set values too")
    p_assign.add_argument("notebooks", nargs="*")
    p_check = sub.add_parser("check", help="every cell has slideshow metadata; slides fit")
    p_check.add_argument("notebooks", nargs="*")
    p_html = sub.add_parser("html", help="offline reveal.js decks")
    p_html.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p_html.add_argument("notebooks", nargs="*")
    p_table = sub.add_parser("guide-table", help="timing table for teaching/README.md")
    p_table.add_argument(
        "--write", action="store_true", help="update it in teaching/README.md and teaching/zh-CN/"
    )
    p_table.add_argument("--lang", default="en", help="en or zh-CN: the table to print")
    p_table.add_argument("notebooks", nargs="*")
    args = parser.parse_args(argv)

    if args.command == "assign":
        for path in _paths(args.notebooks):
            nb = nbformat.read(path, as_version=4)
            n = assign(nb, force=args.force)
            if n:
                write_notebook(nb, path)
            print(f"{path.name}: {n} cells changed")
        return 0
    if args.command == "check":
        problems = [p for path in _paths(args.notebooks) for p in check_notebook(path)]
        for p in problems:
            print(p)
        print(f"{len(problems)} problem(s)")
        return 1 if problems else 0
    if args.command == "html":
        paths = _paths(args.notebooks)
        if not args.notebooks:  # the chapter in both editions
            paths += [p.parent / ZH / p.name for p in paths if (p.parent / ZH / p.name).exists()]
        written = []
        for lang, out in ((ZH, args.out / ZH), ("en", args.out)):  # zh first: en links to it
            mine = [p for p in paths if lang_of(p) == lang]
            written += build_html(mine, out, lang) if mine else []
        for target in written:
            hits = remote_references(target.read_text(encoding="utf-8"))
            if hits:
                print(f"{target}: remote references {hits}", file=sys.stderr)
                return 1
            print(target.relative_to(ROOT) if target.is_relative_to(ROOT) else target)
        return 0
    if args.command == "guide-table":  # the table's code is tools/teaching_guide.py
        from tools import teaching_guide

        argv = [*(["--write"] if args.write else []), "--lang", args.lang, *args.notebooks]
        return teaching_guide.main(argv, prog="slides.py guide-table")
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
