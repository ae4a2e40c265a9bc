"""The input checks of _checks.py: bad input gives a clear error that names the offending
value and a fix, from every module that uses them (the attention modules, ``attention``,
``TinyLM`` and ``CharLM`` (one token-id check), ``TinyLMConfig``, ``make_batch``).

Each test pins the exception type, the value as the learner wrote it, and the words of
the fix, so a message cannot quietly lose either half; some pin the whole message, word for
word. Errors of other modules' own checks are tested with them (mask kinds: test_masks.py,
task names: test_tasks.py, conversions: test_convert.py).
"""

from __future__ import annotations

import ast
import dataclasses
import html
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import attention_lab
from attention_lab import (
    CausalAttention,
    DecoderConfig,
    LatentAttention,
    MultiHeadAttention,
    MultiHeadSelfAttention,
    SingleHeadAttention,
    TinyLM,
    TinyLMConfig,
    attention,
    causal_mask,
    make_batch,
    sliding_window_mask,
)
from attention_lab._checks import (
    check_dropout,
    check_float_tensor,
    check_heads,
    check_input,
    check_kv_heads,
    check_mask,
    check_positive,
    check_qkv,
    check_rope_base,
    check_scores_mask,
    check_token_ids,
)
from attention_lab.charlm import CharLM, CharLMConfig
from tests.conftest import message, raises

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


# --- the token ids of both language models (one check_token_ids), word for word ------------

LANGUAGE_MODELS = {  # vocab_size=64, context_length=12 for both, so the messages differ by name
    "TinyLM": lambda: TinyLM().eval(),
    "CharLM": lambda: CharLM(
        CharLMConfig(vocab_size=64, context_length=12, d_model=32, n_heads=4, n_layers=1)
    ).eval(),
}


@pytest.mark.parametrize(
    "idx, exc, expected",
    [
        (
            [[1, 2]],
            TypeError,
            "{m} takes token ids as an int64 tensor (B, T), got list; "
            "make one with torch.tensor(ids)",
        ),
        (
            torch.rand(2, 5),
            TypeError,
            "{m} takes token ids as an int64 tensor (B, T), got torch.float32; convert "
            "whole-number ids with idx.long() ({m} embeds the ids itself)",
        ),
        (
            torch.zeros(5, dtype=torch.long),
            ValueError,
            "idx has shape (5,) (rank 1), but {m} takes (B, T) token ids; "
            "add a batch dimension with idx.unsqueeze(0)",
        ),
        (
            torch.zeros(1, 2, 3, dtype=torch.long),
            ValueError,
            "idx has shape (1, 2, 3) (rank 3), but {m} takes (B, T) token ids; reshape it",
        ),
        (
            torch.zeros(1, 13, dtype=torch.long),
            ValueError,
            "idx has T=13 positions, more than context_length=12; feed the last ones, "
            "idx[:, -12:], or build {m} with context_length>=13",
        ),
        (
            torch.tensor([[-1, 2]]),
            ValueError,
            "token ids must lie in [0, 64) for vocab_size=64; got values from -1 to 2; "
            "ids are row numbers of the embedding table and cannot be negative",
        ),
        (
            torch.tensor([[64]]),  # one id, the first past the end
            ValueError,
            "token ids must lie in [0, 64) for vocab_size=64; got values from 64 to 64; "
            "encode with the vocabulary {m} was built for, or build {m} with vocab_size>=65",
        ),
    ],
    ids=["list", "float", "rank_1", "rank_3", "too_long", "negative", "one_past_the_end"],
)
@pytest.mark.parametrize("name", LANGUAGE_MODELS)
def test_both_language_models_refuse_bad_ids_in_one_whole_message(name, idx, exc, expected):
    model = LANGUAGE_MODELS[name]()
    assert message(exc, lambda: model(idx)) == expected.format(m=name)
    # the same rule, called directly: one check for both models
    assert message(exc, lambda: check_token_ids(idx, 64, 12, name)) == expected.format(m=name)


@pytest.mark.parametrize("name", LANGUAGE_MODELS)
def test_language_models_accept_int64_and_int32_ids_from_0_to_vocab_size_minus_1(name):
    model = LANGUAGE_MODELS[name]()  # vocab_size=64, context_length=12
    assert model(torch.tensor([[0, 63]])).shape == (1, 2, 64)
    assert model(torch.tensor([[0, 63]], dtype=torch.int32)).shape == (1, 2, 64)
    assert model(torch.zeros(1, 12, dtype=torch.long)).shape == (1, 12, 64)
    check_token_ids(torch.zeros(1, 0, dtype=torch.long), 64, 12)  # no ids: nothing to range-check


