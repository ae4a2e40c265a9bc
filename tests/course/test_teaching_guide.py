"""The teacher's guide (teaching/README.md): its timing table is current, and every notebook
section it points at by heading exists.

The timing table is written by tools/teaching_guide.py (also `tools/slides.py guide-table`).
A misconception is dispelled by a section of a notebook; the guide names that section in
bold ("Section **Why the mask goes before the softmax**"). When a heading is renamed, the
guide must follow, or a teacher looks for a section that is gone.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tools import teaching_guide as tg  # tools/teaching_guide.py (pytest's pythonpath)

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "teaching" / "README.md"


def _plain(text: str) -> str:
    """A heading as a reader sees it: maths and code marks dropped, spaces folded."""
    text = text.replace(r"$\sqrt{d_{head}}$", "√d_head")
    text = re.sub(r"[`$*]", "", text)
    return re.sub(r"\s+", " ", text).strip().rstrip(":").lower()


def _headings() -> set[str]:
    found = set()
    for path in (ROOT / "notebooks").glob("*.ipynb"):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            for line in "".join(cell["source"]).splitlines():
                match = re.match(r"#+\s+(.*)", line)
                if match:
                    found.add(_plain(match.group(1)))
    return found


def test_every_section_the_guide_names_is_a_heading_of_the_chapter():
    references = re.findall(r"[Ss]ection \*\*(.+?)\*\*", GUIDE.read_text(encoding="utf-8"), re.S)
    assert len(references) >= 20
    headings = _headings()
    missing = [r for r in references if _plain(r) not in headings]
    assert not missing, f"the guide names sections no notebook has: {missing}"


# ---------------------------------------------------------------- the timing table


def test_the_guide_table_in_teaching_readme_is_current():
    table = tg.guide_table(tg.chapter_notebooks(with_explorer=True))
    readme = (ROOT / "teaching" / "README.md").read_text(encoding="utf-8")
    assert table in readme, (
        "teaching/README.md's timing table is stale: "
        "run `python -m tools.slides guide-table --write`"
    )


def test_guide_table_write_replaces_only_the_marked_block(tmp_path):
    guide = tmp_path / "README.md"
    guide.write_text(f"intro\n{tg.TABLE_START}\nold table\n{tg.TABLE_END}\noutro\n")
    tg.write_guide_table("| new |\n", guide)
    assert guide.read_text() == (f"intro\n{tg.TABLE_START}\n\n| new |\n\n{tg.TABLE_END}\noutro\n")


def test_exercise_headings_map_to_notebooks():
    assert tg.exercise_notebook("4.2 · A sliding-window mask") == "04"
    assert tg.exercise_notebook("12.1 · Anything") == "12"
    assert tg.exercise_notebook("9 · Count the parameters at GPT-2 size") == "07"
    assert tg.exercise_notebook("11 · Something new") is None


def test_the_timing_rule_adds_up():
    t = tg.Timing("x", slides=2, subslides=3, fragments=4, notes=2, exercises=1)
    assert t.present == 5 * tg.MIN_PER_SLIDE + 4 * tg.MIN_PER_FRAGMENT + 2 * tg.MIN_PER_NOTES_CELL
    assert t.hands_on == tg.MIN_HANDS_ON_BASE + tg.MIN_PER_EXERCISE


def test_every_exercise_belongs_to_a_notebook():
    titles = tg.exercise_titles()
    assert titles, "notebooks/exercises.ipynb has no '### Exercise N.M · title' headings"
    assert [t for t in titles if tg.exercise_notebook(t) is None] == []
