"""The explorer in a real browser, as a learner and a teacher meet it.

Two places, each at a laptop's 1280x800 and a projector's 1920x1080:
- the app: Voila serves notebooks/explorer.ipynb with the project's template (`make explore`);
- JupyterLab, default layout with the file browser open: a copy of notebook 06 is opened
  and run from the Run menu.

In both, Debian's Chromium (driven by Playwright) checks that the heatmap image keeps its
natural aspect ratio, that nothing overflows to the right, that moving n_heads 4 -> 8
redraws the picture, and measures the time from a slider change to the new image in the
page over a dozen changes (printed: run pytest with -s to see it; the Voila p90 must stay
within 300 ms). In Voila also: the n_heads slider is on the first screen, every link
of the app answers 200, and the induction task trains, shows its layer toggle and redraws
for layer 1 (screenshots voila-induction-*.png), and 2 kv heads for the 4 heads redraw the
picture with the KV cache per token in the status line (voila-kv-heads-*.png).

Skipped with a reason when Chromium or Playwright is missing -- unless the environment sets
ATTENTION_LAB_REQUIRE_BROWSER=1 (CI does, in .ci/run): then a missing browser is a failure.
The pages must work offline: the browser is cut off from everything but 127.0.0.1 (any other
request is aborted and recorded), and the Voila app must not even try an outside address.
Chromium and JupyterLab are the session's (tests/browser_helpers.py), shared with
tests/course/test_slides_browser.py. Marked ``browser``: `make test` runs these alone, last.
Screenshots are kept in artifacts/ (git-ignored): look at them after a layout change.
"""

from __future__ import annotations

import hashlib
import math
import statistics
import sys
import time
from pathlib import Path

import pytest

from tests.browser_helpers import free_port, offline_context, require_browser, serve, stop

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "explorer.ipynb"
LAB_NOTEBOOK = ROOT / "notebooks" / "06_multi_head.ipynb"
ARTIFACTS = ROOT / "artifacts"
SIZES = ((1280, 800), (1920, 1080))  # a laptop, a projector
PAGE_TIMEOUT_MS = 240_000  # until the notebook has run and the widget is on the page
CHANGE_TIMEOUT_MS = 60_000  # until the page shows the new setting
CHANGES = 12  # slider changes timed per page
# The goal for change-to-image in Voila is p90 <= 300 ms. Like every speed figure of
# this project it is measured and printed (and reported), not asserted: a timed assertion
# fails on a busy machine and passes on a fast one, and proves nothing either way.
VOILA_P90_GOAL_MS = 300
COLAB_BADGE = ("https://colab.research.google.com/assets/colab-badge.svg",)
RATIO_TOLERANCE = 0.02
# The app is served with the project's own Voila template (share/jupyter/voila/templates/
# attention-lab): offline, prose and checks hidden, a presenter view.
TEMPLATE_ENV = {"JUPYTER_PATH": str(ROOT / "share" / "jupyter")}


@pytest.fixture(scope="module")
def voila_url(tmp_path_factory):
    """Serve the explorer with Voila on a free port of 127.0.0.1; stop it afterwards."""
    require_browser("voila")  # before starting the server: skip (or fail in CI) without one
    port = free_port()
    log = tmp_path_factory.mktemp("voila") / "voila.log"
    server = serve(
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
        port,
        log,
        ROOT,
        TEMPLATE_ENV,
    )
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        stop(server)


@pytest.fixture
def lab_url(jupyterlab):
    """Notebook 06 in the session's JupyterLab (a copy; conftest's ``jupyterlab``)."""
    return f"{jupyterlab}/lab/tree/{LAB_NOTEBOOK.name}"


def _new_page(browser, url: str, size: tuple[int, int], blocked: list[str]):
    """A page in a fresh context that only reaches the server at ``url``."""
    local = "/".join(url.split("/", 3)[:3])
    context = offline_context(browser, (local,), blocked, {"width": size[0], "height": size[1]})
    return context, context.new_page()


def _image_digest(image) -> tuple[str, str]:
    """(src, sha256 of the bytes behind it) of the explorer's heatmap image."""
    src = image.get_attribute("src")
    data = image.evaluate(
        "img => fetch(img.src).then(r => r.arrayBuffer()).then(b => Array.from(new Uint8Array(b)))"
    )
    return src, hashlib.sha256(bytes(data)).hexdigest()