def test_the_eager_range_check_still_names_a_bad_id():
    with pytest.raises(ValueError, match=r"\[0, 64\).*from 0 to 70.*vocab_size>=71"):
        TinyLM()(torch.tensor([[0, 70]]))


class _ScalarReads(TorchDispatchMode):
    """Counts item()-style reads of one value (int(t), bool(t), t.item(): each a host sync)."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += func is torch.ops.aten._local_scalar_dense.default
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("return_weights", [False, True], ids=["sdpa", "weights"])
@pytest.mark.parametrize("name", LANGUAGE_MODELS)
def test_a_forward_reads_values_to_the_host_once(name, return_weights, monkeypatch):
    """The fast path's one host sync: the ids' min and max, read together by one tolist
    (the old check read them with two int() calls, two syncs on a GPU)."""
    model, tolist, lists = LANGUAGE_MODELS[name](), torch.Tensor.tolist, []

    def counted_tolist(tensor):
        lists.append(tensor.numel())
        return tolist(tensor)

    monkeypatch.setattr(torch.Tensor, "tolist", counted_tolist)
    with _ScalarReads() as reads:
        model(torch.randint(64, (2, 12)), return_weights=return_weights)
    assert lists == [2] and reads.count == 0
    # the control: the counter sees a read when there is one
    with _ScalarReads() as reads:
        int(torch.tensor(3).min())
    assert reads.count == 1


# --- the whole message, word for word -------------------------------------------------


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
    assert message(ValueError, lambda: attention(q, torch.randn(2, 4, 6), q)) == (
        "q has d_k=3 but k has d_k=6; queries and keys must have "
        "the same last dimension to take their dot product"
    )
    k, v = torch.randn(2, 5, 3), torch.randn(2, 4, 3)  # (B, T_k, d), (B, T_v, d)
    assert message(ValueError, lambda: attention(q, k, v)) == (
        "k has 5 positions but v has 4; each key needs one value"
    )


# --- what is a size -------------------------------------------------------------------


@pytest.mark.parametrize("integer", [np.int64, np.int32, np.uint8, int])
def test_numpy_integers_are_sizes(integer):
    block = MultiHeadSelfAttention(integer(8), integer(2), integer(10))
    assert block.d_head == 4 and type(block.d_model) is int
    x, _ = make_batch("previous", integer(3), integer(5), integer(7))
    assert x.shape == (3, 5)
    assert TinyLM(n_heads=np.int64(2)).config.n_heads == 2


@pytest.mark.parametrize("value", [8.0, True, "8"])
def test_floats_bools_and_strings_are_not_sizes(value):
    with pytest.raises(ValueError, match=f"d_model={value!r}"):
        MultiHeadSelfAttention(value, 2, 10)


# --- one home per rule (issue 41, "Validation once") -------------------------------------
# Each rule is decided, and its message worded, in one function of _checks.py; every
# boundary where a bad value enters calls it (or builds the config that does), and a
# caller that shows the error otherwise (the explorer's page, llama_block's model name)
# translates that error instead of testing the condition again.

SRC = Path(attention_lab.__file__).parent
HEADS_MESSAGE = (
    "d_model=30 is not divisible by n_heads=4; pick d_model as a multiple of n_heads "
    "(for example d_model=28 or 32)"
)
KV_MESSAGE = (
    "n_heads=4 is not divisible by n_kv_heads=3; each key/value head serves a group of "
    "n_heads // n_kv_heads query heads, so pick one of 1, 2, 4 (1: multi-query attention, "
    "4: plain multi-head)"
)
POSITIVE_MESSAGE = "n_heads=0 must be a whole number >= 1; pass a positive int, e.g. n_heads=4"
DROPOUT_MESSAGE = (
    "dropout=1.0 must be in [0, 1): it is the probability of dropping an attention weight; "
    "use 0.0 to switch dropout off"
)


def _modulo_by(node: ast.AST, side: str) -> bool:
    """``node`` is ``a % b`` with ``n_heads`` (self.n_heads, model.n_heads, ...) on ``side``."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod)):
        return False
    return re.search(r"(^|\.)n_heads$", ast.unparse(getattr(node, side))) is not None


# rule -> (a fragment of its message, a test of its condition on one AST node or None, a
# regex of its condition in the source or None)
RULES = {
    "n_heads divides d_model": (
        "is not divisible by n_heads=",
        lambda node: _modulo_by(node, "right"),
        None,
    ),
    "n_kv_heads divides n_heads": (
        "is not divisible by n_kv_heads=",
        lambda node: _modulo_by(node, "left"),
        None,
    ),
    "sizes are whole numbers >= 1": (
        "must be a whole number >= 1;",
        None,
        r"\bis None or \w+ < 1\b",
    ),
    "dropout lies in [0, 1)": (
        "it is the probability of dropping an attention weight",
        None,
        r"0\.0 <= float\(\w+\) < 1\.0",
    ),
}


