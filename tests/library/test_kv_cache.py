"""The KV cache of one block (kv_cache.py, ``MultiHeadSelfAttention(..., cache=)``,
``LatentAttention(..., cache=)``; notebook 12_attention_in_todays_llms): a prefill chunk and
then one token at a time give the full pass's outputs and weights for every variant; a
sliding window keeps its size flat; the bytes equal the formula and the tensors' nbytes; a
cache that drops its oldest entry or forgets its position fails the same check; bad uses are
refused with the fix. The whole models: test_decoder.py.
"""

from __future__ import annotations

import pytest
import torch

from attention_lab import MultiHeadSelfAttention, build_mask
from attention_lab.kv_cache import CacheShape, KVCache, LayerCache, cache_bytes
from attention_lab.latent import LatentAttention
from attention_lab.masks import offset_mask
from tests.conftest import message

D, H, CONTEXT = 16, 4, 24

VARIANTS = {
    "mha": dict(),
    "gqa": dict(n_kv_heads=2),
    "mqa": dict(n_kv_heads=1),
    "rope": dict(rope=True),
    "gqa_rope": dict(n_kv_heads=2, rope=True),
    "sliding": dict(mask_kind="sliding", window=4),
    "sliding_rope_mqa": dict(mask_kind="sliding", window=3, rope=True, n_kv_heads=1),
    "window_1": dict(mask_kind="sliding", window=1),
    "mla": dict(d_latent=6),
    "mla_sliding": dict(d_latent=6, mask_kind="sliding", window=4),
}


def make_block(variant: str) -> torch.nn.Module:
    options = dict(VARIANTS[variant])
    if "d_latent" in options:
        return LatentAttention(D, H, CONTEXT, **options).eval()
    return MultiHeadSelfAttention(D, H, CONTEXT, **options).eval()


def run_cached(block, x, chunks, cache=None, return_weights=False):
    """x (B, T, D) fed in pieces of the given lengths through one cache; the outputs joined,
    and each piece's weights."""
    cache = block.new_cache() if cache is None else cache
    outs, weights, t = [], [], 0
    for n in chunks:
        out = block(x[:, t : t + n], return_weights=return_weights, cache=cache)
        if return_weights:
            out, w = out
            weights.append(w)
        outs.append(out)
        t += n
    return torch.cat(outs, dim=1), weights, cache


def assert_cached_equals_full(block, x, chunks, cache=None):
    """The check: the cached pieces give the full pass's outputs (both paths) to 1e-5."""
    with torch.no_grad():
        full = block(x)  # (B, T, D)
        full_explicit, full_weights = block(x, return_weights=True)
        cached, _, _ = run_cached(block, x, chunks, cache)
        torch.testing.assert_close(cached, full, rtol=1e-5, atol=1e-5)
        if cache is None:
            cached_explicit, weights, cache = run_cached(block, x, chunks, return_weights=True)
            torch.testing.assert_close(cached_explicit, full_explicit, rtol=1e-5, atol=1e-5)
            t = 0
            for n, w in zip(chunks, weights):  # each piece's weights: its rows, over the keys kept
                kept = w.shape[-1]
                torch.testing.assert_close(
                    w, full_weights[:, :, t : t + n, t + n - kept : t + n], rtol=1e-5, atol=1e-5
                )
                outside = full_weights[:, :, t : t + n, : t + n - kept]
                assert (outside == 0).all()  # what the cache dropped had weight 0 anyway
                t += n


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("chunks", [[1] * 11, [5, 1, 1, 1, 3], [11]], ids=["steps", "mixed", "one"])
def test_cached_pieces_give_the_full_pass_for_every_variant(variant, chunks):
    torch.manual_seed(0)
    assert_cached_equals_full(make_block(variant), torch.randn(2, 11, D), chunks)


