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

from tools import summary_sheet  # tools/summary_sheet.py (pytest's pythonpath)

ROOT = Path(__file__).resolve().parents[2]
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
        "teaching/zh-CN/summary.html is missing: run python -m tools.summary_sheet"
    )
    assert ZH_PAGE.read_text(encoding="utf-8") == pages["zh-CN"], (
        "teaching/zh-CN/summary.html is stale: run python -m tools.summary_sheet"
    )


def test_the_chinese_sheet_has_the_english_sheets_numbers(pages):
    en, zh = _numbers(pages["en"]), _numbers(pages["zh-CN"])
    assert sum(en.values()) > 50  # the tables really are in there
    assert zh == en, f"only in English: {en - zh}; only in Chinese: {zh - en}"


def english_in_code(page: str) -> list[str]:
    """Words of prose inside the page's code spans: a code span holds code, so an English
    joiner there ("attn_mask=...; or is_causal=True") stays English on the Chinese page."""
    spans = re.findall(r"<code>(.*?)</code>", page, re.S)
    return [w for s in spans for w in re.findall(r"(?<![\w.=])(?:or|and|then)(?![\w(=])", s)]


def test_code_spans_hold_code_and_the_words_between_them_are_translated(pages):
    assert english_in_code("<code>attn_mask=bool (T, T); or is_causal=True</code>") == ["or"]
    assert english_in_code(pages["zh-CN"]) == []
    assert "<code>attn_mask=bool (T, T)</code>；或 <code>is_causal=True</code>" in pages["zh-CN"]


def test_the_chinese_sheet_is_chinese_with_a_cjk_font_stack(pages):
    zh = pages["zh-CN"]
    assert '<html lang="zh-CN">' in zh
    stack = re.search(r"body \{ font: ([^;]*);", zh).group(1)
    assert stack.index('"Noto Sans CJK SC"') < stack.index("sans-serif")
    assert stack.endswith(', "Attention Lab Sans SC"'), stack  # the reader's fonts first
    sources = re.findall(r"src: url\(\"([^\"]{0,30})", zh)
    assert len(sources) == 2 and all(s.startswith("data:font/otf;base64,") for s in sources)
    without_fonts = re.sub(r"data:font/otf;base64,[A-Za-z0-9+/=]+", "", zh)
    assert "http" not in without_fonts and "url(" not in without_fonts.replace('url("")', "")
    assert "@font-face" not in pages["en"]  # the English page needs none
    body = zh[zh.index("<body>") :]
    text = re.sub(r"<code>.*?</code>", " ", body, flags=re.S)  # code stays English
    text = re.sub(r"<[^>]+>", " ", text)
    for english in ("shape walk", "Mask conventions", "Parameters of one block", "Cost in T"):
        assert english not in text, f"untranslated heading {english!r} in the Chinese sheet"
    assert len(re.findall(r"[\u4e00-\u9fff]", text)) > 300


def test_the_chinese_sheets_font_holds_exactly_its_characters(pages):
    """The inline font is the shipped subset cut down to the page: every character of the
    page that DejaVu Sans lacks, nothing more (so it stays small)."""
    import base64
    import io

    from fontTools.ttLib import TTFont

    from tools.catalogues.font import _is_cjk, _latin_cmap  # tools/catalogues/font.py

    zh = pages["zh-CN"]
    text = html.unescape(re.sub(r"<[^>]+>", " ", zh[zh.index("<body>") :]))
    need = {ord(c) for c in text if _is_cjk(c)} - _latin_cmap()
    fonts = re.findall(r"data:font/otf;base64,([A-Za-z0-9+/=]+)", zh)
    sizes = []
    for data in fonts:
        raw = base64.b64decode(data)
        sizes.append(len(raw))
        assert set(TTFont(io.BytesIO(raw)).getBestCmap()) == need
    assert len(need) > 150 and sum(sizes) < 120_000, (len(need), sizes)


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
        "run python -m tools.summary_sheet --update-catalogue and translate the new entries"
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


# ---------------------------------------------------------------- in a browser


