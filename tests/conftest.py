"""Shared pieces for the unit tests of attention_lab.

* Every test starts from ``torch.manual_seed(0)``, so a failure reproduces.
* Torch runs on one thread here: the tensors are tiny, and on a busy 2-core CI machine
  two threads per process only add contention (the whole suite must stay fast).
* ``make_module`` builds every module of the library by a short name; ``CAUSAL_CASES`` lists
  every causal one with each of its paths (both paths of ``MultiHeadSelfAttention`` and of
  ``TinyLM``), so the one causality test (test_module_contract.py) covers all of them at once.
* ``zh``: a fixture that switches the library to Chinese for one test (English otherwise).
* ``raises`` and ``message``: the error-message checks every test file uses.
* The browser tests' session fixtures, ``chromium`` and ``jupyterlab`` (tests/browser_helpers.py):
  one Chromium and one JupyterLab for tests/course/test_browser.py and
  tests/course/test_slides_browser.py.
* The hub tests' session fixtures, ``hub_venv``, ``classroom``, ``shared_hub`` and ``red``
  (tests/hub_helpers.py): the hub's venv built once, the checkout private while they run, one
  hub for every test that needs one (alice and bob on it for both red-team rounds). Under
  pytest-xdist the files of that hub are one unit of work (``pytest_xdist_make_scheduler``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from tests.browser_helpers import chromium, jupyterlab  # noqa: F401  (session fixtures)
from tests.hub_helpers import (  # noqa: F401  (session fixtures of the hub tests)
    SHARED_HUB_FILES,
    classroom,
    hub_venv,
    red,
    shared_hub,
)

if TYPE_CHECKING:
    import torch

# torch and attention_lab are imported when a test needs them, not here: `make test-hub`
# (-m hub) runs none of the library's tests, and importing torch costs each of its
# processes about 3 CPU-seconds before its first hub starts.


def _hub_only(config) -> bool:
    return config.getoption("markexpr", "") == "hub"


def pytest_configure(config):
    if not _hub_only(config):
        import torch

        torch.set_num_threads(1)


@pytest.hookimpl(tryfirst=True)  # before -m deselects anything
def pytest_collection_modifyitems(config, items):
    """`make test-hub` collects only tests/hub/test_hub*.py: collecting every test file (about
    2,200 tests, torch and the notebooks' helpers imported) for its 35 costs each worker 10 s
    of CPU, and minutes of wall time on a busy machine. A test with the hub marker in any
    other file would then never run: every collection (make test's too) stops on one."""
    stray = [
        item.nodeid
        for item in items
        if item.get_closest_marker("hub") and not item.path.name.startswith("test_hub")
    ]
    if stray:
        raise pytest.UsageError(
            f"{', '.join(stray)}: the hub marker outside tests/hub/test_hub*.py, the files make "
            "test-hub runs; move the test into one of them"
        )


def pytest_xdist_make_scheduler(config, log):
    """Under --dist loadfile or loadgroup, the test files of the shared hub
    (hub_helpers.SHARED_HUB_FILES) are one unit of work: one worker runs them in their order,
    on one hub. (xdist_group marks cannot say it: pytest 9.2 drops the group that
    pytest-xdist 3.8 writes into each test's id, pytest-dev/pytest-xdist#1386.)"""
    dist = config.getvalue("dist")
    if dist not in ("loadfile", "loadgroup"):
        return None
    from xdist.scheduler import LoadFileScheduling, LoadGroupScheduling

    base = LoadFileScheduling if dist == "loadfile" else LoadGroupScheduling

    class SharedHubScheduling(base):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.split("::", 1)[0].rsplit("/", 1)[-1] in SHARED_HUB_FILES:
                return "the shared hub"
            return super()._split_scope(nodeid)

    return SharedHubScheduling(config, log)


B, T, D, H = 2, 6, 8, 2  # small sizes used across the tests
CONTEXT = 10  # context_length: larger than T, so every module slices its mask buffer
VOCAB = 64  # TinyLM's vocabulary


@pytest.fixture(autouse=True)
def _seed(request):
    if not request.node.get_closest_marker("hub"):
        import torch

        torch.manual_seed(0)
    yield


@pytest.fixture(autouse=True)
def _train_every_model(monkeypatch):
    """The tests here train every model they ask for. ``make test`` keeps each finished run
    for the notebooks' kernels (ATTENTION_LAB_TRAIN_ONCE, src/attention_lab/train_once.py),
    but several tests compare two ways of training one run (a loop and ``train_tiny_lms``,
    with a recorder and without), which a stored run would make equal by construction.
    tests/library/test_train_once.py sets a store of its own."""
    monkeypatch.delenv("ATTENTION_LAB_TRAIN_ONCE", raising=False)


@pytest.fixture(autouse=True, scope="session")
def _english(request):
    """Every test starts in English, whatever the machine's locale says."""
    if not _hub_only(request.config):
        from attention_lab import set_language

        set_language("en")
    yield


@pytest.fixture
def zh():
    """The library speaks Simplified Chinese for one test (``attention_lab.set_language``)."""
    from attention_lab import set_language

    set_language("zh_CN")
    try:
        yield
    finally:
        set_language("en")


# the fused block and TinyLM by mask kind (window=3 for "sliding")
MASK_KINDS = {
    "fused": "causal",
    "fused_sliding": "sliding",
    "fused_none": "none",
    "tiny_lm": "causal",
    "tiny_lm_sliding": "sliding",
    "tiny_lm_none": "none",
}


def make_module(name: str, d_model: int = D, n_heads: int = H, context: int = CONTEXT, **kw):
    """Build one module of the library by a short name, in eval mode."""
    from attention_lab import (
        CausalAttention,
        MultiHeadAttention,
        MultiHeadSelfAttention,
        SingleHeadAttention,
        TinyLM,
    )

    if name == "single":
        module = SingleHeadAttention(d_model, d_model)
    elif name == "causal":
        module = CausalAttention(d_model, d_model, context, **kw)
    elif name == "multihead":
        module = MultiHeadAttention(d_model, n_heads, context, **kw)
    elif name in MASK_KINDS:
        kind = MASK_KINDS[name]
        window = 3 if kind == "sliding" else None
        if name.startswith("fused"):
            module = MultiHeadSelfAttention(
                d_model, n_heads, context, mask_kind=kind, window=window, **kw
            )
        else:
            module = TinyLM(
                vocab_size=VOCAB,
                d_model=d_model,
                n_heads=n_heads,
                context_length=context,
                mask_kind=kind,
                window=window,
                **kw,
            )
    else:
        raise KeyError(name)
    return module.eval()


def make_input(name: str, batch: int = B, length: int = T, d_model: int = D) -> torch.Tensor:
    """An input for ``make_module(name)``: token ids (B, T) for a TinyLM, else (B, T, D)."""
    import torch

    if name.startswith("tiny_lm"):
        return torch.randint(VOCAB, (batch, length))  # (B, T)
    return torch.randn(batch, length, d_model)  # (B, T, D)


# (module name, return_weights): return_weights=True takes the explicit path of the fused
# block (and of the TinyLM around it), False its F.scaled_dot_product_attention path.
CAUSAL_CASES = [
    ("causal", False),
    ("causal", True),
    ("multihead", False),
    ("multihead", True),
    ("fused", False),
    ("fused", True),
    ("fused_sliding", False),
    ("fused_sliding", True),
    ("tiny_lm", False),
    ("tiny_lm", True),
    ("tiny_lm_sliding", False),
    ("tiny_lm_sliding", True),
]
# Modules without a causal mask: the causality test must fail on them (it can fail).
NON_CAUSAL_CASES = [
    ("single", False),
    ("fused_none", False),
    ("fused_none", True),
    ("tiny_lm_none", False),
    ("tiny_lm_none", True),
]


def case_ids(cases) -> list[str]:
    """Test ids for (name, return_weights) cases: "fused-explicit", "causal-default"."""
    return [f"{name}-{'explicit' if weights else 'default'}" for name, weights in cases]


ALL_MODULES = ["single", "causal", "multihead", "fused", "fused_sliding", "fused_none"]


def run(module, x, return_weights: bool):
    """The module's output (B, T, d_out), whichever path ``return_weights`` selects."""
    if return_weights:
        out, _ = module(x, return_weights=True)
        return out
    return module(x)


def assert_future_does_not_leak(fn, x: torch.Tensor, t: int) -> None:
    """Change every position after ``t``; outputs at positions 0..t must stay the same.

    ``x`` is (B, T, D) vectors or (B, T) token ids (each later id then becomes another id).
    """
    import torch

    changed = x.clone()
    if x.is_floating_point():
        changed[:, t + 1 :] = torch.randn_like(changed[:, t + 1 :]) * 3.0
    else:
        later = changed[:, t + 1 :]
        changed[:, t + 1 :] = (later + torch.randint(1, VOCAB, later.shape)) % VOCAB
    before, after = fn(x), fn(changed)
    torch.testing.assert_close(after[:, : t + 1], before[:, : t + 1], rtol=0, atol=1e-6)
    # The change must matter somewhere, or the test proves nothing.
    assert not torch.allclose(after[:, t + 1 :], before[:, t + 1 :])


def raises(exc, *fragments):
    """pytest.raises that also checks every fragment appears in the message, literally."""
    pattern = "".join(f"(?=.*{re.escape(f)})" for f in fragments)
    return pytest.raises(exc, match=re.compile(pattern, re.DOTALL))


def message(exc, call) -> str:
    """The message of the ``exc`` that ``call()`` raises (for a test of the whole text)."""
    with pytest.raises(exc) as caught:
        call()
    return str(caught.value)


def graph_break_count(module: torch.nn.Module, *args) -> int:
    """How many graph breaks ``torch.compile`` finds tracing ``module(*args)`` (0: one graph)."""
    import torch._dynamo

    torch._dynamo.reset()
    return torch._dynamo.explain(module)(*args).graph_break_count


# --- one trained model per task for the whole session ---------------------------------
# Training takes about a second each; every test that needs a trained model shares these.
# Tests must not change their weights (evaluate/forward/generate only).


def _trained(task: str):
    import torch

    from attention_lab import TinyLM, train

    torch.manual_seed(0)
    model = TinyLM()  # the chapter's setting: TinyLMConfig() defaults
    return model, train(model, task, progress=False)  # train() defaults, seed 0


@pytest.fixture(scope="session")
def copy_run():
    """TinyLM() trained on the copy task with train()'s defaults: (model, history)."""
    return _trained("copy")


@pytest.fixture(scope="session")
def previous_run():
    return _trained("previous")


@pytest.fixture(scope="session")
def repeat_run():
    return _trained("repeat")
