"""The Chinese explorer in a real browser: Voila serves notebooks/zh-CN/explorer.ipynb.

What a zh-CN learner sees on the first screen, at a laptop's 1280x800 and a projector's
1920x1080: the controls and the status line in Chinese (no English word outside code
identifiers), a heatmap drawn in Chinese, and nothing overflowing. Screenshots go to
artifacts/zh-voila-<w>x<h>.png: look at them after a change. Marked ``browser``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.browser_helpers import (
    WEB_FONT_FAMILY,
    free_port,
    glyph_problems,
    offline_context,
    require_browser,
    serve,
    stop,
    web_font_state,
)

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "zh-CN" / "explorer.ipynb"
ARTIFACTS = ROOT / "artifacts"
SIZES = ((1280, 800), (1920, 1080))
PAGE_TIMEOUT_MS = 240_000
TEMPLATE_ENV = {"JUPYTER_PATH": str(ROOT / "share" / "jupyter")}
ROOT_CSS = ".attention-lab-explorer"  # the explorer's own element
CJK = re.compile(r"[\u4e00-\u9fff]")
WORD = re.compile(r"(?<![\w.=])[A-Za-z]{3,}(?![\w(=])")
# English a Chinese page may show: identifiers and terms the chapter keeps in English.
ALLOWED = {
    "softmax",
    "token",
    "tokens",
    "dropout",
    "SEP",
    "d_head",
    "n_heads",
    "Voila",
    "copy",
    "previous",
    "repeat",
    "lookup",
    "induction",
    "causal",
}  # the tasks and masks as the code names them (the task buttons show the code names)


@pytest.fixture(scope="module")
def zh_voila_url(tmp_path_factory):
    require_browser("voila")
    port = free_port()
    log = tmp_path_factory.mktemp("voila-zh") / "voila.log"
    args = [sys.executable, "-m", "voila", str(NOTEBOOK), "--no-browser", f"--port={port}",
            "--Voila.ip=127.0.0.1", "--template=attention-lab"]  # fmt: skip
    server = serve(args, port, log, ROOT, TEMPLATE_ENV)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        stop(server)


@pytest.fixture(scope="module")
def zh_page(chromium, zh_voila_url):
    """One loaded page of the Chinese app for both tests, in a context that reaches only the
    Voila server: (page, the outside addresses it asked for). Each load starts a kernel and
    runs the notebook (about 9 s), so the tests share one; each starts with ``app_view``."""
    blocked: list[str] = []
    local = "/".join(zh_voila_url.split("/", 3)[:3])
    size = {"width": SIZES[0][0], "height": SIZES[0][1]}
    context = offline_context(chromium, (local,), blocked, size)
    try:
        page = context.new_page()
        page.goto(zh_voila_url, timeout=PAGE_TIMEOUT_MS, wait_until="domcontentloaded")
        page.locator(f"{ROOT_CSS} .attention-lab-status").wait_for(timeout=PAGE_TIMEOUT_MS)
        page.locator(f"{ROOT_CSS} img.attention-lab-heatmap").wait_for(timeout=PAGE_TIMEOUT_MS)
        yield page, blocked
    finally:
        context.close()


def english_words(page) -> list[str]:
    """The English words the explorer shows, outside ``ALLOWED``: read word by word as the
    page shows them (the task buttons' names, one text each, come out of inner_text() run
    together, "copypreviousrepeatlookup")."""
    shown = page.locator(ROOT_CSS).evaluate(
        """e => { const w = document.createTreeWalker(e, NodeFilter.SHOW_TEXT), out = [];
                  for (let n = w.nextNode(); n; n = w.nextNode()) out.push(n.data);
                  return out.join(" "); }"""
    )
    return sorted(set(WORD.findall(shown)) - ALLOWED)


def fits_at_both_sizes(page, name: str) -> None:
    """At each size the page is no wider than the window; screenshot
    artifacts/<name>-<w>x<h>.png."""
    for width, height in SIZES:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(400)
        overflow = page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
        assert not overflow, f"{width}x{height}: the page is wider than the window"
        page.screenshot(path=str(ARTIFACTS / f"{name}-{width}x{height}.png"))


def app_view(page) -> None:
    """Back to the app's own view at a laptop's size, whatever the other test left."""
    page.evaluate("location.hash = ''")
    page.set_viewport_size({"width": SIZES[0][0], "height": SIZES[0][1]})
    page.wait_for_timeout(500)


def test_the_chinese_explorer_speaks_chinese(zh_page):
    ARTIFACTS.mkdir(exist_ok=True)
    page, blocked = zh_page
    app_view(page)
    status = page.locator(f"{ROOT_CSS} .attention-lab-status")
    controls = page.locator(ROOT_CSS).inner_text()
    assert page.locator("#attention-lab-view").inner_text() == "演示视图"  # the template's
    assert "zh_CN" not in page.locator("body").inner_text()  # the setup cell shows nothing
    assert CJK.search(status.inner_text()), status.inner_text()
    assert CJK.search(controls)
    english = english_words(page)
    assert not english, f"English words in the Chinese explorer: {english}"
    fits_at_both_sizes(page, "zh-voila")
    assert not blocked, f"the app asked for outside addresses: {blocked}"


def test_the_kv_heads_toggle_speaks_chinese(zh_page):
    """2 kv heads for the 4 heads: the status line gives the KV cache per token in Chinese,
    the page still shows no English word and fits; screenshots zh-voila-kv-heads-<w>x<h>.png."""
    ARTIFACTS.mkdir(exist_ok=True)
    page, blocked = zh_page
    app_view(page)
    status = page.locator(f"{ROOT_CSS} .attention-lab-status")
    old = page.locator(f"{ROOT_CSS} img.attention-lab-heatmap").get_attribute("src")
    toggle = page.locator(f"{ROOT_CSS} .attention-lab-n-kv-heads")
    toggle.get_by_role("button", name="2", exact=True).click()
    page.wait_for_function(
        """([root, old]) => document.querySelector(root + ' img.attention-lab-heatmap').src
            !== old && document.querySelector(root + ' .attention-lab-status').innerText
            .includes('2 个键/值头')""",
        arg=[ROOT_CSS, old],
        timeout=60_000,
    )
    assert "每个 token 的 KV 缓存 128 字节（2 个键/值头）：是多头注意力 256 字节的 1/2" in (
        status.inner_text()
    )
    english = english_words(page)
    assert not english, f"English words with 2 kv heads: {english}"
    fits_at_both_sizes(page, "zh-voila-kv-heads")
    toggle.get_by_role("button", name="4", exact=True).click()
    page.wait_for_function(
        "root => !document.querySelector(root + ' .attention-lab-status').innerText"
        ".includes('KV 缓存')",
        arg=ROOT_CSS,
        timeout=60_000,
    )
    assert not blocked, f"the app asked for outside addresses: {blocked}"


def test_every_chinese_character_of_the_explorer_has_a_glyph(zh_page):
    """On a machine without a CJK system font (CI's), every Chinese character of the app and
    of its presenter view is drawn by a font that has it: the package's subset, served by the
    template as a web font. Screenshots: artifacts/zh-voila-glyphs-<view>-<w>x<h>.png."""
    ARTIFACTS.mkdir(exist_ok=True)
    page, blocked = zh_page
    app_view(page)
    problems, checked, fonts = {}, {}, {}
    for view, (width, height) in (("app", SIZES[0]), ("presenter", SIZES[1])):
        page.evaluate(f"location.hash = '{'#presenter' if view == 'presenter' else ''}'")
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(400)
        text = page.locator("body").inner_text()
        fonts[view] = web_font_state(page, "".join(sorted(set(CJK.findall(text)))))
        page.screenshot(path=str(ARTIFACTS / f"zh-voila-glyphs-{view}-{width}x{height}.png"))
        problems[view], checked[view] = glyph_problems(page)
    for view in problems:
        assert checked[view] > 100, f"{view}: only {checked[view]} characters found to check"
        assert not problems[view], f"{view}: drawn without their glyph:\n" + "\n".join(
            problems[view]
        )
        faces = fonts[view]["faces"]
        assert faces and "error" not in str(faces) and "loaded" in str(faces), (
            f"{view}: the web font {WEB_FONT_FAMILY!r} did not load: faces {faces}"
        )
        assert fonts[view]["check"], f"{view}: document.fonts.check is false: {fonts[view]}"
    assert not blocked, f"the app asked for outside addresses: {blocked}"