def _sources() -> dict[str, str]:
    return {
        path.relative_to(SRC).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(SRC.rglob("*.py"))
    }


@pytest.mark.parametrize("rule", RULES)
def test_each_rule_is_decided_and_worded_in_one_module(rule):
    fragment, node_test, pattern = RULES[rule]
    worded, decided = set(), set()
    for name, source in _sources().items():
        tree = ast.parse(source)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if fragment in node.value:
                    worded.add(name)
            if node_test is not None and node_test(node):
                decided.add(name)
        if pattern is not None and re.search(pattern, source):
            decided.add(name)
    assert worded == {"_checks.py"}, f"{rule}: message worded in {sorted(worded)}"
    assert decided == {"_checks.py"}, f"{rule}: condition tested in {sorted(decided)}"


def _page_message(ex) -> str:
    """The problem the explorer shows in its page, as the reader reads it."""
    text = ex.message.value
    assert "Traceback" not in text and ex.image.layout.display == "none"
    return html.unescape(re.search(r"</b> (.*)</div>$", text, re.DOTALL).group(1))


def _explorer_with(**forced) -> str:
    """The explorer's page after controls are forced from code to a setting they never
    offer (the settings boundary: the page shows the problem, never a traceback)."""
    from attention_lab.viz.explorer.widgets import AttentionExplorer

    ex = AttentionExplorer(n_heads=4, d_model=32, diagram=False)
    for name, options in forced.items():
        getattr(ex, name).options = options
    return _page_message(ex)


def _llama_block(**sizes):
    from attention_lab.published import PUBLISHED_MODELS
    from attention_lab.viz.diagrams import llama_block

    llama = next(m for m in PUBLISHED_MODELS if m.name == "Llama 3.1 8B")
    return llama_block(dataclasses.replace(llama, **sizes))


def _head_split(*sizes):
    from attention_lab.viz.diagrams import head_split

    return head_split(*sizes)


def _dropout_row(p):
    from attention_lab.viz.diagrams import dropout_row

    return dropout_row([0.5, 0.5], p)


# rule -> boundary -> (how it is given the bad value, the exact message it raises)
BOUNDARIES = {
    "n_heads divides d_model": {
        "TinyLMConfig": lambda: TinyLMConfig(d_model=30, n_heads=4),
        "DecoderConfig": lambda: DecoderConfig(10, d_model=30, n_heads=4),
        "CharLMConfig": lambda: CharLMConfig(vocab_size=62, d_model=30, n_heads=4),
        "TinyLM": lambda: TinyLM(d_model=30, n_heads=4),
        "MultiHeadSelfAttention": lambda: MultiHeadSelfAttention(30, 4, 8),
        "MultiHeadAttention": lambda: MultiHeadAttention(30, 4, 8),
        "LatentAttention": lambda: LatentAttention(30, 4, 8, d_latent=8),
        "head_split": lambda: _head_split(6, 30, 4),
        "explorer page": lambda: _explorer_with(d_model=(30,)),
    },
    "n_kv_heads divides n_heads": {
        "TinyLMConfig": lambda: TinyLMConfig(n_heads=4, n_kv_heads=3),
        "DecoderConfig": lambda: DecoderConfig(10, n_heads=4, n_kv_heads=3),
        "CharLMConfig": lambda: CharLMConfig(vocab_size=62, n_heads=4, n_kv_heads=3),
        "MultiHeadSelfAttention": lambda: MultiHeadSelfAttention(32, 4, 8, n_kv_heads=3),
        "explorer page": lambda: _explorer_with(n_kv_heads=[("3", 3)]),
        "llama_block": lambda: _llama_block(n_heads=4, n_kv_heads=3),
    },
    "sizes are whole numbers >= 1": {
        "TinyLMConfig": lambda: TinyLMConfig(n_heads=0),
        "DecoderConfig": lambda: DecoderConfig(10, n_heads=0),
        "CharLMConfig": lambda: CharLMConfig(vocab_size=62, n_heads=0),
        "MultiHeadSelfAttention": lambda: MultiHeadSelfAttention(32, 0, 8),
        "MultiHeadAttention": lambda: MultiHeadAttention(32, 0, 8),
    },
    "dropout lies in [0, 1)": {
        "DecoderConfig": lambda: DecoderConfig(10, dropout=1.0),
        "CharLMConfig": lambda: CharLMConfig(vocab_size=62, dropout=1.0),
        "MultiHeadSelfAttention": lambda: MultiHeadSelfAttention(32, 4, 8, dropout=1.0),
        "attention": lambda: attention(*[torch.randn(1, 4, 8)] * 3, dropout_p=1.0),
    },
}
EXPECTED = {
    "n_heads divides d_model": HEADS_MESSAGE,
    "n_kv_heads divides n_heads": KV_MESSAGE,
    "sizes are whole numbers >= 1": POSITIVE_MESSAGE,
    "dropout lies in [0, 1)": DROPOUT_MESSAGE,
}
CASES = [(rule, where) for rule, boundaries in BOUNDARIES.items() for where in boundaries]


