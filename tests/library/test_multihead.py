"""``MultiHeadAttention`` (separate W_q, W_k, W_v, W_o) and the head split (notebook 06)."""

from __future__ import annotations

import pytest
import torch

from attention_lab import (
    MultiHeadAttention,
    attention,
    causal_mask,
    merge_heads,
    split_heads,
)
from tests.conftest import CONTEXT, B, D, H, T, make_module


def test_split_heads_gives_head_h_features_h_times_d_head_onwards():
    x = torch.randn(B, T, 12)  # (B, T, D)
    heads = split_heads(x, 3)  # (B, H, T, d_head)
    assert heads.shape == (B, 3, T, 4)
    for h in range(3):
        assert torch.equal(heads[:, h], x[..., 4 * h : 4 * (h + 1)])


@pytest.mark.parametrize("n_heads", [1, 2, 3, 6, 12])
def test_merge_heads_undoes_split_heads(n_heads):
    x = torch.randn(B, T, 12)  # (B, T, D)
    assert torch.equal(merge_heads(split_heads(x, n_heads)), x)
    y = torch.randn(B, n_heads, T, 12 // n_heads)  # (B, H, T, d_head)
    assert torch.equal(split_heads(merge_heads(y), n_heads), y)


def test_multihead_maps_b_t_d_to_b_t_d_with_b_h_t_t_weights():
    module = make_module("multihead", d_model=12, n_heads=3)
    x = torch.randn(B, T, 12)  # (B, T, D)
    out = module(x)
    out2, weights = module(x, return_weights=True)
    assert out.shape == (B, T, 12)
    assert weights.shape == (B, 3, T, T)
    assert module.d_head == 4
    torch.testing.assert_close(out, out2)


# Causality: test_module_contract.py (CAUSAL_CASES).


def test_multihead_weights_rows_sum_to_one_and_are_zero_above_the_diagonal():
    module = make_module("multihead")
    _, weights = module(torch.randn(B, T, D), return_weights=True)  # (B, H, T, T)
    assert (weights >= 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, T))
    assert (weights[..., causal_mask(T)] == 0).all()


def test_multihead_is_a_loop_over_heads_then_w_o():
    """The batched reshape computes what H separate heads on feature slices compute."""
    module = make_module("multihead", d_model=12, n_heads=3)
    x = torch.randn(B, T, 12)  # (B, T, D)
    out, weights = module(x, return_weights=True)
    q, k, v = module.W_q(x), module.W_k(x), module.W_v(x)  # 3 x (B, T, D)
    contexts = []
    for h in range(3):
        s = slice(4 * h, 4 * (h + 1))
        ctx_h, w_h = attention(q[..., s], k[..., s], v[..., s], causal_mask(T))  # (B, T, 4)
        torch.testing.assert_close(weights[:, h], w_h)
        contexts.append(ctx_h)
    torch.testing.assert_close(out, module.W_o(torch.cat(contexts, dim=-1)))


def _identity_w_o(module: MultiHeadAttention) -> MultiHeadAttention:
    """W_o = identity with zero bias: the output is the merged per-head context."""
    with torch.no_grad():
        module.W_o.weight.copy_(torch.eye(module.d_model))
        module.W_o.bias.zero_()
    return module


@pytest.mark.parametrize("projection", ["W_q", "W_k", "W_v"])
def test_head_h_context_depends_only_on_its_own_slice_of_features(projection):
    module = _identity_w_o(make_module("multihead", d_model=12, n_heads=3))
    d_head = module.d_head
    x = torch.randn(B, T, 12)  # (B, T, D)
    before = split_heads(module(x), 3)  # (B, H, T, d_head): each head's context
    for other in range(3):
        perturbed = _identity_w_o(make_module("multihead", d_model=12, n_heads=3))
        perturbed.load_state_dict(module.state_dict())
        rows = slice(other * d_head, (other + 1) * d_head)
        with torch.no_grad():  # change only the features head `other` is made of
            getattr(perturbed, projection).weight[rows] += torch.randn(d_head, 12)
        after = split_heads(perturbed(x), 3)  # (B, H, T, d_head)
        for h in range(3):
            if h == other:
                assert not torch.allclose(after[:, h], before[:, h]), "the change did nothing"
            else:
                torch.testing.assert_close(after[:, h], before[:, h], rtol=0, atol=0)


def test_perturbing_one_heads_qkv_slice_leaves_the_other_heads_context_unchanged():
    """The same property on the bare split -> attend -> merge, with the features perturbed."""
    n_heads, d_head = 4, 3
    q, k, v = torch.randn(3, B, T, n_heads * d_head).unbind(0)  # 3 x (B, T, D)

    def contexts(q, k, v):
        heads = [split_heads(t, n_heads) for t in (q, k, v)]  # 3 x (B, H, T, d_head)
        ctx, _ = attention(*heads, causal_mask(T))  # (B, H, T, d_head)
        return ctx

    base = contexts(q, k, v)
    for other in range(n_heads):
        s = slice(other * d_head, (other + 1) * d_head)
        q2, k2, v2 = q.clone(), k.clone(), v.clone()
        for t in (q2, k2, v2):
            t[..., s] += torch.randn_like(t[..., s])
        ctx = contexts(q2, k2, v2)
        keep = [h for h in range(n_heads) if h != other]
        assert torch.equal(ctx[:, keep], base[:, keep])
        assert not torch.allclose(ctx[:, other], base[:, other])


def test_multihead_with_one_head_and_identity_w_o_is_causal_attention():
    mha = _identity_w_o(make_module("multihead", n_heads=1))
    head = make_module("causal")
    with torch.no_grad():
        for name in ("W_q", "W_k", "W_v"):
            getattr(head, name).weight.copy_(getattr(mha, name).weight)
    x = torch.randn(B, T, D)  # (B, T, D)
    out_mha, w_mha = mha(x, return_weights=True)
    out_head, w_head = head(x, return_weights=True)
    torch.testing.assert_close(out_mha, out_head)
    torch.testing.assert_close(w_mha[:, 0], w_head)


def test_every_parameter_of_multihead_gets_a_gradient():
    module = MultiHeadAttention(D, H, CONTEXT, qkv_bias=True).train()
    module(torch.randn(B, T, D)).square().sum().backward()
    names = {n for n, _ in module.named_parameters()}
    assert {"W_q.bias", "W_k.bias", "W_v.bias", "W_o.bias"} <= names
    for name, param in module.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name


def test_multihead_dropout_is_on_in_train_mode_and_rescales_survivors():
    p = 0.25
    module = _identity_w_o(MultiHeadAttention(T, 1, CONTEXT, dropout=p)).train()
    with torch.no_grad():  # W_v = identity, x = identity: the output IS the dropped weights
        module.W_v.weight.copy_(torch.eye(T))
    x = torch.eye(T).expand(8, T, T).contiguous()  # (8, T, D=T)
    out, weights = module(x, return_weights=True)  # (8, T, T), (8, 1, T, T)
    kept = out != 0
    assert 0 < kept.sum() < (weights > 0).sum()
    torch.testing.assert_close(out[kept], weights[:, 0][kept] / (1 - p))
    assert not torch.allclose(out, module.eval()(x))


def test_multihead_runs_any_length_up_to_context_length():
    module = make_module("multihead")
    x = torch.randn(B, CONTEXT, D)  # (B, context_length, D)
    full = module(x)
    for t in (1, 3, CONTEXT):
        torch.testing.assert_close(module(x[:, :t]), full[:, :t])
