"""bench/generation.py: before anything is timed, cached generation must give the uncached ids
and each variant's cache must hold the bytes the formula says; a broken cache is rejected by
each gate. The printed sections name every variant with its ratio to MHA. No time is asserted
(speed belongs to ``make bench``).
"""

from __future__ import annotations

import pytest
import torch

from attention_lab.bench import ImplementationCheckError
from attention_lab.bench.generation import (
    VARIANTS,
    check_cached_ids,
    format_generation,
    format_variants,
    generation_model,
    measure_generation,
    measure_variants,
)
from attention_lab.kv_cache import KVCache, LayerCache


def test_the_gate_passes_a_right_cache_and_rejects_one_that_drops_its_oldest_entry(monkeypatch):
    model = generation_model(24)
    prompt = torch.randint(62, (1, 6))
    check_cached_ids("right", model, prompt, 8)
    update = LayerCache.update

    def drops_oldest(self, *new, window=None):
        out = update(self, *new, window=window)
        self.tensors = tuple(t[..., 1:, :] for t in self.tensors)
        return out

    monkeypatch.setattr(LayerCache, "update", drops_oldest)
    with pytest.raises(ImplementationCheckError, match="broken: cached generation gives other ids"):
        check_cached_ids("broken", model, prompt, 8)


def test_the_memory_gate_rejects_a_cache_that_holds_other_bytes_than_the_formula(monkeypatch):
    monkeypatch.setattr(KVCache, "nbytes", lambda self: 12345)
    with pytest.raises(ImplementationCheckError, match="holds 12345 bytes, the formula says"):
        measure_variants(T=12, new_tokens=2, repeats=1)


def test_the_sections_show_the_speed_up_and_every_variants_cache_as_a_ratio():
    rows = measure_generation((2, 4), repeats=1)
    assert [r.new_tokens for r in rows] == [2, 4]
    assert all(r.cached_ms > 0 and r.uncached_ms > 0 for r in rows)
    text = format_generation(rows, threads=1)
    assert "cached speed-up" in text and "prompt 32 ids, context 36" in text
    variants = measure_variants(T=40, new_tokens=2, repeats=1)
    ratios = {r.name: r.nbytes / variants[0].nbytes for r in variants}
    assert list(ratios) == list(VARIANTS)
    assert ratios == {
        "MHA (4 kv heads)": 1.0,
        "GQA (2 kv heads)": 0.5,
        "MQA (1 kv head)": 0.25,
        "sliding window 32": 32 / 40,  # the window keeps 32 of the 40 positions
        "MLA (d_latent 64)": 0.5,  # 64 numbers per token and layer against 2 x 4 x 16
    }
    assert variants[0].nbytes == 2 * 2 * 4 * 16 * 40 * 4  # layers x K,V x heads x d x T x 4
    table = format_variants(variants)
    for name in VARIANTS:
        assert name in table
    assert "0.800" in table and "0.250" in table
