"""``functional.attention``: the explicit maths, checked against PyTorch's fused kernel."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attention_lab import attention, causal_mask, no_mask, sliding_window_mask, to_sdpa_mask

MASKS = {
    "causal": lambda T: causal_mask(T),
    "sliding": lambda T: sliding_window_mask(T, 3),
    "none": lambda T: no_mask(T),
}


def qkv(*lead, T=7, d_k=4, d_v=5, dtype=torch.float32):
    q = torch.randn(*lead, T, d_k, dtype=dtype)  # (..., T, d_k)
    k = torch.randn(*lead, T, d_k, dtype=dtype)  # (..., T, d_k)
    v = torch.randn(*lead, T, d_v, dtype=dtype)  # (..., T, d_v)
    return q, k, v


def test_attention_is_softmax_of_scaled_scores_times_values():
    q, k, v = qkv(2)
    out, weights = attention(q, k, v)
    expected_w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(4), dim=-1)  # (2, T, T)
    torch.testing.assert_close(weights, expected_w)
    torch.testing.assert_close(out, expected_w @ v)


def test_attention_keeps_leading_dimensions():
    q, k, v = qkv(2, 3)  # (B, H, T, d)
    out, weights = attention(q, k, v, causal_mask(7))
    assert out.shape == (2, 3, 7, 5)
    assert weights.shape == (2, 3, 7, 7)


def test_attention_takes_different_query_and_key_lengths():
    q = torch.randn(2, 3, 4)  # (B, T_q, d_k)
    k = torch.randn(2, 6, 4)  # (B, T_k, d_k)
    v = torch.randn(2, 6, 5)  # (B, T_k, d_v)
    out, weights = attention(q, k, v)
    assert out.shape == (2, 3, 5) and weights.shape == (2, 3, 6)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))


@pytest.mark.parametrize("kind", [None, "causal", "sliding", "none"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_attention_matches_torch_scaled_dot_product_attention(kind, dtype):
    q, k, v = qkv(2, 3, dtype=dtype)
    mask = MASKS[kind](7) if kind else None
    out, _ = attention(q, k, v, mask)
    # SDPA's boolean mask means "may attend": our True = blocked must be flipped.
    sdpa_mask = to_sdpa_mask(mask) if mask is not None else None
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=sdpa_mask)
    assert out.dtype == dtype
    torch.testing.assert_close(out, expected)


def test_causal_attention_matches_sdpa_is_causal():
    q, k, v = qkv(2, 3)
    out, _ = attention(q, k, v, causal_mask(7))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))


@pytest.mark.parametrize("kind", ["causal", "sliding", "none"])
def test_weights_are_a_probability_distribution_per_row(kind):
    q, k, v = qkv(2, 3)
    mask = MASKS[kind](7)
    _, weights = attention(q, k, v, mask)
    assert (weights >= 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 7))
    # Blocked entries are exactly zero (not just small), open ones strictly positive.
    assert (weights[..., mask] == 0).all()
    assert (weights[..., ~mask] > 0).all()


def test_causal_weights_are_exactly_zero_above_the_diagonal():
    q, k, v = qkv(4)
    q, k = q * 10, k * 10  # large scores: a sloppy mask (e.g. -1e4) would still leak here
    _, weights = attention(q, k, v, causal_mask(7))
    assert torch.equal(weights.triu(1), torch.zeros_like(weights))


def test_mask_broadcasts_over_batch_and_heads():
    q, k, v = qkv(2, 3)
    mask = causal_mask(7)
    out_2d, _ = attention(q, k, v, mask)  # (T, T)
    out_4d, _ = attention(q, k, v, mask.expand(2, 3, 7, 7))  # (B, H, T, T)
    torch.testing.assert_close(out_2d, out_4d)


def test_a_row_with_every_key_blocked_comes_back_as_nan():
    q, k, v = qkv(1, T=3)
    mask = torch.zeros(3, 3, dtype=torch.bool)
    mask[1] = True  # query 1 may look nowhere
    _, weights = attention(q, k, v, mask)
    assert torch.isnan(weights[0, 1]).all()
    assert not torch.isnan(weights[0, [0, 2]]).any()


def test_dropout_zeroes_weights_and_scales_the_survivors():
    p = 0.5
    q, k, _ = qkv(4, T=8)
    eye = torch.eye(8).expand(4, 8, 8)  # v = identity: the context IS the dropped weights
    dropped, weights = attention(q, k, eye, causal_mask(8), dropout_p=p)
    kept = dropped != 0
    open_ = ~causal_mask(8).expand(4, 8, 8)
    assert (kept & ~open_).sum() == 0, "dropout revived a blocked weight"
    # Some weights were dropped, some survived, and every survivor is scaled by 1 / (1 - p).
    assert 0 < kept.sum() < open_.sum()
    torch.testing.assert_close(dropped[kept], weights[kept] / (1 - p))
    # The returned weights are those before dropout: rows still sum to 1.
    torch.testing.assert_close(weights.sum(-1), torch.ones(4, 8))


def test_dropout_zero_changes_nothing():
    q, k, v = qkv(2)
    a, _ = attention(q, k, v, causal_mask(7), dropout_p=0.0)
    b, _ = attention(q, k, v, causal_mask(7))
    assert torch.equal(a, b)


def test_gradients_reach_queries_keys_and_values():
    q, k, v = (t.requires_grad_() for t in qkv(2))
    out, _ = attention(q, k, v, causal_mask(7))
    out.square().sum().backward()
    for name, t in (("q", q), ("k", k), ("v", v)):
        assert t.grad is not None and t.grad.abs().sum() > 0, name
        assert torch.isfinite(t.grad).all(), name


# --- masks that broadcast when T_q differs from T_k -----------------------------------


def _reference_attention(q, k, v, blocked):
    """softmax(q kᵀ / sqrt(d)) v with a loop over (query, key) pairs: no broadcasting tricks."""
    T_q, T_k = q.shape[-2], k.shape[-2]
    scores = torch.empty(*q.shape[:-1], T_k)  # (..., T_q, T_k)
    for i in range(T_q):
        for j in range(T_k):
            s = (q[..., i, :] * k[..., j, :]).sum(-1) / q.shape[-1] ** 0.5
            scores[..., i, j] = s.masked_fill(torch.tensor(blocked(i, j)), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v  # (..., T_q, d_v)


@pytest.mark.parametrize(
    "mask_shape, blocked",
    [
        ((4, 6), lambda i, j: j > i + 2),  # one row per query and one column per key
        ((1, 6), lambda i, j: j in (0, 3)),  # a key padding mask: the same row for every query
        ((4, 1), lambda i, j: False),  # one flag per query, broadcast over the keys
    ],
)
def test_masks_broadcast_over_queries_or_keys_when_t_q_differs_from_t_k(mask_shape, blocked):
    q = torch.randn(2, 4, 3)  # (B, T_q, d_k)
    k, v = torch.randn(2, 2, 6, 3).unbind(0)  # 2 x (B, T_k, d_k)
    rows, cols = mask_shape
    mask = torch.tensor([[blocked(i, j) for j in range(cols)] for i in range(rows)])
    out, weights = attention(q, k, v, mask)  # (B, T_q, d_k), (B, T_q, T_k)
    torch.testing.assert_close(out, _reference_attention(q, k, v, blocked))
    assert weights.shape == (2, 4, 6)
