"""Bad input gives a clear error: the exception names the offending value and a fix.

Each test pins the exception type, the value as the learner wrote it, and the words of
the fix, so a message cannot quietly lose either half.
"""

from __future__ import annotations

import re

import pytest
import torch

from attention_lab import (
    CausalAttention,
    MultiHeadAttention,
    MultiHeadSelfAttention,
    SingleHeadAttention,
    TinyLM,
    attention,
    build_mask,
    causal_mask,
    make_batch,
    sliding_window_mask,
    train_tiny_lm,
)


def raises(exc, *fragments):
    """pytest.raises that also checks every fragment appears in the message, literally."""
    pattern = "".join(f"(?=.*{re.escape(f)})" for f in fragments)
    return pytest.raises(exc, match=re.compile(pattern, re.DOTALL))


MODULES = {
    "MultiHeadAttention": lambda d, h: MultiHeadAttention(d, h, 8),
    "MultiHeadSelfAttention": lambda d, h: MultiHeadSelfAttention(d, h, 8),
    "TinyLM": lambda d, h: TinyLM(d_model=d, n_heads=h),
}


@pytest.mark.parametrize("build", MODULES.values(), ids=MODULES.keys())
def test_d_model_not_divisible_by_n_heads_names_both_and_suggests_sizes(build):
    with raises(ValueError, "d_model=30", "n_heads=4", "multiple of n_heads", "28 or 32"):
        build(30, 4)


@pytest.mark.parametrize("n_heads", [0, -2, 2.5, True])
def test_n_heads_below_one_or_not_a_whole_number_is_refused(n_heads):
    with raises(ValueError, f"n_heads={n_heads!r}", ">= 1", "e.g. n_heads=4"):
        MultiHeadAttention(32, n_heads, 8)


@pytest.mark.parametrize(
    "shape, fix", [((6, 8), "x.unsqueeze(0)"), ((1, 2, 6, 8), "reshape it to rank 3")]
)
def test_input_of_rank_other_than_3_names_its_shape_and_the_fix(shape, fix):
    module = MultiHeadSelfAttention(8, 2, 8)
    with raises(ValueError, f"shape {shape}", f"rank {len(shape)}", "(B, T, D)", fix):
        module(torch.randn(shape))


@pytest.mark.parametrize(
    "module", [SingleHeadAttention(8, 4), CausalAttention(8, 4, 8), MultiHeadAttention(8, 2, 8)]
)
def test_last_dimension_other_than_d_model_names_both_sizes(module):
    with raises(ValueError, "x has 7 features", "built for 8", "project the input to 8"):
        module(torch.randn(1, 5, 7))


@pytest.mark.parametrize(
    "module",
    [CausalAttention(8, 4, 8), MultiHeadAttention(8, 2, 8), MultiHeadSelfAttention(8, 2, 8)],
)
def test_sequence_longer_than_context_length_names_both_and_the_fix(module):
    with raises(ValueError, "T=9", "context_length=8", "context_length>=9", "shorter sequence"):
        module(torch.randn(1, 9, 8))


@pytest.mark.parametrize("dropout", [1.0, -0.1, 1.5])
@pytest.mark.parametrize("cls", [CausalAttention, MultiHeadAttention, MultiHeadSelfAttention])
def test_dropout_outside_zero_to_one_is_refused(cls, dropout):
    args = (8, 8, 8) if cls is CausalAttention else (8, 2, 8)
    with raises(ValueError, f"dropout={dropout!r}", "[0, 1)", "use 0.0"):
        cls(*args, dropout=dropout)


def test_attention_dropout_outside_zero_to_one_is_refused():
    q = torch.randn(1, 4, 8)  # (B, T, d_k)
    with raises(ValueError, "dropout=1.0", "[0, 1)"):
        attention(q, q, q, dropout_p=1.0)


def test_mask_of_the_wrong_shape_names_both_shapes_and_how_to_slice():
    q = torch.randn(1, 4, 8)  # (B, T, d_k)
    with raises(ValueError, "shape (5, 5)", "(..., 4, 4)", "mask[:4, :4]"):
        attention(q, q, q, causal_mask(5))


