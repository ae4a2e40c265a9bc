"""Shared pieces for the unit tests of attention_lab.

* Every test starts from ``torch.manual_seed(0)``, so a failure reproduces.
* Torch runs on one thread here: the tensors are tiny, and on a busy 2-core CI machine
  two threads per process only add contention (the whole suite must stay fast).
* ``CAUSAL_MODULES`` builds every causal module of the library, both paths of
  ``MultiHeadSelfAttention`` included, so the causality tests cover all of them at once.
"""

from __future__ import annotations

import pytest
import torch

from attention_lab import (
    CausalAttention,
    MultiHeadAttention,
    MultiHeadSelfAttention,
    SingleHeadAttention,
)

torch.set_num_threads(1)

B, T, D, H = 2, 6, 8, 2  # small sizes used across the tests
CONTEXT = 10  # context_length: larger than T, so every module slices its mask buffer


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


def make_module(name: str, d_model: int = D, n_heads: int = H, context: int = CONTEXT, **kw):
    """Build one module of the library by a short name, in eval mode."""
    if name == "single":
        module = SingleHeadAttention(d_model, d_model)
    elif name == "causal":
        module = CausalAttention(d_model, d_model, context, **kw)
    elif name == "multihead":
        module = MultiHeadAttention(d_model, n_heads, context, **kw)
    elif name in ("fused", "fused_sliding", "fused_none"):
        kind = {"fused": "causal", "fused_sliding": "sliding", "fused_none": "none"}[name]
        window = 3 if kind == "sliding" else None
        module = MultiHeadSelfAttention(
            d_model, n_heads, context, mask_kind=kind, window=window, **kw
        )
    else:
        raise KeyError(name)
    return module.eval()


# (module name, return_weights): return_weights=True takes the explicit path of the fused
# block, False its F.scaled_dot_product_attention path.
CAUSAL_CASES = [
    ("causal", False),
    ("causal", True),
    ("multihead", False),
    ("multihead", True),
    ("fused", False),
    ("fused", True),
    ("fused_sliding", False),
    ("fused_sliding", True),
]
ALL_MODULES = ["single", "causal", "multihead", "fused", "fused_sliding", "fused_none"]


def run(module, x, return_weights: bool):
    """The module's output (B, T, d_out), whichever path ``return_weights`` selects."""
    if return_weights:
        out, _ = module(x, return_weights=True)
        return out
    return module(x)


def assert_future_does_not_leak(fn, x: torch.Tensor, t: int) -> None:
    """Change every position after ``t``; outputs at positions 0..t must stay the same."""
    changed = x.clone()
    changed[:, t + 1 :] = torch.randn_like(changed[:, t + 1 :]) * 3.0
    before, after = fn(x), fn(changed)
    torch.testing.assert_close(after[:, : t + 1], before[:, : t + 1], rtol=0, atol=1e-6)
    # The change must matter somewhere, or the test proves nothing.
    assert not torch.allclose(after[:, t + 1 :], before[:, t + 1 :])


# --- one trained model per task for the whole session ---------------------------------
# Training takes about a second each; every test that needs a trained model shares these.
# Tests must not change their weights (evaluate/forward/generate only).


def _trained(task: str):
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