@pytest.mark.parametrize(("rule", "where"), CASES, ids=[f"{r}-{w}" for r, w in CASES])
def test_every_boundary_gives_the_one_message_of_its_rule(rule, where):
    expected = EXPECTED[rule]
    if where == "llama_block":  # the model's name, then the library's message
        expected = f"Llama 3.1 8B: {expected}"
    if where == "explorer page":  # shown in the page, never raised
        assert BOUNDARIES[rule][where]() == expected
        return
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        BOUNDARIES[rule][where]()


def test_callers_that_word_a_rule_for_their_argument_still_leave_the_decision_to_checks():
    """n_layers (config) and dropout_row's p word the rule for their argument; whether a
    value passes is check_positive's and check_dropout's, so they take the same values."""
    for bad in (0, -1, 2.0, True, "2"):
        with pytest.raises(ValueError, match=r"^n_layers=.* must be a whole number >= 1: how"):
            CharLMConfig(vocab_size=62, n_layers=bad)
    assert CharLMConfig(vocab_size=62, n_layers=np.int64(3)).n_layers == 3
    with pytest.raises(
        ValueError, match=re.escape("p=1.0 must be in [0, 1): the probability of dropping a weight")
    ):
        _dropout_row(1.0)
    _dropout_row(0)  # an int in [0, 1) passes, as with check_dropout


def _ids(*shape, dtype=torch.int64):
    return torch.zeros(shape, dtype=dtype)


