"""Slides from the chapter's own notebooks: assign slideshow metadata, check slide sizes, build
offline HTML decks, and write the teacher's timing table.

    python tools/slides.py assign [--force] [NOTEBOOK ...]   # fill in metadata.slideshow
    python tools/slides.py check [NOTEBOOK ...]              # every cell has it; slides fit
    python tools/slides.py html [--out build/slides] [NOTEBOOK ...]   # offline reveal.js decks
    python tools/slides.py guide-table                       # markdown timing table (teaching/)

With no NOTEBOOK, the chapter: notebooks/01_*.ipynb ... 09_*.ipynb (`guide-table` adds the
explorer). The same metadata drives both the live slideshow (RISE in JupyterLab, Alt+R) and
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
import math
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))
from notebook_io import write_notebook  # noqa: E402

ROOT = TOOLS.parent
NOTEBOOKS = ROOT / "notebooks"
DECK_DIR = ROOT / "teaching" / "deck"  # template + vendored reveal.js and MathJax
DEFAULT_OUT = ROOT / "build" / "slides"

SLIDE_TYPES = ("slide", "subslide", "fragment", "-", "skip", "notes")
PREDICT = "**Predict."  # a predict-then-run question starts its own screen
MAX_MARKDOWN_LINES = 15  # non-blank markdown lines on one slide or subslide
MAX_CODE_LINES = 25  # code lines on one slide or subslide
LONG_PROSE_LINES = 15  # a heading-less markdown cell longer than this becomes speaker notes
SLIDE_HEIGHT_LINES = 24  # rendered lines that fit a 960x700 reveal.js slide at 20 px text
FIGURE_LINES = 13  # rendered lines a figure takes on a slide (about 390 px of 700)
WIDGET_LINES = 14

# Timing rule for the teacher's guide (estimates, not measurements of a class):
MIN_PER_SLIDE = 1.5  # every slide or subslide: read, explain
MIN_PER_FRAGMENT = 0.5  # every fragment: ask for a prediction, reveal
MIN_PER_EXERCISE = 8.0  # hands-on: every exercise of the notebook in exercises.ipynb
MIN_HANDS_ON_BASE = 5.0  # hands-on: run the notebook, change one number
MIN_PER_NOTES_CELL = 0.5  # speaker notes are said aloud


def chapter_notebooks(with_explorer: bool = False) -> list[Path]:
    paths = sorted(NOTEBOOKS.glob("0[1-9]_*.ipynb"))
    if with_explorer:
        paths.append(NOTEBOOKS / "explorer.ipynb")
    return paths


# ---------------------------------------------------------------- reading cells

_HEADING = re.compile(r"^(#{1,6})\s+\S", re.MULTILINE)


def _without_code(markdown: str) -> str:
    """Markdown with fenced code, inline code and link targets removed."""
    text = re.sub(r"```.*?```", "", markdown, flags=re.DOTALL)
    text = re.sub(r"`[^`]*`", "", text)
    return re.sub(r"\]\([^)]*\)", "]", text)


def heading_levels(markdown: str) -> list[int]:
    """Levels of the headings in a markdown cell, in order (fenced code ignored)."""
    text = re.sub(r"```.*?```", "", markdown, flags=re.DOTALL)
    return [len(m.group(1)) for m in _HEADING.finditer(text)]


def first_heading(markdown: str) -> str | None:
    text = re.sub(r"```.*?```", "", markdown, flags=re.DOTALL)
    m = re.search(r"^#{1,6}\s+(.+)$", text, flags=re.MULTILINE)
    return m.group(1).strip() if m else None


def nonblank_lines(source: str) -> int:
    return sum(1 for line in source.splitlines() if line.strip())


def has_question(markdown: str) -> bool:
    return "<details" in markdown or "?" in _without_code(markdown)


def is_badge(cell) -> bool:
    return cell.cell_type == "markdown" and "colab-badge" in cell.source


def _output_height(output) -> float:
    if output.get("output_type") == "stream":
        return sum(
            max(1, math.ceil(len(line) / 75)) for line in output.get("text", "").splitlines()
        )
    data = output.get("data", {})
    if "image/png" in data or "image/svg+xml" in data:
        return FIGURE_LINES
    if "application/vnd.jupyter.widget-view+json" in data:
        return WIDGET_LINES
    if "text/html" in data:
        return 8
    if "text/plain" in data:
        return len(str(data["text/plain"]).splitlines())
    if output.get("output_type") == "error":
        return 6
    return 0


def cell_height(cell) -> float:
    """Estimated rendered lines of a cell on a 960x700 slide (prose wraps at ~95 characters)."""
    if cell.cell_type == "markdown":
        h = 0.0
        for line in cell.source.splitlines():
            s = line.strip()
            if not s:
                h += 0.4
            elif s.startswith("#"):
                h += 2.0
            elif s.startswith("$$"):
                h += 2.0
            else:
                h += max(1, math.ceil(len(s) / 95))
        return h
    if cell.cell_type == "code":
        h = sum(max(1, math.ceil(len(line) / 75)) for line in cell.source.splitlines())
        return h + 0.5 + sum(_output_height(o) for o in cell.get("outputs", []))
    return 0.0


def slide_type(cell) -> str | None:
    return cell.get("metadata", {}).get("slideshow", {}).get("slide_type")


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


def cell_label(cell) -> str:
    """A stable name for a cell that survives inserts: its heading or its first words."""
    heading = first_heading(cell.source) if cell.cell_type == "markdown" else None
    if heading:
        return heading
    first = next((line.strip() for line in cell.source.splitlines() if line.strip()), "")
    return first[:60]


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


# ---------------------------------------------------------------- html


def build_html(paths: list[Path], out: Path) -> list[Path]:
    """One offline reveal.js deck per notebook in `out`, with reveal.js and MathJax beside them."""
    from nbconvert import SlidesExporter
    from traitlets.config import Config

    out.mkdir(parents=True, exist_ok=True)
    vendor = DECK_DIR / "vendor"
    for name in ("reveal.js", "mathjax"):
        target = out / name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(vendor / name, target)
    shutil.copy(vendor / "README.md", out / "THIRD-PARTY-LICENSES.md")
    c = Config()
    c.SlidesExporter.reveal_url_prefix = "reveal.js"
    c.SlidesExporter.reveal_theme = "white"
    c.SlidesExporter.reveal_transition = "none"
    c.SlidesExporter.reveal_scroll = True
    c.SlidesExporter.reveal_number = "c/t"
    c.SlidesExporter.reveal_width = "1200"
    c.SlidesExporter.reveal_height = "800"
    c.SlidesExporter.mathjax_url = "mathjax/tex-svg.js"
    c.SlidesExporter.extra_template_basedirs = [str(DECK_DIR / "templates")]
    c.SlidesExporter.template_name = "attention-lab-offline"
    c.SlidesExporter.exclude_input_prompt = True
    c.SlidesExporter.exclude_output_prompt = True
    exporter = SlidesExporter(config=c)
    written = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        missing = [i for i, cell in enumerate(nb.cells) if slide_type(cell) is None]
        if missing:
            raise SystemExit(
                f"{path.name}: cells {missing} have no slideshow metadata; "
                f"run `python tools/slides.py assign {path}` first"
            )
        body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": path.stem}})
        target = out / f"{path.stem}.slides.html"
        target.write_text(body, encoding="utf-8")
        written.append(target)
    index = out / "index.html"
    links = "\n".join(
        f'<li><a href="{p.name}">{p.stem.replace(".slides", "")}</a></li>' for p in written
    )
    index.write_text(
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Attention Lab slides"
        "</title></head><body style='font:20px sans-serif;margin:2em'><h1>Attention Lab: slides"
        "</h1><p>Open a deck; arrows or space to move, S for speaker notes, F for full screen."
        f"</p><ul>{links}</ul></body></html>\n",
        encoding="utf-8",
    )
    return written


REMOTE = re.compile(
    r"""<(?:script|link|img|iframe)\b[^>]*?(?:src|href)\s*=\s*["']?(?:https?:)?//""", re.I
)
REMOTE_CSS = re.compile(r"""(?:@import\s+url\(|url\()\s*["']?(?:https?:)?//""", re.I)


