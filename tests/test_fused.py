"""``MultiHeadSelfAttention``: the fused block, its two paths, and its weight conversions
(notebook 07)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from conftest import CONTEXT, B, D, H, T, assert_future_does_not_leak, make_module, run

from attention_lab import (
    MultiHeadAttention,
    MultiHeadSelfAttention,
    causal_mask,
    sliding_window_mask,
)

KINDS = ["fused", "fused_sliding", "fused_none"]


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


@pytest.mark.parametrize("name", ["fused", "fused_sliding"])
@pytest.mark.parametrize("return_weights", [False, True], ids=["sdpa_path", "explicit_path"])
def test_future_tokens_do_not_change_earlier_outputs_of_the_fused_block(name, return_weights):
    module = make_module(name)
    x = torch.randn(B, T, D)  # (B, T, D)
    for t in range(T - 1):
        assert_future_does_not_leak(lambda inp: run(module, inp, return_weights), x, t)


@pytest.mark.parametrize("return_weights", [False, True], ids=["sdpa_path", "explicit_path"])
def test_the_unmasked_block_lets_the_future_change_the_past(return_weights):
    module = make_module("fused_none")
    x = torch.randn(B, T, D)  # (B, T, D)
    with pytest.raises(AssertionError):
        assert_future_does_not_leak(lambda inp: run(module, inp, return_weights), x, t=2)


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


def test_from_separate_computes_the_same_function_as_multihead_attention():
    separate = MultiHeadAttention(D, H, CONTEXT).eval()
    fused = MultiHeadSelfAttention.from_separate(separate).eval()
    x = torch.randn(B, T, D)  # (B, T, D)
    out_sep, w_sep = separate(x, return_weights=True)
    out_fused, w_fused = fused(x, return_weights=True)
    torch.testing.assert_close(out_fused, out_sep)
    torch.testing.assert_close(fused(x), out_sep)  # the SDPA path too
    torch.testing.assert_close(w_fused, w_sep)


def test_from_separate_keeps_qkv_biases():
    separate = MultiHeadAttention(D, H, CONTEXT, qkv_bias=True).eval()
    with torch.no_grad():
        for layer in (separate.W_q, separate.W_k, separate.W_v):
            layer.bias.normal_()
    fused = MultiHeadSelfAttention.from_separate(separate).eval()
    x = torch.randn(B, T, D)  # (B, T, D)
    torch.testing.assert_close(fused(x), separate(x))


@pytest.mark.parametrize("bias", [True, False])
def test_to_separate_round_trips_the_weights(bias):
    fused = MultiHeadSelfAttention(D, H, CONTEXT, qkv_bias=bias, out_bias=bias).eval()
    separate = fused.to_separate().eval()
    x = torch.randn(B, T, D)  # (B, T, D)
    torch.testing.assert_close(separate(x), fused(x))
    back = MultiHeadSelfAttention.from_separate(separate)
    torch.testing.assert_close(back.qkv.weight, fused.qkv.weight, rtol=0, atol=0)
    torch.testing.assert_close(back.out_proj.weight, fused.out_proj.weight, rtol=0, atol=0)
    if bias:
        torch.testing.assert_close(back.qkv.bias, fused.qkv.bias, rtol=0, atol=0)
        torch.testing.assert_close(back.out_proj.bias, fused.out_proj.bias, rtol=0, atol=0)
    torch.testing.assert_close(back.eval()(x), fused(x))


def test_to_separate_refuses_a_block_that_is_not_causal():
    with pytest.raises(ValueError, match="mask_kind='sliding'"):
        make_module("fused_sliding").to_separate()


def _torch_mha(bias: bool = True, batch_first: bool = True) -> nn.MultiheadAttention:
    mha = nn.MultiheadAttention(D, H, bias=bias, batch_first=batch_first).eval()
    if bias:  # PyTorch starts its biases at zero: make them count
        with torch.no_grad():
            mha.in_proj_bias.normal_()
            mha.out_proj.bias.normal_()
    return mha


@pytest.mark.parametrize("bias", [True, False])
def test_from_torch_matches_torch_multihead_attention(bias):
    reference = _torch_mha(bias)
    block = MultiHeadSelfAttention.from_torch(reference, context_length=CONTEXT).eval()
    x = torch.randn(B, T, D)  # (B, T, D)
    # A boolean attn_mask in nn.MultiheadAttention uses our convention: True = blocked.
    expected, expected_w = reference(
        x, x, x, attn_mask=causal_mask(T), need_weights=True, average_attn_weights=False
    )  # (B, T, D), (B, H, T, T)
    out, weights = block(x, return_weights=True)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(block(x), expected)
    torch.testing.assert_close(weights, expected_w)
    _, averaged = reference(x, x, x, attn_mask=causal_mask(T), need_weights=True)  # (B, T, T)
    torch.testing.assert_close(weights.mean(dim=1), averaged)


def test_from_torch_takes_a_sequence_first_module_too():
    reference = _torch_mha(batch_first=False)
    block = MultiHeadSelfAttention.from_torch(reference, context_length=CONTEXT).eval()
    x = torch.randn(B, T, D)  # (B, T, D)
    xt = x.transpose(0, 1)  # (T, B, D): what a batch_first=False module takes
    expected, _ = reference(xt, xt, xt, attn_mask=causal_mask(T))
    torch.testing.assert_close(block(x), expected.transpose(0, 1))


@pytest.mark.parametrize("bias", [True, False])
def test_to_torch_gives_a_batch_first_module_with_the_same_function(bias):
    block = MultiHeadSelfAttention(D, H, CONTEXT, qkv_bias=bias, out_bias=bias).eval()
    if bias:
        with torch.no_grad():
            block.qkv.bias.normal_()
    reference = block.to_torch().eval()
    assert reference.batch_first and reference.num_heads == H
    x = torch.randn(B, T, D)  # (B, T, D)
    expected, expected_w = reference(
        x, x, x, attn_mask=causal_mask(T), need_weights=True, average_attn_weights=False
    )
    out, weights = block(x, return_weights=True)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(weights, expected_w)
    # And back again: the same weights, exactly.
    again = MultiHeadSelfAttention.from_torch(reference, CONTEXT)
    for name, param in block.named_parameters():
        torch.testing.assert_close(dict(again.named_parameters())[name], param, rtol=0, atol=0)


def test_from_torch_refuses_a_module_it_cannot_represent():
    with pytest.raises(ValueError, match="add_bias_kv"):
        MultiHeadSelfAttention.from_torch(nn.MultiheadAttention(D, H, add_bias_kv=True), CONTEXT)
    with pytest.raises(TypeError, match="nn.MultiheadAttention"):
        MultiHeadSelfAttention.from_torch(nn.Linear(D, D), CONTEXT)


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


@pytest.mark.parametrize("training", [True, False])
def test_conversions_keep_the_train_or_eval_mode(training):
    """A converted copy must drop (or not drop) weights exactly when the original does."""
    # qkv_bias=True: nn.MultiheadAttention has one bias flag, so both projections need one
    separate = MultiHeadAttention(D, H, CONTEXT, dropout=0.1, qkv_bias=True).train(training)
    fused = MultiHeadSelfAttention.from_separate(separate)
    assert fused.training is training
    assert fused.to_separate().training is training
    reference = fused.to_torch()
    assert reference.training is training
    assert MultiHeadSelfAttention.from_torch(reference, CONTEXT).training is training


def test_a_block_from_an_eval_mode_torch_module_with_dropout_matches_it():
    reference = nn.MultiheadAttention(D, H, dropout=0.5, batch_first=True).eval()
    block = MultiHeadSelfAttention.from_torch(reference, CONTEXT)
    x = torch.randn(B, T, D)  # (B, T, D)
    expected, _ = reference(x, x, x, attn_mask=causal_mask(T))
    torch.testing.assert_close(block(x), expected)
