"""Properties that mutation testing (tools/mutation.sh, issue 9) found unpinned.

Each test here kills mutants of masks, functional, heads, multihead, fused or _checks that
survived the rest of the unit tests: a conversion that loses the dtype, the device or the
dropout; an error message that loses the words of its fix; a mask built on the wrong device.
Every expected value is computed independently (PyTorch's own modules, explicit loops,
hand-written masks), never copied from the output under test.
"""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from attention_lab.functional import attention
from attention_lab.fused import MultiHeadSelfAttention
from attention_lab.heads import CausalAttention, SingleHeadAttention
from attention_lab.masks import build_mask, causal_mask, no_mask, sliding_window_mask
from attention_lab.multihead import MultiHeadAttention

B, T, D, H, CONTEXT = 2, 5, 8, 2, 7


def raises(exc, *fragments):
    """pytest.raises that checks every fragment appears in the message, literally."""
    pattern = "".join(f"(?=.*{re.escape(f)})" for f in fragments)
    return pytest.raises(exc, match=re.compile(pattern, re.DOTALL))


# --- fused.py: conversions keep dtype, device, dropout and say why they refuse ----------


def test_conversions_keep_float64_and_the_dropout_probability():
    separate = MultiHeadAttention(D, H, CONTEXT, dropout=0.25, qkv_bias=True).double().eval()
    x = torch.randn(B, T, D, dtype=torch.float64)  # (B, T, D)
    fused = MultiHeadSelfAttention.from_separate(separate)
    back = fused.to_separate()
    reference = fused.to_torch()
    again = MultiHeadSelfAttention.from_torch(reference, CONTEXT)
    for module in (fused, back, reference, again):
        assert {p.dtype for p in module.parameters()} == {torch.float64}, type(module).__name__
    assert fused.dropout.p == back.dropout.p == reference.dropout == again.dropout.p == 0.25
    # float64 all the way: the four agree to float64 precision, not float32's
    expected = separate(x)  # (B, T, D)
    torch_out, _ = reference(x, x, x, attn_mask=torch.ones(T, T).triu(1).bool())
    for out in (fused(x), back(x), again(x), torch_out):
        torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)


def test_conversions_keep_the_device_of_the_weights():
    """On the meta device nothing is computed: a copy to the wrong device fails or shows.

    (``from_separate`` is left out: ``torch.cat`` on meta imports PyTorch's decompositions,
    seconds of start-up for one assertion.)
    """
    fused = MultiHeadSelfAttention(D, H, CONTEXT).to("meta")
    converted = (fused.to_separate(), fused.to_torch())
    converted += (MultiHeadSelfAttention.from_torch(converted[1], CONTEXT),)
    for module in converted:
        assert {p.device.type for p in module.parameters()} == {"meta"}, type(module).__name__


def _message(exc, call) -> str:
    with pytest.raises(exc) as caught:
        call()
    return str(caught.value)


def test_to_torch_refusals_say_what_to_do_instead():
    unmasked = MultiHeadSelfAttention(D, H, CONTEXT, mask_kind="none")
    assert _message(ValueError, unmasked.to_torch) == (
        "to_torch() converts causal blocks only; this block has mask_kind='none'. "
        "nn.MultiheadAttention keeps no mask: copy the weights yourself and pass "
        "attn_mask=block.mask[:T, :T] on every call"
    )
    one_bias = MultiHeadSelfAttention(D, H, CONTEXT, qkv_bias=True, out_bias=False)
    assert _message(ValueError, one_bias.to_torch) == (
        "nn.MultiheadAttention has one bias flag for both projections, but this block has "
        "qkv_bias=True and out_bias=False; build the block with qkv_bias == out_bias to "
        "convert it"
    )


