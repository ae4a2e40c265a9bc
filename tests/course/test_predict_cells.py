"""Learn by predicting: the chapter asks the reader to commit to an answer before a cell runs.

A predict-then-run place is a markdown question (a sentence ending in "?"), then the code
cell(s) that settle it, then the answer and its reason, folded in a
``<details><summary>Answer</summary>`` so that it is not read before the run. The answer
comes right after a code cell that ran, and the question at most ``REACH`` cells before.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
ANSWER = "<details><summary>Answer</summary>"
REACH = 4


def predict_places(path: Path) -> list[int]:
    """Indices of the answer cells of ``path``, each checked to follow a question and a run."""
    cells = nbformat.read(path, as_version=4).cells
    places = []
    for i, cell in enumerate(cells):
        if cell.cell_type != "markdown" or ANSWER not in cell.source:
            continue
        run = cells[i - 1]
        assert run.cell_type == "code" and run.outputs, (
            f"{path.name} cell {i}: an answer must follow the code cell that settles it"
        )
        before = cells[max(0, i - 1 - REACH) : i - 1]
        assert any(c.cell_type == "markdown" and "?" in c.source for c in before), (
            f"{path.name} cell {i}: no question in the {REACH} cells before the run"
        )
        assert "</details>" in cell.source, f"{path.name} cell {i}: the answer is not closed"
        places.append(i)
    return places


def test_the_chapter_asks_for_at_least_12_predictions():
    counts = {path.name: len(predict_places(path)) for path in CHAPTER}
    assert sum(counts.values()) >= 12, counts


@pytest.mark.parametrize("path", CHAPTER, ids=lambda p: p.stem)
def test_every_lesson_asks_for_a_prediction(path):
    assert predict_places(path), f"{path.name} has no predict-then-run place"
