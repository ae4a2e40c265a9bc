"""The weight converters (``MultiHeadSelfAttention.from_separate``, ``to_separate``,
``from_torch`` and ``to_torch``, convert.py; notebook 07): the same function, every bias
kept, dtype, device, dropout and train/eval mode kept, and a refusal in words for what
cannot be represented.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from attention_lab import (
    MultiHeadAttention,
    MultiHeadSelfAttention,
    causal_mask,
    sliding_window_mask,
)
from tests.conftest import CONTEXT, B, D, H, T, make_module, message

# --- MultiHeadAttention <-> MultiHeadSelfAttention ------------------------------------


def test_from_separate_computes_the_same_function_as_multihead_attention():
    separate = MultiHeadAttention(D, H, CONTEXT).eval()
    fused = MultiHeadSelfAttention.from_separate(separate).eval()
    x = torch.randn(B, T, D)  # (B, T, D)
    out_sep, w_sep = separate(x, return_weights=True)
    out_fused, w_fused = fused(x, return_weights=True)
    torch.testing.assert_close(out_fused, out_sep)
    torch.testing.assert_close(fused(x), out_sep)  # the SDPA path too
    torch.testing.assert_close(w_fused, w_sep)


def test_from_separate_keeps_qkv_biases():
    separate = MultiHeadAttention(D, H, CONTEXT, qkv_bias=True).eval()
    with torch.no_grad():
        for layer in (separate.W_q, separate.W_k, separate.W_v):
            layer.bias.normal_()
    fused = MultiHeadSelfAttention.from_separate(separate).eval()
    x = torch.randn(B, T, D)  # (B, T, D)
    torch.testing.assert_close(fused(x), separate(x))


@pytest.mark.parametrize("bias", [True, False])
def test_to_separate_round_trips_the_weights(bias):
    fused = MultiHeadSelfAttention(D, H, CONTEXT, qkv_bias=bias, out_bias=bias).eval()
    separate = fused.to_separate().eval()
    x = torch.randn(B, T, D)  # (B, T, D)
    torch.testing.assert_close(separate(x), fused(x))
    back = MultiHeadSelfAttention.from_separate(separate)
    torch.testing.assert_close(back.qkv.weight, fused.qkv.weight, rtol=0, atol=0)
    torch.testing.assert_close(back.out_proj.weight, fused.out_proj.weight, rtol=0, atol=0)
    if bias:
        torch.testing.assert_close(back.qkv.bias, fused.qkv.bias, rtol=0, atol=0)
        torch.testing.assert_close(back.out_proj.bias, fused.out_proj.bias, rtol=0, atol=0)
    torch.testing.assert_close(back.eval()(x), fused(x))


def test_to_separate_refuses_a_block_that_is_not_causal():
    with pytest.raises(ValueError, match="mask_kind='sliding'"):
        make_module("fused_sliding").to_separate()


# --- nn.MultiheadAttention <-> MultiHeadSelfAttention ---------------------------------


def _torch_mha(bias: bool = True, batch_first: bool = True) -> nn.MultiheadAttention:
    mha = nn.MultiheadAttention(D, H, bias=bias, batch_first=batch_first).eval()
    if bias:  # PyTorch starts its biases at zero: make them count
        with torch.no_grad():
            mha.in_proj_bias.normal_()
            mha.out_proj.bias.normal_()
    return mha


@pytest.mark.parametrize("bias", [True, False])
def test_from_torch_matches_torch_multihead_attention(bias):
    reference = _torch_mha(bias)
    block = MultiHeadSelfAttention.from_torch(reference, context_length=CONTEXT).eval()
    x = torch.randn(B, T, D)  # (B, T, D)
    # A boolean attn_mask in nn.MultiheadAttention uses our convention: True = blocked.
    expected, expected_w = reference(
        x, x, x, attn_mask=causal_mask(T), need_weights=True, average_attn_weights=False
    )  # (B, T, D), (B, H, T, T)
    out, weights = block(x, return_weights=True)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(block(x), expected)
    torch.testing.assert_close(weights, expected_w)
    _, averaged = reference(x, x, x, attn_mask=causal_mask(T), need_weights=True)  # (B, T, T)
    torch.testing.assert_close(weights.mean(dim=1), averaged)


def test_from_torch_takes_a_sequence_first_module_too():
    reference = _torch_mha(batch_first=False)
    block = MultiHeadSelfAttention.from_torch(reference, context_length=CONTEXT).eval()
    x = torch.randn(B, T, D)  # (B, T, D)
    xt = x.transpose(0, 1)  # (T, B, D): what a batch_first=False module takes
    expected, _ = reference(xt, xt, xt, attn_mask=causal_mask(T))
    torch.testing.assert_close(block(x), expected.transpose(0, 1))


@pytest.mark.parametrize("bias", [True, False])
def test_to_torch_gives_a_batch_first_module_with_the_same_function(bias):
    block = MultiHeadSelfAttention(D, H, CONTEXT, qkv_bias=bias, out_bias=bias).eval()
    if bias:
        with torch.no_grad():
            block.qkv.bias.normal_()
    reference = block.to_torch().eval()
    assert reference.batch_first and reference.num_heads == H
    x = torch.randn(B, T, D)  # (B, T, D)
    expected, expected_w = reference(
        x, x, x, attn_mask=causal_mask(T), need_weights=True, average_attn_weights=False
    )
    out, weights = block(x, return_weights=True)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(weights, expected_w)
    # And back again: the same weights, exactly.
    again = MultiHeadSelfAttention.from_torch(reference, CONTEXT)
    for name, param in block.named_parameters():
        torch.testing.assert_close(dict(again.named_parameters())[name], param, rtol=0, atol=0)


def test_from_torch_refuses_a_module_it_cannot_represent():
    with pytest.raises(ValueError, match="add_bias_kv"):
        MultiHeadSelfAttention.from_torch(nn.MultiheadAttention(D, H, add_bias_kv=True), CONTEXT)
    with pytest.raises(TypeError, match="nn.MultiheadAttention"):
        MultiHeadSelfAttention.from_torch(nn.Linear(D, D), CONTEXT)


# --- biases ---------------------------------------------------------------------------


def _randomise_biases(module: nn.Module) -> nn.Module:
    with torch.no_grad():
        for name, param in module.named_parameters():
            if name.endswith("bias"):
                param.normal_()
    return module


@pytest.mark.parametrize("qkv_bias", [False, True])
@pytest.mark.parametrize("out_bias", [False, True])
def test_separate_to_fused_and_back_keeps_keys_and_outputs(qkv_bias, out_bias):
    separate = _randomise_biases(
        MultiHeadAttention(8, 2, 10, qkv_bias=qkv_bias, out_bias=out_bias)
    ).eval()
    fused = MultiHeadSelfAttention.from_separate(separate)
    back = fused.to_separate()
    assert (fused.qkv.bias is not None) == qkv_bias
    assert (fused.out_proj.bias is not None) == out_bias
    assert back.state_dict().keys() == separate.state_dict().keys()
    separate.load_state_dict(back.state_dict())  # strict load works
    x = torch.randn(2, 6, 8)
    torch.testing.assert_close(fused(x), separate(x), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(back(x), separate(x), rtol=0, atol=0)


@pytest.mark.parametrize("bias", [False, True])
def test_fused_to_torch_and_back_keeps_keys_and_outputs(bias):
    block = _randomise_biases(MultiHeadSelfAttention(8, 2, 10, qkv_bias=bias, out_bias=bias))
    block.eval()
    mha = block.to_torch()
    back = MultiHeadSelfAttention.from_torch(mha, 10)
    assert back.state_dict().keys() == block.state_dict().keys()
    x = torch.randn(2, 6, 8)
    expected, _ = mha(x, x, x, attn_mask=causal_mask(6))
    torch.testing.assert_close(block(x), expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(back(x), block(x), rtol=0, atol=0)


@pytest.mark.parametrize("kind, window", [("sliding", 3), ("none", None)])
def test_to_torch_refuses_a_block_that_is_not_causal(kind, window):
    block = MultiHeadSelfAttention(8, 2, 10, mask_kind=kind, window=window)
    with pytest.raises(ValueError, match=f"mask_kind='{kind}'.*attn_mask=block.mask"):
        block.to_torch()


def test_to_torch_refuses_biases_it_cannot_represent():
    with pytest.raises(ValueError, match="qkv_bias=True and out_bias=False.*qkv_bias == out_bias"):
        MultiHeadSelfAttention(8, 2, 10, out_bias=False).to_torch()


def test_from_torch_takes_the_mask_kind_and_then_matches_torch_given_that_mask():
    mha = _randomise_biases(nn.MultiheadAttention(8, 2, batch_first=True)).eval()
    block = MultiHeadSelfAttention.from_torch(mha, 10, mask_kind="sliding", window=3)
    assert block.mask_kind == "sliding" and block.window == 3
    x = torch.randn(2, 6, 8)
    expected, _ = mha(x, x, x, attn_mask=sliding_window_mask(6, 3))
    torch.testing.assert_close(block(x), expected, rtol=1e-5, atol=1e-6)
    explicit, _ = block(x, return_weights=True)  # both paths agree
    torch.testing.assert_close(block(x), explicit, rtol=1e-5, atol=1e-6)


# --- train/eval mode, dropout, dtype, device ------------------------------------------


@pytest.mark.parametrize("training", [True, False])
def test_conversions_keep_the_train_or_eval_mode(training):
    """A converted copy must drop (or not drop) weights exactly when the original does."""
    # qkv_bias=True: nn.MultiheadAttention has one bias flag, so both projections need one
    separate = MultiHeadAttention(D, H, CONTEXT, dropout=0.1, qkv_bias=True).train(training)
    fused = MultiHeadSelfAttention.from_separate(separate)
    assert fused.training is training
    assert fused.to_separate().training is training
    reference = fused.to_torch()
    assert reference.training is training
    assert MultiHeadSelfAttention.from_torch(reference, CONTEXT).training is training


def test_a_block_from_an_eval_mode_torch_module_with_dropout_matches_it():
    reference = nn.MultiheadAttention(D, H, dropout=0.5, batch_first=True).eval()
    block = MultiHeadSelfAttention.from_torch(reference, CONTEXT)
    x = torch.randn(B, T, D)  # (B, T, D)
    expected, _ = reference(x, x, x, attn_mask=causal_mask(T))
    torch.testing.assert_close(block(x), expected)


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


# --- refusals, in words ---------------------------------------------------------------


def test_to_torch_refusals_say_what_to_do_instead():
    unmasked = MultiHeadSelfAttention(D, H, CONTEXT, mask_kind="none")
    assert message(ValueError, unmasked.to_torch) == (
        "to_torch() converts causal blocks only; this block has mask_kind='none'. "
        "nn.MultiheadAttention keeps no mask: copy the weights yourself and pass "
        "attn_mask=block.mask[:T, :T] on every call"
    )
    one_bias = MultiHeadSelfAttention(D, H, CONTEXT, qkv_bias=True, out_bias=False)
    assert message(ValueError, one_bias.to_torch) == (
        "nn.MultiheadAttention has one bias flag for both projections, but this block has "
        "qkv_bias=True and out_bias=False; build the block with qkv_bias == out_bias to "
        "convert it"
    )


def test_from_torch_refusals_name_what_converts():
    zero_attn = nn.MultiheadAttention(D, H, add_zero_attn=True)
    assert message(ValueError, lambda: MultiHeadSelfAttention.from_torch(zero_attn, 4)) == (
        "only a plain nn.MultiheadAttention converts: kdim == vdim == embed_dim, "
        "add_bias_kv=False and add_zero_attn=False"
    )
    linear = nn.Linear(D, D)
    assert message(TypeError, lambda: MultiHeadSelfAttention.from_torch(linear, 4)) == (
        "expected torch.nn.MultiheadAttention, got Linear"
    )
    assert message(TypeError, lambda: MultiHeadSelfAttention.from_separate(linear)) == (
        "expected attention_lab.MultiHeadAttention, got Linear"
    )