def test_from_torch_refusals_name_what_converts():
    zero_attn = nn.MultiheadAttention(D, H, add_zero_attn=True)
    assert _message(ValueError, lambda: MultiHeadSelfAttention.from_torch(zero_attn, 4)) == (
        "only a plain nn.MultiheadAttention converts: kdim == vdim == embed_dim, "
        "add_bias_kv=False and add_zero_attn=False"
    )
    linear = nn.Linear(D, D)
    assert _message(TypeError, lambda: MultiHeadSelfAttention.from_torch(linear, 4)) == (
        "expected torch.nn.MultiheadAttention, got Linear"
    )
    assert _message(TypeError, lambda: MultiHeadSelfAttention.from_separate(linear)) == (
        "expected attention_lab.MultiHeadAttention, got Linear"
    )


@pytest.mark.parametrize(
    "kind, window, shown",
    [("causal", None, "mask_kind='causal'"), ("sliding", 3, "mask_kind='sliding', window=3")],
)
def test_the_printed_block_shows_its_sizes_and_its_mask(kind, window, shown):
    block = MultiHeadSelfAttention(D, H, CONTEXT, mask_kind=kind, window=window)
    expected = f"d_model={D}, n_heads={H}, d_head={D // H}, context_length={CONTEXT}, {shown}"
    assert block.extra_repr() == expected
    assert f"\n  {expected}\n" in repr(block)


# --- masks.py: every mask names a bad size and is built where it is asked --------------


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


# --- heads.py, multihead.py: sizes named in errors, bias flags honoured ------------------


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: SingleHeadAttention(0, 4), "d_in=0"),
        (lambda: SingleHeadAttention(4, -1), "d_out=-1"),
        (lambda: CausalAttention(0, 4, 8), "d_in=0"),
        (lambda: CausalAttention(4, 0, 8), "d_out=0"),
        (lambda: MultiHeadAttention(8, 2, 0), "context_length=0"),
        (lambda: MultiHeadSelfAttention(8, 2, -3), "context_length=-3"),
        (lambda: MultiHeadSelfAttention(8, 2, 8, mask_kind="sliding", window=0), "window=0"),
    ],
)
def test_module_sizes_below_one_are_named_in_the_error(call, name):
    with raises(ValueError, name, "must be a whole number >= 1"):
        call()


@pytest.mark.parametrize("qkv_bias", [False, True])
def test_single_head_bias_flag_switches_all_three_projections(qkv_bias):
    head = SingleHeadAttention(4, 6, qkv_bias=qkv_bias)
    biased = {n.removesuffix(".bias") for n, _ in head.named_parameters() if n.endswith("bias")}
    assert biased == ({"W_q", "W_k", "W_v"} if qkv_bias else set())
    assert not any(n.endswith("bias") for n, _ in SingleHeadAttention(4, 6).named_parameters())


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


# --- _checks.py: the messages keep both halves, the value and the fix ------------------


def test_d_model_smaller_than_n_heads_is_told_the_smallest_size_that_works():
    with pytest.raises(ValueError) as caught:
        MultiHeadAttention(2, 4, 8)
    assert str(caught.value).endswith("of n_heads (for example d_model=4)")


@pytest.mark.parametrize(
    "shape, tail",
    [
        ((5, 8), " add a batch dimension with x.unsqueeze(0)"),
        ((1, 1, 5, 8), " reshape it to rank 3"),
    ],
)
def test_input_of_the_wrong_rank_gets_the_whole_message(shape, tail):
    with pytest.raises(ValueError) as caught:
        MultiHeadAttention(8, 2, 8)(torch.randn(shape))
    assert str(caught.value) == (
        f"x has shape {shape} (rank {len(shape)}), but attention modules take "
        f"(B, T, D) = (batch, time, features);{tail}"
    )


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


def test_a_mask_of_the_wrong_rank_type_or_length_is_refused_in_words():
    q = torch.randn(2, 4, 3)  # (B, T_q, d_k)
    k = torch.randn(2, 5, 3)  # (B, T_k, d_k)
    cases = [
        (torch.zeros(5, dtype=torch.bool), ValueError, "mask has shape (5,), but the scores"),
        (torch.zeros(4, 6, dtype=torch.bool), ValueError, "slice it with mask[:4, :5]"),
        ([[False] * 5] * 4, TypeError, "mask must be a torch.Tensor of dtype bool, got list"),
    ]
    for mask, exc, fragment in cases:
        with raises(exc, fragment):
            attention(q, k, k, mask)
    with pytest.raises(TypeError) as caught:
        attention(q, k, k, torch.zeros(4, 5))
    assert str(caught.value) == (
        "mask has dtype torch.float32; it must be torch.bool with True = blocked "
        "(build one with attention_lab.causal_mask, or convert with mask.bool())"
    )


