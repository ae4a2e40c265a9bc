"""Smeared keys (smear.py; notebook 10's one-layer model that can form an induction head).

Each property is checked against something other than the code under test: the smear against
a loop written here, the smeared block against the plain block in its two limits (σ(α) = 1 is
the plain block; σ(α) = 0 is the plain block fed keys shifted by one, computed here), both
forward paths against each other, the cache against the full pass, and causality by changing
the future. The last tests break the smear on purpose and watch these checks fail.
"""

from __future__ import annotations

import math

import pytest
import torch

import attention_lab.fused as fused
from attention_lab import MultiHeadSelfAttention, TinyLM, TinyLMConfig
from attention_lab.decoder import make_attention
from attention_lab.functional import attention
from attention_lab.masks import offset_mask
from attention_lab.multihead import merge_heads
from attention_lab.smear import check_smear, smear_keys
from tests.conftest import raises

SIZES = dict(vocab_size=16, context_length=12, d_model=16, n_heads=4)


def smeared_by_hand(k: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """k (B, n_kv, T, d), alpha (n_kv,): the formula, one key at a time."""
    out = torch.empty_like(k)
    for h in range(k.shape[1]):
        s = 1 / (1 + math.exp(-alpha[h].item()))
        for j in range(k.shape[2]):
            before = k[:, h, j - 1] if j > 0 else k[:, h, 0]
            out[:, h, j] = s * k[:, h, j] + (1 - s) * before
    return out


def block(seed=0, **kw):
    torch.manual_seed(seed)
    return MultiHeadSelfAttention(16, 4, 12, **kw).eval()


def smeared_block(seed=0, alpha=(0.3, -1.2, 2.0, 0.0), **kw):
    b = block(seed, smear_keys=True, **kw)
    with torch.no_grad():
        b.smear_alpha.copy_(torch.tensor(alpha[: b.n_kv_heads]))
    return b


# --- the smear itself ---------------------------------------------------------------------


def test_smear_keys_on_a_known_case():
    k = torch.arange(2 * 2 * 4 * 3, dtype=torch.float32).view(2, 2, 4, 3)  # (B, n_kv, T, d)
    alpha = torch.tensor([0.0, math.log(3.0)])  # σ = 1/2 and 3/4
    got = smear_keys(k, alpha)
    torch.testing.assert_close(got, smeared_by_hand(k, alpha))
    # head 0, position 2: half its own key, half the one before; key 0 stays itself
    torch.testing.assert_close(got[0, 0, 2], (k[0, 0, 2] + k[0, 0, 1]) / 2)
    torch.testing.assert_close(got[:, :, 0], k[:, :, 0])
    torch.testing.assert_close(got[1, 1, 3], 0.75 * k[1, 1, 3] + 0.25 * k[1, 1, 2])


def test_smear_keys_refuses_mismatched_shapes_and_non_booleans():
    with raises(ValueError, "(B, n_kv_heads, T, d_head)", "(2, 4, 5, 3)", "(3,)"):
        smear_keys(torch.zeros(2, 4, 5, 3), torch.zeros(3))
    assert check_smear(True) is True and check_smear(False) is False
    with raises(ValueError, "smear_keys=1", "True", "False"):
        check_smear(1)


# --- the block: its limits, both paths, causality ------------------------------------------


def test_the_default_block_has_no_smear_parameter_and_draws_the_same_weights():
    plain, smeared = block(), block(smear_keys=True)
    assert "smear_alpha" not in dict(plain.named_parameters())
    assert not hasattr(plain, "smear_alpha") and plain.smear_keys is False
    for name, tensor in plain.state_dict().items():  # the same seed: the same weights
        assert torch.equal(tensor, smeared.state_dict()[name]), name
    assert torch.equal(smeared.smear_alpha, torch.zeros(4))  # σ(0) = 1/2: an even mix
    assert "smear_keys" not in repr(plain) and "smear_keys=True" in repr(smeared)


@pytest.mark.parametrize("n_kv_heads", [None, 2])
def test_sigma_one_is_the_plain_block(n_kv_heads):
    plain, smeared = block(n_kv_heads=n_kv_heads), block(smear_keys=True, n_kv_heads=n_kv_heads)
    with torch.no_grad():
        smeared.smear_alpha.fill_(math.inf)  # σ(α) = 1: every key its own token's
    x = torch.randn(2, 12, 16)
    torch.testing.assert_close(smeared(x), plain(x), rtol=0, atol=0)


@pytest.mark.parametrize("n_kv_heads", [None, 2])
def test_sigma_zero_reads_the_previous_tokens_key(n_kv_heads):
    b = block(smear_keys=True, n_kv_heads=n_kv_heads)
    with torch.no_grad():
        b.smear_alpha.fill_(-math.inf)  # σ(α) = 0: key j is k_{j-1} (key 0 stays k_0)
    x = torch.randn(2, 9, 16)
    q, k, v = b.project(x)  # the plain projections
    shifted = torch.cat([k[:, :, :1], k[:, :, :-1]], dim=2)  # (B, n_kv, T, d_head)
    rep = b.n_heads // b.n_kv_heads
    expected, _ = attention(
        q, shifted.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1), b.mask[:9, :9]
    )
    torch.testing.assert_close(b(x), b.out_proj(merge_heads(expected)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kw", [{}, {"n_kv_heads": 2}, {"rope": True}, {"mask_kind": "none"}])
def test_both_forward_paths_agree_with_smeared_keys(kw):
    b = smeared_block(**kw)
    x = torch.randn(3, 12, 16)
    out, weights = b(x, return_weights=True)
    torch.testing.assert_close(b(x), out, rtol=1e-5, atol=1e-6)
    assert weights.shape == (3, 4, 12, 12)


def future_changes(module, x, t, call=None):
    """Whether changing the inputs after position t changes any output at or before t."""
    call = call or module
    y = x.clone()
    y[:, t + 1 :] = torch.randn_like(y[:, t + 1 :]) if y.is_floating_point() else 0
    with torch.no_grad():
        return not torch.equal(call(x)[:, : t + 1], call(y)[:, : t + 1])


@pytest.mark.parametrize("return_weights", [False, True])
def test_future_tokens_do_not_change_earlier_outputs_with_smeared_keys(return_weights):
    b = smeared_block()

    def call(x):
        return b(x, return_weights=True)[0] if return_weights else b(x)

    x = torch.randn(2, 12, 16)
    assert not any(future_changes(b, x, t, call) for t in range(11))
    assert future_changes(b, x, 5, lambda x: x.flip(1))  # it sees a non-causal map


def test_the_smear_alpha_is_learned():
    b = smeared_block()
    b(torch.randn(2, 12, 16)).square().sum().backward()
    assert b.smear_alpha.grad is not None and b.smear_alpha.grad.abs().min() > 0


# --- the model: config, cache, conversions ---------------------------------------------------


def test_tinylm_with_smeared_keys_differs_only_by_the_smear():
    torch.manual_seed(0)
    plain = TinyLM(TinyLMConfig(**SIZES))
    torch.manual_seed(0)
    smeared = TinyLM(TinyLMConfig(**SIZES, smear_keys=True))
    extra = set(smeared.state_dict()) - set(plain.state_dict())
    assert extra == {"attn.smear_alpha"}
    for name, tensor in plain.state_dict().items():
        assert torch.equal(tensor, smeared.state_dict()[name]), name
    two = TinyLM(TinyLMConfig(**SIZES, n_layers=2, smear_keys=True))
    assert {n for n in two.state_dict() if "smear" in n} == {
        "blocks.0.attn.smear_alpha",
        "blocks.1.attn.smear_alpha",
    }


@pytest.mark.parametrize("n_layers", [1, 2])
@pytest.mark.parametrize("extra", [{}, {"n_kv_heads": 2}, {"positions": "rope"}])
def test_cached_logits_equal_the_full_pass_with_smeared_keys(n_layers, extra):
    torch.manual_seed(1)
    model = TinyLM(TinyLMConfig(**SIZES, n_layers=n_layers, smear_keys=True, **extra)).eval()
    with torch.no_grad():
        for blk in model.attention_layers():
            blk.smear_alpha.normal_()
    idx = torch.randint(16, (2, 12))
    cache = model.new_cache()
    with torch.no_grad():
        full = model(idx)
        pieces = [model(idx[:, a:b], cache=cache) for a, b in ((0, 5), (5, 6), (6, 9), (9, 12))]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-5, atol=1e-5)
    prompt = idx[:, :3]
    assert torch.equal(
        model.generate(prompt, 9, use_cache=True), model.generate(prompt, 9, use_cache=False)
    )


def test_a_sliding_window_cache_is_refused_with_smeared_keys():
    model = TinyLM(TinyLMConfig(**SIZES, mask_kind="sliding", window=4, smear_keys=True)).eval()
    idx = torch.randint(16, (1, 6))
    model(idx)  # without a cache it runs
    with raises(ValueError, "sliding window", "smear_keys", "use_cache=False"):
        model(idx, cache=model.new_cache())


def test_the_config_checks_smear_keys():
    assert TinyLMConfig(**SIZES, smear_keys=True).attention_options()["smear_keys"] is True
    with raises(ValueError, "smear_keys='yes'"):
        TinyLMConfig(**SIZES, smear_keys="yes")
    with raises(ValueError, "smear_keys=True", "d_latent"):
        TinyLMConfig(**SIZES, d_latent=8, smear_keys=True)
    with raises(ValueError, "smear_keys=True", "d_latent"):
        make_attention(16, 4, 12, d_latent=8, smear_keys=True)


def test_conversions_refuse_a_smeared_block():
    b = smeared_block()
    for convert, target in ((b.to_torch, "nn.MultiheadAttention"), (b.to_separate, "MultiHead")):
        with raises(ValueError, "smear_keys=True", target):
            convert()


# --- the checks fail on broken smears ------------------------------------------------------


def test_the_causality_check_catches_a_smear_from_the_future(monkeypatch):
    def from_the_future(k, alpha):  # mixes in key j + 1: not causal
        s = torch.sigmoid(alpha)[:, None, None]
        return s * k + (1 - s) * torch.cat([k[..., 1:, :], k[..., -1:, :]], dim=-2)

    monkeypatch.setattr(fused, "smear", from_the_future)
    b = smeared_block()
    assert any(future_changes(b, torch.randn(2, 12, 16), t) for t in range(11))


def test_the_cache_check_catches_keys_smeared_before_caching(monkeypatch):
    """The natural bug: smear each call's keys, then cache them. A chunk's first key then
    misses the key before it (the previous chunk's last), and cached logits drift."""

    def smear_then_cache(self, x, return_weights=False, cache=None):
        if cache is None:
            return original(self, x, return_weights)
        T = x.shape[1]
        start = cache.start(T)
        q, k, v = self.project(x, start)  # (B, H, T, d_head) each
        k = smear_keys(k, self.smear_alpha)  # the bug: before the update, chunk by chunk
        k, v = cache.update(k, v)  # (B, H, T_k, d_head)
        mask = None if T == 1 else offset_mask(self.mask_kind, start, T, k.shape[2], None, x.device)
        ctx, weights = attention(q, k, v, mask)  # (B, H, T, d_head)
        out = self.out_proj(merge_heads(ctx))
        return (out, weights) if return_weights else out

    torch.manual_seed(2)
    model = TinyLM(TinyLMConfig(**SIZES, smear_keys=True)).eval()
    idx = torch.randint(16, (2, 10))
    chunks = ((0, 4), (4, 5), (5, 7), (7, 10))
    with torch.no_grad():
        full = model(idx)
        cache = model.new_cache()
        right = torch.cat([model(idx[:, a:b], cache=cache) for a, b in chunks], dim=1)
        original = fused.MultiHeadSelfAttention.forward
        monkeypatch.setattr(fused.MultiHeadSelfAttention, "forward", smear_then_cache)
        cache = model.new_cache()
        wrong = torch.cat([model(idx[:, a:b], cache=cache) for a, b in chunks], dim=1)
    torch.testing.assert_close(right, full, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(wrong, full, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(wrong[:, :4], full[:, :4], rtol=1e-5, atol=1e-5)  # first chunk fine
