"""The teacher's guide points at notebook sections by their headings: every one must exist.

A misconception is dispelled by a section of a notebook; the guide names that section in
bold ("Section **Why the mask goes before the softmax**"). When a heading is renamed, the
guide must follow, or a teacher looks for a section that is gone.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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
