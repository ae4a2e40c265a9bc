"""Rotary positions (rope.py, and ``MultiHeadSelfAttention(rope=True)``; notebook
12_attention_in_todays_llms): the rotate-half layout equals RoFormer's interleaved one under a
permutation of the q and k rows; the scores depend only on the offset between positions (a
property test); v is never rotated; an odd d_head is refused.
"""

from __future__ import annotations

import math
import os

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_lab import MultiHeadSelfAttention, causal_mask
from attention_lab.rope import apply_rope, rope_cos_sin, rotate_half
from tests.conftest import message

EXPLORE = bool(os.environ.get("HYPOTHESIS_EXPLORE"))
PROPERTY = settings(max_examples=250 if EXPLORE else 25, deadline=None, derandomize=not EXPLORE)


def rope_interleaved(x: torch.Tensor, positions: torch.Tensor, base: float = 10_000.0):
    """RoFormer's layout, written from the paper: features (2i, 2i + 1) form pair i and turn
    by positions * base^(-2i/d). x (..., T, d)."""
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)  # (d/2,)
    angle = positions.to(x.dtype)[:, None] * theta  # (T, d/2)
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., T, d/2) each
    out = torch.empty_like(x)
    out[..., 0::2] = even * angle.cos() - odd * angle.sin()
    out[..., 1::2] = even * angle.sin() + odd * angle.cos()
    return out


def test_rotate_half_pairs_feature_i_with_feature_i_plus_half():
    x = torch.arange(6.0)
    assert rotate_half(x).tolist() == [-3.0, -4.0, -5.0, 0.0, 1.0, 2.0]
    cos, sin = rope_cos_sin(torch.tensor([0, 1, 5]), 6)
    assert cos.shape == sin.shape == (3, 6)
    torch.testing.assert_close(cos[0], torch.ones(6))  # position 0 is not turned
    torch.testing.assert_close(cos[:, :3], cos[:, 3:])  # both halves hold the same angles
    expected = torch.tensor([1.0, 10_000 ** (-2 / 6), 10_000 ** (-4 / 6)]) * 5
    torch.testing.assert_close(
        torch.atan2(sin[2, :3], cos[2, :3]), expected - 2 * math.pi * (expected > math.pi)
    )


def test_rope_keeps_every_pairs_length():
    x = torch.randn(2, 3, 7, 8, dtype=torch.float64)
    cos, sin = rope_cos_sin(torch.arange(7), 8, dtype=torch.float64)
    y = apply_rope(x, cos, sin)
    norms = lambda t: t[..., :4] ** 2 + t[..., 4:] ** 2  # noqa: E731 (pair i is (i, i + 4))
    torch.testing.assert_close(norms(y), norms(x))


