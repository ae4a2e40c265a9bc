"""Reading a notebook's cells for the slides: headings, sizes, heights, slide types.

Shared by tools/slides.py (assign, check), tools/slide_decks.py and tools/teaching_guide.py.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
SLIDE_TYPES = ("slide", "subslide", "fragment", "-", "skip", "notes")
FIGURE_LINES = 13  # rendered lines a figure takes on a slide (about 390 px of 700)
WIDGET_LINES = 14


def chapter_notebooks(with_explorer: bool = False) -> list[Path]:
    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if with_explorer:
        paths.append(NOTEBOOKS / "explorer.ipynb")
    return paths


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


def cell_label(cell) -> str:
    """A stable name for a cell that survives inserts: its heading or its first words."""
    heading = first_heading(cell.source) if cell.cell_type == "markdown" else None
    if heading:
        return heading
    first = next((line.strip() for line in cell.source.splitlines() if line.strip()), "")
    return first[:60]
