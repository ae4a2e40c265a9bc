"""Defects found in review, each pinned by a test that failed before its fix (issue 9).

* masks are configuration, not checkpoint state: state loads across mask kinds and
  context lengths, and both paths of the loading block then agree;
* conversions keep every bias they can and refuse what they cannot represent;
* ``torch.compile(..., fullgraph=True)`` traces ``TinyLM`` and the block with no graph break;
* ``import attention_lab`` stays light (no matplotlib, seaborn, ipywidgets, tqdm);
* any ``operator.index`` integer is a size (NumPy integers included);
* one ``TinyLMConfig`` drives ``TinyLM`` and ``train_tiny_lm``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn

from attention_lab import (
    CausalAttention,
    MultiHeadAttention,
    MultiHeadSelfAttention,
    TinyLM,
    TinyLMConfig,
    causal_mask,
    make_batch,
    sliding_window_mask,
    train_tiny_lm,
)

ROOT = Path(__file__).resolve().parents[1]
KINDS = [("causal", None), ("sliding", 3), ("none", None)]


def _both_paths_agree(block: MultiHeadSelfAttention, x: torch.Tensor) -> None:
    explicit, _ = block(x, return_weights=True)
    torch.testing.assert_close(block(x), explicit, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("source", KINDS, ids=[k for k, _ in KINDS])
@pytest.mark.parametrize("target", KINDS, ids=[k for k, _ in KINDS])
def test_state_loads_across_mask_kinds_and_both_paths_keep_the_loading_blocks_mask(source, target):
    saved = MultiHeadSelfAttention(8, 2, 10, mask_kind=source[0], window=source[1]).state_dict()
    block = MultiHeadSelfAttention(8, 2, 10, mask_kind=target[0], window=target[1]).eval()
    result = block.load_state_dict(saved)  # strict: raises on a missing or unexpected key
    assert not result.missing_keys and not result.unexpected_keys
    assert torch.equal(block.mask, _mask(target[0], 10, target[1]))
    _both_paths_agree(block, torch.randn(2, 6, 8))


def _mask(kind, T, window):
    from attention_lab import build_mask

    return build_mask(kind, T, window)


@pytest.mark.parametrize(
    "build",
    [
        lambda ctx: MultiHeadSelfAttention(8, 2, ctx),
        lambda ctx: MultiHeadAttention(8, 2, ctx),
        lambda ctx: CausalAttention(8, 8, ctx),
    ],
    ids=["fused", "multihead", "causal"],
)
def test_state_loads_across_context_lengths(build):
    small, large = build(6).eval(), build(16).eval()
    large.load_state_dict(small.state_dict())
    x = torch.randn(2, 6, 8)  # (B, T, D): fits both
    torch.testing.assert_close(large(x), small(x), rtol=0, atol=0)
    assert large.mask.shape == (16, 16) and small.mask.shape == (6, 6)


def test_tiny_lm_state_loads_into_a_model_with_another_mask_kind():
    causal = TinyLM(TinyLMConfig(mask_kind="causal")).eval()
    sliding = TinyLM(TinyLMConfig(mask_kind="sliding", window=3)).eval()
    sliding.load_state_dict(causal.state_dict())
    idx = torch.randint(64, (2, 12))
    logits, weights = sliding(idx, return_weights=True)
    torch.testing.assert_close(sliding(idx), logits, rtol=1e-5, atol=1e-5)
    assert (weights[..., sliding_window_mask(12, 3)] == 0).all()


# --- conversions ----------------------------------------------------------------------


def _randomise_biases(module: nn.Module) -> nn.Module:
    with torch.no_grad():
        for name, param in module.named_parameters():
            if name.endswith("bias"):
                param.normal_()
    return module


@pytest.mark.parametrize("qkv_bias", [False, True])
@pytest.mark.parametrize("out_bias", [False, True])
def test_separate_to_fused_and_back_keeps_keys_and_outputs(qkv_bias, out_bias):
    separate = _randomise_biases(
        MultiHeadAttention(8, 2, 10, qkv_bias=qkv_bias, out_bias=out_bias)
    ).eval()
    fused = MultiHeadSelfAttention.from_separate(separate)
    back = fused.to_separate()
    assert (fused.qkv.bias is not None) == qkv_bias
    assert (fused.out_proj.bias is not None) == out_bias
    assert back.state_dict().keys() == separate.state_dict().keys()
    separate.load_state_dict(back.state_dict())  # strict load works
    x = torch.randn(2, 6, 8)
    torch.testing.assert_close(fused(x), separate(x), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(back(x), separate(x), rtol=0, atol=0)


@pytest.mark.parametrize("bias", [False, True])
def test_fused_to_torch_and_back_keeps_keys_and_outputs(bias):
    block = _randomise_biases(MultiHeadSelfAttention(8, 2, 10, qkv_bias=bias, out_bias=bias))
    block.eval()
    mha = block.to_torch()
    back = MultiHeadSelfAttention.from_torch(mha, 10)
    assert back.state_dict().keys() == block.state_dict().keys()
    x = torch.randn(2, 6, 8)
    expected, _ = mha(x, x, x, attn_mask=causal_mask(6))
    torch.testing.assert_close(block(x), expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(back(x), block(x), rtol=0, atol=0)


@pytest.mark.parametrize("kind, window", [("sliding", 3), ("none", None)])
def test_to_torch_refuses_a_block_that_is_not_causal(kind, window):
    block = MultiHeadSelfAttention(8, 2, 10, mask_kind=kind, window=window)
    with pytest.raises(ValueError, match=f"mask_kind='{kind}'.*attn_mask=block.mask"):
        block.to_torch()


def test_to_torch_refuses_biases_it_cannot_represent():
    with pytest.raises(ValueError, match="qkv_bias=True and out_bias=False.*qkv_bias == out_bias"):
        MultiHeadSelfAttention(8, 2, 10, out_bias=False).to_torch()


def test_from_torch_takes_the_mask_kind_and_then_matches_torch_given_that_mask():
    mha = _randomise_biases(nn.MultiheadAttention(8, 2, batch_first=True)).eval()
    block = MultiHeadSelfAttention.from_torch(mha, 10, mask_kind="sliding", window=3)
    assert block.mask_kind == "sliding" and block.window == 3
    x = torch.randn(2, 6, 8)
    expected, _ = mha(x, x, x, attn_mask=sliding_window_mask(6, 3))
    torch.testing.assert_close(block(x), expected, rtol=1e-5, atol=1e-6)
    _both_paths_agree(block, x)


# --- torch.compile --------------------------------------------------------------------


def _graph_breaks(module: nn.Module, *args) -> int:
    import torch._dynamo

    torch._dynamo.reset()
    return torch._dynamo.explain(module)(*args).graph_break_count


def test_tiny_lm_compiles_with_no_graph_break():
    model = TinyLM().eval()
    idx = torch.randint(64, (2, 12))
    assert _graph_breaks(model, idx) == 0


@pytest.mark.parametrize("kind, window", KINDS, ids=[k for k, _ in KINDS])
def test_the_fused_block_compiles_with_no_graph_break(kind, window):
    block = MultiHeadSelfAttention(8, 2, 10, mask_kind=kind, window=window).eval()
    assert _graph_breaks(block, torch.randn(2, 6, 8)) == 0


def test_tiny_lm_compiled_with_fullgraph_gives_the_eager_logits():
    model = TinyLM().eval()
    idx = torch.randint(64, (2, 12))
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(idx), model(idx))


def test_the_eager_range_check_still_names_a_bad_id():
    with pytest.raises(ValueError, match=r"\[0, 64\).*from 0 to 70.*vocab_size>=71"):
        TinyLM()(torch.tensor([[0, 70]]))


# --- light imports --------------------------------------------------------------------

# (torch itself imports plain tqdm; tqdm.auto is the notebook flavour, which pulls in IPython)
HEAVY = ("matplotlib", "seaborn", "pandas", "ipywidgets", "tqdm.auto", "IPython")


def test_importing_the_core_loads_no_plotting_or_widget_library():
    code = textwrap.dedent(
        f"""
        import sys
        import attention_lab
        from attention_lab import TinyLM, MultiHeadSelfAttention, train_tiny_lm
        loaded = [m for m in {HEAVY!r} if m in sys.modules]
        print(",".join(loaded))
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"import attention_lab loaded {result.stdout.strip()}"