def test_the_interleaved_layout_is_rotate_half_with_the_q_and_k_rows_permuted():
    """A block with rope=True whose q and k rows are permuted within each head computes what
    RoFormer's interleaved rotation computes with the original rows."""
    torch.manual_seed(0)
    D, H, T = 16, 2, 9
    d = D // H
    block = MultiHeadSelfAttention(D, H, 12, rope=True).double().eval()
    x = torch.randn(2, T, D, dtype=torch.float64)
    # the reference: interleaved RoPE on the original rows, attention by hand
    with torch.no_grad():
        q, k, v = block.qkv(x).split(D, dim=-1)  # (B, T, D) each
        q, k, v = (t.view(2, T, H, d).transpose(1, 2) for t in (q, k, v))  # (B, H, T, d)
        pos = torch.arange(T)
        q, k = rope_interleaved(q, pos), rope_interleaved(k, pos)
        scores = (q @ k.transpose(-2, -1) / math.sqrt(d)).masked_fill(causal_mask(T), -math.inf)
        ctx = torch.softmax(scores, dim=-1) @ v  # (B, H, T, d)
        expected = block.out_proj(ctx.transpose(1, 2).reshape(2, T, D))
        # rotate-half pairs (i, i + d/2): put the old features 2i, 2i + 1 there, in each head
        within = torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])  # (d,)
        rows = torch.cat([h * d + within for h in range(H)])  # (D,)
        permuted = MultiHeadSelfAttention(D, H, 12, rope=True).double().eval()
        permuted.load_state_dict(block.state_dict())
        permuted.qkv.weight[:D] = block.qkv.weight[:D][rows]  # q rows
        permuted.qkv.weight[D : 2 * D] = block.qkv.weight[D : 2 * D][rows]  # k rows
        permuted.qkv.bias[:D] = block.qkv.bias[:D][rows]
        permuted.qkv.bias[D : 2 * D] = block.qkv.bias[D : 2 * D][rows]
        torch.testing.assert_close(permuted(x), expected, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(
            permuted(x, return_weights=True)[0], expected, rtol=1e-10, atol=1e-10
        )
        # without the permutation the two layouts are different functions
        assert (block(x) - expected).abs().max() > 1e-3


@PROPERTY
@given(
    st.integers(1, 3),  # heads
    st.integers(1, 4).map(lambda n: 2 * n),  # d_head, even
    st.integers(1, 7),  # T
    st.integers(0, 10_000),  # the shift k
    st.integers(0, 2**16),  # seed
)
def test_shifting_every_position_by_k_leaves_the_scores_unchanged(H, d, T, k, seed):
    torch.manual_seed(seed)
    q, key = torch.randn(2, 1, H, T, d, dtype=torch.float64).unbind(0)  # (1, H, T, d) each
    pos = torch.arange(T)
    scores = []
    for shift in (0, k):
        cos, sin = rope_cos_sin(pos + shift, d, dtype=torch.float64)
        scores.append(apply_rope(q, cos, sin) @ apply_rope(key, cos, sin).transpose(-2, -1))
    torch.testing.assert_close(scores[1], scores[0], rtol=1e-9, atol=1e-9)


@PROPERTY
@given(st.integers(1, 6), st.integers(1, 500), st.integers(0, 2**16))
def test_a_rope_block_at_positions_k_onward_gives_the_weights_of_positions_0_onward(T, k, seed):
    """The same property on the block's own projection: its weights at positions k .. k + T - 1
    (as a KV cache's offset puts them) equal those at 0 .. T - 1."""
    torch.manual_seed(seed)
    block = MultiHeadSelfAttention(8, 2, 512 + 8, rope=True).double().eval()
    x = torch.randn(1, T, 8, dtype=torch.float64)
    weights = []
    for start in (0, k):
        q, key, _ = block.project(x, start)  # (1, H, T, d_head), (1, H, T, d_head)
        weights.append(torch.softmax(q @ key.transpose(-2, -1), dim=-1))
    torch.testing.assert_close(weights[1], weights[0], rtol=1e-9, atol=1e-9)


def test_the_offset_test_can_fail_on_a_learned_position_table():
    """The control: with absolute positions added to x the scores move with the shift."""
    torch.manual_seed(0)
    table = torch.randn(20, 8, dtype=torch.float64)  # a position table
    block = MultiHeadSelfAttention(8, 2, 20).double().eval()
    x = torch.randn(1, 5, 8, dtype=torch.float64)
    scores = []
    for shift in (0, 7):
        q, key, _ = block.project(x + table[shift : shift + 5])
        scores.append(q @ key.transpose(-2, -1))
    assert (scores[0] - scores[1]).abs().max() > 1e-2


def test_rope_turns_q_and_k_but_never_v():
    torch.manual_seed(0)
    plain = MultiHeadSelfAttention(8, 2, 12).eval()
    rope = MultiHeadSelfAttention(8, 2, 12, rope=True).eval()
    rope.load_state_dict(plain.state_dict())
    x = torch.randn(1, 6, 8)
    q0, k0, v0 = plain.project(x)
    q1, k1, v1 = rope.project(x, start=3)
    assert torch.equal(v1, v0)
    assert not torch.allclose(q1, q0) and not torch.allclose(k1, k0)
    cos, sin = rope_cos_sin(torch.arange(3, 9), 4)
    torch.testing.assert_close(q1, apply_rope(q0, cos, sin))
    torch.testing.assert_close(k1, apply_rope(k0, cos, sin))
    assert "rope=True, rope_base=10000" in rope.extra_repr()


def test_an_odd_d_head_with_rope_is_refused_with_a_size_that_works():
    assert message(ValueError, lambda: MultiHeadSelfAttention(12, 4, 8, rope=True)) == (
        "d_head=3 is odd, but RoPE turns the features of a head in pairs; pick an even "
        "d_head = d_model // n_heads (for example d_model=16 with n_heads=4)"
    )
    MultiHeadSelfAttention(12, 4, 8)  # without RoPE an odd d_head is fine
    with pytest.raises(ValueError, match="rope_base=1 must be a number > 1"):
        MultiHeadSelfAttention(8, 2, 8, rope=True, rope_base=1)
