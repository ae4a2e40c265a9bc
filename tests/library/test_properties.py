"""Property-based tests: the attention properties hold for any small (B, T, D, H), not
just the sizes the other tests picked.

Hypothesis draws the sizes, the mask kind and a seed for the weights. ``derandomize``
makes CI see the same examples on every run; set ``HYPOTHESIS_EXPLORE=1`` to draw fresh
examples (and 10x as many) when hunting for a bug.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_lab import (
    MultiHeadAttention,
    MultiHeadSelfAttention,
    attention,
    merge_heads,
    split_heads,
    to_sdpa_mask,
)

EXPLORE = bool(os.environ.get("HYPOTHESIS_EXPLORE"))
PROPERTY = settings(max_examples=250 if EXPLORE else 25, deadline=None, derandomize=not EXPLORE)


@st.composite
def blocks(draw, kinds=("causal", "sliding", "none")):
    """A MultiHeadSelfAttention of random small size, an input for it, and its sizes."""
    B = draw(st.integers(1, 3))
    T = draw(st.integers(1, 8))
    H = draw(st.integers(1, 4))
    d_head = draw(st.integers(1, 4))
    kind = draw(st.sampled_from(kinds))
    window = draw(st.integers(1, T + 2)) if kind == "sliding" else None
    context = T + draw(st.integers(0, 3))  # the mask buffer is sliced to (T, T)
    seed = draw(st.integers(0, 2**16))
    torch.manual_seed(seed)
    D = H * d_head
    module = MultiHeadSelfAttention(D, H, context, mask_kind=kind, window=window).eval()
    x = torch.randn(B, T, D)  # (B, T, D)
    return module, x


@PROPERTY
@given(blocks())
def test_explicit_path_and_sdpa_path_agree(case):
    module, x = case
    explicit, _ = module(x, return_weights=True)  # functional.attention
    torch.testing.assert_close(module(x), explicit)  # F.scaled_dot_product_attention


@PROPERTY
@given(blocks(kinds=("causal", "sliding")), st.data())
def test_future_tokens_never_change_earlier_outputs(case, data):
    module, x = case
    T = x.shape[1]
    t = data.draw(st.integers(0, T - 1))
    changed = x.clone()
    changed[:, t + 1 :] = torch.randn_like(changed[:, t + 1 :])
    for return_weights in (False, True):
        if return_weights:
            before, after = module(x, True)[0], module(changed, True)[0]
        else:
            before, after = module(x), module(changed)
        torch.testing.assert_close(after[:, : t + 1], before[:, : t + 1], rtol=0, atol=1e-6)


@PROPERTY
@given(blocks())
def test_weights_rows_sum_to_one_and_are_zero_where_masked(case):
    module, x = case
    B, T, _ = x.shape
    _, weights = module(x, return_weights=True)  # (B, H, T, T)
    assert weights.shape == (B, module.n_heads, T, T)
    assert (weights >= 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, module.n_heads, T))
    assert (weights[..., module.mask[:T, :T]] == 0).all()


@PROPERTY
@given(blocks(kinds=("causal",)))
def test_the_fused_block_and_its_separate_twin_agree(case):
    module, x = case
    separate = module.to_separate().eval()
    assert isinstance(separate, MultiHeadAttention)
    out, weights = separate(x, return_weights=True)
    torch.testing.assert_close(out, module(x))
    torch.testing.assert_close(weights, module(x, return_weights=True)[1])


@PROPERTY
@given(
    st.integers(1, 3),
    st.integers(1, 4),
    st.integers(1, 6),
    st.integers(1, 4),
    st.integers(0, 2**16),
)
def test_split_and_merge_heads_are_inverse(B, H, T, d_head, seed):
    torch.manual_seed(seed)
    x = torch.randn(B, T, H * d_head)  # (B, T, D)
    heads = split_heads(x, H)  # (B, H, T, d_head)
    assert heads.shape == (B, H, T, d_head)
    assert torch.equal(merge_heads(heads), x)


@PROPERTY
@given(st.integers(1, 3), st.integers(1, 7), st.integers(1, 5), st.integers(0, 2**16))
def test_attention_matches_sdpa_for_any_mask_with_an_open_key_per_row(B, T, d_k, seed):
    torch.manual_seed(seed)
    q, k, v = torch.randn(3, B, T, d_k).unbind(0)  # 3 x (B, T, d_k)
    mask = torch.rand(B, T, T) < 0.5  # (B, T, T), True = blocked
    mask[:, torch.arange(T), torch.randint(T, (T,))] = False  # every query keeps one key
    out, weights = attention(q, k, v, mask)
    torch.testing.assert_close(
        out, F.scaled_dot_product_attention(q, k, v, attn_mask=to_sdpa_mask(mask))
    )
    assert (weights[mask] == 0).all()
