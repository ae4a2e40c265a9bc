"""What the real-browser tests share (tests/course/test_browser.py,
tests/course/test_slides_browser.py).

* ``require_browser(*modules)``: skip with the reason when Debian's Chromium, Playwright or
  one of ``modules`` is missing -- or fail, when the environment sets
  ATTENTION_LAB_REQUIRE_BROWSER=1 (CI does, in .ci/run). Playwright never downloads a
  browser here: it drives /usr/bin/chromium (ATTENTION_LAB_CHROMIUM points elsewhere).
* ``serve`` / ``stop``: a server process on a free port of 127.0.0.1, waited for until it
  accepts connections.
* ``offline_context``: a browser context that reaches only the given addresses; every other
  request is aborted and recorded.
* Session fixtures (conftest.py imports them): ``chromium``, one headless Chromium, and
  ``jupyterlab``, one JupyterLab for every browser test: it serves a copy of notebooks/
  (running a notebook there must not touch the repository's), token-less, with the
  project's RISE settings (teaching/jupyterlab-settings) and every cell rendered.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Debian's Chromium; ATTENTION_LAB_CHROMIUM points elsewhere (another distribution's path)
CHROMIUM = Path(os.environ.get("ATTENTION_LAB_CHROMIUM", "/usr/bin/chromium"))
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SERVER_START_TIMEOUT_S = 90  # until a server accepts connections
RISE_SETTINGS = ROOT / "teaching" / "jupyterlab-settings"
# import name -> what to install
PACKAGES = {
    "playwright": "pip install playwright",
    "voila": "pip install voila",
    "jupyterlab": "pip install jupyterlab",
    "jupyterlab_rise": "pip install jupyterlab-rise",
}


def missing(*modules: str) -> str | None:
    """Why a browser test needing ``modules`` (besides Chromium and Playwright) cannot run."""
    if not CHROMIUM.exists():
        return f"Chromium not found at {CHROMIUM}; install it with `apt-get install chromium`"
    for module in ("playwright", *modules):
        if importlib.util.find_spec(module) is None:
            return f"the Python package {module} is not installed ({PACKAGES.get(module)})"
    return None


def require_browser(*modules: str) -> None:
    """Skip when the browser test cannot run here, or fail under ATTENTION_LAB_REQUIRE_BROWSER=1."""
    reason = missing(*modules)
    if reason is None:
        return
    if os.environ.get("ATTENTION_LAB_REQUIRE_BROWSER") == "1":
        pytest.fail(f"ATTENTION_LAB_REQUIRE_BROWSER=1, but the browser test cannot run: {reason}")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(args: list[str], port: int, log: Path, cwd: Path, env: dict | None = None):
    """Start a server process; return it once it accepts connections on ``port``."""
    with open(log, "wb") as out:
        server = subprocess.Popen(
            args, cwd=cwd, env={**os.environ, **(env or {})}, stdout=out, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while True:
        if server.poll() is not None:
            pytest.fail(f"{args[2]} exited with code {server.returncode}:\n{log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server
        except OSError:
            if time.monotonic() > deadline:
                stop(server)
                pytest.fail(f"{args[2]} did not listen on port {port}:\n{log.read_text()}")
            time.sleep(0.5)


def stop(server) -> None:
    server.terminate()
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def offline_context(browser, allowed: tuple[str, ...], outside: list[str], viewport, scale=1):
    """A fresh context whose requests reach only URLs starting with ``allowed``; any other
    request is aborted and its URL appended to ``outside``."""
    context = browser.new_context(viewport=viewport, device_scale_factor=scale)

    def only_local(route):
        if route.request.url.startswith(allowed):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    context.route("**/*", only_local)
    return context


@pytest.fixture(scope="session")
def chromium():
    """One headless Chromium for every browser test (skipped or failed without one)."""
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=LAUNCH_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="session")
def jupyterlab(tmp_path_factory):
    """One JupyterLab on a free port of 127.0.0.1 for the session: its base URL.

    It serves a copy of notebooks/*.ipynb with a fresh workspace (the default layout) and
    user settings that render every cell (JupyterLab 4 puts only the cells in view into the
    page, "windowing": a widget far down a notebook could not be found once its cell ran),
    and RISE's settings from teaching/jupyterlab-settings (the "white" theme, whose fonts are
    bundled; the default "simple" theme imports Google Fonts).
    """
    require_browser("jupyterlab")
    root = tmp_path_factory.mktemp("lab")
    for nb in (ROOT / "notebooks").glob("*.ipynb"):
        shutil.copy(nb, root / nb.name)
    settings = root / ".settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    port = free_port()
    args = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        f"--port={port}",
        "--ServerApp.ip=127.0.0.1",
        "--IdentityProvider.token=",
        "--ServerApp.password=",
        "--ServerApp.disable_check_xsrf=True",
        f"--ServerApp.root_dir={root}",
        f"--LabApp.app_settings_dir={RISE_SETTINGS}",
        f"--LabApp.user_settings_dir={root / '.settings'}",
        f"--LabApp.workspaces_dir={root / '.workspaces'}",
        "--LabApp.news_url=",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--allow-root",
    ]
    server = serve(
        args, port, root / "lab.log", root, {"JUPYTER_RUNTIME_DIR": str(root / ".runtime")}
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(server)


# ---------------------------------------------------------------- glyphs

WEB_FONT_FAMILY = "Attention Lab Sans SC"  # the package's subset, served as a web font
# The characters the glyph check looks at: Han, CJK punctuation, full-width forms (the
# ranges a Latin font lacks; the subset's own ranges are tools/catalogues/font.py's).
_CJK_CLASS = r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef]"
_PROBE_JS = """([cls, shownOnly]) => {
  // Every CJK character in the page's visible text (shownOnly; else in all of it: a deck's
  // later slides), once per font style it is in; then one probe <span> per (style,
  // character), laid out off-screen in that style, so that DevTools can say which font
  // drew it once the fonts the probes asked for have loaded.
  const cjk = new RegExp(cls, "gu");
  const seen = new Map();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!el || el.closest("script, style, #glyph-probe")) continue;
    const chars = node.data.match(cjk);
    if (!chars) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    const s = getComputedStyle(el);
    const hidden = range.getClientRects().length === 0 || s.visibility === "hidden";
    if (shownOnly && hidden) continue;  // not shown (display: none, ...)
    const lang = (el.closest("[lang]") || document.documentElement).lang;  // picks the Han font
    const key = [s.fontFamily, s.fontWeight, s.fontStyle, lang].join("|");
    if (!seen.has(key)) seen.set(key, new Set());
    chars.forEach((c) => seen.get(key).add(c));
  }
  const probe = document.createElement("div");
  probe.id = "glyph-probe";
  probe.style.cssText = "position:absolute;left:-10000px;top:0;white-space:nowrap";
  const out = [];
  for (const [key, chars] of seen) {
    const [family, weight, style, lang] = key.split("|");
    for (const c of chars) {
      const span = document.createElement("span");
      span.style.fontFamily = family;
      span.style.fontWeight = weight;
      span.style.fontStyle = style;
      span.style.fontSize = "16px";
      if (lang) span.lang = lang;
      span.textContent = c;
      probe.appendChild(span);
      out.push({char: c, family: family, weight: weight});
    }
  }
  document.body.appendChild(probe);
  probe.getBoundingClientRect();  // lay the probes out now: that starts their fonts' loads
  return document.fonts.ready.then(() => out);
}"""


def _system_cmaps() -> dict[str, set[int]]:
    """PostScript name -> the code points of each font fontconfig knows (Chromium's fallback)."""
    from fontTools.ttLib import TTCollection, TTFont

    listing = subprocess.run(
        ["fc-list", "--format", "%{postscriptname}\t%{file}\t%{index}\n"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    cmaps: dict[str, set[int]] = {}
    for line in listing.splitlines():
        name, path, index = (line.split("\t") + ["", ""])[:3]
        if not name or name in cmaps:
            continue
        try:
            if path.endswith((".ttc", ".otc")):
                font = TTCollection(path).fonts[int(index or 0)]
            else:
                font = TTFont(path, lazy=True)
            cmaps[name] = set(font.getBestCmap())
        except Exception:  # a font fontTools cannot read: it draws nothing we check
            cmaps[name] = set()
    return cmaps


def _web_font_cmaps() -> dict[str, set[int]]:
    """PostScript name -> code points of the package's web font (both weights)."""
    from fontTools.ttLib import TTFont

    fonts = ROOT / "src" / "attention_lab" / "fonts"
    return {
        f"AttentionLabSansSC-{weight}": set(
            TTFont(fonts / f"AttentionLabSansSC-{weight}.otf", lazy=True).getBestCmap()
        )
        for weight in ("Regular", "Bold")
    }


_TEXTS_JS = """(cls) => {
  // Every text node with CJK characters that is laid out (a box on the page, or off-screen,
  // as a deck's other slides), kept in window.__glyphTexts for DevTools.
  const cjk = new RegExp(cls, "gu");
  const texts = [], out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!el || el.closest("script, style, #glyph-probe")) continue;
    const chars = node.data.match(cjk);
    const range = document.createRange();
    range.selectNodeContents(node);
    if (!chars || range.getClientRects().length === 0) continue;
    texts.push(node);
    out.push({chars: chars.join(""), text: node.data.trim().slice(0, 40), tag: el.tagName});
  }
  window.__glyphTexts = texts;
  return out;
}"""


def _drawing_font_cmap(font, system, web):
    return (
        web.get(font["postScriptName"])
        if font["isCustomFont"]
        else system.get(font["postScriptName"])
    )


def glyph_problems(page, shown_only: bool = True) -> tuple[list[str], int]:
    """Which CJK characters of the page are drawn by a font without them (a box, tofu).

    Two looks, both through Chromium's DevTools (CSS.getPlatformFontsForNode, the inspector's
    "Rendered Fonts", which names each font that drew a node's text and how many glyphs):
    1. the page as it is drawn: for every text node with CJK characters, the glyphs drawn
       by fonts whose cmap holds some of them must be at least as many as those characters;
       the rest were drawn by a font without them. This sees text laid out before the web
       font loaded and never shaped again;
    2. each CJK character, once per font style it is in, in a fresh probe <span>: the font
       that drew it must have it (its cmap read with fontTools: the web font's file, or the
       system font's file fontconfig lists).
    With ``shown_only=False`` the text not on screen counts in 2 (a deck's notes).
    Returns (problems, how many text nodes and (style, character) pairs were checked)."""
    system, web = _system_cmaps(), _web_font_cmaps()
    texts = page.evaluate(_TEXTS_JS, _CJK_CLASS)
    try:
        drawn = _platform_fonts(page, [f"window.__glyphTexts[{i}]" for i in range(len(texts))])
    finally:
        page.evaluate("delete window.__glyphTexts")
    lines = []
    for text, fonts in zip(texts, drawn):
        if not fonts:  # laid out but not drawn (the answer in a closed <details>)
            continue
        chars = {ord(c) for c in text["chars"]}
        good = sum(
            f["glyphCount"] for f in fonts if chars & (_drawing_font_cmap(f, system, web) or set())
        )
        if good < len(text["chars"]):
            names = ", ".join(f"{f['postScriptName']} {f['glyphCount']}" for f in fonts)
            lines.append(
                f"<{text['tag'].lower()}> {text['text']!r}: {len(text['chars'])} CJK "
                f"characters, {good} glyphs from fonts that have them ({names})"
            )
    probes = page.evaluate(_PROBE_JS, [_CJK_CLASS, shown_only])
    try:
        used = _platform_fonts(page, ["#glyph-probe > span"], every=True)
    finally:
        page.evaluate("document.getElementById('glyph-probe').remove()")
    assert len(used) == len(probes), (len(used), len(probes))
    problems: dict[str, list[str]] = {}
    for probe, fonts in zip(probes, used):
        for font in fonts:
            cmap = _drawing_font_cmap(font, system, web)
            if cmap is None or ord(probe["char"]) not in cmap:
                name = f"{font['familyName']}{' (web font)' if font['isCustomFont'] else ''}"
                key = f"weight {probe['weight']}, drawn with {name} [{probe['family']}]"
                problems.setdefault(key, []).append(probe["char"])
    lines += [f"{len(c)} characters in {k}: {''.join(c[:40])}" for k, c in problems.items()]
    return lines, len(texts) + len(probes)


def _platform_fonts(page, selectors: list[str], every: bool = False) -> list[list[dict]]:
    """The fonts Chromium drew each node's text with (DevTools' Rendered Fonts): the nodes
    a CSS selector finds (every=True: all of them), or else the node a JavaScript expression
    gives (a text node: exactly its own text)."""
    cdp = page.context.new_cdp_session(page)
    try:
        cdp.send("DOM.enable")
        cdp.send("CSS.enable")
        root = cdp.send("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
        nodes = []
        for selector in selectors:
            if every:
                found = cdp.send("DOM.querySelectorAll", {"nodeId": root, "selector": selector})
                nodes += found["nodeIds"]
            else:
                handle = cdp.send("Runtime.evaluate", {"expression": selector})["result"]
                nodes.append(
                    cdp.send("DOM.requestNode", {"objectId": handle["objectId"]})["nodeId"]
                )
        return [cdp.send("CSS.getPlatformFontsForNode", {"nodeId": n})["fonts"] for n in nodes]
    finally:
        cdp.detach()


def web_font_state(page, text: str) -> dict:
    """The web font as the page's FontFaceSet sees it: the status of each of its faces and
    document.fonts.check on `text` (True when the faces covering it are loaded)."""
    return page.evaluate(
        """([family, text]) => document.fonts.ready.then(() => ({
             faces: Array.from(document.fonts).filter(f => f.family.replace(/["']/g, "") === family)
                          .map(f => f.weight + ":" + f.status),
             check: document.fonts.check('16px "' + family + '"', text)}))""",
        [WEB_FONT_FAMILY, text],
    )