def test_plotting_names_still_come_from_the_package_on_first_use():
    code = "import attention_lab as al, sys; al.plot_heads; print('matplotlib' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


def test_an_unknown_attribute_is_an_attribute_error_that_names_it():
    import attention_lab

    with pytest.raises(AttributeError, match="plot_haeds"):
        attention_lab.plot_haeds  # noqa: B018


# --- sizes ----------------------------------------------------------------------------


@pytest.mark.parametrize("integer", [np.int64, np.int32, np.uint8, int])
def test_numpy_integers_are_sizes(integer):
    block = MultiHeadSelfAttention(integer(8), integer(2), integer(10))
    assert block.d_head == 4 and type(block.d_model) is int
    x, _ = make_batch("previous", integer(3), integer(5), integer(7))
    assert x.shape == (3, 5)
    assert TinyLM(n_heads=np.int64(2)).config.n_heads == 2


@pytest.mark.parametrize("value", [8.0, True, "8"])
def test_floats_bools_and_strings_are_not_sizes(value):
    with pytest.raises(ValueError, match=f"d_model={value!r}"):
        MultiHeadSelfAttention(value, 2, 10)


# --- one config -----------------------------------------------------------------------


def test_tiny_lm_takes_a_config_or_its_fields():
    config = TinyLMConfig(n_heads=8, mask_kind="sliding", window=4)
    model = TinyLM(config)
    assert model.config == config
    assert model.attn.n_heads == 8 and model.attn.mask_kind == "sliding" and model.attn.window == 4
    assert TinyLM(n_heads=2).config == TinyLMConfig(n_heads=2)
    # a config and fields together: still works, deprecated (one way to configure a TinyLM)
    with pytest.warns(DeprecationWarning, match=r"TinyLM\(config.replace\(n_heads=2\)\)"):
        assert TinyLM(config, n_heads=2).config == config.replace(n_heads=2)


