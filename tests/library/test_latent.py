"""Multi-head latent attention (latent.py, ``LatentAttention``; notebook
12_attention_in_todays_llms): the decompressed form is multi-head attention on keys and values
made from the latent; the absorbed form, with W_UK folded into the query and W_UV into the
output projection, gives the same outputs and weights to 1e-5 (and a wrong fold does not);
the cache holds d_latent numbers per token; RoPE is refused with the reason.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attention_lab import causal_mask
from attention_lab.latent import LatentAttention
from tests.conftest import message

D, H, CONTEXT, D_LATENT = 16, 4, 12, 6


def latent_block(**options) -> LatentAttention:
    block = LatentAttention(D, H, CONTEXT, D_LATENT, **options).eval()
    with torch.no_grad():  # biases that count
        for name, p in block.named_parameters():
            if name.endswith("bias"):
                p.normal_()
    return block


def test_the_decompressed_form_is_multi_head_attention_on_keys_and_values_from_the_latent():
    block = latent_block()
    x = torch.randn(2, 7, D)
    with torch.no_grad():
        c = x @ block.kv_down.weight.T + block.kv_down.bias  # (B, T, d_latent)
        q = (x @ block.q_proj.weight.T + block.q_proj.bias).view(2, 7, H, 4).transpose(1, 2)
        k = (c @ block.k_up.weight.T).view(2, 7, H, 4).transpose(1, 2)  # (B, H, T, d_head)
        v = (c @ block.v_up.weight.T).view(2, 7, H, 4).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1) / 2.0).masked_fill(causal_mask(7), -math.inf)
        ctx = torch.softmax(scores, dim=-1) @ v  # (B, H, T, d_head)
        expected = block.out_proj(ctx.transpose(1, 2).reshape(2, 7, D))
        torch.testing.assert_close(block(x), expected, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(block(x, return_weights=True)[0], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind, window", [("causal", None), ("sliding", 3)])
@pytest.mark.parametrize("return_weights", [False, True], ids=["sdpa", "explicit"])
def test_the_absorbed_form_equals_the_decompressed_form(kind, window, return_weights):
    block = latent_block(mask_kind=kind, window=window)
    x = torch.randn(3, 10, D)
    with torch.no_grad():
        decompressed = block(x, return_weights=return_weights, absorbed=False)
        absorbed = block(x, return_weights=return_weights, absorbed=True)
    if return_weights:
        torch.testing.assert_close(absorbed[1], decompressed[1], rtol=1e-5, atol=1e-5)
        absorbed, decompressed = absorbed[0], decompressed[0]
    torch.testing.assert_close(absorbed, decompressed, rtol=1e-5, atol=1e-5)


def test_the_absorbed_form_never_makes_keys_or_values():
    """Its folded matrices act on the latent directly: k_up and v_up are never called."""
    block = latent_block()
    calls = []
    for layer in (block.k_up, block.v_up):
        layer.register_forward_hook(lambda m, args, out: calls.append(m))
    W_qk, b_qk, W_ov = block.absorbed_weights()
    assert W_qk.shape == (H, D_LATENT, D) and b_qk.shape == (H, D_LATENT)
    assert W_ov.shape == (H, D, D_LATENT)
    with torch.no_grad():
        block(torch.randn(1, 5, D), absorbed=True)
        assert calls == []
        block(torch.randn(1, 5, D), absorbed=False)
        assert len(calls) == 2


def test_a_wrong_fold_gives_another_answer_so_the_equality_test_can_fail(monkeypatch):
    """Scaling the latent scores by 1/sqrt(d_latent) (the latent's width, not d_head's)."""
    block = latent_block()
    x = torch.randn(2, 8, D)
    sdpa = F.scaled_dot_product_attention

    def wrong_scale(*args, scale=None, **kwargs):
        return sdpa(*args, scale=1 / math.sqrt(D_LATENT), **kwargs)

    with torch.no_grad():
        expected = block(x, absorbed=False)
        monkeypatch.setattr(F, "scaled_dot_product_attention", wrong_scale)
        with pytest.raises(AssertionError):
            torch.testing.assert_close(block(x, absorbed=True), expected, rtol=1e-5, atol=1e-5)


def test_with_a_cache_it_absorbs_and_caches_one_latent_per_token():
    block = latent_block()
    x = torch.randn(2, 9, D)
    cache = block.new_cache()
    with torch.no_grad():
        full = block(x)  # decompressed, no cache
        pieces = [block(x[:, :4], cache=cache)] + [
            block(x[:, t : t + 1], cache=cache) for t in range(4, 9)
        ]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-5, atol=1e-5)
    (latents,) = cache.tensors
    assert latents.shape == (2, 9, D_LATENT)
    assert cache.nbytes() == 2 * 9 * D_LATENT * 4  # multi-head attention: 2 * 9 * 2 * D * 4


def test_every_parameter_gets_a_gradient_on_both_forms():
    for absorbed in (False, True):
        block = latent_block().train()
        block(torch.randn(2, 5, D), absorbed=absorbed).square().sum().backward()
        for name, p in block.named_parameters():
            assert p.grad is not None and p.grad.abs().sum() > 0, (absorbed, name)


def test_rope_with_latent_attention_is_refused_with_the_reason():
    assert message(ValueError, lambda: LatentAttention(D, H, CONTEXT, D_LATENT, rope=True)) == (
        "latent attention (d_latent) cannot take RoPE here: the rotation sits between the query "
        "and the folded key up-projection and depends on the position, so the absorbed form "
        "breaks (DeepSeek-V2 adds a separate decoupled RoPE key); use learned positions or none "
        "with d_latent"
    )
    with pytest.raises(ValueError, match="d_latent=0 must be a whole number >= 1"):
        LatentAttention(D, H, CONTEXT, 0)
    assert "d_latent=6" in LatentAttention(D, H, CONTEXT, D_LATENT).extra_repr()
