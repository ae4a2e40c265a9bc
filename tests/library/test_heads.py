"""One head: ``SingleHeadAttention`` (no mask) and ``CausalAttention`` (notebooks 02 and 05)."""

from __future__ import annotations

import pytest
import torch

from attention_lab import CausalAttention, SingleHeadAttention, attention, causal_mask
from tests.conftest import CONTEXT, B, D, T, make_module


@pytest.mark.parametrize("name", ["single", "causal"])
@pytest.mark.parametrize("d_out", [3, 8])
def test_a_head_maps_b_t_d_in_to_b_t_d_out_with_b_t_t_weights(name, d_out):
    module = (
        SingleHeadAttention(D, d_out) if name == "single" else CausalAttention(D, d_out, CONTEXT)
    )
    x = torch.randn(B, T, D)  # (B, T, d_in)
    out = module(x)
    out2, weights = module(x, return_weights=True)
    assert out.shape == (B, T, d_out)
    assert weights.shape == (B, T, T)
    torch.testing.assert_close(out, out2)


def test_single_head_is_attention_over_its_own_projections():
    module = make_module("single")
    x = torch.randn(B, T, D)  # (B, T, D)
    out, weights = module(x, return_weights=True)
    expected, expected_w = attention(module.W_q(x), module.W_k(x), module.W_v(x))
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(weights, expected_w)


def test_causal_head_is_masked_attention_over_its_own_projections():
    module = make_module("causal")
    x = torch.randn(B, T, D)  # (B, T, D)
    out, weights = module(x, return_weights=True)
    mask = causal_mask(T)
    expected, expected_w = attention(module.W_q(x), module.W_k(x), module.W_v(x), mask)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(weights, expected_w)


# Causality, and that its test fails on SingleHeadAttention: test_module_contract.py.


def test_single_head_attention_lets_the_last_token_change_the_first_output():
    module = make_module("single")
    x = torch.randn(B, T, D)  # (B, T, D)
    changed = x.clone()
    changed[:, -1] += 1.0  # touch only the last token
    assert not torch.allclose(module(changed)[:, 0], module(x)[:, 0])


def test_causal_weights_rows_sum_to_one_and_are_zero_above_the_diagonal():
    module = make_module("causal")
    _, weights = module(torch.randn(B, T, D), return_weights=True)  # (B, T, T)
    assert (weights >= 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, T))
    assert (weights[:, causal_mask(T)] == 0).all()
    # The first position can only look at itself.
    torch.testing.assert_close(weights[:, 0, 0], torch.ones(B))


def test_single_head_weights_rows_sum_to_one_and_look_everywhere():
    module = make_module("single")
    _, weights = module(torch.randn(B, T, D), return_weights=True)  # (B, T, T)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, T))
    assert (weights > 0).all()


@pytest.mark.parametrize("name", ["single", "causal"])
def test_every_parameter_of_a_head_gets_a_gradient(name):
    module = make_module(name).train()
    module(torch.randn(B, T, D)).square().sum().backward()
    for pname, param in module.named_parameters():
        assert param.grad is not None, pname
        assert param.grad.abs().sum() > 0, pname


def test_causal_head_dropout_is_on_in_train_mode_and_rescales_survivors():
    p = 0.5
    module = CausalAttention(T, T, CONTEXT, dropout=p).train()
    with torch.no_grad():  # W_v = identity and x = identity: the output IS the weights
        module.W_v.weight.copy_(torch.eye(T))
    x = torch.eye(T).expand(4, T, T).contiguous()  # (4, T, d_in=T)
    out, weights = module(x, return_weights=True)  # (4, T, T): dropped, (4, T, T): before
    kept = out != 0
    assert 0 < kept.sum() < (weights > 0).sum()
    torch.testing.assert_close(out[kept], weights[kept] / (1 - p))
    module.eval()
    torch.testing.assert_close(module(x), weights)


def test_causal_head_output_at_t_matches_running_on_the_prefix():
    module = make_module("causal")
    x = torch.randn(B, T, D)  # (B, T, D)
    full = module(x)
    for t in range(1, T + 1):
        torch.testing.assert_close(module(x[:, :t]), full[:, :t])


# --- bias flags -----------------------------------------------------------------------


@pytest.mark.parametrize("qkv_bias", [False, True])
def test_single_head_bias_flag_switches_all_three_projections(qkv_bias):
    head = SingleHeadAttention(4, 6, qkv_bias=qkv_bias)
    biased = {n.removesuffix(".bias") for n, _ in head.named_parameters() if n.endswith("bias")}
    assert biased == ({"W_q", "W_k", "W_v"} if qkv_bias else set())
    assert not any(n.endswith("bias") for n, _ in SingleHeadAttention(4, 6).named_parameters())