def test_a_config_checks_its_fields_when_made():
    with pytest.raises(ValueError, match="d_model=30 is not divisible by n_heads=4"):
        TinyLMConfig(d_model=30)
    with pytest.raises(ValueError, match="window=4 only applies to mask_kind='sliding'"):
        TinyLMConfig(window=4)
    with pytest.raises(TypeError, match="no field 'n_head'.*n_heads"):
        TinyLMConfig().replace(n_head=8)


def test_train_tiny_lm_splits_config_fields_from_training_options():
    model, history = train_tiny_lm(
        "previous", TinyLMConfig(d_model=16), n_heads=2, epochs=1, n_rows=64, progress=False
    )
    assert model.config == TinyLMConfig(d_model=16, n_heads=2)
    assert len(history.step_losses) == 2  # 64 rows / batch 32: the option reached train()


# --- notebooks ------------------------------------------------------------------------


def test_notebooks_are_stored_without_execution_timestamps():
    stamped = []
    for path in sorted((ROOT / "notebooks").rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        nb = json.loads(path.read_text(encoding="utf-8"))
        for i, cell in enumerate(nb["cells"]):
            if "execution" in cell.get("metadata", {}):
                stamped.append(f"{path.name} cell {i}")
    assert not stamped, f"cells with execution timestamps: {stamped[:5]} (+{len(stamped) - 5})"
