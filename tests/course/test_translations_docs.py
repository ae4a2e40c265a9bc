"""The Simplified Chinese edition beyond the notebooks: README.zh-CN.md, the slide decks, the
teacher's guide and lesson plans, and the glossary check over them.

README.zh-CN.md is built from i18n/zh_CN/teaching/README.po (tools/catalogues/readme.py, one entry
per Markdown block of README.md); tools/slides.py html builds zh-CN decks from
notebooks/zh-CN/; tools/teaching_guide.py writes the Chinese timing table;
tools/catalogues/glossary.py
checks the teaching text as well as the notebooks. Fast: no notebook is run.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import polib
import pytest

from tools import slide_decks
from tools import teaching_guide as tg
from tools.catalogues.common import TranslationError
from tools.catalogues.glossary import glossary_check
from tools.catalogues.readme import (
    DOCUMENTS,
    README,
    SWITCH,
    SWITCH_EN,
    build_readme,
    check_readme,
    messages_of,
    split_blocks,
    update_readme,
)

ROOT = Path(__file__).resolve().parents[2]
EN = ROOT / "README.md"
ZH = ROOT / "README.zh-CN.md"
CATALOGUE = ROOT / README.catalogue
NUMBER = re.compile(r"(?<![A-Za-z_])\d+(?:[.,]\d+)*(?![A-Za-z_])")
CJK = re.compile(r"[\u4e00-\u9fff]")


def _headings(text: str) -> list[str]:
    """The '#' marks of every heading outside fenced code, in order."""
    text = re.sub(r"^\s*```.*?^\s*```", "", text, flags=re.S | re.M)
    return re.findall(r"^(#{1,6})\s", text, flags=re.M)


def _numbers(text: str) -> list[str]:
    lines = [line for line in text.splitlines() if line not in (SWITCH, SWITCH_EN)]
    return NUMBER.findall("\n".join(lines))


# ---------------------------------------------------------------- README.zh-CN.md


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda d: d.english)
def test_each_chinese_page_has_every_section_of_the_english_one(doc):
    en = (ROOT / doc.english).read_text(encoding="utf-8")
    zh = (ROOT / doc.chinese).read_text(encoding="utf-8")
    assert _headings(zh) == _headings(en), "same headings, same levels, same order"
    titles = re.findall(
        r"^#{1,6} (.+)$", re.sub(r"^\s*```.*?^\s*```", "", zh, flags=re.S | re.M), flags=re.M
    )
    assert titles and all(CJK.search(t) for t in titles), titles
    assert _numbers(zh) == _numbers(en)


def test_the_readme_keeps_its_sections_and_the_guides_estimate():
    en = EN.read_text(encoding="utf-8")
    assert len(re.findall(r"^## ", en, flags=re.M)) >= 6
    guide = (ROOT / "teaching" / "README.md").read_text(encoding="utf-8")
    minutes = re.search(r"^\| \*\*total\*\* .*?\*\*(\d+)\*\*", guide, flags=re.M).group(1)
    assert minutes in _numbers(en)  # the guide's presenting total
    measured = (ROOT / "docs" / "measured.md").read_text(encoding="utf-8")
    assert "110,142" in _numbers(measured)


def test_the_chinese_readme_is_what_the_build_writes():
    assert check_readme(ROOT) == [], "run `python -m tools.translations build`"
    zh = ZH.read_text(encoding="utf-8")
    assert zh.splitlines()[2] == SWITCH  # the language line points back to README.md
    assert "](README.md)" in zh
    # links to notebooks and teaching files go to their Chinese editions
    assert "](notebooks/zh-CN/08_training_copy_task.ipynb)" in zh
    assert "](teaching/zh-CN/README.md)" in zh
    assert "](notebooks/08_training_copy_task.ipynb)" not in zh
    assert "附加篇" in zh and "CPU 内存" not in zh.replace(" ", "")
    library = (ROOT / "docs" / "zh-CN" / "library.md").read_text(encoding="utf-8")
    assert (
        "True 表示被屏蔽" in library
        and library.splitlines()[2] == "[English](../library.md) · 简体中文"
    )


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda d: d.english)
def test_each_page_catalogue_is_complete(doc):
    po = polib.pofile(str(ROOT / doc.catalogue), wrapwidth=0)
    active = [e for e in po if not e.obsolete]
    english = (ROOT / doc.english).read_text(encoding="utf-8")
    messages = messages_of(split_blocks(english, doc.switch_en))
    assert len(active) == len(messages) >= 3
    assert {(e.msgctxt, e.msgid) for e in active} == {(m.msgctxt, m.msgid) for m in messages}
    assert [e.msgid[:40] for e in active if "fuzzy" in e.flags] == []
    assert [e.msgid[:40] for e in active if not e.msgstr] == []
    prose = [e for e in active if e.msgctxt != "code" and not e.msgid.startswith("[![")]
    untranslated = [e.msgid[:40] for e in prose if e.msgstr == e.msgid or not CJK.search(e.msgstr)]
    assert untranslated == []


@pytest.fixture
def repo(tmp_path):
    """A copy of what the README's build reads: README.md, its catalogue, the Chinese targets."""
    pages = [rel for d in DOCUMENTS for rel in (d.english, d.catalogue)]
    for rel in pages + ["teaching/zh-CN/README.md", "teaching/zh-CN/grading.md",
                        "notebooks/zh-CN/08_training_copy_task.ipynb"]:  # fmt: skip
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    build_readme(tmp_path)
    return tmp_path