def _check_layout(page, root: str, where: str) -> dict:
    """The image keeps its natural aspect ratio and nothing overflows to the right."""
    box = page.evaluate(
        """root => {
            const ex = document.querySelector(root);
            const img = ex.querySelector('img.attention-lab-heatmap');
            const r = img.getBoundingClientRect();
            const scroller = document.scrollingElement;
            const panel = ex.closest('.jp-WindowedPanel-outer, .jp-Notebook') || scroller;
            return {
                width: r.width, height: r.height, right: r.right,
                natural: [img.naturalWidth, img.naturalHeight],
                scrollWidth: scroller.scrollWidth, innerWidth: window.innerWidth,
                explorerRight: ex.getBoundingClientRect().right,
                panelRight: panel.getBoundingClientRect().right,
                panelScroll: [panel.scrollWidth, panel.clientWidth],
                fontPx: parseFloat(getComputedStyle(ex).fontSize),
            };
        }""",
        root,
    )
    natural = box["natural"][0] / box["natural"][1]
    shown = box["width"] / box["height"]
    assert abs(shown / natural - 1) <= RATIO_TOLERANCE, f"{where}: image stretched: {box}"
    assert box["scrollWidth"] <= box["innerWidth"], f"{where}: the page scrolls sideways: {box}"
    assert box["right"] <= box["innerWidth"] + 0.5, f"{where}: the image is cut off: {box}"
    assert box["explorerRight"] <= box["panelRight"] + 0.5, f"{where}: explorer overflows: {box}"
    assert box["panelScroll"][0] <= box["panelScroll"][1], f"{where}: notebook scrolls: {box}"
    return box


def _move_n_heads(page, root: str, key: str, expect_heads: int, timeout=CHANGE_TIMEOUT_MS):
    """Press ``key`` on the n_heads slider; return ms until the new image is on the page."""
    image = page.locator(f"{root} img.attention-lab-heatmap")
    old = image.get_attribute("src")
    handle = page.locator(f"{root} .attention-lab-n-heads .noUi-handle")
    handle.focus()
    start = time.perf_counter()
    handle.press(key)
    heads = "1 head ·" if expect_heads == 1 else f"{expect_heads} heads ·"
    page.wait_for_function(  # the new picture, decoded, and the status line that goes with it
        """([root, old, heads]) => {
            const img = document.querySelector(root + ' img.attention-lab-heatmap');
            const status = document.querySelector(root + ' .attention-lab-status');
            return img.src !== old && img.complete && img.naturalWidth > 0
                && status.innerText.includes(heads);
        }""",
        arg=[root, old, heads],
        polling="raf",
        timeout=timeout,
    )
    ms = 1000 * (time.perf_counter() - start)
    return ms


def _time_changes(page, root: str, where: str) -> list[float]:
    """Walk n_heads 4 -> 2 -> 1 -> 2 -> 4 -> 8 -> 4 ... (every panel count, first visits
    included) at a reader's pace; return the change-to-image times in ms."""
    walk = [("ArrowLeft", 2), ("ArrowLeft", 1), ("ArrowRight", 2), ("ArrowRight", 4)]
    walk += [("ArrowRight", 8), ("ArrowLeft", 4)] * 4
    times = []
    for key, heads in walk[:CHANGES]:
        times.append(_move_n_heads(page, root, key, heads))
        page.wait_for_timeout(400)  # a reader looks at the picture before the next move
    print(
        f"\n{where}: slider change -> new image, {len(times)} changes: "
        f"median {statistics.median(times):.0f} ms, p90 {p90(times):.0f} ms, "
        f"max {max(times):.0f} ms  ({', '.join(f'{t:.0f}' for t in times)})"
    )
    return times


def p90(times: list[float]) -> float:
    """The 90th percentile: the value 90 % of the times are at or below (nearest rank)."""
    return sorted(times)[math.ceil(0.9 * len(times)) - 1]


