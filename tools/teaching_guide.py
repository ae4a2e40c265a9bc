"""The teacher's timing table in teaching/README.md, counted from the slide metadata.

    python -m tools.teaching_guide                  # print the table (the chapter and explorer)
    python -m tools.teaching_guide --write          # update it between the markers of the guide
    python -m tools.teaching_guide NOTEBOOK ...     # only these notebooks
    python -m tools.teaching_guide --lang zh-CN     # the table of teaching/zh-CN/README.md

`python -m tools.slides guide-table [--write]` runs the same. Per notebook: slides, subslides,
fragments and speaker-notes cells (tools/slides.py assigns them), the exercises that belong to
it (in notebooks/exercises.ipynb or in the notebook itself), and the minutes the rule below
gives for presenting it and for the hands-on part.

`--write` updates both guides: teaching/README.md and the Simplified Chinese
teaching/zh-CN/README.md, whose table has the same numbers (counted from the English
notebook; the Chinese one carries the same metadata) with Chinese headers and rule, and
each row named by the Chinese notebook's title heading (notebooks/zh-CN/).
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

TOOLS = Path(__file__).resolve().parent
if not __package__:  # run as a file, not as the module tools.teaching_guide
    raise SystemExit("run it from the repository root as a module: python -m tools.teaching_guide")
from tools.slide_cells import NOTEBOOKS, ROOT, chapter_notebooks, heading_levels, slide_type  # noqa: E402

# Timing rule for the teacher's guide (estimates, not measurements of a class):
MIN_PER_SLIDE = 1.5  # every slide or subslide: read, explain
MIN_PER_FRAGMENT = 0.5  # every fragment: ask for a prediction, reveal
MIN_PER_EXERCISE = 8.0  # hands-on: every exercise of the notebook in exercises.ipynb
MIN_HANDS_ON_BASE = 5.0  # hands-on: run the notebook, change one number
MIN_PER_NOTES_CELL = 0.5  # speaker notes are said aloud

# Which notebook each exercise of notebooks/exercises.ipynb belongs to. An exercise numbered
# "N.M" (### Exercise 4.2 · ...) belongs to notebook 0N; a plain "Exercise N" is looked up here
# by words of its title (titles survive renumbering). One matching neither is reported by
# `guide-table` and fails tests/course/test_teaching_guide.py.
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


ZH = "zh-CN"
HEADERS = {
    "en": "| notebook | slides | subslides | fragments | notes cells | exercises "
    "| present (min) | hands-on (min) |",
    ZH: "| 笔记本 | 幻灯片 | 子幻灯片 | 片段 | 备注单元格 | 练习 | 讲授（分钟） | 动手（分钟） |",
}
TOTAL = {"en": "**total**", ZH: "**合计**"}


def zh_title(path: Path) -> str:
    """The Chinese notebook's title heading (notebooks/zh-CN/NAME), or the English stem."""
    zh = path.parent / ZH / path.name
    if zh.exists():
        for cell in nbformat.read(zh, as_version=4).cells:
            if cell.cell_type == "markdown" and (m := re.search(r"^#\s+(.+)$", cell.source, re.M)):
                return m.group(1).strip()
    return path.stem


def _rule_zh(unmapped: list[str]) -> str:
    rule = (
        f"规则：讲授 = 每张幻灯片或子幻灯片 {MIN_PER_SLIDE} 分钟 + 每个片段 {MIN_PER_FRAGMENT} "
        f"分钟 + 每个演讲者备注单元格 {MIN_PER_NOTES_CELL} 分钟；动手 = 运行笔记本 "
        f"{MIN_HANDS_ON_BASE} 分钟 + `exercises.ipynb` 或笔记本中每道练习 {MIN_PER_EXERCISE} "
        "分钟。向上取整。没有 slideshow 元数据的笔记本，每个带标题的 markdown 单元格算一张"
        "幻灯片。这些是由幻灯片元数据得出的估计，不是真实课堂的计时。"
    )
    if unmapped:
        rule += f"未归入任何笔记本的练习（请加到 EXERCISE_NOTEBOOK 中）：{unmapped}。"
    return rule


def guide_table(paths: list[Path], lang: str = "en") -> str:
    """The timing table in English or (``lang="zh-CN"``) Simplified Chinese."""
    rows = [HEADERS[lang], "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    total_p = total_h = 0.0
    for path in paths:
        t = timing(path)
        total_p += t.present
        total_h += t.hands_on
        name = t.notebook if lang == "en" else zh_title(path)
        rows.append(
            f"| {name} | {t.slides} | {t.subslides} | {t.fragments} | {t.notes} "
            f"| {t.exercises} | {_round_half(t.present)} | {_round_half(t.hands_on)} |"
        )
    rows.append(
        f"| {TOTAL[lang]} | | | | | | **{_round_half(total_p)}** | **{_round_half(total_h)}** |"
    )
    unmapped = [t for t in exercise_titles() if exercise_notebook(t) is None]
    if lang != "en":
        return "\n".join(rows) + "\n\n" + _rule_zh(unmapped) + "\n"
    rule = (
        f"Rule: present = {MIN_PER_SLIDE} min per slide or subslide + {MIN_PER_FRAGMENT} per "
        f"fragment + {MIN_PER_NOTES_CELL} per speaker-notes cell; hands-on = "
        f"{MIN_HANDS_ON_BASE} min to run the notebook + {MIN_PER_EXERCISE} per exercise in "
        "exercises.ipynb or in the notebook. Rounded up. A notebook without slideshow metadata "
        "counts one slide per markdown cell with a heading. Estimates from the slide metadata, "
        "not timings of a class."
    )
    if unmapped:
        rule += (
            f" Exercises not assigned to a notebook (add them to EXERCISE_NOTEBOOK): {unmapped}."
        )
    return "\n".join(rows) + "\n\n" + rule + "\n"


GUIDE = ROOT / "teaching" / "README.md"
GUIDES = {"en": GUIDE, ZH: ROOT / "teaching" / ZH / "README.md"}
TABLE_START = "<!-- guide-table: generated by `python -m tools.slides guide-table --write` -->"
TABLE_END = "<!-- /guide-table -->"


def write_guide_table(table: str, guide: Path = GUIDE) -> None:
    """Replace the table between the markers of the teacher's guide."""
    text = guide.read_text(encoding="utf-8")
    start, end = text.find(TABLE_START), text.find(TABLE_END)
    if start < 0 or end < start:
        raise SystemExit(f"{guide} has no {TABLE_START!r} ... {TABLE_END!r} markers")
    text = text[: start + len(TABLE_START)] + "\n\n" + table + "\n" + text[end:]
    guide.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--write", action="store_true", help="update it in teaching/README.md and teaching/zh-CN/"
    )
    parser.add_argument("--lang", choices=tuple(HEADERS), default="en", help="table to print")
    parser.add_argument("notebooks", nargs="*", help="default: the chapter and the explorer")
    args = parser.parse_args(argv)
    paths = [Path(p) for p in args.notebooks] or chapter_notebooks(with_explorer=True)
    for p in paths:
        if not p.exists():
            raise SystemExit(
                f"notebook {p} does not exist; give a path such as notebooks/02_*.ipynb"
            )
    if args.write:
        for lang, guide in GUIDES.items():
            write_guide_table(guide_table(paths, lang), guide)
            print(f"updated the timing table in {guide.relative_to(ROOT)}")
    else:
        print(guide_table(paths, args.lang), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
