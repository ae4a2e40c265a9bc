"""Grouped-query and multi-query attention in ``MultiHeadSelfAttention`` (``n_kv_heads``, fused.py;
notebook 12_attention_in_todays_llms): today's block in the limit n_kv_heads = n_heads, an
independent multi-query attention, PyTorch's ``enable_gqa``, the grouping Llama uses (and the
tiling mistake that a test must tell from it), both paths, and the converters.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from attention_lab import MultiHeadSelfAttention, causal_mask, sliding_window_mask
from attention_lab.fused import repeat_kv
from tests.conftest import message

D, H, CONTEXT = 16, 4, 10


def todays_block(x: torch.Tensor, qkv: nn.Linear, out_proj: nn.Linear, n_heads: int):
    """The block's forward as it was before n_kv_heads (commit 1278c0f), written out."""
    B, T, D = x.shape
    q, k, v = qkv(x).split(D, dim=-1)  # 3 x (B, T, D)
    q, k, v = (t.view(B, T, n_heads, D // n_heads).transpose(1, 2) for t in (q, k, v))
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, d_head)
    return out_proj(ctx.transpose(1, 2).contiguous().view(B, T, D))  # (B, T, D)


def test_n_kv_heads_equal_to_n_heads_is_todays_block_bitwise_from_the_same_seed():
    torch.manual_seed(3)
    block = MultiHeadSelfAttention(D, H, CONTEXT, n_kv_heads=H).eval()
    torch.manual_seed(3)  # today's block drew Linear(D, 3D), then Linear(D, D)
    qkv, out_proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
    assert list(block.state_dict()) == [
        "qkv.weight",
        "qkv.bias",
        "out_proj.weight",
        "out_proj.bias",
    ]
    assert torch.equal(block.qkv.weight, qkv.weight) and torch.equal(block.qkv.bias, qkv.bias)
    assert torch.equal(block.out_proj.weight, out_proj.weight)
    default = MultiHeadSelfAttention(D, H, CONTEXT).eval()  # None means n_heads
    default.load_state_dict(block.state_dict())  # strict: the same keys and shapes
    x = torch.randn(3, 7, D)
    with torch.no_grad():
        expected = todays_block(x, qkv, out_proj, H)
        assert torch.equal(block(x), expected)
        assert torch.equal(default(x), expected)
    assert default.extra_repr() == (
        f"d_model={D}, n_heads={H}, d_head={D // H}, context_length={CONTEXT}, mask_kind='causal'"
    )


def mqa_reference(x: torch.Tensor, block: MultiHeadSelfAttention) -> torch.Tensor:
    """Multi-query attention written out: H query heads, one key and one value (B, T, d_head)
    that every head shares, each head's scores and softmax by hand."""
    B, T, _ = x.shape
    d = block.d_head
    w, b = block.qkv.weight, block.qkv.bias
    q = x @ w[:D].T + b[:D]  # (B, T, D)
    k = x @ w[D : D + d].T + b[D : D + d]  # (B, T, d_head): the one key head
    v = x @ w[D + d :].T + b[D + d :]  # (B, T, d_head): the one value head
    heads = []
    for h in range(block.n_heads):
        scores = q[..., h * d : (h + 1) * d] @ k.transpose(1, 2) / math.sqrt(d)  # (B, T, T)
        scores = scores.masked_fill(causal_mask(T), float("-inf"))
        heads.append(torch.softmax(scores, dim=-1) @ v)  # (B, T, d_head)
    return block.out_proj(torch.cat(heads, dim=-1))  # (B, T, D)


@pytest.mark.parametrize("return_weights", [False, True], ids=["sdpa", "explicit"])
def test_one_kv_head_is_multi_query_attention_written_independently(return_weights):
    block = MultiHeadSelfAttention(D, H, CONTEXT, n_kv_heads=1).eval()
    assert block.qkv.weight.shape == (D + 2 * (D // H), D)  # Q, then one K head, one V head
    x = torch.randn(2, 8, D)
    with torch.no_grad():
        out = block(x, return_weights=True)[0] if return_weights else block(x)
        torch.testing.assert_close(out, mqa_reference(x, block), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
@pytest.mark.parametrize("kind, window", [("causal", None), ("sliding", 3)])
def test_the_block_agrees_with_pytorchs_enable_gqa(n_kv_heads, kind, window):
    block = MultiHeadSelfAttention(
        D, H, CONTEXT, n_kv_heads=n_kv_heads, mask_kind=kind, window=window
    )
    block.eval()
    x = torch.randn(2, 9, D)
    with torch.no_grad():
        q, k, v = block.project(x)  # (B, H, T, d), (B, n_kv, T, d), (B, n_kv, T, d)
        assert k.shape == v.shape == (2, n_kv_heads, 9, D // H)
        allowed = ~block.mask[:9, :9]  # SDPA's convention: True = may attend
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=True)
        expected = block.out_proj(ctx.transpose(1, 2).reshape(2, 9, D))  # (B, T, D)
        explicit, weights = block(x, return_weights=True)
        torch.testing.assert_close(explicit, expected, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(block(x), expected, rtol=1e-5, atol=1e-6)  # both paths
        assert weights.shape == (2, H, 9, 9)
        assert (weights[..., block.mask[:9, :9]] == 0).all()


def test_query_heads_share_kv_heads_in_groups_as_in_llama():
    x = torch.arange(2 * 3 * 5 * 2, dtype=torch.float32).view(2, 3, 5, 2)  # (B, n_kv=3, T, d)
    out = repeat_kv(x, 4)  # (B, 12, T, d)
    assert out.shape == (2, 12, 5, 2)
    for h in range(12):
        assert torch.equal(out[:, h], x[:, h // 4])  # query heads 0-3 -> kv head 0, ...
    assert torch.equal(out, x.repeat_interleave(4, dim=1))
    assert repeat_kv(x, 1) is x


def tiled_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """The typical mistake: tiling, so query head h gets kv head h % n_kv."""
    return x.repeat(1, n_rep, 1, 1)


def test_tiling_instead_of_grouping_gives_another_answer_and_the_test_sees_it(monkeypatch):
    torch.manual_seed(0)
    block = MultiHeadSelfAttention(D, H, CONTEXT, n_kv_heads=2).eval()
    x = torch.randn(2, 6, D)
    with torch.no_grad():
        right, _ = block(x, return_weights=True)
        monkeypatch.setattr("attention_lab.fused.repeat_kv", tiled_kv)
        wrong, _ = block(x, return_weights=True)
    assert (wrong - right).abs().max() > 1e-2
    with pytest.raises(AssertionError):  # the check the tests above make, on the tiled block
        torch.testing.assert_close(wrong, block(x), rtol=1e-5, atol=1e-6)


def test_a_gqa_block_keeps_every_promise_of_the_block():
    """Causal on both paths, gradients everywhere, float64, a sliding window's zeros."""
    block = MultiHeadSelfAttention(D, H, CONTEXT, n_kv_heads=2, mask_kind="sliding", window=3)
    x = torch.randn(2, 8, D)
    changed = x.clone()
    changed[:, 5:] += 1.0
    for rw in (False, True):
        before = block(x, return_weights=rw)
        after = block(changed, return_weights=rw)
        before, after = (before[0], after[0]) if rw else (before, after)
        torch.testing.assert_close(after[:, :5], before[:, :5], rtol=0, atol=1e-6)
        assert not torch.allclose(after[:, 5], before[:, 5])
    block(x).square().sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in block.parameters())
    _, w = block.double()(x.double(), return_weights=True)
    assert w.dtype == torch.float64
    assert (w[..., sliding_window_mask(8, 3)] == 0).all()


def test_a_bad_n_kv_heads_is_refused_with_the_divisors():
    assert message(ValueError, lambda: MultiHeadSelfAttention(D, 4, CONTEXT, n_kv_heads=3)) == (
        "n_heads=4 is not divisible by n_kv_heads=3; each key/value head serves a group of "
        "n_heads // n_kv_heads query heads, so pick one of 1, 2, 4 (1: multi-query attention, "
        "4: plain multi-head)"
    )
    with pytest.raises(ValueError, match="n_heads=4 is not divisible by n_kv_heads=8"):
        MultiHeadSelfAttention(D, 4, CONTEXT, n_kv_heads=8)
    with pytest.raises(ValueError, match="n_kv_heads=0 must be a whole number >= 1"):
        MultiHeadSelfAttention(D, 4, CONTEXT, n_kv_heads=0)


def test_the_printed_block_shows_its_kv_heads():
    block = MultiHeadSelfAttention(D, H, CONTEXT, n_kv_heads=1)
    assert block.extra_repr().endswith("mask_kind='causal', n_kv_heads=1")


# --- the converters --------------------------------------------------------------------


@pytest.mark.parametrize("n_kv_heads", [1, 2])
@pytest.mark.parametrize("bias", [True, False])
def test_to_torch_and_to_separate_repeat_the_kv_rows_and_give_the_same_function(n_kv_heads, bias):
    block = MultiHeadSelfAttention(
        D, H, CONTEXT, n_kv_heads=n_kv_heads, qkv_bias=bias, out_bias=bias
    )
    block.eval()
    if bias:
        with torch.no_grad():
            block.qkv.bias.normal_()
    x = torch.randn(2, 7, D)
    with torch.no_grad():
        expected = block(x)
        mha = block.to_torch().eval()
        got, _ = mha(x, x, x, attn_mask=causal_mask(7))
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
        separate = block.to_separate().eval()
        torch.testing.assert_close(separate(x), expected, rtol=1e-5, atol=1e-6)
    # W_k of the copy: kv head j's rows, once for each query head of its group
    d, g = D // H, H // n_kv_heads
    for h in range(H):
        j = h // g
        rows = block.qkv.weight[D + j * d : D + (j + 1) * d]
        assert torch.equal(separate.W_k.weight[h * d : (h + 1) * d], rows)
    # and back: the copies have H key/value heads
    again = MultiHeadSelfAttention.from_separate(separate)
    assert again.n_kv_heads == H
    torch.testing.assert_close(again.eval()(x), expected, rtol=1e-5, atol=1e-6)


def test_a_block_with_rope_refuses_to_convert_and_says_why():
    block = MultiHeadSelfAttention(D, H, CONTEXT, rope=True)
    assert message(ValueError, block.to_torch) == (
        "to_torch() cannot convert a block with rope=True: nn.MultiheadAttention has no "
        "rotary positions, so no weights give the same function; keep this block, or build "
        "one with rope=False"
    )
    with pytest.raises(ValueError, match="to_separate.*MultiHeadAttention has no rotary"):
        block.to_separate()