def _four_to_eight(page, root: str, where: str) -> None:
    """Moving n_heads 4 -> 8 changes the picture (bytes, not only the address)."""
    image = page.locator(f"{root} img.attention-lab-heatmap")
    before_src, before = _image_digest(image)
    before_height = image.evaluate("img => img.naturalHeight")
    _move_n_heads(page, root, "ArrowRight", 8)
    after_src, after = _image_digest(image)
    status = page.locator(f"{root} .attention-lab-status").inner_text()
    assert "8 heads · d_head = 4" in status and "8 panels" in status, status
    assert after_src != before_src and after != before, f"{where}: the image did not change"
    assert image.evaluate("img => img.naturalHeight") > before_height, "8 panels take two rows"
    assert page.locator(f"{root} .attention-lab-message").inner_text().strip() == ""
    _move_n_heads(page, root, "ArrowLeft", 4)


def _wait_for_status(page, root: str, words: str, timeout=CHANGE_TIMEOUT_MS) -> None:
    page.wait_for_function(
        """([root, words]) => document.querySelector(root + ' .attention-lab-status')
            .innerText.includes(words)""",
        arg=[root, words],
        timeout=timeout,
    )


def _redraws(page, root: str, button, status: str, where: str) -> None:
    """Click ``button``: the status line comes to say ``status`` and a new picture (other
    bytes) replaces the old one, with no message."""
    image = page.locator(f"{root} img.attention-lab-heatmap")
    before = _image_digest(image)
    button.click()
    _wait_for_status(page, root, status)
    page.wait_for_function(
        "([root, old]) => document.querySelector(root + ' img.attention-lab-heatmap').src !== old",
        arg=[root, before[0]],
        timeout=CHANGE_TIMEOUT_MS,
    )
    assert _image_digest(image) != before, f"{where}: {status!r} drew the same picture"
    assert page.locator(f"{root} .attention-lab-message").inner_text().strip() == ""


def _at_both_sizes(page, root: str, where: str, name: str) -> None:
    """Check the layout and take screenshot artifacts/<name>-<w>x<h>.png at each size, then
    back to the laptop's."""
    for width, height in SIZES:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(300)
        _check_layout(page, root, f"{where} {name} {width}x{height}")
        page.screenshot(path=str(ARTIFACTS / f"{name}-{width}x{height}.png"))
    page.set_viewport_size({"width": SIZES[0][0], "height": SIZES[0][1]})


def _induction_layers(page, root: str, where: str) -> None:
    """Choose the induction task, trained: the layer toggle appears, layer 1 redraws the
    picture; screenshots at both sizes. Then back to the previous task, untrained."""
    layer_row = page.locator(f"{root} .attention-lab-layer")
    assert not layer_row.is_visible(), f"{where}: a one-layer task shows the layer toggle"
    page.locator(f"{root} .attention-lab-task").get_by_role("button", name="induction").click()
    _wait_for_status(page, root, "layer 0 of 2")
    assert layer_row.is_visible(), f"{where}: the induction task hides the layer toggle"
    trained = page.locator(f"{root} .attention-lab-trained")
    trained.get_by_role("button", name="trained", exact=True).click()
    page.wait_for_function(  # a few seconds of training, then its read-out
        """root => document.querySelector(root + ' .attention-lab-metrics')
            .innerText.includes('trained on induction')""",
        arg=root,
        timeout=CHANGE_TIMEOUT_MS,
    )
    _redraws(page, root, layer_row.get_by_role("button", name="layer 1"), "layer 1 of 2", where)
    _at_both_sizes(page, root, where, "voila-induction")
    page.locator(f"{root} .attention-lab-task").get_by_role("button", name="previous").click()
    trained.get_by_role("button", name="untrained").click()
    _wait_for_status(page, root, "4 heads · d_head = 8")
    page.wait_for_function(
        """root => !document.querySelector(root + ' .attention-lab-status')
            .innerText.includes('layer')""",
        arg=root,
        timeout=CHANGE_TIMEOUT_MS,
    )
    assert not layer_row.is_visible(), f"{where}: the layer toggle stayed after induction"


