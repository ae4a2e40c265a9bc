"""The explorer in a real browser: Voila serves notebooks/explorer.ipynb on 127.0.0.1, Debian's
Chromium (driven by Playwright) moves the n_heads slider, and the picture must follow.

Skipped with a reason when Chromium or Playwright is missing -- unless the environment sets
ATTENTION_LAB_REQUIRE_BROWSER=1 (CI does, in .ci/run): then a missing browser is a failure.
Playwright never downloads a browser here: it drives /usr/bin/chromium. The page must work
offline: the test cuts the browser off from everything but 127.0.0.1 (any other request is
aborted and recorded), checks the explorer still works, and checks that the page did not
even try an outside address.
Screenshots are kept in artifacts/ (git-ignored).
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "explorer.ipynb"
ARTIFACTS = ROOT / "artifacts"
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
SERVER_START_TIMEOUT_S = 60  # until Voila accepts connections
PAGE_TIMEOUT_MS = 240_000  # until the notebook has run and the widget is on the page
CHANGE_TIMEOUT_MS = 120_000  # until the page shows the new setting
# The app is served with the project's own Voila template (share/jupyter/voila/templates/
# attention-lab), which drops the CDN stylesheets of Voila's "lab" template and the Colab badge.
TEMPLATE_ENV = {"JUPYTER_PATH": str(ROOT / "share" / "jupyter")}


def _missing() -> str | None:
    """Why the browser test cannot run here, or None."""
    if not CHROMIUM.exists():
        return f"Chromium not found at {CHROMIUM}; install it with `apt-get install chromium`"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the Python package playwright is not installed (pip install playwright)"
    try:
        import voila  # noqa: F401
    except ImportError:
        return "voila is not installed (pip install voila)"
    return None


def require_browser() -> None:
    """Skip when the browser test cannot run here, or fail under ATTENTION_LAB_REQUIRE_BROWSER=1."""
    reason = _missing()
    if reason is None:
        return
    if os.environ.get("ATTENTION_LAB_REQUIRE_BROWSER") == "1":
        pytest.fail(f"ATTENTION_LAB_REQUIRE_BROWSER=1, but the browser test cannot run: {reason}")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def voila_url(tmp_path_factory):
    """Serve the explorer with Voila on a free port of 127.0.0.1; stop it afterwards."""
    port = _free_port()
    log = tmp_path_factory.mktemp("voila") / "voila.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "voila",
                str(NOTEBOOK),
                "--no-browser",
                f"--port={port}",
                "--Voila.ip=127.0.0.1",
                "--template=attention-lab",
            ],
            cwd=ROOT,
            env={**os.environ, **TEMPLATE_ENV},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while True:
            if server.poll() is not None:
                pytest.fail(f"Voila exited with code {server.returncode}:\n{log.read_text()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"Voila did not listen on port {port} within "
                        f"{SERVER_START_TIMEOUT_S} s:\n{log.read_text()}"
                    )
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _image_digest(page) -> tuple[str, str]:
    """(src, sha256 of the bytes behind it) of the explorer's heatmap image."""
    src = page.locator("img.attention-lab-heatmap").get_attribute("src")
    data = page.evaluate(
        "src => fetch(src).then(r => r.arrayBuffer()).then(b => Array.from(new Uint8Array(b)))",
        src,
    )
    return src, hashlib.sha256(bytes(data)).hexdigest()


def test_moving_the_n_heads_slider_redraws_the_heatmaps_in_a_real_browser(request, tmp_path):
    require_browser()  # before starting Voila: skip (or fail in CI) without a browser
    voila_url = request.getfixturevalue("voila_url")
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    requests: list[str] = []  # every request the page made
    blocked: list[str] = []  # those that were not for 127.0.0.1, aborted
    sockets: list[str] = []
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            user_data_dir=str(tmp_path / "chromium-profile"),  # a fresh profile every run
            executable_path=str(CHROMIUM),
            headless=True,
            args=LAUNCH_ARGS,
            viewport={"width": 1280, "height": 1400},
        )
        try:
            local = voila_url.rstrip("/")

            def only_local(route):  # offline: nothing but the Voila server answers
                if route.request.url.startswith(local):
                    route.continue_()
                else:
                    blocked.append(route.request.url)
                    route.abort()

            context.route("**/*", only_local)
            page = context.new_page()
            page.on("request", lambda request: requests.append(request.url))
            page.on("websocket", lambda ws: sockets.append(ws.url))
            page.goto(voila_url, timeout=PAGE_TIMEOUT_MS, wait_until="domcontentloaded")

            status = page.locator(".attention-lab-status")
            image = page.locator("img.attention-lab-heatmap")
            expect(status).to_contain_text("4 heads · d_head = 8", timeout=PAGE_TIMEOUT_MS)
            expect(status).to_contain_text("4 panels")
            expect(image).to_be_visible()
            before_src, before = _image_digest(page)
            before_height = image.evaluate("img => img.naturalHeight")
            page.screenshot(path=str(ARTIFACTS / "explorer-4-heads.png"), full_page=True)

            # move the n_heads slider one step to the right with the keyboard: 4 -> 8
            handle = page.locator(".attention-lab-n-heads .noUi-handle")
            handle.focus()
            page.keyboard.press("ArrowRight")

            expect(status).to_contain_text("8 heads · d_head = 4", timeout=CHANGE_TIMEOUT_MS)
            expect(status).to_contain_text("8 panels")
            page.wait_for_function(
                "old => document.querySelector('img.attention-lab-heatmap').src !== old",
                arg=before_src,
                timeout=CHANGE_TIMEOUT_MS,
            )
            after_src, after = _image_digest(page)
            after_height = image.evaluate("img => img.naturalHeight")
            page.screenshot(path=str(ARTIFACTS / "explorer-8-heads.png"), full_page=True)
            message = page.locator(".attention-lab-message").inner_text()
        finally:
            context.close()

    assert after_src != before_src
    assert after != before, "the heatmap image did not change"
    assert after_height > before_height, "8 panels take two rows, 4 panels one"
    assert message.strip() == ""
    assert (ARTIFACTS / "explorer-8-heads.png").stat().st_size > 0

    # offline: everything the page got came from the Voila server on 127.0.0.1 (no CDN)
    local = voila_url.rstrip("/")
    network = [u for u in requests if not u.startswith(("data:", "blob:"))]
    served = [u for u in network if u not in blocked]
    assert served and all(u.startswith(local) for u in served)
    assert all(u.startswith(f"blob:{local}") for u in requests if u.startswith("blob:"))
    assert sockets and all(u.startswith(local.replace("http", "ws", 1)) for u in sockets), sockets
    assert not blocked, f"the page asked for outside addresses: {blocked}"