def test_a_changed_english_block_is_merged_fuzzy_and_fails_check(repo):
    readme = repo / "README.md"
    text = readme.read_text(encoding="utf-8")
    old = "Everything runs on a CPU; the code uses CUDA or Apple's MPS when present."
    assert old in text
    readme.write_text(text.replace(old, old.replace("when present", "when it is there")), "utf-8")
    assert any("English changed" in line for line in check_readme(repo))
    report = update_readme(repo)[0]  # README.md's
    assert "1 fuzzy" in report and "0 untranslated" in report
    po = polib.pofile(str(repo / README.catalogue), wrapwidth=0)
    (fuzzy,) = [e for e in po if "fuzzy" in e.flags]
    assert fuzzy.previous_msgid == old and "CUDA" in fuzzy.msgstr
    assert any("fuzzy" in line for line in check_readme(repo))
    with pytest.raises(TranslationError, match="1 README.md blocks"):
        build_readme(repo)
    build_readme(repo, allow_pending=True)  # keeps the English of that block
    assert "when it is there" in (repo / "README.zh-CN.md").read_text(encoding="utf-8")
    assert check_readme(repo, allow_pending=True) == []


def test_check_holds_numbers_and_heading_levels(repo):
    measured = next(d for d in DOCUMENTS if d.english == "docs/measured.md")
    for catalogue, change in (
        (measured.catalogue, ("110,142", "110,143")),
        (README.catalogue, None),
    ):
        path = repo / catalogue
        po = polib.pofile(str(path), wrapwidth=0)
        for e in po:
            if change and change[0] in e.msgid:
                e.msgstr = e.msgstr.replace(*change)
            if e.msgid == "## Start":
                e.msgstr = "### 开始"
        path.write_text(str(po), encoding="utf-8")
    problems = "\n".join(check_readme(repo))
    assert "numbers differ" in problems and "'110,143'" in problems
    assert "must stay one level-2 heading" in problems


def test_a_hand_edited_chinese_readme_fails_check(repo):
    zh = repo / "README.zh-CN.md"
    zh.write_text(zh.read_text(encoding="utf-8") + "\n手工加的一行。\n", encoding="utf-8")
    assert check_readme(repo) == ["README.zh-CN.md is not what `build` writes (run `build`)"]


# ---------------------------------------------------------------- slide decks


def test_a_chinese_deck_has_chinese_chrome_and_loads_nothing_remote(tmp_path):
    path = ROOT / "notebooks" / "zh-CN" / "05_causal_head.ipynb"
    assert slide_decks.lang_of(path) == "zh-CN"
    assert slide_decks.lang_of(ROOT / "notebooks" / "05_causal_head.ipynb") == "en"
    out = tmp_path / "zh-CN"
    (deck,) = slide_decks.build_html([path], out)
    html = deck.read_text(encoding="utf-8")
    assert '<html lang="zh-CN">' in html
    assert "<title>05 · 因果注意力头 · 幻灯片</title>" in html
    assert slide_decks.remote_references(html) == []
    assert CJK.search(re.sub(r"<[^>]+>", "", html))
    index = (out / "index.html").read_text(encoding="utf-8")
    assert "lang='zh-CN'" in index and "05 · 因果注意力头" in index and "幻灯片" in index
    assert "href='../index.html'" in index
    notes = (out / "reveal.js" / "plugin" / "notes" / "notes.js").read_text(encoding="utf-8")
    for english, chinese in slide_decks.NOTES_ZH:
        assert chinese in notes and english not in notes
    english_notes = slide_decks.DECK_DIR / "vendor" / "reveal.js" / "plugin" / "notes" / "notes.js"
    assert "Upcoming" in english_notes.read_text(encoding="utf-8"), "the vendored copy unchanged"


def test_slides_html_builds_both_editions(tmp_path, monkeypatch):
    from tools import slides

    built = []
    monkeypatch.setattr(
        slides, "build_html", lambda paths, out, lang: built.append((lang, out, paths)) or []
    )
    assert slides.main(["html", "--out", str(tmp_path)]) == 0
    langs = {lang: (out, [p.parent.name for p in paths]) for lang, out, paths in built}
    assert langs["zh-CN"] == (tmp_path / "zh-CN", ["zh-CN"] * 12)
    assert langs["en"] == (tmp_path, ["notebooks"] * 12)


# ---------------------------------------------------------------- teacher's guide


