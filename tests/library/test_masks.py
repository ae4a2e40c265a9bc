"""The masks: one convention, bool with True = blocked (notebook 04)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attention_lab import (
    MultiHeadSelfAttention,
    attention,
    build_mask,
    causal_mask,
    no_mask,
    sliding_window_mask,
    to_sdpa_mask,
)
from tests.conftest import raises


def test_causal_mask_blocks_exactly_the_future():
    mask = causal_mask(4)
    expected = torch.tensor(
        [
            [False, True, True, True],
            [False, False, True, True],
            [False, False, False, True],
            [False, False, False, False],
        ]
    )
    assert mask.dtype == torch.bool
    assert torch.equal(mask, expected)


@pytest.mark.parametrize("T", [1, 2, 7, 12])
def test_causal_mask_is_true_only_above_the_diagonal(T):
    mask = causal_mask(T)
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    assert mask.shape == (T, T)
    assert torch.equal(mask, j > i)


def test_sliding_window_of_8_at_T_12_sees_itself_and_7_before():
    T, window = 12, 8
    mask = sliding_window_mask(T, window)
    for i in range(T):
        visible = [j for j in range(T) if not mask[i, j]]
        first = max(0, i - (window - 1))
        assert visible == list(range(first, i + 1)), f"row {i}"
    # Spelled out: the last query (11) sees keys 4..11, no more and no less.
    assert (~mask[11]).nonzero().flatten().tolist() == [4, 5, 6, 7, 8, 9, 10, 11]
    assert mask[11, 3] and not mask[11, 4]
    assert (~mask).sum(dim=-1).tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 8, 8, 8, 8]


@pytest.mark.parametrize("window", [12, 13, 100])
def test_sliding_window_at_least_T_is_the_causal_mask(window):
    assert torch.equal(sliding_window_mask(12, window), causal_mask(12))


def test_sliding_window_of_1_sees_only_itself():
    assert torch.equal(~sliding_window_mask(5, 1), torch.eye(5, dtype=torch.bool))


def test_sliding_window_is_always_causal():
    for window in range(1, 8):
        mask = sliding_window_mask(7, window)
        assert mask[causal_mask(7)].all(), f"window={window} lets a query see the future"


def test_no_mask_blocks_nothing():
    mask = no_mask(5)
    assert mask.dtype == torch.bool and mask.shape == (5, 5)
    assert not mask.any()


def test_to_sdpa_mask_flips_the_convention():
    mask = sliding_window_mask(6, 3)
    flipped = to_sdpa_mask(mask)
    assert flipped.dtype == torch.bool
    assert torch.equal(flipped, ~mask)
    assert torch.equal(to_sdpa_mask(flipped), mask)


def test_to_sdpa_mask_gives_sdpa_the_same_attention_as_ours():
    q, k, v = torch.randn(3, 1, 5, 4).unbind(0)  # 3 x (1, 5, 4)
    mask = causal_mask(5)
    ours, _ = attention(q, k, v, mask)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=to_sdpa_mask(mask))
    torch.testing.assert_close(ours, theirs)
    # Passing our mask unflipped is the classic bug: SDPA would then look only at the future.
    wrong = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, :].clone())
    assert not torch.allclose(ours[:, :-1], wrong[:, :-1], equal_nan=True)


@pytest.mark.parametrize(
    "kind, window, expected",
    [
        ("causal", None, causal_mask(6)),
        ("sliding", 2, sliding_window_mask(6, 2)),
        ("none", None, no_mask(6)),
    ],
)
def test_build_mask_picks_the_mask_by_name(kind, window, expected):
    assert torch.equal(build_mask(kind, 6, window), expected)


def test_masks_are_made_on_the_requested_device():
    for mask in (causal_mask(3, "cpu"), sliding_window_mask(3, 2, "cpu"), no_mask(3, "cpu")):
        assert mask.device == torch.device("cpu")


# --- bad sizes and kinds, and the device ----------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda: build_mask("diagonal", 4),
        lambda: MultiHeadSelfAttention(8, 2, 8, mask_kind="diagonal"),
    ],
    ids=["build_mask", "MultiHeadSelfAttention"],
)
def test_unknown_mask_kind_lists_the_known_ones(call):
    with raises(ValueError, "kind='diagonal'", "'causal'", "'sliding'", "'none'"):
        call()


def test_mask_kind_typo_in_the_fused_block_is_caught():
    with raises(ValueError, "kind='casual'"):
        MultiHeadSelfAttention(8, 2, 8, mask_kind="casual")


def test_a_window_without_the_sliding_mask_is_not_silently_ignored():
    with raises(ValueError, "window=4", "mask_kind='sliding'"):
        MultiHeadSelfAttention(8, 2, 8, mask_kind="causal", window=4)


def test_sliding_mask_without_a_window_asks_for_one():
    with raises(ValueError, "'sliding'", "window=8"):
        MultiHeadSelfAttention(8, 2, 8, mask_kind="sliding")


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: causal_mask(0), "T=0"),
        (lambda: sliding_window_mask(0, 3), "T=0"),
        (lambda: sliding_window_mask(4, -1), "window=-1"),
        (lambda: no_mask(-2), "T=-2"),
        (lambda: build_mask("none", 0), "T=0"),
    ],
)
def test_every_mask_names_the_size_it_refuses(call, name):
    with raises(ValueError, name, "must be a whole number >= 1", "pass a positive int"):
        call()


def test_a_window_with_another_mask_kind_or_none_for_sliding_gets_the_whole_fix():
    with pytest.raises(ValueError) as caught:
        build_mask("causal", 4, window=3)
    assert str(caught.value) == (
        "window=3 only applies to mask_kind='sliding', not mask_kind='causal'; "
        "pass mask_kind='sliding' or leave window out"
    )
    with pytest.raises(ValueError) as caught:
        build_mask("sliding", 4)
    assert str(caught.value) == "mask_kind='sliding' needs a window, e.g. window=8"


@pytest.mark.parametrize(
    "kind, window, T_, blocked",
    [
        ("causal", None, 4, lambda i, j: j > i),
        ("sliding", 2, 5, lambda i, j: j > i or j <= i - 2),
        ("none", None, 3, lambda i, j: False),
    ],
)
def test_masks_are_built_on_the_device_they_are_asked_for(kind, window, T_, blocked):
    """Under a meta default device, a mask that ignores ``device="cpu"`` lands on meta."""
    with torch.device("meta"):
        mask = build_mask(kind, T_, window, device="cpu")  # (T, T)
    assert mask.device.type == "cpu" and mask.dtype == torch.bool
    expected = torch.tensor([[blocked(i, j) for j in range(T_)] for i in range(T_)])
    assert torch.equal(mask, expected)
