"""``MultiHeadSelfAttention``: the fused block and its two paths (notebook 07).

Its weight conversions (from_separate, to_torch, ...): test_convert.py; its causality and
what it shares with every module: test_module_contract.py.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attention_lab import MultiHeadSelfAttention, build_mask, causal_mask, sliding_window_mask
from tests.conftest import CONTEXT, B, D, H, T, graph_break_count, make_module, run

KINDS = ["fused", "fused_sliding", "fused_none"]
# (mask_kind, window) of each kind
KIND_WINDOWS = [("causal", None), ("sliding", 3), ("none", None)]


@pytest.mark.parametrize("name", KINDS)
def test_fused_block_maps_b_t_d_to_b_t_d_with_b_h_t_t_weights(name):
    module = make_module(name, d_model=12, n_heads=3)
    x = torch.randn(B, T, 12)  # (B, T, D)
    out = module(x)
    out2, weights = module(x, return_weights=True)
    assert out.shape == out2.shape == (B, T, 12)
    assert weights.shape == (B, 3, T, T)


@pytest.mark.parametrize("name", KINDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_explicit_path_matches_the_sdpa_path(name, dtype):
    module = make_module(name).to(dtype)
    x = torch.randn(B, T, D, dtype=dtype)  # (B, T, D)
    fast = module(x)  # F.scaled_dot_product_attention
    explicit, _ = module(x, return_weights=True)  # functional.attention
    assert fast.dtype == explicit.dtype == dtype
    torch.testing.assert_close(fast, explicit)


# Causality of both paths of every mask kind (and that "none" lets the future leak):
# test_module_contract.py (CAUSAL_CASES, NON_CAUSAL_CASES).


def test_sliding_block_forgets_tokens_older_than_the_window():
    """With window=3 and no layers stacked, the output at t reads only x[t-2..t]."""
    module = make_module("fused_sliding")  # window = 3
    x = torch.randn(B, T, D)  # (B, T, D)
    changed = x.clone()
    changed[:, 0] += 5.0  # only the first token changes
    for return_weights in (False, True):
        before, after = run(module, x, return_weights), run(module, changed, return_weights)
        assert not torch.allclose(after[:, 2], before[:, 2])  # 0 is inside 2's window
        torch.testing.assert_close(after[:, 3:], before[:, 3:], rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", KINDS)
def test_fused_weights_are_rows_summing_to_one_zero_where_masked(name):
    module = make_module(name)
    _, weights = module(torch.randn(B, T, D), return_weights=True)  # (B, H, T, T)
    mask = module.mask[:T, :T]
    assert (weights >= 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, T))
    assert (weights[..., mask] == 0).all()
    assert (weights[..., ~mask] > 0).all()


def test_sliding_weights_are_zero_outside_the_window():
    module = MultiHeadSelfAttention(D, H, 12, mask_kind="sliding", window=8).eval()
    _, weights = module(torch.randn(B, 12, D), return_weights=True)  # (B, H, 12, 12)
    assert torch.equal(module.mask, sliding_window_mask(12, 8))
    outside = sliding_window_mask(12, 8) & ~causal_mask(12)  # too old, not future
    assert outside.sum() == 10
    assert (weights[..., outside] == 0).all()
    assert (weights[..., causal_mask(12)] == 0).all()


@pytest.mark.parametrize("return_weights", [False, True], ids=["sdpa_path", "explicit_path"])
def test_fused_dropout_rescales_the_surviving_weights(return_weights):
    p = 0.5
    module = MultiHeadSelfAttention(
        T, 1, CONTEXT, dropout=p, qkv_bias=False, out_bias=False
    ).train()
    with torch.no_grad():  # V and out_proj = identity, x = identity: output = dropped weights
        module.qkv.weight[2 * T :].copy_(torch.eye(T))
        module.out_proj.weight.copy_(torch.eye(T))
    x = torch.eye(T).expand(8, T, T).contiguous()  # (8, T, D=T)
    out = run(module, x, return_weights)  # (8, T, T)
    _, weights = module.eval()(x, return_weights=True)  # (8, 1, T, T) before dropout
    kept = out != 0
    assert 0 < kept.sum() < (weights > 0).sum()
    torch.testing.assert_close(out[kept], weights[:, 0][kept] / (1 - p))


@pytest.mark.parametrize("return_weights", [False, True], ids=["sdpa_path", "explicit_path"])
def test_every_parameter_of_the_fused_block_gets_a_gradient(return_weights):
    module = make_module("fused").train()
    run(module, torch.randn(B, T, D), return_weights).square().sum().backward()
    assert {n for n, _ in module.named_parameters()} == {
        "qkv.weight",
        "qkv.bias",
        "out_proj.weight",
        "out_proj.bias",
    }
    for name, param in module.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name


def test_fused_block_has_two_linear_layers_and_the_seeds_parameter_count():
    module = MultiHeadSelfAttention(32, 4, 12)
    assert module.qkv.weight.shape == (96, 32)
    assert module.out_proj.weight.shape == (32, 32)
    assert sum(p.numel() for p in module.parameters()) == 4 * 32 * 32 + 4 * 32


# --- the mask is configuration, not checkpoint state ----------------------------------


def _both_paths_agree(block: MultiHeadSelfAttention, x: torch.Tensor) -> None:
    explicit, _ = block(x, return_weights=True)
    torch.testing.assert_close(block(x), explicit, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("source", KIND_WINDOWS, ids=[k for k, _ in KIND_WINDOWS])
@pytest.mark.parametrize("target", KIND_WINDOWS, ids=[k for k, _ in KIND_WINDOWS])
def test_state_loads_across_mask_kinds_and_both_paths_keep_the_loading_blocks_mask(source, target):
    saved = MultiHeadSelfAttention(8, 2, 10, mask_kind=source[0], window=source[1]).state_dict()
    block = MultiHeadSelfAttention(8, 2, 10, mask_kind=target[0], window=target[1]).eval()
    result = block.load_state_dict(saved)  # strict: raises on a missing or unexpected key
    assert not result.missing_keys and not result.unexpected_keys
    assert torch.equal(block.mask, _mask(target[0], 10, target[1]))
    _both_paths_agree(block, torch.randn(2, 6, 8))


def _mask(kind, T, window):
    return build_mask(kind, T, window)


# --- torch.compile, the SDPA call and the printed block -------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("kind, window", KIND_WINDOWS, ids=[k for k, _ in KIND_WINDOWS])
def test_the_fused_block_compiles_with_no_graph_break(kind, window):
    block = MultiHeadSelfAttention(8, 2, 10, mask_kind=kind, window=window).eval()
    assert graph_break_count(block, torch.randn(2, 6, 8)) == 0


@pytest.mark.parametrize(
    "kind, window, shown",
    [("causal", None, "mask_kind='causal'"), ("sliding", 3, "mask_kind='sliding', window=3")],
)
def test_the_printed_block_shows_its_sizes_and_its_mask(kind, window, shown):
    block = MultiHeadSelfAttention(D, H, CONTEXT, mask_kind=kind, window=window)
    expected = f"d_model={D}, n_heads={H}, d_head={D // H}, context_length={CONTEXT}, {shown}"
    assert block.extra_repr() == expected
    assert f"\n  {expected}\n" in repr(block)


def test_a_causal_block_asks_sdpa_for_its_causal_kernel_and_others_pass_their_mask(monkeypatch):
    """``is_causal=True`` lets SDPA skip the blocked half; other kinds must pass ~mask."""
    calls = []
    sdpa = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    x = torch.randn(B, T, D)  # (B, T, D)
    MultiHeadSelfAttention(D, H, CONTEXT).eval()(x)
    sliding = MultiHeadSelfAttention(D, H, CONTEXT, mask_kind="sliding", window=2).eval()
    sliding(x)
    assert calls[0].get("is_causal") is True and calls[0].get("attn_mask") is None
    allowed = ~sliding_window_mask(T, 2)  # (T, T), SDPA's convention: True = may attend
    assert not calls[1].get("is_causal") and torch.equal(calls[1]["attn_mask"], allowed)
