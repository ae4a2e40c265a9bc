"""Classroom mode in a real browser (Debian Chromium driven by Playwright), offline.

1. JupyterLab with RISE (jupyterlab-rise) serves a temporary copy of notebooks/ on a free port
   of 127.0.0.1, token-less, with the project's RISE settings (teaching/jupyterlab-settings:
   the "white" reveal theme, whose fonts are bundled; the default "simple" theme imports Google
   Fonts): the session's JupyterLab, shared with tests/course/test_browser.py, like the Chromium
   both drive (tests/browser_helpers.py). Notebook 02 opens as a slideshow at
   /rise/02_query_key_value.ipynb, three slides advance, and a figure becomes visible.
2. The static deck of notebook 06 (tools/slides.py html) opens from a file:// URL and shows
   its first slides.
3. The Chinese deck of notebook 06, its speaker view (S) and the Chinese index page, opened
   from file:// in a Chromium that has no CJK system font (CI's): every Chinese character,
   on every slide, is drawn by a font that has it (the package's subset, copied beside the
   decks as a web font), and the web font has loaded.

The browser is cut off from everything but 127.0.0.1 and file://: any other request is aborted
and recorded, and the test fails if the page even tried one (one known exception below).
Screenshots go to artifacts/slides/ (git-ignored): RISE's notebook 02 and deck 06 at 1280x800 and
1920x1080 (the Chinese deck 06 too: zh-deck-06-<size>-<i>.png); with ATTENTION_LAB_ALL_SLIDES=1,
three slides of every deck 01-08 (about 60 s more).
Skipped with a reason when Chromium or Playwright is missing, unless the environment sets
ATTENTION_LAB_REQUIRE_BROWSER=1 (CI does): then it fails. Marked ``browser``: `make test` runs
these alone, last.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.browser_helpers import (
    WEB_FONT_FAMILY,
    glyph_problems,
    offline_context,
    require_browser,
    web_font_state,
)

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts" / "slides"
PAGE_TIMEOUT_MS = 120_000
# The Colab badge cell is a skipped slide, but RISE keeps every cell in the page, so the badge's
# <img> (colab.research.google.com) is requested -- and aborted here. The notebooks' badge is
# their content (tools/badges.py), not the slideshow's; the static decks leave skipped cells out.
KNOWN_OUTSIDE = ("https://colab.research.google.com/assets/colab-badge.svg",)


def _visible_figure(page) -> bool:
    return page.evaluate(
        """() => Array.from(document.querySelectorAll('.reveal .slides section.present img'))
             .some(img => img.naturalWidth > 0 && img.getBoundingClientRect().width > 100
                          && getComputedStyle(img).visibility !== 'hidden'
                          && img.getBoundingClientRect().bottom > 0)"""
    )


def test_rise_presents_notebook_02_as_slides_offline(chromium, jupyterlab):
    require_browser("jupyterlab_rise")
    from playwright.sync_api import expect

    url = jupyterlab
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    outside: list[str] = []
    context = offline_context(chromium, (url,), outside, {"width": 1280, "height": 800})
    try:
        page = context.new_page()
        page.goto(f"{url}/rise/02_query_key_value.ipynb", wait_until="domcontentloaded")
        present = page.locator(".reveal .slides section.present").last
        expect(present).to_be_visible(timeout=PAGE_TIMEOUT_MS)
        expect(page.locator(".reveal")).to_contain_text("Query, key, value", ignore_case=True)
        page.wait_for_timeout(1000)  # let the typeset maths settle before the picture
        hashes = [page.evaluate("location.hash")]
        page.screenshot(path=str(ARTIFACTS / "rise-02-slide-0.png"))
        for i in range(1, 4):  # three slides forward (space: next slide, subslide or fragment;
            page.keyboard.press("Space")  # the right arrow would skip the subslides)
            page.wait_for_function("old => location.hash !== old", arg=hashes[-1])
            hashes.append(page.evaluate("location.hash"))
            page.screenshot(path=str(ARTIFACTS / f"rise-02-slide-{i}.png"))
        presses = 0
        while not _visible_figure(page) and presses < 40:  # on to the first figure
            page.keyboard.press("Space")
            page.wait_for_timeout(250)
            presses += 1
        figure = _visible_figure(page)
        page.screenshot(path=str(ARTIFACTS / "rise-02-figure.png"))
        layout = page.evaluate(
            "() => ({w: document.querySelector('.reveal').clientWidth,"
            " scrolled: document.scrollingElement.scrollTop})"
        )
    finally:
        context.close()

    assert len(set(hashes)) == 4, f"three key presses should show three new slides: {hashes}"
    assert figure, f"no figure became visible within {presses} more slides"
    assert layout["scrolled"] == 0 and layout["w"] > 1000, "a slideshow, not a scrolled notebook"
    unexpected = [u for u in outside if not u.startswith(KNOWN_OUTSIDE)]
    assert unexpected == [], f"the slideshow asked for outside addresses: {unexpected}"


def test_static_deck_of_06_opens_from_a_file_url_offline(chromium, tmp_path):
    from tools import slides  # tools/slides.py (pytest's pythonpath)

    out = tmp_path / "decks"
    notebooks = slides.chapter_notebooks()
    if os.environ.get("ATTENTION_LAB_ALL_SLIDES") != "1":  # all eight decks take ~60 s more
        notebooks = [nb for nb in notebooks if nb.name.startswith("06")]
    decks = slides.build_html(notebooks, out)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    outside: list[str] = []
    shown: dict[str, list[str]] = {}
    context = offline_context(chromium, ("file://",), outside, {"width": 1280, "height": 800})
    try:
        page = context.new_page()
        for viewport in ({"width": 1280, "height": 800}, {"width": 1920, "height": 1080}):
            page.set_viewport_size(viewport)
            size = f"{viewport['width']}x{viewport['height']}"
            for deck in decks:
                stem = deck.name.split(".")[0]
                if size != "1280x800" and not stem.startswith("06"):
                    continue
                page.goto(deck.as_uri())
                page.wait_for_function("window.Reveal && Reveal.isReady()", timeout=30_000)
                page.wait_for_function(
                    "window.MathJax && MathJax.startup && MathJax.startup.promise",
                    timeout=30_000,
                )
                page.evaluate("MathJax.startup.promise.then(() => true)")  # maths typeset
                titles = []
                for i in range(3):
                    titles.append(
                        page.evaluate(
                            "() => { const s = Reveal.getCurrentSlide();"
                            " const r = s.getBoundingClientRect();"
                            " return r.width > 0 ? s.innerText.slice(0, 80) : ''; }"
                        )
                    )
                    page.screenshot(path=str(ARTIFACTS / f"deck-{stem}-{size}-{i}.png"))
                    page.evaluate("Reveal.next()")
                    page.wait_for_timeout(150)
                shown[f"{stem}-{size}"] = titles
    finally:
        context.close()

    first = shown["06_multi_head-1280x800"]
    assert "06" in first[0] and "MULTI-HEAD" in first[0].upper(), first
    assert all(first), f"a slide of deck 06 was empty: {first}"
    assert len(set(first)) == 3, f"the deck did not advance: {first}"
    assert all(all(t) for t in shown.values()), "every deck shows its first three slides"
    assert outside == [], f"a static deck asked for outside addresses: {outside}"


def test_the_chinese_deck_of_06_draws_every_character_offline(chromium, tmp_path):
    from tools import slides  # tools/slides.py (pytest's pythonpath)

    notebook = ROOT / "notebooks" / slides.ZH / "06_multi_head.ipynb"
    out = tmp_path / "decks" / slides.ZH
    (deck,) = slides.build_html([notebook], out, slides.ZH)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    outside: list[str] = []
    # Requests are recorded, not routed: under Playwright's routing the speaker view (an
    # about:blank window the deck writes) never got its font files.
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    local = ("file://", "data:", "about:")
    context.on("request", lambda r: None if r.url.startswith(local) else outside.append(r.url))
    try:
        page = context.new_page()
        for viewport in ({"width": 1280, "height": 800}, {"width": 1920, "height": 1080}):
            page.set_viewport_size(viewport)
            size = f"{viewport['width']}x{viewport['height']}"
            page.goto(deck.as_uri())
            page.wait_for_function("window.Reveal && Reveal.isReady()", timeout=30_000)
            page.wait_for_function(
                "window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=30_000
            )
            page.evaluate("MathJax.startup.promise.then(() => true)")
            for i in range(3):
                page.evaluate("document.fonts.ready.then(() => true)")
                page.screenshot(path=str(ARTIFACTS / f"zh-deck-06-{size}-{i}.png"))
                page.evaluate("Reveal.next()")
                page.wait_for_timeout(150)
        page.evaluate("Reveal.configure({viewDistance: 1000})")  # lay every slide out
        page.wait_for_timeout(500)
        text = page.locator(".reveal .slides").text_content()
        font = web_font_state(page, "".join(sorted(set(re.findall(r"[\u4e00-\u9fff]", text)))))
        problems, checked = glyph_problems(page, shown_only=False)  # every slide, notes too
        with context.expect_page() as opened:  # the speaker view: S (no deck has notes yet)
            page.keyboard.press("s")
        speaker = opened.value
        speaker.set_viewport_size({"width": 1920, "height": 1080})
        speaker.wait_for_function(
            "document.documentElement.classList.contains('attention-lab-font-loaded')"
            " && getComputedStyle(document.querySelector('#connection-status')).display"
            " === 'none'"  # connected to the deck
        )
        speaker.wait_for_timeout(1000)  # the slides in its frames
        labels = speaker.locator("body").inner_text()
        speaker.screenshot(path=str(ARTIFACTS / "zh-deck-06-speaker-view-1920x1080.png"))
        speaker_problems, speaker_checked = glyph_problems(speaker)
        speaker.close()
        page.goto((out / "index.html").as_uri())
        index_problems, index_checked = glyph_problems(page)
        page.screenshot(path=str(ARTIFACTS / "zh-deck-index-1920x1080.png"))
    finally:
        context.close()

    assert checked > 300, f"only {checked} characters of the deck were found to check"
    assert not problems, "drawn without their glyph in the deck:\n" + "\n".join(problems)
    assert font["faces"] and "error" not in str(font["faces"]), font
    assert "loaded" in str(font["faces"]) and font["check"], (
        f"the web font {WEB_FONT_FAMILY!r} did not load in the deck: {font}"
    )
    assert index_checked > 20 and not index_problems, index_problems
    assert "下一张" in labels and "时间" in labels, labels  # NOTES_ZH
    assert speaker_checked > 5, speaker_checked
    assert not speaker_problems, "in the speaker view:\n" + "\n".join(speaker_problems)
    print(
        f"zh deck 06: {checked} text nodes and (style, character) pairs checked in the deck, "
        f"{speaker_checked} in the speaker view, {index_checked} on the index page; {font}"
    )
    assert outside == [], f"the Chinese deck asked for outside addresses: {outside}"