def remote_references(html: str) -> list[str]:
    """Tags and CSS rules in `html` that would fetch something from the network."""
    hits = [m.group(0) for m in REMOTE.finditer(html)]
    hits += [m.group(0) for m in REMOTE_CSS.finditer(html)]
    return hits


# ---------------------------------------------------------------- timing table


# Which notebook each exercise of notebooks/exercises.ipynb belongs to. An exercise numbered
# "N.M" (### Exercise 4.2 · ...) belongs to notebook 0N; a plain "Exercise N" is looked up here
# by words of its title (titles survive renumbering). One matching neither is reported by
# `guide-table` and fails tests/test_slides.py.
EXERCISE_NOTEBOOK = {
    "Mask first": "04",
    "sliding-window": "04",
    "Padding and the causal mask": "04",
    "variance of": "03",
    "einsum": "02",
    "One head of": "06",
    "Split into heads": "06",
    "Three projections": "07",
    "Count the parameters": "07",
    "From 4 heads to 8": "08",
}
_EXERCISE = re.compile(r"^#{2,4}\s+Exercise\s+(\d+)(?:\.(\d+))?\s*·\s*(.+)$", re.MULTILINE)


def exercise_titles() -> list[str]:
    """Headings of the exercises in notebooks/exercises.ipynb, as 'N.M · title' or 'N · title'."""
    path = NOTEBOOKS / "exercises.ipynb"
    if not path.exists():
        return []
    nb = nbformat.read(path, as_version=4)
    return [
        f"{m.group(1)}{'.' + m.group(2) if m.group(2) else ''} · {m.group(3).strip()}"
        for cell in nb.cells
        if cell.cell_type == "markdown"
        for m in _EXERCISE.finditer(cell.source)
    ]