# every message of _checks.py, word for word: (call, exception type, the exact message)
CHECKS_MESSAGES = [
    (lambda: check_heads(30, 4), ValueError, HEADS_MESSAGE),
    (
        lambda: check_heads(3, 4),
        ValueError,
        "d_model=3 is not divisible by n_heads=4; pick d_model as a multiple of n_heads "
        "(for example d_model=4)",
    ),
    (lambda: check_kv_heads(4, 3), ValueError, KV_MESSAGE),
    (
        lambda: check_rope_base(1),
        ValueError,
        "rope_base=1 must be a number > 1: the slowest pair turns by position / rope_base; "
        "Llama 2 uses 10000.0, Llama 3 500000.0",
    ),
    (lambda: check_positive("n_heads", 0), ValueError, POSITIVE_MESSAGE),
    (
        lambda: check_positive("d_model", -1),
        ValueError,
        "d_model=-1 must be a whole number >= 1; pass a positive int, e.g. d_model=32",
    ),
    (
        lambda: check_positive("window", 2.0),
        ValueError,
        "window=2.0 must be a whole number >= 1; pass window=2",
    ),
    (lambda: check_dropout(1.0), ValueError, DROPOUT_MESSAGE),
    (
        lambda: check_float_tensor([1.0]),
        TypeError,
        "x must be a torch.Tensor, got list; convert it with torch.as_tensor(x, "
        "dtype=torch.float32)",
    ),
    (
        lambda: check_float_tensor(_ids(2), "q"),
        TypeError,
        "q has dtype torch.int64, but attention needs floating-point vectors; token ids go "
        "through an nn.Embedding first (or call .float() on real-valued data)",
    ),
    (
        lambda: check_input(torch.zeros(6, 8), 8),
        ValueError,
        "x has shape (6, 8) (rank 2), but attention modules take (B, T, D) = (batch, time, "
        "features); add a batch dimension with x.unsqueeze(0)",
    ),
    (
        lambda: check_input(torch.zeros(1, 2, 6, 8), 8),
        ValueError,
        "x has shape (1, 2, 6, 8) (rank 4), but attention modules take (B, T, D) = (batch, "
        "time, features); reshape it to rank 3",
    ),
    (
        lambda: check_input(torch.zeros(1, 5, 7), 8),
        ValueError,
        "x has 7 features in its last dimension, but this module was built for 8; project "
        "the input to 8 features or build the module with that size",
    ),
    (
        lambda: check_input(torch.zeros(1, 9, 8), 8, 8),
        ValueError,
        "x has T=9 positions, more than context_length=8; build the module with "
        "context_length>=9 or feed a shorter sequence",
    ),
    (
        lambda: check_mask("m", 4, 4),
        TypeError,
        "mask must be a torch.Tensor of dtype bool, got str",
    ),
    (
        lambda: check_mask(torch.zeros(4, 4), 4, 4),
        TypeError,
        "mask has dtype torch.float32; it must be torch.bool with True = blocked (build one "
        "with attention_lab.causal_mask, or convert with mask.bool())",
    ),
    (
        lambda: check_mask(causal_mask(5), 4, 4),
        ValueError,
        "mask has shape (5, 5), but the scores are (..., 4, 4); slice it with mask[:4, :4] "
        "or build it for this length",
    ),
    (
        lambda: check_qkv(torch.zeros(1, 4, 8), torch.zeros(1, 4, 6), torch.zeros(1, 4, 8)),
        ValueError,
        "q has d_k=8 but k has d_k=6; queries and keys must have the same last dimension to "
        "take their dot product",
    ),
    (
        lambda: check_qkv(torch.zeros(1, 4, 8), torch.zeros(1, 4, 8), torch.zeros(1, 5, 8)),
        ValueError,
        "k has 4 positions but v has 5; each key needs one value",
    ),
    (
        lambda: check_scores_mask(torch.zeros(3, 4, 4, dtype=torch.bool), torch.Size([2, 4, 4])),
        ValueError,
        "mask has shape (3, 4, 4), which does not broadcast to the scores (2, 4, 4); pass a "
        "(4, 4) mask, or give it leading dimensions of size 1 or equal to (2,)",
    ),
    (
        lambda: check_token_ids([[1]], 10, 8),
        TypeError,
        "TinyLM takes token ids as an int64 tensor (B, T), got list; make one with "
        "torch.tensor(ids)",
    ),
    (
        lambda: check_token_ids(_ids(1, 3, dtype=torch.float32), 10, 8, "CharLM"),
        TypeError,
        "CharLM takes token ids as an int64 tensor (B, T), got torch.float32; convert "
        "whole-number ids with idx.long() (CharLM embeds the ids itself)",
    ),
    (
        lambda: check_token_ids(_ids(3), 10, 8),
        ValueError,
        "idx has shape (3,) (rank 1), but TinyLM takes (B, T) token ids; add a batch "
        "dimension with idx.unsqueeze(0)",
    ),
    (
        lambda: check_token_ids(_ids(1, 1, 3), 10, 8),
        ValueError,
        "idx has shape (1, 1, 3) (rank 3), but TinyLM takes (B, T) token ids; reshape it",
    ),
    (
        lambda: check_token_ids(_ids(1, 9), 10, 8, "CharLM"),
        ValueError,
        "idx has T=9 positions, more than context_length=8; feed the last ones, "
        "idx[:, -8:], or build CharLM with context_length>=9",
    ),
    (
        lambda: check_token_ids(torch.tensor([[-1, 2]]), 10, 8),
        ValueError,
        "token ids must lie in [0, 10) for vocab_size=10; got values from -1 to 2; ids are "
        "row numbers of the embedding table and cannot be negative",
    ),
    (
        lambda: check_token_ids(torch.tensor([[1, 12]]), 10, 8),
        ValueError,
        "token ids must lie in [0, 10) for vocab_size=10; got values from 1 to 12; encode "
        "with the vocabulary TinyLM was built for, or build TinyLM with vocab_size>=13",
    ),
]


@pytest.mark.parametrize(("call", "exc", "expected"), CHECKS_MESSAGES)
def test_every_message_of_checks_word_for_word(call, exc, expected):
    assert message(exc, call) == expected


def _checks_templates() -> list[str]:
    """Every message _checks.py words: the literal passed to ``error_text``."""
    tree = ast.parse((SRC / "_checks.py").read_text(encoding="utf-8"))
    return [
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", None) == "error_text"
        and isinstance(node.args[0], ast.Constant)
    ]


def test_every_message_of_checks_is_pinned_above():
    """No message of _checks.py can change unread: each template, its {fields} filled with
    anything, matches one of the exact messages of CHECKS_MESSAGES."""
    templates = _checks_templates()
    assert len(templates) == 26
    pinned = [expected for _, _, expected in CHECKS_MESSAGES]
    for template in templates:
        pattern = re.sub(r"\\\{\w+\\\}", ".+", re.escape(template))
        assert any(re.fullmatch(pattern, text) for text in pinned), template