@pytest.mark.parametrize("shape", [(3, 4, 4), (5, 2, 4, 4)])
def test_mask_whose_leading_dimensions_do_not_fit_the_scores_is_refused(shape):
    """(5, 2, 4, 4) used to broadcast silently and grow the output to 4 dimensions."""
    q = torch.randn(2, 4, 8)  # (B, T, d_k)
    with raises(ValueError, f"shape {shape}", "scores (2, 4, 4)", "pass a (4, 4) mask"):
        attention(q, q, q, torch.zeros(shape, dtype=torch.bool))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.uint8])
def test_mask_of_the_wrong_dtype_names_it_and_says_use_bool(dtype):
    q = torch.randn(1, 4, 8)  # (B, T, d_k)
    with raises(TypeError, f"dtype {dtype}", "torch.bool", "True = blocked", "mask.bool()"):
        attention(q, q, q, causal_mask(4).to(dtype))


@pytest.mark.parametrize(
    "module", [SingleHeadAttention(8, 4), CausalAttention(8, 4, 8), MultiHeadSelfAttention(8, 2, 8)]
)
def test_integer_input_tensor_names_its_dtype_and_points_to_an_embedding(module):
    with raises(TypeError, "dtype torch.int64", "floating-point", "nn.Embedding", ".float()"):
        module(torch.randint(10, (1, 4, 8)))


def test_non_tensor_input_names_its_type_and_how_to_convert():
    with raises(TypeError, "got list", "torch.as_tensor"):
        MultiHeadSelfAttention(8, 2, 8)([[[0.0] * 8]])


def test_attention_on_integer_queries_names_the_argument():
    q = torch.randn(1, 4, 8)  # (B, T, d_k)
    with raises(TypeError, "k has dtype torch.int64"):
        attention(q, q.long(), q)


def test_attention_with_mismatched_key_width_names_both_widths():
    with raises(ValueError, "q has d_k=8", "k has d_k=6", "same last dimension"):
        attention(torch.randn(1, 4, 8), torch.randn(1, 4, 6), torch.randn(1, 4, 8))


def test_tiny_lm_with_float_ids_names_the_dtype_and_the_fix():
    with raises(TypeError, "torch.float32", "int64", "idx.long()"):
        TinyLM()(torch.rand(2, 5))


def test_tiny_lm_with_ids_beyond_the_vocabulary_names_them_and_the_fix():
    ids = torch.tensor([[1, 2, 70]])
    with raises(ValueError, "[0, 64)", "from 1 to 70", "vocab_size>=71"):
        TinyLM()(ids)


def test_tiny_lm_with_negative_ids_names_them():
    with raises(ValueError, "from -1 to 2", "cannot be negative"):
        TinyLM()(torch.tensor([[-1, 2]]))


def test_tiny_lm_with_too_long_a_sequence_names_both_lengths_and_the_fix():
    with raises(ValueError, "T=13", "context_length=12", "context_length>=13"):
        TinyLM()(torch.zeros(1, 13, dtype=torch.long))


def test_tiny_lm_with_one_dimensional_ids_says_add_a_batch_dimension():
    with raises(ValueError, "shape (5,)", "(B, T)", "idx.unsqueeze(0)"):
        TinyLM()(torch.zeros(5, dtype=torch.long))


@pytest.mark.parametrize(
    "call",
    [lambda: make_batch("reverse"), lambda: train_tiny_lm("reverse", epochs=1, n_rows=8)],
    ids=["make_batch", "train_tiny_lm"],
)
def test_unknown_task_name_lists_the_known_ones(call):
    with raises(ValueError, "task='reverse'", "'copy'", "'previous'"):
        call()


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
        (lambda: sliding_window_mask(6, 0), "window=0"),
        (lambda: CausalAttention(8, 8, context_length=0), "context_length=0"),
        (lambda: TinyLM(vocab_size=-3), "vocab_size=-3"),
        (lambda: make_batch("copy", n_rows=2.5), "n_rows=2.5"),
    ],
)
def test_sizes_below_one_name_the_value_and_ask_for_a_positive_int(call, name):
    with raises(ValueError, name, ">= 1", "positive int"):
        call()


def test_a_float_size_that_is_a_whole_number_is_told_the_int_to_use():
    with raises(ValueError, "context_length=12.0", "pass context_length=12"):
        CausalAttention(8, 8, context_length=12.0)
