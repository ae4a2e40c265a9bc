"""What every attention module of the library promises, checked on each of them at once.

One parametrised test per promise, over every module (and both paths of the fused block):
causality (over conftest's CAUSAL_CASES: every causal module and path, TinyLM's included, and
it fails on every module without a causal mask), state that loads across context lengths,
float64 end to end, the mask is derived state (not in checkpoints, follows ``.to``),
dropout only in training, fp16/bf16 agree with float32, gradients are right
(``torch.autograd.gradcheck`` in float64), and a sequence of one token works.
"""

from __future__ import annotations

import pytest
import torch

from attention_lab import CausalAttention, MultiHeadAttention, MultiHeadSelfAttention
from attention_lab.masks import build_mask
from tests.conftest import (
    ALL_MODULES,
    CAUSAL_CASES,
    CONTEXT,
    NON_CAUSAL_CASES,
    B,
    D,
    T,
    assert_future_does_not_leak,
    case_ids,
    make_input,
    make_module,
    run,
)

MASKED = ["causal", "multihead", "fused", "fused_sliding", "fused_none"]
# (module, return_weights): every module's one path, and the fused block's two
PATHS = [(name, False) for name in ALL_MODULES] + [
    (name, True) for name in ("fused", "fused_sliding", "fused_none")
]
PATH_IDS = case_ids(PATHS)
# SingleHeadAttention has neither mask nor dropout
DROPOUT_PATHS = [(n, w) for n, w in PATHS if n != "single"]
DROPOUT_IDS = [i for i, (n, _) in zip(PATH_IDS, PATHS) if n != "single"]


@pytest.mark.parametrize("name, return_weights", CAUSAL_CASES, ids=case_ids(CAUSAL_CASES))
def test_future_tokens_do_not_change_earlier_outputs(name, return_weights):
    module = make_module(name)
    x = make_input(name)  # (B, T, D), or (B, T) token ids for a TinyLM
    for t in range(T - 1):
        assert_future_does_not_leak(lambda inp: run(module, inp, return_weights), x, t)


@pytest.mark.parametrize("name, return_weights", NON_CAUSAL_CASES, ids=case_ids(NON_CAUSAL_CASES))
def test_the_causality_test_fails_on_a_module_without_a_causal_mask(name, return_weights):
    """The same check fails when the future may leak: the causality test can fail."""
    module = make_module(name)
    x = make_input(name)
    with pytest.raises(AssertionError):
        assert_future_does_not_leak(lambda inp: run(module, inp, return_weights), x, t=2)


@pytest.mark.parametrize(
    "build",
    [
        lambda ctx: MultiHeadSelfAttention(8, 2, ctx),
        lambda ctx: MultiHeadAttention(8, 2, ctx),
        lambda ctx: CausalAttention(8, 8, ctx),
    ],
    ids=["fused", "multihead", "causal"],
)
def test_state_loads_across_context_lengths(build):
    small, large = build(6).eval(), build(16).eval()
    large.load_state_dict(small.state_dict())
    x = torch.randn(2, 6, 8)  # (B, T, D): fits both
    torch.testing.assert_close(large(x), small(x), rtol=0, atol=0)
    assert large.mask.shape == (16, 16) and small.mask.shape == (6, 6)


@pytest.mark.parametrize("name, return_weights", PATHS, ids=PATH_IDS)
def test_every_module_works_in_float64_end_to_end(name, return_weights):
    module = make_module(name).double()
    x = torch.randn(B, T, D, dtype=torch.float64)  # (B, T, D)
    out = run(module, x, return_weights)
    assert out.dtype == torch.float64
    out.sum().backward()
    assert all(p.grad is not None and p.grad.dtype == torch.float64 for p in module.parameters())


@pytest.mark.parametrize("name", MASKED)
def test_the_mask_is_derived_state_not_a_parameter_nor_in_the_checkpoint(name):
    module = make_module(name)
    assert "mask" not in module.state_dict()
    assert "mask" not in dict(module.named_parameters())
    assert module.mask.dtype == torch.bool and module.mask.shape == (CONTEXT, CONTEXT)
    kind = getattr(module, "mask_kind", "causal")
    assert torch.equal(module.mask, build_mask(kind, CONTEXT, getattr(module, "window", None)))


@pytest.mark.parametrize("name", MASKED)
def test_the_mask_follows_the_module_and_keeps_its_dtype(name):
    module = make_module(name).to(torch.float64)
    assert module.mask.dtype == torch.bool
    weight = next(module.parameters())
    assert module.mask.device == weight.device and weight.dtype == torch.float64