def test_the_cache_holds_keys_and_values_of_n_kv_heads_or_the_latent():
    x = torch.randn(2, 7, D)
    _, _, cache = run_cached(make_block("gqa"), x, [4, 3])
    assert cache.keys.shape == cache.values.shape == (2, 2, 7, D // H)
    assert cache.position == 7
    _, _, cache = run_cached(make_block("mla"), x, [7])
    assert len(cache.tensors) == 1 and cache.tensors[0].shape == (2, 7, 6)


@pytest.mark.parametrize("variant", ["sliding", "mla_sliding", "sliding_rope_mqa"])
def test_a_sliding_window_cache_stays_flat_as_t_grows(variant):
    block = make_block(variant)
    window = block.window
    cache = block.new_cache()
    sizes, nbytes = [], []
    with torch.no_grad():
        for _ in range(CONTEXT):
            block(torch.randn(1, 1, D), cache=cache)
            sizes.append(cache.tensors[0].shape[-2])
            nbytes.append(cache.nbytes())
    assert sizes == [min(t + 1, window) for t in range(CONTEXT)]
    assert max(nbytes) == nbytes[window - 1] == nbytes[-1]  # flat once the window is full
    assert cache.position == CONTEXT  # the position keeps counting


def test_a_causal_cache_grows_by_one_token_of_keys_and_values_per_step():
    block = make_block("mqa")
    cache = block.new_cache()
    shape = CacheShape(n_layers=1, n_kv_heads=1, d_head=D // H)
    with torch.no_grad():
        for t in range(1, 6):
            block(torch.randn(3, 1, D), cache=cache)  # B = 3
            expected = cache_bytes(shape, t, bytes_per_element=4, batch_size=3)
            assert expected == 3 * 2 * 1 * (D // H) * t * 4  # B x 2 x n_kv x d_head x T x 4
            assert cache.nbytes() == expected == sum(k.nbytes for k in cache.tensors)


def test_the_cache_keeps_tensors_of_its_own_not_views_of_larger_ones():
    """The keys come out of the qkv output and a trimmed window out of a longer tensor: the
    cache copies them, so its storage is exactly what its nbytes says."""
    for variant in ("mha", "sliding", "mla"):
        _, _, cache = run_cached(make_block(variant), torch.randn(1, 9, D), [6, 1, 1, 1])
        for t in cache.tensors:
            assert t.untyped_storage().nbytes() == t.nbytes == t.numel() * 4


def test_offset_mask_is_the_full_mask_at_zero_and_its_corner_later():
    for kind, window in (("causal", None), ("sliding", 3)):
        full = build_mask(kind, 9, window)
        assert torch.equal(offset_mask(kind, 0, 9, 9, window), full)
        assert torch.equal(offset_mask(kind, 5, 4, 9, window), full[5:, :])
        assert torch.equal(offset_mask(kind, 6, 3, 5, window), full[6:9, 4:9])


# --- the check can fail -------------------------------------------------------------------


class DropsTheOldest(LayerCache):
    """A broken cache: after each update it forgets its oldest position."""

    def update(self, *new, window=None):
        out = super().update(*new, window=window)
        if self.tensors[0].shape[-2] > 1:
            self.tensors = tuple(t[..., 1:, :] for t in self.tensors)
        return out


class SkipsTheRopeOffset(LayerCache):
    """A broken cache: it keeps the keys but tells the block every new token is at position 0,
    so RoPE turns the new q and k without the offset."""

    def start(self, T):
        super().start(T)
        return 0


@pytest.mark.parametrize("variant", ["mha", "gqa_rope", "mla"])
def test_a_cache_that_drops_its_oldest_entry_fails_the_check(variant):
    block = make_block(variant)
    with pytest.raises(AssertionError):
        assert_cached_equals_full(
            block, torch.randn(2, 8, D), [3, 1, 1, 1, 1, 1], DropsTheOldest(CONTEXT)
        )
    assert_cached_equals_full(block, torch.randn(2, 8, D), [3, 1, 1, 1, 1, 1], LayerCache(CONTEXT))


@pytest.mark.parametrize("variant", ["rope", "gqa_rope", "sliding_rope_mqa"])
def test_a_cache_that_skips_the_rope_offset_fails_the_check(variant):
    block = make_block(variant)
    x = torch.randn(2, 8, D)
    with pytest.raises(AssertionError):
        assert_cached_equals_full(block, x, [1] * 8, SkipsTheRopeOffset(CONTEXT))
    assert_cached_equals_full(block, x, [1] * 8, LayerCache(CONTEXT))


# --- refusals -------------------------------------------------------------------------------


def test_a_cache_past_the_context_length_is_refused_with_the_fix():
    block = MultiHeadSelfAttention(D, H, 6).eval()
    cache = block.new_cache()
    block(torch.randn(1, 4, D), cache=cache)
    assert message(ValueError, lambda: block(torch.randn(1, 3, D), cache=cache)) == (
        "the cache holds 4 positions and 3 more would pass context_length=6; build the model "
        "with context_length>=7, or start a new cache (generate with use_cache=False slides "
        "over the last context_length tokens instead)"
    )
    assert cache.position == 4 and cache.keys.shape[2] == 4  # nothing was added
    block(torch.randn(1, 2, D), cache=cache)  # exactly up to the context is fine
    cache.reset()
    assert cache.position == 0 and cache.tensors == () and cache.nbytes() == 0


def test_a_block_without_a_mask_or_a_wrong_cache_is_refused():
    unmasked = MultiHeadSelfAttention(D, H, CONTEXT, mask_kind="none")
    with pytest.raises(ValueError, match="mask_kind='none' .*'causal' or 'sliding'"):
        unmasked(torch.randn(1, 2, D), cache=unmasked.new_cache())
    block = MultiHeadSelfAttention(D, H, CONTEXT)
    with pytest.raises(TypeError, match=r"one layer's LayerCache .*cache\[i\].*got KVCache"):
        block(torch.randn(1, 2, D), cache=KVCache(2, CONTEXT))
    with pytest.raises(ValueError, match="window=0"):
        MultiHeadSelfAttention(D, H, CONTEXT, mask_kind="sliding", window=0)