def test_the_chinese_guide_table_is_chinese_with_the_english_numbers():
    paths = tg.chapter_notebooks(with_explorer=True)
    en, zh = tg.guide_table(paths), tg.guide_table(paths, "zh-CN")
    assert zh.startswith("| 笔记本 | 幻灯片 | 子幻灯片 |") and "**合计**" in zh
    rows = [line for line in zh.splitlines() if line.startswith("| ") and "---" not in line]
    names = [row.split("|")[1].strip() for row in rows[1:-1]]
    assert len(names) == 13 and all(CJK.search(n) for n in names), names
    assert "01 · 加权平均" in names
    assert re.findall(r"\d+", en.split("\n\n")[0]) == re.findall(r"\d+", zh.split("\n\n")[0])
    assert not re.search(
        r"[A-Za-z]{4,}",
        zh.replace("exercises.ipynb", "")
        .replace("slideshow", "")
        .replace("markdown", "")
        .replace("EXERCISE_NOTEBOOK", ""),
    )
    guide = (ROOT / "teaching" / "zh-CN" / "README.md").read_text(encoding="utf-8")
    assert zh in guide, "run `python -m tools.slides guide-table --write`"


def _zh_headings() -> set[str]:
    found = set()
    for path in (ROOT / "notebooks" / "zh-CN").glob("*.ipynb"):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "markdown":
                for m in re.finditer(r"^#+\s+(.*)$", "".join(cell["source"]), re.M):
                    found.add(_plain(m.group(1)))
    return found


def _plain(text: str) -> str:
    text = text.replace(r"$\sqrt{d_{head}}$", "√d_head")
    return re.sub(r"\s+", " ", re.sub(r"[`$*]", "", text)).strip()


def test_the_chinese_guide_names_sections_the_chinese_notebooks_have():
    text = (ROOT / "teaching" / "zh-CN" / "README.md").read_text(encoding="utf-8")
    references = re.findall(r"\*\*([^*\n]+?)\*\* 一节", text)
    assert len(references) >= 20
    headings = _zh_headings()
    assert [r for r in references if _plain(r) not in headings] == []


def test_the_chinese_guide_follows_the_english_one():
    en = (ROOT / "teaching" / "README.md").read_text(encoding="utf-8")
    zh = (ROOT / "teaching" / "zh-CN" / "README.md").read_text(encoding="utf-8")
    assert _headings(zh) == _headings(en), "one section for each section of the English guide"
    assert "## 给一个班级使用" in zh and "make hub" in zh
    for number in ("752", "117", "2026-12-01", "4.4.0", "**64**"):
        assert number in en and number in zh, number


def test_the_chinese_lesson_plans_name_the_current_exercises():
    titles = set()
    nb = json.loads((ROOT / "notebooks/zh-CN/exercises.ipynb").read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        for m in re.finditer(r"^#+\s+练习 \d+\.\d+ · (.+)$", "".join(cell["source"]), re.M):
            titles.add(m.group(1).strip())
    assert len(titles) >= 10
    plans = (ROOT / "teaching" / "zh-CN" / "lesson_plans.md").read_text(encoding="utf-8")
    named = {n for n in re.findall(r"(?<!\*)\*([^*\n]+)\*(?!\*)", plans) if n != "Run All"}
    assert len(named) >= 8
    assert sorted(named - titles) == []


# ---------------------------------------------------------------- glossary check


def test_the_glossary_check_covers_the_teaching_text_and_readme():
    assert glossary_check(ROOT, [], documents=True) == []


def test_the_glossary_check_reports_an_english_term_in_the_teaching_text(tmp_path):
    (tmp_path / "i18n").mkdir()
    shutil.copy(ROOT / "i18n" / "glossary.tsv", tmp_path / "i18n" / "glossary.tsv")
    guide = tmp_path / "teaching" / "zh-CN" / "README.md"
    guide.parent.mkdir(parents=True)
    guide.write_text("# 上课\n\n第一段没有问题。\n\n这里的 attention weights 要先讲。\n", "utf-8")
    catalogue = tmp_path / README.catalogue
    catalogue.parent.mkdir(parents=True)
    po = polib.POFile(wrapwidth=0)
    po.append(polib.POEntry(msgctxt="markdown", msgid="The causal mask.", msgstr="因果 mask。"))
    po.append(polib.POEntry(msgctxt="markdown", msgid="One head.", msgstr="一个头。"))
    po.append(polib.POEntry(msgctxt="markdown", msgid="The loss.", msgstr="它。"))
    catalogue.write_text(str(po), encoding="utf-8")
    found = glossary_check(tmp_path, [])
    assert (
        "teaching/zh-CN/README.md:5: English 'attention weights' left in Chinese; use 注意力权重"
        in found
    )
    assert any(f.startswith("i18n/zh_CN/teaching/README.po") and "'mask'" in f for f in found)
    assert any("English has 'loss' but the Chinese lacks 损失" in f for f in found)
    assert not any("One head" in f or "一个头" in f for f in found)
    assert not any(":3:" in f for f in found), "the clean paragraph is not reported"
    assert len(found) == 5, found  # "attention weights" also holds "attention", as the mask
    assert glossary_check(tmp_path, [], documents=False) == []