def exercise_notebook(title: str) -> str | None:
    """The two-digit notebook number an exercise heading belongs to, or None."""
    dotted = re.match(r"(\d+)\.\d+ · ", title)
    if dotted:
        return f"{int(dotted.group(1)):02d}"
    return next((nb for key, nb in EXERCISE_NOTEBOOK.items() if key in title), None)


def count_exercises(path: Path) -> int:
    """Exercises of one notebook: those of exercises.ipynb mapped to it + its own 'Exercise:'."""
    number = path.stem[:2]
    n = sum(1 for title in exercise_titles() if exercise_notebook(title) == number)
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            n += len(re.findall(r"(?:^|\n)\s*(?:\*\*)?Exercise\b", cell.source))
    return n


@dataclass
class Timing:
    notebook: str
    slides: int
    subslides: int
    fragments: int
    notes: int
    exercises: int

    @property
    def present(self) -> float:
        units = self.slides + self.subslides
        return (
            units * MIN_PER_SLIDE
            + self.fragments * MIN_PER_FRAGMENT
            + self.notes * MIN_PER_NOTES_CELL
        )

    @property
    def hands_on(self) -> float:
        return MIN_HANDS_ON_BASE + self.exercises * MIN_PER_EXERCISE


def timing(path: Path) -> Timing:
    nb = nbformat.read(path, as_version=4)
    kinds = [slide_type(c) for c in nb.cells]
    if all(k is None for k in kinds):  # no slideshow metadata (the explorer): one slide a section
        kinds = [
            "slide" for c in nb.cells if c.cell_type == "markdown" and heading_levels(c.source)
        ]
    return Timing(
        path.stem,
        kinds.count("slide"),
        kinds.count("subslide"),
        kinds.count("fragment"),
        kinds.count("notes"),
        count_exercises(path),
    )


def _round_half(x: float) -> str:
    return f"{math.ceil(x):d}"


def guide_table(paths: list[Path]) -> str:
    rows = [
        "| notebook | slides | subslides | fragments | notes cells | exercises "
        "| present (min) | hands-on (min) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    total_p = total_h = 0.0
    for path in paths:
        t = timing(path)
        total_p += t.present
        total_h += t.hands_on
        rows.append(
            f"| {t.notebook} | {t.slides} | {t.subslides} | {t.fragments} | {t.notes} "
            f"| {t.exercises} | {_round_half(t.present)} | {_round_half(t.hands_on)} |"
        )
    rows.append(
        f"| **total** | | | | | | **{_round_half(total_p)}** | **{_round_half(total_h)}** |"
    )
    rule = (
        f"Rule: present = {MIN_PER_SLIDE} min per slide or subslide + {MIN_PER_FRAGMENT} per "
        f"fragment + {MIN_PER_NOTES_CELL} per speaker-notes cell; hands-on = "
        f"{MIN_HANDS_ON_BASE} min to run the notebook + {MIN_PER_EXERCISE} per exercise in "
        "exercises.ipynb or in the notebook. Rounded up. A notebook without slideshow metadata "
        "counts one slide per markdown cell with a heading. Estimates from the slide metadata, "
        "not timings of a class."
    )
    unmapped = [t for t in exercise_titles() if exercise_notebook(t) is None]
    if unmapped:
        rule += (
            f" Exercises not assigned to a notebook (add them to EXERCISE_NOTEBOOK): {unmapped}."
        )
    return "\n".join(rows) + "\n\n" + rule + "\n"


GUIDE = ROOT / "teaching" / "README.md"
TABLE_START = "<!-- guide-table: generated by `python tools/slides.py guide-table --write` -->"
TABLE_END = "<!-- /guide-table -->"


def write_guide_table(table: str, guide: Path = GUIDE) -> None:
    """Replace the table between the markers of the teacher's guide."""
    text = guide.read_text(encoding="utf-8")
    start, end = text.find(TABLE_START), text.find(TABLE_END)
    if start < 0 or end < start:
        raise SystemExit(f"{guide} has no {TABLE_START!r} ... {TABLE_END!r} markers")
    text = text[: start + len(TABLE_START)] + "\n\n" + table + "\n" + text[end:]
    guide.write_text(text, encoding="utf-8")


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
    p_table.add_argument("--write", action="store_true", help="update it in teaching/README.md")
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
        for target in build_html(_paths(args.notebooks), args.out):
            hits = remote_references(target.read_text(encoding="utf-8"))
            if hits:
                print(f"{target}: remote references {hits}", file=sys.stderr)
                return 1
            print(target.relative_to(ROOT) if target.is_relative_to(ROOT) else target)
        return 0
    if args.command == "guide-table":
        paths = _paths(args.notebooks) if args.notebooks else chapter_notebooks(True)
        table = guide_table(paths)
        if args.write:
            write_guide_table(table)
            print(f"updated the timing table in {GUIDE.relative_to(ROOT)}")
        else:
            print(table, end="")
        return 0
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
