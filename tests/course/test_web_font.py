"""The shipped font subset as the web font of the project's Chinese pages (no browser needed).

tools/catalogues/font.py holds the stacks, the unicode-range and the reshape script; the Voila
template says them by hand (a template cannot import Python), so these tests hold the two
together. The decks: a Chinese build carries the font beside it (fonts/, with its licence)
and in its speaker view; an English build carries none. Whether the glyphs really draw is
tests/course/test_browser_zh.py's, tests/course/test_slides_browser.py's and
tests/course/test_summary_sheet_zh.py's
(marked browser).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tools.catalogues.font import (  # tools/catalogues/font.py
    FAMILY,
    JUPYTERLAB_STACKS,
    LOADED_CLASS,
    UNICODE_RANGE,
    WEB_FONT_DIR,
    WEIGHTS,
    font_path,
)

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "share" / "jupyter" / "voila" / "templates" / "attention-lab" / "index.html.j2"


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def test_the_voila_template_serves_both_weights_of_the_shipped_font_last_in_its_stacks():
    page = _squeeze(TEMPLATE.read_text(encoding="utf-8"))
    faces = re.findall(r"@font-face \{(.*?unicode-range: [^;]*;) \}", page)
    assert len(faces) == len(WEIGHTS)
    for face, weight in zip(faces, WEIGHTS):
        assert f'font-family: "{FAMILY}"' in face
        assert f"static/fonts/{font_path(weight).name}" in face  # WEB_FONT_DIR's copy
        assert f"unicode-range: {UNICODE_RANGE};" in face, face
    ui = JUPYTERLAB_STACKS["--jp-ui-font-family"]
    assert f'--jp-ui-font-family: {ui}, "{FAMILY}";' in page
    code = JUPYTERLAB_STACKS["--jp-code-font-family"]
    assert f'--jp-code-font-family: {code}, "{FAMILY}";' in page
    assert "--jp-content-font-family: var(--jp-ui-font-family);" in page
    assert f'classList.add("{LOADED_CLASS}")' in page and '"loadingdone"' in page
    assert f"html.{LOADED_CLASS} {{ text-rendering: optimizeLegibility; }}" in page
    for weight in WEIGHTS:  # the copy is the shipped file (translations.py check too)
        copy = ROOT / WEB_FONT_DIR / font_path(weight).name
        assert copy.read_bytes() == (ROOT / font_path(weight)).read_bytes()


@pytest.fixture(scope="module")
def decks(tmp_path_factory):
    from tools import slides  # tools/slides.py

    out = tmp_path_factory.mktemp("decks")
    name = "06_multi_head.ipynb"
    zh = slides.build_html([ROOT / "notebooks" / slides.ZH / name], out / slides.ZH, slides.ZH)
    en = slides.build_html([ROOT / "notebooks" / name], out, "en")
    return out, zh[0], en[0]


def test_a_chinese_deck_carries_the_font_beside_it_and_an_english_one_none(decks):
    out, zh, en = decks
    zh_html = zh.read_text(encoding="utf-8")
    for weight in WEIGHTS:
        copied = out / "zh-CN" / "fonts" / font_path(weight).name
        assert copied.read_bytes() == (ROOT / font_path(weight)).read_bytes()
        assert f'src: url("fonts/{font_path(weight).name}")' in zh_html
    assert (out / "zh-CN" / "fonts" / "OFL.txt").exists()
    assert f'--r-main-font: "Source Sans Pro", Helvetica, sans-serif, "{FAMILY}";' in zh_html
    assert "@font-face" in (out / "zh-CN" / "index.html").read_text(encoding="utf-8")
    notes = (out / "zh-CN" / "reveal.js" / "plugin" / "notes" / "notes.js").read_text("utf-8")
    assert f"font-family: Helvetica, sans-serif, '{FAMILY}';" in notes
    assert LOADED_CLASS in notes
    en_html = en.read_text(encoding="utf-8")
    assert FAMILY not in en_html and not (out / "fonts").exists()
    assert FAMILY not in (out / "reveal.js" / "plugin" / "notes" / "notes.js").read_text("utf-8")
