"""cost.py: the tiled attention equals the explicit one, and the measuring tools measure
what they claim (memory on cases computed by hand; never speed)."""

from __future__ import annotations

import pytest
import torch

from attention_lab import attention, causal_mask
from attention_lab.cost import (
    attention_flops,
    interleaved_medians,
    loglog_slope,
    peak_memory_bytes,
    projection_flops,
    score_flops,
    tiled_attention,
)


def _qkv(B=2, H=3, T=50, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(3, B, H, T, d, generator=g).unbind(0)  # 3 x (B, H, T, d)


@pytest.mark.parametrize("block_size", [1, 7, 16, 50, 64])
def test_tiled_attention_equals_explicit_causal_attention(block_size):
    q, k, v = _qkv()
    expected, _ = attention(q, k, v, causal_mask(50))  # (B, H, T, d)
    torch.testing.assert_close(tiled_attention(q, k, v, block_size=block_size), expected)


def test_tiled_attention_without_mask_equals_full_attention():
    q, k, v = _qkv(T=37)
    expected, _ = attention(q, k, v)  # (B, H, T, d)
    torch.testing.assert_close(tiled_attention(q, k, v, causal=False, block_size=8), expected)


def test_tiled_attention_future_keys_do_not_change_earlier_outputs():
    q, k, v = _qkv(T=40)
    before = tiled_attention(q, k, v, block_size=16)
    k2, v2 = k.clone(), v.clone()
    k2[..., 21:, :] = torch.randn_like(k2[..., 21:, :])
    v2[..., 21:, :] = torch.randn_like(v2[..., 21:, :])
    after = tiled_attention(q, k2, v2, block_size=16)
    torch.testing.assert_close(after[..., :21, :], before[..., :21, :])
    assert not torch.allclose(after[..., 21:, :], before[..., 21:, :])


def test_tiled_attention_gradients_equal_the_explicit_ones():
    q, k, v = (t.requires_grad_(True) for t in _qkv(T=20))
    tiled_attention(q, k, v, block_size=6).square().sum().backward()
    tiled_grads = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    attention(q, k, v, causal_mask(20))[0].square().sum().backward()
    for got, expected in zip(tiled_grads, (q.grad, k.grad, v.grad)):
        torch.testing.assert_close(got, expected)


def test_causal_tiled_attention_rejects_different_query_and_key_lengths():
    q, k, v = _qkv(T=10)
    with pytest.raises(ValueError, match="causal=False"):
        tiled_attention(q[..., :5, :], k, v)


def test_peak_memory_of_a_score_matrix_is_b_h_t_squared_times_4_bytes():
    B, H, T = 2, 3, 64
    assert peak_memory_bytes(torch.empty, B, H, T, T) == B * H * T * T * 4
    assert peak_memory_bytes(torch.zeros, B, H, T, T, dtype=torch.float64) == B * H * T * T * 8


def test_peak_memory_is_the_peak_not_what_is_left_at_the_end():
    def build_then_drop():
        big = torch.ones(256, 256)  # 256 KiB
        small = big[0].clone()  # 1 KiB
        del big
        return small

    assert peak_memory_bytes(build_then_drop) == 256 * 256 * 4 + 256 * 4


def test_peak_memory_ignores_tensors_made_before_the_call():
    x = torch.ones(512, 512)
    assert peak_memory_bytes(lambda: x.sum()) == 4  # only the 0-d result


def test_explicit_attention_memory_quadruples_when_t_doubles():
    peaks = []
    for T in (256, 512):
        q, k, v = _qkv(B=1, H=8, T=T, d=16)
        mask = causal_mask(T)
        with torch.no_grad():
            peaks.append(peak_memory_bytes(attention, q, k, v, mask))
    one_matrix = 8 * 512 * 512 * 4
    assert peaks[1] >= one_matrix  # at least one (B, H, T, T) float32 matrix is alive
    assert 3.8 < peaks[1] / peaks[0] < 4.1


def test_tiled_attention_never_holds_a_t_by_t_matrix():
    T = 512
    q, k, v = _qkv(B=1, H=8, T=T, d=16)
    with torch.no_grad():
        peak = peak_memory_bytes(lambda: tiled_attention(q, k, v, block_size=64))
    assert peak < 8 * T * T * 4 / 4  # well under a quarter of one score matrix


def test_flops_are_counted_the_dense_way():
    B, T, D = 8, 1024, 768
    assert projection_flops(B, T, D) == 8 * B * T * D * D
    assert score_flops(B, T, D) == 4 * B * T * T * D
    assert attention_flops(B, T, D) == 38_654_705_664 + 25_769_803_776


def test_loglog_slope_recovers_the_exponent():
    xs = [64, 128, 256, 512]
    assert loglog_slope(xs, [3 * x**2 for x in xs]) == pytest.approx(2.0)
    assert loglog_slope(xs, [5.0 for _ in xs]) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="two"):
        loglog_slope([1], [1])


def test_interleaved_medians_calls_each_function_warmup_plus_repeats_times_number():
    calls = {"a": 0, "b": 0}

    def counter(name):
        def fn():
            calls[name] += 1

        return fn

    result = interleaved_medians({n: counter(n) for n in calls}, repeats=3, warmup=2, number=4)
    assert set(result) == {"a", "b"}
    assert calls == {"a": 2 + 3 * 4, "b": 2 + 3 * 4}


def test_timing_on_one_thread_runs_every_call_there_and_restores_the_thread_count():
    outside = torch.get_num_threads()
    torch.set_num_threads(2)  # so that a count left at 1 would show
    before = torch.get_num_threads()
    seen = []
    interleaved_medians({"f": lambda: seen.append(torch.get_num_threads())}, repeats=3, warmup=1,
                        threads=1)  # fmt: skip
    assert seen == [1] * 4  # the warm-up call too
    assert torch.get_num_threads() == before

    def boom():
        raise RuntimeError("inside the timed call")

    with pytest.raises(RuntimeError):
        interleaved_medians({"f": boom}, threads=1)
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="threads=0"):
        interleaved_medians({"f": lambda: None}, threads=0)
    torch.set_num_threads(outside)
