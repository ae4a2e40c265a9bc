"""The Simplified Chinese summary sheet, teaching/zh-CN/summary.html: current, and the same numbers.

tools/summary_sheet.py builds both editions from one computation; these tests rebuild the
Chinese page and compare it with the checked-in file, and check that translating the prose
changed no number: the numbers in the visible text of both pages are equal as multisets.
"""

from __future__ import annotations

import html
import importlib.util
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ZH_PAGE = ROOT / "teaching" / "zh-CN" / "summary.html"


def _load_tool():
    spec = importlib.util.spec_from_file_location(
        "summary_sheet_zh_under_test", ROOT / "tools" / "summary_sheet.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


summary_sheet = _load_tool()


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
