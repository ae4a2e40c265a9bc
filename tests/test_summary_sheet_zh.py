"""The Simplified Chinese summary sheet, teaching/zh-CN/summary.html: current, and the same numbers.

tools/summary_sheet.py renders one template (tools/templates/summary_sheet.html.j2) per language
from one computation, the Chinese words from i18n/zh_CN/teaching/summary_sheet.po; these tests
rebuild the Chinese page and compare it with the checked-in file, check that translating the
prose changed no number (the numbers in the visible text of both pages are equal as multisets),
and that the catalogue holds exactly the template's strings, all translated.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from pathlib import Path

import pytest
import summary_sheet  # tools/summary_sheet.py (pytest's pythonpath)

ROOT = Path(__file__).resolve().parents[1]
ZH_PAGE = ROOT / "teaching" / "zh-CN" / "summary.html"


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return {lang: summary_sheet.render(lang) for lang in ("en", "zh-CN")}


def _numbers(page: str) -> Counter:
    """Every number in the page's visible body text ("1,024", "12.9", "2" of GPT-2, ...)."""
    body = page[page.index("<body>") : page.index("</body>")]
    text = html.unescape(re.sub(r"<[^>]+>", " ", body))
    return Counter(re.findall(r"[0-9]+(?:,[0-9]{3})*(?:\.[0-9]+)?", text))


def test_the_chinese_summary_sheet_is_up_to_date(pages):
    assert ZH_PAGE.exists(), (
        "teaching/zh-CN/summary.html is missing: run python tools/summary_sheet.py"
    )
    assert ZH_PAGE.read_text(encoding="utf-8") == pages["zh-CN"], (
        "teaching/zh-CN/summary.html is stale: run python tools/summary_sheet.py"
    )


def test_the_chinese_sheet_has_the_english_sheets_numbers(pages):
    en, zh = _numbers(pages["en"]), _numbers(pages["zh-CN"])
    assert sum(en.values()) > 50  # the tables really are in there
    assert zh == en, f"only in English: {en - zh}; only in Chinese: {zh - en}"


def test_the_chinese_sheet_is_chinese_with_a_cjk_font_stack(pages):
    zh = pages["zh-CN"]
    assert '<html lang="zh-CN">' in zh
    assert '"Noto Sans CJK SC"' in zh and "sans-serif" in zh
    assert "@font-face" not in zh and "http" not in zh  # nothing is downloaded
    body = zh[zh.index("<body>") :]
    text = re.sub(r"<code>.*?</code>", " ", body, flags=re.S)  # code stays English
    text = re.sub(r"<[^>]+>", " ", text)
    for english in ("shape walk", "Mask conventions", "Parameters of one block", "Cost in T"):
        assert english not in text, f"untranslated heading {english!r} in the Chinese sheet"
    assert len(re.findall(r"[\u4e00-\u9fff]", text)) > 300


def test_the_chinese_sheet_uses_the_glossary_terms(pages):
    zh = pages["zh-CN"]
    for term in ("多头自注意力", "因果掩码", "切头", "合头", "注意力权重", "打分", "掩码"):
        assert term in zh, f"glossary term {term!r} missing from the Chinese sheet"


def test_an_unknown_language_is_a_clear_error():
    with pytest.raises(ValueError, match="lang='fr'"):
        summary_sheet.render("fr")


# ---------------------------------------------------------------- the catalogue


def test_the_catalogue_has_exactly_the_templates_strings(tmp_path, monkeypatch):
    """`--update-catalogue` on the checked-in catalogue changes nothing: no string is missing
    and none is left over (the English is tools/templates/summary_sheet.html.j2)."""
    real = summary_sheet.CATALOGUES["zh-CN"]
    copy = tmp_path / "summary_sheet.po"
    copy.write_bytes(real.read_bytes())
    monkeypatch.setitem(summary_sheet.CATALOGUES, "zh-CN", copy)
    summary_sheet.update_catalogue()
    assert copy.read_text(encoding="utf-8") == real.read_text(encoding="utf-8"), (
        "run python tools/summary_sheet.py --update-catalogue and translate the new entries"
    )


def test_an_untranslated_string_stops_the_chinese_page_and_is_named(tmp_path, monkeypatch):
    import polib

    po = polib.pofile(str(summary_sheet.CATALOGUES["zh-CN"]), wrapwidth=0)
    po.find("merge heads", msgctxt="step").msgstr = ""
    po.find("The formula", msgctxt="page").flags.append("fuzzy")
    po.save(str(tmp_path / "summary_sheet.po"))
    monkeypatch.setitem(summary_sheet.CATALOGUES, "zh-CN", tmp_path / "summary_sheet.po")
    with pytest.raises(Exception, match=r"2 strings .*\n.*'The formula'.*\n.*'merge heads'"):
        summary_sheet.render("zh-CN")
    assert summary_sheet.main(["--lang", "zh-CN", "--check"]) == 1