@pytest.mark.browser
def test_the_chinese_sheet_draws_every_character_without_a_cjk_font(chromium):
    """Opened from disk in a Chromium with no CJK system font (CI's): every Chinese character
    is drawn by a font that has it (the inline subset). Screenshot:
    artifacts/zh-summary-sheet-1280x800.png."""
    from tests.browser_helpers import glyph_problems, offline_context, web_font_state

    outside: list[str] = []
    context = offline_context(
        chromium, ("file://", "data:"), outside, {"width": 1280, "height": 800}
    )
    try:
        page = context.new_page()
        page.goto(ZH_PAGE.as_uri())
        text = "".join(sorted(set(re.findall(r"[\u4e00-\u9fff]", page.inner_text("body")))))
        font = web_font_state(page, text)
        page.evaluate(  # until the page is shaped again with the font (at most 5 s)
            """() => new Promise((done) => { const t0 = Date.now(); (function wait() {
                 if (document.documentElement.classList.contains("attention-lab-font-loaded")
                     || Date.now() - t0 > 5000) done(); else setTimeout(wait, 50); })(); })"""
        )
        (ROOT / "artifacts").mkdir(exist_ok=True)
        page.screenshot(path=str(ROOT / "artifacts" / "zh-summary-sheet-1280x800.png"))
        problems, checked = glyph_problems(page)
    finally:
        context.close()
    print(f"summary sheet: {checked} text nodes and (style, character) pairs checked; {font}")
    assert checked > 150
    assert not problems, "drawn without their glyph:\n" + "\n".join(problems)
    assert font["faces"] and "error" not in str(font["faces"]) and font["check"], font
    assert outside == [], outside


def _pdf_glyphs(pdf: bytes) -> dict[str, list[int]]:
    """Glyph ids each font of a PDF printed by Chromium (Skia) draws: font name -> ids.
    Skia writes 2-byte glyph ids in hex strings (<0012>) after selecting a Type0 font with
    Tf; a CFF web font becomes a Type3 font (1-byte codes, none of which is .notdef)."""
    import zlib

    objects = {int(m[1]): m[2] for m in re.finditer(rb"(\d+) 0 obj(.*?)endobj", pdf, re.S)}
    fonts = {}
    for body in objects.values():
        for table in re.findall(rb"/Font\s*<<(.*?)>>", body, re.S):
            for name, ref in re.findall(rb"/(\w+)\s+(\d+) 0 R", table):
                font = objects[int(ref)]
                base = re.search(rb"/BaseFont\s*/([\w+-]+)", font)
                kind = re.search(rb"/Subtype\s*/(\w+)", font)[1].decode()
                fonts[name.decode()] = (base[1].decode() if base else f"{kind} {int(ref)}", kind)
    drawn: dict[str, list[int]] = {}
    for body in objects.values():
        stream = re.search(rb"stream\r?\n(.*?)\r?\nendstream", body, re.S)
        try:
            content = zlib.decompress(stream[1]) if stream else b""
        except zlib.error:
            continue
        font = None
        for selected, text in re.findall(rb"/(\w+)\s+[\d.]+\s+Tf|<([0-9A-Fa-f]*)>", content):
            if selected:
                font = fonts.get(selected.decode())
            elif font is not None:
                width = 4 if font[1] == "Type0" else 2
                ids = [int(text[i : i + width], 16) for i in range(0, len(text), width)]
                drawn.setdefault(font[0], []).extend(ids)
    return drawn


@pytest.mark.browser
def test_the_chinese_sheets_pdf_has_no_missing_glyph(chromium, tmp_path):
    """`make slides-html` prints the sheet with headless Chromium: on a machine without a
    CJK font no glyph of the PDF is .notdef (glyph 0, a box)."""
    pdf = tmp_path / "summary.pdf"
    assert summary_sheet.print_pdf(ZH_PAGE, pdf)
    drawn = _pdf_glyphs(pdf.read_bytes())
    boxes = {font: ids.count(0) for font, ids in drawn.items() if ids.count(0)}
    print(f"summary.pdf: { ({font: len(ids) for font, ids in drawn.items()}) } glyphs")
    assert sum(len(ids) for ids in drawn.values()) > 1000, drawn.keys()  # the text was found
    assert not boxes, f".notdef glyphs (boxes) in the PDF, by font: {boxes}"
    assert any(font.startswith("Type3") for font in drawn), drawn.keys()  # the web font


@pytest.mark.browser
@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_the_summary_sheet_prints_on_one_a4_page(chromium, lang):
    """The sheet is a one-page handout: printed to A4 (its own @page size and margins), in
    either language, it makes a PDF of exactly one page."""
    page_file = summary_sheet.PAGES[lang]
    page = chromium.new_page()
    try:
        page.goto(page_file.as_uri())
        page.wait_for_load_state("load")
        page.wait_for_timeout(500)  # the Chinese page shapes itself again once its font loaded
        pdf = page.pdf(format="A4", prefer_css_page_size=True)
    finally:
        page.close()
    pages = len(re.findall(rb"/Type\s*/Page[^s]", pdf))
    assert pages == 1, f"{page_file.relative_to(ROOT)} prints on {pages} A4 pages"