def _kv_heads(page, root: str, where: str) -> None:
    """With 4 heads the kv heads toggle offers 4, 2 and 1 (divisors only); 2 redraws the
    picture (titles name each head's kv head, the panels are framed by group) and the status
    line gives the KV cache per token against MHA's; screenshots at both sizes. Then back to
    4 (MHA), whose status line names no cache, as before the control."""
    toggle = page.locator(f"{root} .attention-lab-n-kv-heads")
    buttons = [b.strip() for b in toggle.get_by_role("button").all_inner_texts()]
    assert buttons == ["4", "2", "1"], f"{where}: kv heads offered with 4 heads: {buttons}"
    assert "KV cache" not in page.locator(f"{root} .attention-lab-status").inner_text()
    two = toggle.get_by_role("button", name="2", exact=True)
    _redraws(page, root, two, "KV cache 128 bytes per token (2 kv heads): 1/2 of MHA's 256", where)
    _at_both_sizes(page, root, where, "voila-kv-heads")
    toggle.get_by_role("button", name="4", exact=True).click()
    page.wait_for_function(  # plain multi-head attention again: no cache in the status line
        "root => !document.querySelector(root + ' .attention-lab-status').innerText"
        ".includes('KV cache')",
        arg=root,
        timeout=CHANGE_TIMEOUT_MS,
    )


def test_the_explorer_app_in_voila(chromium, voila_url):
    browser = chromium
    ARTIFACTS.mkdir(exist_ok=True)
    root = ".attention-lab-explorer"
    blocked: list[str] = []
    requests: list[str] = []
    sockets: list[str] = []
    context, page = _new_page(browser, voila_url, SIZES[0], blocked)
    try:
        page.on("request", lambda r: requests.append(r.url))
        page.on("websocket", lambda ws: sockets.append(ws.url))
        start = time.perf_counter()
        answer = page.goto(voila_url, timeout=PAGE_TIMEOUT_MS, wait_until="domcontentloaded")
        assert answer.status == 200
        status = page.locator(f"{root} .attention-lab-status")
        status.wait_for(timeout=PAGE_TIMEOUT_MS)
        page.locator(f"{root} img.attention-lab-heatmap").wait_for(timeout=PAGE_TIMEOUT_MS)
        page.wait_for_function(
            "document.querySelector('img.attention-lab-diagram').naturalWidth > 0",
            timeout=PAGE_TIMEOUT_MS,
        )
        print(f"\nVoila: the app was ready {time.perf_counter() - start:.1f} s after the request")
        assert "4 heads · d_head = 8" in status.inner_text()

        # an app, not a notebook: title and controls first, prose and checks hidden
        title = page.locator("h1").first.inner_text()
        assert title.startswith("Explorer"), title
        text = page.locator("body").inner_text()
        for hidden in ("Learning goals", "What we built", "The same picture, static", "panels of"):
            assert hidden not in text, f"{hidden!r} should be hidden in the app"
        for width, height in SIZES:
            page.set_viewport_size({"width": width, "height": height})
            page.wait_for_timeout(300)
            where = f"Voila {width}x{height}"
            _check_layout(page, root, where)
            slider = page.locator(f"{root} .attention-lab-n-heads").bounding_box()
            assert slider["y"] + slider["height"] <= height, f"{where}: n_heads below the fold"
            picture = page.locator(f"{root} img.attention-lab-heatmap").bounding_box()
            assert picture["y"] < height * 0.6, f"{where}: the picture starts below the fold"
            page.screenshot(path=str(ARTIFACTS / f"voila-{width}x{height}.png"))

        # every link in the app answers 200: a link into this page was answered by the page
        # itself (200 above; fetching it again would run the notebook again), any other is
        # asked, from the page, as a click would
        links = page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)")
        assert links, "the app links to its presenter view"
        for link in links:
            if link.split("#")[0] == page.url.split("#")[0]:
                continue
            answer = page.request.get(link)
            assert answer.status == 200, f"{link} answers {answer.status}"

        page.set_viewport_size({"width": SIZES[0][0], "height": SIZES[0][1]})
        _four_to_eight(page, root, "Voila")
        times = _time_changes(page, root, "Voila 1280x800")
        page.screenshot(path=str(ARTIFACTS / "voila-1280x800-after.png"), full_page=True)
        _induction_layers(page, root, "Voila")
        _kv_heads(page, root, "Voila")

        # the presenter view: bigger text, the picture as wide as the window
        page.set_viewport_size({"width": SIZES[1][0], "height": SIZES[1][1]})
        page.locator("#attention-lab-view").click()
        page.wait_for_function("document.body.classList.contains('attention-lab-presenter')")
        page.wait_for_timeout(500)
        box = _check_layout(page, root, "Voila presenter 1920x1080")
        assert box["width"] > 0.8 * SIZES[1][0], "the presenter view uses the projector's width"
        page.screenshot(path=str(ARTIFACTS / "voila-presenter-1920x1080.png"))
        diagram = page.locator(f"{root} img.attention-lab-diagram")
        diagram.scroll_into_view_if_needed()
        shape = diagram.evaluate("i => [i.width, i.height, i.naturalWidth, i.naturalHeight]")
        assert shape[0] >= 0.6 * SIZES[1][0], f"the presenter's diagram is small: {shape}"
        assert abs(shape[0] / shape[1] / (shape[2] / shape[3]) - 1) <= RATIO_TOLERANCE, shape
        page.screenshot(path=str(ARTIFACTS / "voila-presenter-1920x1080-diagram.png"))
    finally:
        context.close()

    print(f"Voila p90 {p90(times):.0f} ms against a goal of {VOILA_P90_GOAL_MS} ms")
    assert len(times) == CHANGES and all(t > 0 for t in times)  # every change drew a picture
    # offline: everything the page got came from the Voila server on 127.0.0.1 (no CDN)
    local = voila_url.rstrip("/")
    network = [u for u in requests if not u.startswith(("data:", "blob:"))]
    assert network and all(u.startswith(local) for u in network if u not in blocked)
    assert sockets and all(u.startswith(local.replace("http", "ws", 1)) for u in sockets)
    assert not blocked, f"the app asked for outside addresses: {blocked}"