def test_a_mask_whose_leading_dimensions_do_not_fit_says_which_would():
    q = torch.randn(2, 4, 3)  # (B, T_q, d_k): scores are (2, 4, 5)
    k = torch.randn(2, 5, 3)  # (B, T_k, d_k)
    with pytest.raises(ValueError) as caught:
        attention(q, k, k, torch.zeros(3, 4, 5, dtype=torch.bool))
    assert str(caught.value) == (
        "mask has shape (3, 4, 5), which does not broadcast to the scores (2, 4, 5); "
        "pass a (4, 5) mask, or give it leading dimensions of size 1 or equal to (2,)"
    )


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: CausalAttention(8, 8, context_length=1.0),
            "context_length=1.0 must be a whole number >= 1; pass context_length=1",
        ),
        (
            lambda: sliding_window_mask(6, 0.5),
            "window=0.5 must be a whole number >= 1; pass a positive int, e.g. window=8",
        ),
        (
            lambda: MultiHeadAttention(0, 2, 8),
            "d_model=0 must be a whole number >= 1; pass a positive int, e.g. d_model=32",
        ),
    ],
)
def test_a_size_error_says_the_int_to_pass(call, message):
    with pytest.raises(ValueError) as caught:
        call()
    assert str(caught.value) == message


@pytest.mark.parametrize("dropout", ["0.1", None])
def test_dropout_that_is_not_a_number_is_refused_with_the_range(dropout):
    with pytest.raises(ValueError) as caught:
        CausalAttention(8, 8, 8, dropout=dropout)
    assert str(caught.value) == (
        f"dropout={dropout!r} must be in [0, 1): it is the probability of dropping an attention "
        "weight; use 0.0 to switch dropout off"
    )


def test_a_sequence_of_exactly_context_length_is_accepted_and_one_more_is_not():
    module = MultiHeadAttention(8, 2, 6).eval()
    assert module(torch.randn(1, 6, 8)).shape == (1, 6, 8)
    with raises(ValueError, "x has T=7 positions, more than context_length=6"):
        module(torch.randn(1, 7, 8))


def test_integer_input_is_told_to_go_through_an_embedding_in_one_whole_sentence():
    with pytest.raises(TypeError) as caught:
        SingleHeadAttention(8, 4)(torch.zeros(1, 3, 8, dtype=torch.int64))
    assert str(caught.value) == (
        "x has dtype torch.int64, but attention needs floating-point vectors; "
        "token ids go through an nn.Embedding first (or call .float() on real-valued data)"
    )


@pytest.mark.parametrize("which", ["q", "k", "v"])
def test_attention_names_the_argument_that_is_not_floating_point(which):
    tensors = dict(zip("qkv", torch.randn(3, 2, 4, 3).unbind(0)))  # 3 x (B, T, d)
    tensors[which] = tensors[which].long()
    with raises(TypeError, f"{which} has dtype torch.int64, but attention needs floating-point"):
        attention(tensors["q"], tensors["k"], tensors["v"])


def test_attention_shape_mismatches_are_told_in_whole_sentences():
    q = torch.randn(2, 4, 3)  # (B, T_q, d_k)
    assert _message(ValueError, lambda: attention(q, torch.randn(2, 4, 6), q)) == (
        "q has d_k=3 but k has d_k=6; queries and keys must have "
        "the same last dimension to take their dot product"
    )
    k, v = torch.randn(2, 5, 3), torch.randn(2, 4, 3)  # (B, T_k, d), (B, T_v, d)
    assert _message(ValueError, lambda: attention(q, k, v)) == (
        "k has 5 positions but v has 4; each key needs one value"
    )
