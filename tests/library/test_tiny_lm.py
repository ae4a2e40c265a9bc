"""``TinyLM`` (tiny_lm.py, notebook 08): ids (B, T) -> logits (B, T, vocab), its config, its
state, ``generate``, and ``torch.compile``; with ``n_layers > 1``, the layers on a residual
stream (shapes, each layer's weights, causality through every layer) and, for one layer, the
same model as before ``n_layers`` existed. The one-layer model's causality:
test_module_contract.py; its input checks (the eager range check that compiled code skips):
test_checks.py.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from attention_lab import (
    MultiHeadSelfAttention,
    TinyLM,
    TinyLMConfig,
    causal_mask,
    make_batch,
    sliding_window_mask,
)
from attention_lab.tasks import repeat_offset
from tests.conftest import assert_future_does_not_leak, graph_break_count, run

# --- shapes, gradients, dtype ---------------------------------------------------------


def test_tiny_lm_maps_ids_b_t_to_logits_b_t_vocab_and_weights_b_h_t_t():
    model = TinyLM().eval()
    idx = torch.randint(64, (3, 12))  # (B, T)
    logits = model(idx)
    logits2, weights = model(idx, return_weights=True)
    assert logits.shape == (3, 12, 64)
    assert weights.shape == (3, 4, 12, 12)
    torch.testing.assert_close(logits, logits2)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 4, 12))
    assert model(idx[:, :5]).shape == (3, 5, 64)
    assert model(idx.int()).shape == (3, 12, 64)


def test_tiny_lm_without_a_mask_lets_the_future_leak():
    """The same check fails for an encoder-style TinyLM: the causality test can fail."""
    model = TinyLM(mask_kind="none").eval()
    idx = torch.randint(64, (2, 12))  # (B, T)
    changed = idx.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 64
    assert not torch.allclose(model(changed)[:, 0], model(idx)[:, 0])


def test_every_parameter_of_tiny_lm_gets_a_gradient():
    model = TinyLM().train()
    x, y = make_batch("copy", 16)
    logits = model(x)  # (B, T, vocab)
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten()).backward()
    names = [n for n, _ in model.named_parameters()]
    assert {"tok_emb.weight", "pos_emb.weight", "attn.qkv.weight", "lm_head.weight"} <= set(names)
    for name, param in model.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name


def test_tiny_lm_follows_double_and_keeps_its_mask_boolean():
    model = TinyLM().double().eval()
    logits, weights = model(torch.randint(64, (2, 12)), return_weights=True)
    assert logits.dtype == weights.dtype == torch.float64
    assert model.attn.mask.dtype == torch.bool
    assert "attn.mask" not in model.state_dict()  # derived from the config, not saved


# --- one config, and state across mask kinds ------------------------------------------


def test_tiny_lm_takes_a_config_or_its_fields():
    config = TinyLMConfig(n_heads=8, mask_kind="sliding", window=4)
    model = TinyLM(config)
    assert model.config == config
    assert model.attn.n_heads == 8 and model.attn.mask_kind == "sliding" and model.attn.window == 4
    assert TinyLM(n_heads=2).config == TinyLMConfig(n_heads=2)
    # one way to configure a TinyLM: a config and fields together are refused, with the fix
    with pytest.raises(TypeError, match=r"not both.*TinyLM\(config.replace\(n_heads=2\)\)"):
        TinyLM(config, n_heads=2)
    with pytest.raises(TypeError, match="no field 'n_head'.*n_heads"):
        TinyLM(n_head=2)


def test_tiny_lm_state_loads_into_a_model_with_another_mask_kind():
    causal = TinyLM(TinyLMConfig(mask_kind="causal")).eval()
    sliding = TinyLM(TinyLMConfig(mask_kind="sliding", window=3)).eval()
    sliding.load_state_dict(causal.state_dict())
    idx = torch.randint(64, (2, 12))
    logits, weights = sliding(idx, return_weights=True)
    torch.testing.assert_close(sliding(idx), logits, rtol=1e-5, atol=1e-5)
    assert (weights[..., sliding_window_mask(12, 3)] == 0).all()


# --- generate (on the session's trained models) ---------------------------------------


@pytest.mark.slow  # the session's trained models
def test_generate_writes_the_second_half_from_the_first(repeat_run):
    model, _ = repeat_run
    x, _ = make_batch("repeat", 32, generator=torch.Generator().manual_seed(9))
    m = repeat_offset(12)
    prompt = x[:, : m + 1]  # the first half and the separator
    out = model.generate(prompt, max_new_tokens=12 - m)  # (B, 12 + 1)
    assert out.shape == (32, 13)
    torch.testing.assert_close(out[:, : m + 1], prompt)
    accuracy = (out[:, m + 1 :] == x[:, : 12 - m]).float().mean().item()  # = first half
    assert accuracy >= 0.95


@pytest.mark.slow
def test_generate_is_greedy_and_keeps_the_mode(copy_run):
    model, _ = copy_run
    model.train()
    idx = torch.tensor([[5, 5, 5]])
    out = model.generate(idx, 4)
    assert model.training
    torch.testing.assert_close(out, torch.tensor([[5] * 7]))  # the copy model repeats
    model.eval()


# --- torch.compile --------------------------------------------------------------------


@pytest.mark.slow
def test_tiny_lm_compiles_with_no_graph_break():
    model = TinyLM().eval()
    idx = torch.randint(64, (2, 12))
    assert graph_break_count(model, idx) == 0


@pytest.mark.slow
def test_tiny_lm_compiled_with_fullgraph_gives_the_eager_logits():
    model = TinyLM().eval()
    idx = torch.randint(64, (2, 12))
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(idx), model(idx))


# --- several layers on a residual stream (n_layers) -----------------------------------

SNAPSHOT = Path(__file__).parents[1] / "data" / "tiny_lm_one_layer_fc5bc34.pt"


def _state_sha256(state: dict) -> str:
    digest = hashlib.sha256()
    for key, value in state.items():
        digest.update(key.encode())
        digest.update(value.contiguous().numpy().tobytes())
    return digest.hexdigest()


def test_one_layer_is_todays_model_for_the_same_seed_and_state_dict():
    # The snapshot was saved by TinyLM as it was before n_layers (commit fc5bc34): its
    # state dict, an input, and that model's logits and weights.
    snap = torch.load(SNAPSHOT, weights_only=True)
    torch.manual_seed(snap["seed"])
    assert _state_sha256(TinyLM().state_dict()) == snap["default_state_sha256"]
    assert list(TinyLM().state_dict()) == snap["default_keys"]  # attn.*: no new key
    torch.manual_seed(snap["seed"])
    fresh = TinyLM(**snap["config"]).eval()
    for key, value in snap["state_dict"].items():  # the same seed: the same initial weights
        assert torch.equal(fresh.state_dict()[key], value), key
    model = TinyLM(**snap["config"]).eval()
    model.load_state_dict(snap["state_dict"])  # strict: the same keys, nothing missing
    idx = snap["idx"]
    with torch.no_grad():
        logits, weights = model(idx, return_weights=True)
        fast = model(idx)
        # today's forward written out: lm_head(attn(tok + pos)), no residual
        x = model.tok_emb(idx) + model.pos_emb(torch.arange(idx.shape[1]))
        old_out, old_weights = model.attn(x, return_weights=True)
    assert torch.equal(fast, model.lm_head(model.attn(x)))  # bitwise, same process
    assert torch.equal(logits, model.lm_head(old_out)) and torch.equal(weights, old_weights)
    # against the saved numbers: bitwise on the machine that saved them, float noise elsewhere
    torch.testing.assert_close(fast, snap["logits"], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(logits, snap["weights_logits"], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(weights, snap["weights"], rtol=1e-6, atol=1e-6)


def test_the_one_layer_control_loads_the_same_checkpoint_and_adds_the_residual():
    snap = torch.load(SNAPSHOT, weights_only=True)
    control = TinyLM(TinyLMConfig(**snap["config"], residual=True)).eval()
    control.load_state_dict(snap["state_dict"])
    idx = snap["idx"]
    with torch.no_grad():
        x = control.tok_emb(idx) + control.pos_emb(torch.arange(idx.shape[1]))  # (B, T, D)
        expected = control.lm_head(x + control.attn(x))
        torch.testing.assert_close(control(idx), expected, rtol=0, atol=0)
        assert not torch.allclose(control(idx), snap["logits"])  # the switch changes the model


@pytest.mark.parametrize("n_layers", [2, 3])
def test_several_layers_give_logits_and_the_weights_of_every_layer(n_layers):
    model = TinyLM(n_layers=n_layers, n_heads=2, d_model=16).eval()
    idx = torch.randint(64, (3, 12))  # (B, T)
    logits, weights = model(idx, return_weights=True)
    assert logits.shape == (3, 12, 64)
    assert weights.shape == (3, n_layers, 2, 12, 12)  # (B, L, H, T, T)
    torch.testing.assert_close(model(idx), logits)  # the SDPA path agrees
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, n_layers, 2, 12))
    # layer l's weights are what blocks[l].attn computes on the residual stream it reads
    x = model.tok_emb(idx) + model.pos_emb(torch.arange(12))  # (B, T, D)
    for layer, block in enumerate(model.blocks):
        out, w = block.attn(x, return_weights=True)  # (B, T, D), (B, H, T, T)
        torch.testing.assert_close(weights[:, layer], w)
        x = x + out  # the residual stream
    torch.testing.assert_close(logits, model.lm_head(x))
    assert not torch.allclose(weights[:, 0], weights[:, 1])  # each layer its own


def test_the_layers_live_in_blocks_in_forward_order_and_in_the_state_dict():
    model = TinyLM(n_layers=2)
    assert not hasattr(model, "attn")
    blocks = [m for m in model.modules() if isinstance(m, MultiHeadSelfAttention)]
    assert model.attention_layers() == blocks == [model.blocks[0].attn, model.blocks[1].attn]
    one = TinyLM()
    assert one.attention_layers() == [one.attn]
    keys = set(model.state_dict())
    assert {
        f"blocks.{i}.attn.{p}" for i in (0, 1) for p in ("qkv.weight", "out_proj.weight")
    } <= keys
    assert not any(key.startswith("attn.") or key.endswith("mask") for key in keys)
    again = TinyLM(n_layers=2).eval()
    again.load_state_dict(model.state_dict())
    idx = torch.randint(64, (2, 12))
    torch.testing.assert_close(again(idx), model.eval()(idx), rtol=0, atol=0)


def test_without_the_residual_each_layer_reads_only_the_one_before():
    model = TinyLM(n_layers=2, residual=False).eval()
    idx = torch.randint(64, (2, 12))
    x = model.tok_emb(idx) + model.pos_emb(torch.arange(12))  # (B, T, D)
    expected = model.lm_head(model.blocks[1].attn(model.blocks[0].attn(x)))
    torch.testing.assert_close(model(idx), expected, rtol=0, atol=0)


@pytest.mark.parametrize("n_layers", [2, 3])
@pytest.mark.parametrize("return_weights", [False, True], ids=["sdpa", "weights"])
def test_future_tokens_change_no_earlier_logit_through_every_layer(n_layers, return_weights):
    model = TinyLM(n_layers=n_layers).eval()
    idx = torch.randint(64, (2, 12))  # (B, T)
    for t in range(11):
        assert_future_does_not_leak(lambda inp: run(model, inp, return_weights), idx, t)
    _, weights = model(idx, return_weights=True)  # (B, L, H, T, T)
    assert (weights[..., causal_mask(12)] == 0).all()  # no layer looks ahead


def test_the_multi_layer_causality_check_fails_without_a_mask():
    model = TinyLM(n_layers=2, mask_kind="none").eval()
    idx = torch.randint(64, (2, 12))
    with pytest.raises(AssertionError):
        assert_future_does_not_leak(lambda inp: run(model, inp, False), idx, t=2)


def test_a_changed_token_changes_its_own_and_every_later_logit_and_no_earlier_one():
    # with two layers a token reaches later positions twice (directly, and through what
    # layer 0 wrote at a position in between): still never an earlier one
    model = TinyLM(n_layers=2).eval()
    idx = torch.randint(64, (1, 12))
    changed = idx.clone()
    changed[0, 5] = (changed[0, 5] + 1) % 64
    diff = (model(changed) - model(idx)).abs().amax(-1)[0]  # (T,)
    assert (diff[:5] == 0).all() and (diff[5:] > 0).all()


def test_every_parameter_of_a_two_layer_tiny_lm_gets_a_gradient():
    model = TinyLM(n_layers=2).train()
    x, y = make_batch("previous", 16)
    torch.nn.functional.cross_entropy(
        model(x).flatten(0, 1), y.flatten(), ignore_index=-100
    ).backward()
    for name, param in model.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name


def test_a_two_layer_tiny_lm_generates():
    model = TinyLM(n_layers=2)
    out = model.generate(torch.randint(64, (2, 3)), 12)  # beyond the context: the last 12
    assert out.shape == (2, 15) and out.max() < 64