def _lab_state(page) -> str:
    """What a reader of a stuck JupyterLab page would see: open dialogs, the kernel's status,
    cells still waiting or running, and the notebook's error outputs (for a failure message)."""
    dialogs = page.locator(".jp-Dialog").all_inner_texts()
    status = page.locator(".jp-Notebook-ExecutionIndicator").first.get_attribute("data-status")
    prompts = page.locator(".jp-Notebook .jp-InputPrompt").all_inner_texts()
    waiting = sum("[*]" in p for p in prompts)
    errors = page.locator(
        ".jp-Notebook .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
    ).all_inner_texts()
    return (
        f"dialogs open: {[d[:200] for d in dialogs]}; kernel status: {status}; "
        f"{waiting} of {len(prompts)} cells at [*]; "
        f"error outputs ({len(errors)}): {[e[-1500:] for e in errors]}"
    )


def _accept_dialog_if_open(page) -> str | None:
    """Accept the dialog on the page, if one is open; return its text."""
    dialog = page.locator(".jp-Dialog")
    if not dialog.count() or not dialog.first.is_visible():
        return None
    text = dialog.first.inner_text()
    dialog.first.locator("button.jp-mod-accept").click()
    page.wait_for_timeout(300)
    return text


def _wait_idle(page, deadline: float) -> None:
    """Until the kernel has been idle, with no question open, for 3 s in a row (a reader does
    not press restart the second the notebook opens: the client may still be connecting)."""
    idle = page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")
    page.wait_for_timeout(2000)
    since = None
    while since is None or time.monotonic() - since < 3:
        _accept_dialog_if_open(page)
        if idle.count() and idle.first.is_visible() and not page.locator(".jp-Dialog").count():
            since = since or time.monotonic()
        else:
            since = None
        if time.monotonic() > deadline:
            pytest.fail(f"the kernel never became idle: {_lab_state(page)}")
        page.wait_for_timeout(500)


