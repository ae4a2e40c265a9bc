"""The README is a front door, and the pages behind it hold the rest (issue 41).

README.md and README.zh-CN.md stay short (what you will learn, how to start, the chapter,
teaching, the library in one example, the two commands); the module map, installing without
make, the developer's pages and the measurements live in docs/, each with a Chinese edition
built from its catalogue (tools/catalogues/readme.py, DOCUMENTS). Every relative link in these pages
must reach a file of the repository. Fast: nothing is run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tools.catalogues.readme import DOCUMENTS

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / rel for d in DOCUMENTS for rel in (d.english, d.chinese)]
LINK = re.compile(r"\]\(([^)\s]+)\)")  # [text](target)
FENCED = re.compile(r"^\s*```.*?^\s*```", flags=re.S | re.M)
README_LINES = 120


def relative_links(text: str) -> list[str]:
    """The link targets of Markdown text outside fenced code, without web addresses."""
    found = LINK.findall(FENCED.sub("", text))
    return [t for t in found if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """The relative links of ``page`` that reach no file inside ``root``."""
    broken = []
    for target in relative_links(page.read_text(encoding="utf-8")):
        path = (page.parent / target.split("#")[0]).resolve()
        if not path.exists() or root not in path.parents:
            broken.append(target)
    return broken


@pytest.mark.parametrize("readme", ["README.md", "README.zh-CN.md"])
def test_each_readme_is_a_front_door_of_at_most_120_lines(readme):
    text = (ROOT / readme).read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_LINES
    for page in ("docs/library.md", "docs/install.md", "docs/development.md", "docs/measured.md"):
        linked = page if readme == "README.md" else page.replace("docs/", "docs/zh-CN/")
        assert f"]({linked})" in text, f"{readme} does not link to {linked}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_of_the_readme_and_the_docs_reaches_a_file(page):
    assert len(relative_links(page.read_text(encoding="utf-8"))) >= 1
    assert broken_links(page) == []


def test_the_link_check_sees_a_broken_link(tmp_path):
    (tmp_path / "a.md").write_text("see [b](b.md), [c](c.md#part) and [web](https://x.org)\n")
    (tmp_path / "b.md").write_text("here\n")
    assert relative_links((tmp_path / "a.md").read_text()) == ["b.md", "c.md#part"]
    assert broken_links(tmp_path / "a.md", root=tmp_path) == ["c.md#part"]


def test_every_page_of_docs_has_a_chinese_edition_built_from_a_catalogue():
    english = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))
    assert english == sorted(d.english for d in DOCUMENTS if d.english.startswith("docs/"))
    chinese = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs" / "zh-CN").glob("*.md"))
    assert chinese == sorted(d.chinese for d in DOCUMENTS if d.chinese.startswith("docs/"))
