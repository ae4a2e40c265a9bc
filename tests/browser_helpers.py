"""What the real-browser tests share (tests/test_browser.py, tests/test_slides_browser.py).

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