def _restart_and_run_all(page, target: str) -> None:
    """Restart the kernel and run every cell from the notebook's toolbar, as a reader does,
    then wait until ``target`` is on the page.

    A fresh JupyterLab may ask, at any moment while it starts, which kernel to use; a loaded
    machine may show that question after the restart question. So every dialog is read:
    the kernel's is accepted (the notebook's own python3) whenever it shows, and the restart
    is confirmed in the dialog that asks for it, never in another. A run that stops early
    (a cell's error) fails at once with the error, not after the whole timeout.

    Once, in a fresh-clone CI run, jupyter_server failed to decode the page's first message
    after the restart (``deserialize_binary_message``: struct.error in lab.log), and the page
    then showed the kernel "starting" for good, no cell ever running. A reader reloads the
    page then; so does this test, once, and says so. A second stall fails."""
    deadline = time.monotonic() + PAGE_TIMEOUT_MS / 1000
    found = page.locator(target)
    for attempt in (1, 2):
        _wait_idle(page, deadline)  # 1. the kernel is up and idle, with no question open
        # 2. the toolbar's "restart the kernel and run all cells" (fast-forward) button
        page.locator("[data-command='notebook:restart-run-all']").first.click()
        restart = page.locator(".jp-Dialog", has_text="Restart")
        restart.first.wait_for(timeout=PAGE_TIMEOUT_MS)
        restart.first.locator("button.jp-mod-accept").click()
        restarted = time.monotonic()
        # 3. the run: accept a late kernel question; stop at an error
        seen_busy = False
        try:
            while not (found.count() and found.first.is_visible()):
                _accept_dialog_if_open(page)
                busy = page.locator(".jp-Notebook-ExecutionIndicator[data-status='busy']").count()
                seen_busy = seen_busy or bool(busy)
                state = _lab_state(page)
                if seen_busy and not busy and "Traceback" in state:
                    pytest.fail(f"the notebook stopped on an error: {state}")
                if not seen_busy and time.monotonic() - restarted > 90 and attempt == 1:
                    print(f"\nJupyterLab: no cell ran 90 s after the restart ({state}); reloading")
                    page.reload(timeout=PAGE_TIMEOUT_MS, wait_until="domcontentloaded")
                    page.locator(".jp-Notebook").wait_for(timeout=PAGE_TIMEOUT_MS)
                    break
                if time.monotonic() > deadline:
                    pytest.fail(f"{target} not on the page after {PAGE_TIMEOUT_MS} ms: {state}")
                page.wait_for_timeout(1000)
            else:
                return
        finally:
            page.screenshot(path=str(ARTIFACTS / "jupyterlab-after-run-all.png"))
    pytest.fail(f"{target} not on the page after a reload and a second run: {_lab_state(page)}")


def test_the_explorer_in_jupyterlab_with_the_file_browser_open(chromium, lab_url):
    browser = chromium
    ARTIFACTS.mkdir(exist_ok=True)
    blocked: list[str] = []
    context, page = _new_page(browser, lab_url, SIZES[0], blocked)
    root = ".jp-Notebook .attention-lab-explorer"
    try:
        page.goto(lab_url, timeout=PAGE_TIMEOUT_MS, wait_until="domcontentloaded")
        page.locator(".jp-Notebook").wait_for(timeout=PAGE_TIMEOUT_MS)
        browser_panel = page.locator("#filebrowser")
        if not browser_panel.is_visible():  # the default layout shows it; make sure
            page.locator("[data-id='filebrowser']").click()
        assert browser_panel.is_visible()
        _restart_and_run_all(page, f"{root} img.attention-lab-heatmap")
        page.locator(root).scroll_into_view_if_needed()
        page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(
            timeout=PAGE_TIMEOUT_MS
        )
        status = page.locator(f"{root} .attention-lab-status")
        assert "4 heads · d_head = 8" in status.inner_text()
        for width, height in SIZES:
            page.set_viewport_size({"width": width, "height": height})
            page.wait_for_timeout(500)
            page.locator(root).scroll_into_view_if_needed()
            where = f"JupyterLab {width}x{height}"
            _check_layout(page, root, where)
            page.screenshot(path=str(ARTIFACTS / f"jupyterlab-{width}x{height}.png"))
        page.set_viewport_size({"width": SIZES[0][0], "height": SIZES[0][1]})
        page.wait_for_timeout(300)
        _four_to_eight(page, root, "JupyterLab")
        _time_changes(page, root, "JupyterLab 1280x800")
    finally:
        context.close()
    # The one outside address: the Colab badge picture at the top of the notebook, which
    # JupyterLab renders like any Markdown image (for readers on GitHub). The test blocks it
    # and the page works without it; anything else would be a real outside request.
    unexpected = [url for url in blocked if url not in COLAB_BADGE]
    assert not unexpected, f"JupyterLab asked for outside addresses: {unexpected}"
