"""``TinyLM`` (tiny_lm.py, notebook 08): ids (B, T) -> logits (B, T, vocab), its config, its
state, ``generate``, and ``torch.compile``. Its causality: test_module_contract.py; its
input checks (the eager range check that compiled code skips): test_checks.py.
"""

from __future__ import annotations

import pytest
import torch
from conftest import graph_break_count

from attention_lab import TinyLM, TinyLMConfig, make_batch, sliding_window_mask
from attention_lab.tasks import repeat_offset

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
    # a config and fields together: still works, deprecated (one way to configure a TinyLM)
    with pytest.warns(DeprecationWarning, match=r"TinyLM\(config.replace\(n_heads=2\)\)"):
        assert TinyLM(config, n_heads=2).config == config.replace(n_heads=2)


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
