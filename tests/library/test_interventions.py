"""The interventions toolkit (attention_lab.interventions): each intervention is exact.

Ablating no head changes nothing; the model is restored after every context, even after an
exception; a zero or mean ablation equals the same change made by hand to the head's slice of
the context before ``out_proj``; frozen weights are the ones given; retraining the readout
changes only the readout; the source shares match hand counts. And the control the notebooks
use can fail: attention frozen even, a retrained readout does not recover the "previous" task,
while the model's own mean weights do.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

from attention_lab import (
    MultiHeadSelfAttention,
    TinyLM,
    TinyLMConfig,
    attention,
    make_batch,
    train_tiny_lm,
)
from attention_lab.charlm import CharLM, CharLMConfig, head_shares
from attention_lab.interventions import (
    ablate_heads,
    after_previous_occurrence,
    attention_layers,
    attention_weights,
    even_weights,
    freeze_attention,
    head_outputs,
    last_match_keys,
    mean_weights,
    readout_parameters,
    retrain_readout,
    source_shares,
)
from attention_lab.multihead import merge_heads, split_heads
from tests.conftest import raises

B, T, D, H, VOCAB, CONTEXT = 3, 7, 16, 4, 20, 8
PATHS = [False, True]  # return_weights: the SDPA path and the explicit path


def tiny() -> TinyLM:
    return TinyLM(vocab_size=VOCAB, d_model=D, n_heads=H, context_length=CONTEXT).eval()


def charlm() -> CharLM:
    config = CharLMConfig(vocab_size=VOCAB, context_length=CONTEXT, d_model=D, n_heads=H)
    return CharLM(config).eval()


def ids(batch: int = B, length: int = T, seed: int = 1) -> torch.Tensor:
    return torch.randint(VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def logits(model, x, return_weights: bool) -> torch.Tensor:
    return model(x, return_weights=True)[0] if return_weights else model(x)


def n_hooks(model) -> int:
    return sum(len(m._forward_pre_hooks) + len(m._forward_hooks) for m in model.modules())


def by_hand(model: TinyLM, x: torch.Tensor, change) -> torch.Tensor:
    """TinyLM's forward written out, with ``change(merged)`` applied to the (B, T, D) context
    of the heads before ``out_proj``."""
    attn = model.attn
    h = model.tok_emb(x) + model.pos_emb(torch.arange(x.shape[1]))  # (B, T, D)
    q, k, v = (split_heads(t, H) for t in attn.qkv(h).split(D, dim=-1))  # (B, H, T, d_head)
    ctx, _ = attention(q, k, v, attn.mask[: x.shape[1], : x.shape[1]])  # (B, H, T, d_head)
    return model.lm_head(attn.out_proj(change(merge_heads(ctx))))  # (B, T, vocab)


def zero_slice(head: int, d_head: int = D // H):
    def change(merged):
        merged = merged.clone()
        merged[..., head * d_head : (head + 1) * d_head] = 0
        return merged

    return change


# ---------------------------------------------------------------- finding the layers


def test_attention_layers_are_found_in_forward_order_in_every_model():
    model = charlm()
    assert attention_layers(model) == [model.blocks[0].attn, model.blocks[1].attn]
    assert attention_layers(tiny().attn)[0].n_heads == H
    block = MultiHeadSelfAttention(D, H, CONTEXT)
    assert attention_layers(block) == [block]
    with raises(ValueError, "Linear", "MultiHeadSelfAttention"):
        attention_layers(torch.nn.Linear(2, 2))


# ---------------------------------------------------------------- ablation


@pytest.mark.parametrize("return_weights", PATHS)
@pytest.mark.parametrize("build", [tiny, charlm])
def test_ablating_no_head_changes_nothing(build, return_weights):
    model, x = build(), ids()
    before = logits(model, x, return_weights)
    for how in ("zero", "mean"):
        with ablate_heads(model, [], how=how, reference=ids(seed=2)):
            assert torch.equal(logits(model, x, return_weights), before)


@pytest.mark.parametrize("return_weights", PATHS)
def test_zero_ablation_equals_zeroing_the_heads_slice_by_hand(return_weights):
    model, x = tiny(), ids()
    with ablate_heads(model, [torch.tensor(2)]):  # any integer names a head
        ablated = logits(model, x, return_weights)
    expected = by_hand(model, x, zero_slice(2))
    torch.testing.assert_close(ablated, expected, rtol=0, atol=1e-6)
    # the ablation changed the output: this test could fail
    assert (ablated - logits(model, x, return_weights)).abs().max() > 1e-3


@pytest.mark.parametrize("return_weights", PATHS)
def test_mean_ablation_uses_the_reference_batchs_mean(return_weights):
    model, x, reference = tiny(), ids(), ids(batch=5, seed=3)
    d_head = D // H
    # the mean by hand: head 1's slice of the context on the reference, over rows and positions
    seen = []
    by_hand(model, reference, lambda merged: seen.append(merged) or merged)
    mean = seen[0][..., d_head : 2 * d_head].mean(dim=(0, 1))  # (d_head,)
    torch.testing.assert_close(head_outputs(model, reference)[:, :, 1].mean(dim=(0, 1)), mean)

    def put_mean(merged):
        merged = merged.clone()
        merged[..., d_head : 2 * d_head] = mean
        return merged

    with ablate_heads(model, [1], how="mean", reference=reference):
        ablated = logits(model, x, return_weights)
    torch.testing.assert_close(ablated, by_hand(model, x, put_mean), rtol=0, atol=1e-6)
    # another reference batch gives another mean, so the test would see the wrong batch
    with ablate_heads(model, [1], how="mean", reference=ids(batch=5, seed=4)):
        assert (logits(model, x, return_weights) - ablated).abs().max() > 1e-4


@pytest.mark.parametrize("return_weights", PATHS)
def test_ablating_a_head_of_layer_1_changes_only_what_that_head_contributes(return_weights):
    model, x, head = charlm(), ids(), 3
    d_head = D // H

    def contexts():  # the input of each layer's out_proj, and the logits
        seen = []
        hooks = [
            block.attn.out_proj.register_forward_pre_hook(lambda _m, a: seen.append(a[0]))
            for block in model.blocks
        ]
        out = logits(model, x, return_weights)
        for hook in hooks:
            hook.remove()
        return seen, out

    (c0, c1), plain = contexts()
    with ablate_heads(model, [(1, head)]):
        (a0, a1), ablated = contexts()
    assert torch.equal(a0, c0)  # layer 0 untouched
    cut = slice(head * d_head, (head + 1) * d_head)
    assert torch.equal(a1[..., cut], torch.zeros_like(a1[..., cut]))
    keep = torch.ones(D, dtype=torch.bool)
    keep[cut] = False
    assert torch.equal(a1[..., keep], c1[..., keep])  # the other heads of layer 1 untouched
    # the logits by hand: block 1 with the head's slice zeroed, then the final layer norm
    block1 = model.blocks[1]
    pos = torch.arange(T)
    h1 = model.blocks[0](model.tok_emb(x) + model.pos_emb(pos))  # (B, T, D)
    h2 = h1 + block1.attn.out_proj(zero_slice(head)(c1))  # (B, T, D)
    h2 = h2 + block1.mlp(block1.ln2(h2))  # (B, T, D)
    expected = model.lm_head(model.ln_f(h2))  # (B, T, vocab)
    torch.testing.assert_close(ablated, expected, rtol=0, atol=1e-5)
    assert (ablated - plain).abs().max() > 1e-3


@pytest.mark.skipif(
    "n_layers" not in TinyLMConfig.__dataclass_fields__, reason="TinyLM has one layer only"
)
def test_a_two_layer_tiny_lm_is_ablated_and_frozen_layer_by_layer():
    model, x = (
        TinyLM(vocab_size=VOCAB, d_model=D, n_heads=H, context_length=CONTEXT, n_layers=2),
        ids(),
    )
    model.eval()
    blocks = [block.attn for block in model.blocks]
    assert attention_layers(model) == blocks
    _, weights = model(x, return_weights=True)  # (B, L, H, T, T)
    with freeze_attention(model, even_weights(T), layer=1):
        _, frozen = model(x, return_weights=True)
    assert torch.equal(frozen[:, 0], weights[:, 0])
    assert torch.equal(frozen[:, 1], even_weights(T).expand(B, H, T, T))
    # ablating head 2 of layer 1 by hand: layer 1 adds out_proj of its zeroed context
    h0 = model.tok_emb(x) + model.pos_emb(torch.arange(T))  # (B, T, D)
    h1 = model.blocks[0](h0)  # (B, T, D)
    seen = []
    hook = blocks[1].out_proj.register_forward_pre_hook(lambda _m, a: seen.append(a[0]))
    plain = model(x)
    hook.remove()
    expected = model.lm_head(h1 + blocks[1].out_proj(zero_slice(2)(seen[0])))  # (B, T, vocab)
    with ablate_heads(model, [(1, 2)]):
        ablated = model(x)
    torch.testing.assert_close(ablated, expected, rtol=0, atol=1e-6)
    assert (ablated - plain).abs().max() > 1e-3


@pytest.mark.parametrize("build", [tiny, charlm])
def test_the_model_is_restored_after_every_context_even_after_an_exception(build):
    model, x = build(), ids()
    before, weights_before = model(x, return_weights=True)
    hooks = n_hooks(model)
    contexts = [
        lambda: ablate_heads(model, [(0, 1)]),
        lambda: ablate_heads(model, [(0, 0), (0, 2)], how="mean", reference=ids(seed=5)),
        lambda: freeze_attention(model, even_weights(T)),
    ]
    for make in contexts:
        with make():
            assert not torch.equal(model(x), before)
        with pytest.raises(RuntimeError, match="inside"), make():
            raise RuntimeError("inside")
        after, weights_after = model(x, return_weights=True)
        assert torch.equal(after, before) and torch.equal(weights_after, weights_before)
        assert n_hooks(model) == hooks
        assert all("forward" not in layer.__dict__ for layer in attention_layers(model))
    with raises(ValueError, "layers=[0]"):
        readout_parameters(model)  # no layer is frozen or ablated any more


# ---------------------------------------------------------------- frozen attention


@pytest.mark.parametrize("shape", [(T, T), (H, T, T), (1, H, T, T), (B, H, T, T)])
def test_frozen_weights_are_the_ones_given_and_drive_the_values(shape):
    model, x = tiny(), ids()
    raw = torch.rand(shape).masked_fill(model.attn.mask[:T, :T], 0)
    weights = raw / raw.sum(dim=-1, keepdim=True)
    with freeze_attention(model, weights):
        out, returned = model(x, return_weights=True)
        assert torch.equal(model(x), out)  # both paths use the frozen weights
    assert torch.equal(returned, weights.expand(B, H, T, T))
    attn = model.attn
    h = model.tok_emb(x) + model.pos_emb(torch.arange(T))  # (B, T, D)
    v = split_heads(attn.qkv(h)[..., 2 * D :], H)  # (B, H, T, d_head)
    expected = model.lm_head(attn.out_proj(merge_heads(weights @ v)))  # (B, T, vocab)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-6)


def test_shorter_inputs_use_the_top_left_corner_of_causal_weights():
    model, x = tiny(), ids(length=5)
    weights = even_weights(CONTEXT)
    with freeze_attention(model, weights):
        _, returned = model(x, return_weights=True)
    assert torch.equal(returned[0, 0], even_weights(5))


def test_even_weights_spread_evenly_over_the_visible_keys():
    w = even_weights(4)
    assert torch.equal(w[2], torch.tensor([1 / 3, 1 / 3, 1 / 3, 0]))
    assert torch.equal(even_weights(4, "sliding", window=2)[3], torch.tensor([0, 0, 0.5, 0.5]))
    assert torch.equal(even_weights(3, "none"), torch.full((3, 3), 1 / 3))


def test_mean_weights_are_the_layers_own_weights_averaged_over_the_batch():
    model, x = charlm(), ids()
    _, weights = model(x, return_weights=True)  # (B, L, H, T, T)
    # layer 0 runs its SDPA path here and the explicit one above: equal up to rounding
    torch.testing.assert_close(attention_weights(model, x, layer=1), weights[:, 1])
    assert torch.equal(attention_weights(model, x, layer=0), weights[:, 0])
    torch.testing.assert_close(mean_weights(model, x, layer=1), weights[:, 1].mean(dim=0))
    with freeze_attention(model, mean_weights(model, x, layer=1), layer=1):
        _, frozen = model(x, return_weights=True)
    assert torch.equal(frozen[:, 0], weights[:, 0])  # layer 0 is its own
    torch.testing.assert_close(frozen[:, 1], weights[:, 1].mean(dim=0).expand(B, H, T, T))


# ---------------------------------------------------------------- retraining the readout


def test_retraining_the_readout_changes_only_the_readout_and_restores_the_flags():
    model = tiny()
    model.tok_emb.weight.requires_grad_(False)  # a flag that must come back as it was
    flags = {name: p.requires_grad for name, p in model.named_parameters()}
    before = copy.deepcopy(model.state_dict())
    x, y = make_batch("previous", 64, CONTEXT, VOCAB, generator=torch.Generator().manual_seed(0))
    with freeze_attention(model, even_weights(CONTEXT)):
        names = list(readout_parameters(model))
        history = retrain_readout(model, (x, y), steps=5, lr=1e-2, batch_size=8)
    readout = ["attn.out_proj.weight", "attn.out_proj.bias", "lm_head.weight", "lm_head.bias"]
    assert names == history.parameters == readout
    after = model.state_dict()
    for name, value in before.items():
        if name in readout:
            assert not torch.equal(after[name], value), name
        else:
            assert torch.equal(after[name], value), name
    assert {name: p.requires_grad for name, p in model.named_parameters()} == flags
    assert not model.training  # eval mode, as before
    assert len(history.step_losses) == 5 and math.isfinite(history.final_loss)


def test_retraining_after_an_ablation_trains_that_layers_out_proj_and_the_head():
    model = charlm()
    with ablate_heads(model, [(1, 0)]):
        names = list(readout_parameters(model))
        history = retrain_readout(model, lambda g: (ids(seed=7), ids(seed=8)), steps=2)
    assert names == [
        "blocks.1.attn.out_proj.weight",
        "blocks.1.attn.out_proj.bias",
        "lm_head.weight",
        "lm_head.bias",
    ]
    assert math.isnan(history.final_accuracy)  # no evaluation rows were given


def test_reinit_draws_the_readout_afresh_from_the_seed():
    model, x = tiny(), ids()
    data = make_batch("previous", 64, CONTEXT, VOCAB, generator=torch.Generator().manual_seed(0))
    runs = []
    for _ in range(2):
        copy_of_model = copy.deepcopy(model)
        with freeze_attention(copy_of_model, even_weights(CONTEXT)):
            retrain_readout(copy_of_model, data, steps=1, lr=1e-9, reinit=True, seed=3)
        runs.append(copy_of_model(x))
    assert torch.equal(runs[0], runs[1])  # the same seed draws the same readout
    # the readout was drawn afresh: with lr=1e-9 one step cannot move it this far
    assert not torch.allclose(copy_of_model.lm_head.weight, model.lm_head.weight, atol=1e-3)
    assert torch.equal(copy_of_model.tok_emb.weight, model.tok_emb.weight)


@pytest.mark.slow  # trains one TinyLM for about 3 s
def test_frozen_even_weights_fail_the_previous_task_and_the_models_own_weights_pass_it():
    """The control the notebooks use can fail. Measured here (readouts drawn afresh, 200
    steps): the trained model 99.9 %; even weights 20.8 %; its own mean weights 100 %."""
    model, history = train_tiny_lm("previous", epochs=1, progress=False)
    assert history.final_accuracy > 0.95
    reference = make_batch("previous", 256, 12, 64, generator=torch.Generator().manual_seed(5))[0]
    results = {}
    for name, weights in (("even", even_weights(12)), ("own", mean_weights(model, reference))):
        copy_of_model = copy.deepcopy(model)
        with freeze_attention(copy_of_model, weights):
            run = retrain_readout(copy_of_model, "previous", steps=200, reinit=True)
        results[name] = run.final_accuracy
    assert results["even"] < 0.4, results
    assert results["own"] > 0.95, results


# ---------------------------------------------------------------- where the heads look


def shifted(T: int = 5) -> torch.Tensor:
    """Every query looks one step back (query 0 at itself)."""
    w = torch.zeros(T, T)
    w[0, 0] = 1
    w[torch.arange(1, T), torch.arange(T - 1)] = 1
    return w


def test_source_shares_match_a_hand_count_on_a_shifted_matrix():
    w = shifted(5)
    assert source_shares(w, offsets=1).item() == 1.0  # queries 1..4, each all on i - 1
    assert source_shares(w, offsets=0).item() == pytest.approx(1 / 5)  # query 0 only, of 5
    assert source_shares(w, offsets=2).item() == 0.0
    assert source_shares(w, offsets=torch.tensor(1)).item() == 1.0  # any integer
    two_heads = torch.stack([w, even_weights(5)])  # (H, T, T)
    shares = source_shares(two_heads[None].expand(3, 2, 5, 5), offsets=[1, 2])
    # even head, offset 1: queries 1..4 give 1/2, 1/3, 1/4, 1/5
    torch.testing.assert_close(shares[1], torch.tensor([1.0, (1 / 2 + 1 / 3 + 1 / 4 + 1 / 5) / 4]))
    torch.testing.assert_close(shares[2], torch.tensor([0.0, (1 / 3 + 1 / 4 + 1 / 5) / 3]))
    per_layer = source_shares(torch.stack([two_heads, two_heads.flip(0)])[None], offsets=1)
    assert per_layer.shape == (2, 2) and per_layer[0, 0] == per_layer[1, 1] == 1.0


def test_source_shares_agree_with_charlms_head_shares_on_fixed_offsets():
    model, x = charlm(), ids(batch=4, length=CONTEXT)
    _, weights = model(x, return_weights=True)  # (B, L, H, T, T)
    is_space = torch.zeros(VOCAB, dtype=torch.bool)
    shares = head_shares(weights, x, is_space)
    for name, k in (("current", 0), ("previous", 1), ("two back", 2)):
        torch.testing.assert_close(source_shares(weights, offsets=k), shares[name])


def test_source_shares_on_a_key_rule_leave_out_queries_without_a_key():
    w = even_weights(4)[None, None]  # (1, 1, T, T)
    rule = torch.zeros(1, 4, 4, dtype=torch.bool)
    rule[0, 2, 0] = rule[0, 2, 1] = True  # query 2: keys 0 and 1 -> 2/3
    rule[0, 3, 3] = True  # query 3: key 3 -> 1/4
    torch.testing.assert_close(source_shares(w, keys=rule), torch.tensor([(2 / 3 + 1 / 4) / 2]))
    each = source_shares(w, keys=rule, per_query=True)  # (1, 1, T)
    assert each.shape == (1, 1, 4) and each[0, 0, :2].isnan().all()
    torch.testing.assert_close(each[0, 0, 2:], torch.tensor([2 / 3, 1 / 4]))


def test_last_match_keys_pick_the_last_earlier_target():
    is_space = torch.tensor([False, True, False, False, True, False])  # "a bc d"
    rule = last_match_keys(is_space)[0]
    # queries 0, 1 have no earlier space; 2..4 look at 1; 5 looks at 4
    assert rule.nonzero().tolist() == [[2, 1], [3, 1], [4, 1], [5, 4]]


def test_after_previous_occurrence_is_the_induction_rule():
    x = torch.tensor([[5, 6, 7, 5, 6, 5]])
    rule = after_previous_occurrence(x)[0]
    # query 3 (5): key 1 follows the 5 at 0; query 4 (6): key 2; query 5 (5): keys 1 and 4
    assert rule.nonzero().tolist() == [[3, 1], [4, 2], [5, 1], [5, 4]]
    assert source_shares(even_weights(6), keys=rule).item() == pytest.approx(
        (1 / 4 + 1 / 5 + 2 / 6) / 3
    )


# ---------------------------------------------------------------- bad input


def test_bad_input_is_refused_with_the_value_and_the_fix():
    model, cm = tiny(), charlm()
    with raises(ValueError, "head 4", "4 heads", "0..3"), ablate_heads(model, [4]):
        pass
    with raises(ValueError, "layer=2", "layer=0..1"), ablate_heads(cm, [(2, 0)]):
        pass
    with raises(ValueError, "head 1 is ambiguous", "[(0, 1)]"), ablate_heads(cm, [1]):
        pass
    with raises(ValueError, "heads=2", "heads=[1]"), ablate_heads(model, 2):
        pass
    with raises(ValueError, "'a' is not a head", "(0, 1)"), ablate_heads(model, ["a"]):
        pass
    with raises(ValueError, "how='max'", "how='zero'"), ablate_heads(model, [0], how="max"):
        pass
    with raises(ValueError, "reference=ids"), ablate_heads(model, [0], how="mean"):
        pass
    with raises(ValueError, "(3, 7, 7)", "H=4", "even_weights"):
        with freeze_attention(model, torch.rand(3, T, T)):
            pass
    bad = even_weights(T) * 0.8
    with raises(ValueError, "summing to 0.8", "w / w.sum(-1, keepdim=True)"):
        with freeze_attention(model, bad):
            pass
    with (
        raises(ValueError, "on blocked keys", "causal"),
        freeze_attention(model, even_weights(T, "none")),
    ):
        pass
    with freeze_attention(model, even_weights(T)), raises(ValueError, "T=7", "T=8"):
        model(ids(length=8))
    with raises(ValueError, "minimum of nan"), freeze_attention(model, even_weights(T) * math.nan):
        pass
    with raises(ValueError, "exactly one of offsets"):
        source_shares(shifted())
    with raises(ValueError, "(5, 5)", "bool"):
        source_shares(shifted(), keys=torch.ones(4, 4, dtype=torch.bool))
    with raises(ValueError, "list", "last_match_keys"):
        source_shares(shifted(), keys=[[True] * 5] * 5)
    with raises(ValueError, "int", "'previous'"):
        retrain_readout(model, 3, steps=1, layers=[0])


def test_an_error_keeps_its_english_line_and_adds_the_chinese(zh):
    with raises(ValueError, "head 4 is out of range", "头 4 超出范围"), ablate_heads(tiny(), [4]):
        pass