@pytest.mark.parametrize("name, return_weights", DROPOUT_PATHS, ids=DROPOUT_IDS)
def test_dropout_is_off_in_eval_mode(name, return_weights):
    with_dropout = make_module(name, dropout=0.5).eval()
    without = make_module(name, dropout=0.0).eval()
    without.load_state_dict(with_dropout.state_dict())
    x = torch.randn(B, T, D)  # (B, T, D)
    torch.testing.assert_close(
        run(with_dropout, x, return_weights), run(without, x, return_weights), rtol=0, atol=0
    )


@pytest.mark.parametrize("name, return_weights", DROPOUT_PATHS, ids=DROPOUT_IDS)
def test_dropout_is_on_in_train_mode(name, return_weights):
    module = make_module(name, dropout=0.5)
    x = torch.randn(B, T, D)  # (B, T, D)
    reference = run(module.eval(), x, return_weights)
    assert not torch.allclose(run(module.train(), x, return_weights), reference)


@pytest.mark.parametrize("name", ALL_MODULES)
def test_every_module_keeps_dropout_as_an_nn_dropout(name):
    """One convention: ``module.dropout`` is an nn.Dropout (or absent: no mask, no dropout)."""
    module = make_module(name)
    if name == "single":
        assert not hasattr(module, "dropout")
    else:
        assert isinstance(module.dropout, torch.nn.Dropout)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("name, return_weights", PATHS, ids=PATH_IDS)
def test_half_precision_agrees_with_float32_on_the_cpu(name, return_weights, dtype):
    module = make_module(name)
    x = torch.randn(B, T, D)  # (B, T, D)
    expected = run(module, x, return_weights)
    got = run(module.to(dtype), x.to(dtype), return_weights)
    assert got.dtype == dtype
    tol = 2e-2 if dtype == torch.float16 else 6e-2  # bf16 keeps 8 bits of mantissa
    torch.testing.assert_close(got.float(), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["fused", "fused_sliding", "fused_none"])
def test_both_paths_agree_in_half_precision_too(name):
    module = make_module(name).to(torch.bfloat16)
    x = torch.randn(B, T, D, dtype=torch.bfloat16)  # (B, T, D)
    torch.testing.assert_close(run(module, x, True), run(module, x, False), rtol=3e-2, atol=3e-2)


@pytest.mark.parametrize("name, return_weights", PATHS, ids=PATH_IDS)
def test_gradients_match_finite_differences_in_float64(name, return_weights):
    module = make_module(name, d_model=4, n_heads=2).double()
    x = torch.randn(1, 3, 4, dtype=torch.float64, requires_grad=True)  # (B, T, D)
    assert torch.autograd.gradcheck(lambda inp: run(module, inp, return_weights), (x,))


@pytest.mark.parametrize("name, return_weights", PATHS, ids=PATH_IDS)
def test_a_single_token_attends_only_to_itself(name, return_weights):
    module = make_module(name)
    x = torch.randn(B, 1, D)  # (B, T=1, D)
    out = run(module, x, return_weights)
    assert out.shape == (B, 1, module_out_features(module))
    if return_weights or name in ("single", "causal", "multihead"):
        _, weights = module(x, return_weights=True)
        torch.testing.assert_close(weights, torch.ones_like(weights))


def module_out_features(module) -> int:
    return getattr(module, "d_out", getattr(module, "d_model", D))


@pytest.mark.parametrize(
    "build, biases",
    [
        (lambda: CausalAttention(D, D, CONTEXT), set()),
        (lambda: CausalAttention(D, D, CONTEXT, qkv_bias=True), {"W_q", "W_k", "W_v"}),
        (lambda: MultiHeadAttention(D, 2, CONTEXT), {"W_o"}),
        (
            lambda: MultiHeadAttention(D, 2, CONTEXT, qkv_bias=True, out_bias=False),
            {"W_q", "W_k", "W_v"},
        ),
        (lambda: MultiHeadSelfAttention(D, 2, CONTEXT), {"qkv", "out_proj"}),
        (lambda: MultiHeadSelfAttention(D, 2, CONTEXT, qkv_bias=False), {"out_proj"}),
        (lambda: MultiHeadSelfAttention(D, 2, CONTEXT, out_bias=False), {"qkv"}),
    ],
)
def test_bias_flags_mean_the_same_in_every_module(build, biases):
    """``qkv_bias`` switches the Q/K/V projections' biases, ``out_bias`` the output's."""
    names = {n.removesuffix(".bias") for n, _ in build().named_parameters() if n.endswith("bias")}
    assert names == biases
