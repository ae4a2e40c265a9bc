"""What attention costs, measured (bonus notebook ``bonus_cost_of_attention`` and ``make bench``).

Seed 001 (section 3.6) states the price of attention: time O(B·T²·D), memory for the
attention matrix O(B·H·T²), so "T doubles, memory quadruples". This module holds the tools
to check those claims by measurement:

* ``attention_flops`` counts floating-point operations the dense way, so runs compare;
* ``tiled_attention`` is a small pure-PyTorch attention with an online softmax: it walks
  over blocks of keys and never builds the (T, T) matrix -- the idea behind FlashAttention;
* ``peak_memory_bytes`` measures the peak of the memory a call allocates on the CPU;
* ``median_ms`` / ``interleaved_medians`` time calls (medians of repeats, warmed up, on a
  chosen number of threads);
* ``matmul_gflops`` measures the machine's own float32 matmul speed, the ceiling to compare with;
* ``loglog_slope`` fits the exponent p of ``y ~ x**p``.

How peak memory is measured on the CPU. PyTorch has no CPU ``max_memory_allocated``, so
``peak_memory_bytes`` runs the call under ``torch.profiler`` with ``profile_memory=True``.
The profiler records every allocation and every free of PyTorch's CPU allocator, in order,
with its size. Their running sum is the memory the call holds at each moment; its maximum
is the peak. Tensors that existed before the call (inputs, weights) are not counted; the
tensors the call returns are. The measurement is exact for tensor storage (it is checked
against a (B, H, T, T) float32 tensor, which takes B·H·T²·4 bytes) and ignores memory that
is not a tensor (Python objects, the allocator's own overhead, library workspaces).
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping

import torch

from ._checks import check_float_tensor, check_positive
from .device import cpu_threads
from .i18n import error_text

# --- counting ----------------------------------------------------------------------------


def projection_flops(B: int, T: int, D: int) -> int:
    """FLOPs of the four (D, D) projections Q, K, V and out: 4 matmuls of 2·B·T·D² each."""
    return 8 * B * T * D * D


def score_flops(B: int, T: int, D: int) -> int:
    """FLOPs of q kᵀ and weights @ v over all heads: 2 matmuls of 2·B·T²·D each.

    Counted over the full (T, T) square, although a causal mask makes half of it unneeded:
    a dense count compares across implementations that do or do not skip the blocked half.
    """
    return 4 * B * T * T * D


def attention_flops(B: int, T: int, D: int) -> int:
    """Dense FLOPs of one forward pass of a multi-head self-attention block:
    8·B·T·D² (projections) + 4·B·T²·D (scores and weighted sum). H does not appear."""
    return projection_flops(B, T, D) + score_flops(B, T, D)


# --- attention without the (T, T) matrix --------------------------------------------------


def tiled_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = True,
    block_size: int = 64,
) -> torch.Tensor:
    """softmax(q kᵀ / sqrt(d_k)) v, computed block by block with an online softmax.

    The queries are cut into blocks of ``block_size`` rows. For each query block we walk
    over the key blocks and keep, per query row, three running quantities: the largest
    score seen so far ``m``, the sum of exp(score - m) so far ``l``, and the weighted sum
    of values so far ``acc``. When a new key block raises the maximum, the old ``l`` and
    ``acc`` are rescaled by exp(m_old - m_new) -- that is the online softmax. At the end,
    ``acc / l`` is exactly the softmax-weighted average. Only (block_size, block_size)
    tiles of scores ever exist, so the memory grows with T, not with T².

    With ``causal=True`` (self-attention, T_q == T_k) position i sees keys 0..i only, as
    with ``attention_lab.causal_mask``; key blocks that lie wholly in the future are
    skipped, so about half of the score work is never done.

    This is a teaching version: it runs in Python loops, so it is slower than the fused
    kernels, and under autograd it keeps every tile for the backward pass (FlashAttention
    recomputes them instead). Measure its memory under ``torch.no_grad()``.

    Args:
        q: (..., T_q, d_k) queries; k: (..., T_k, d_k) keys; v: (..., T_k, d_v) values.
        causal: block every key after the query's own position.
        block_size: rows and columns of one score tile.

    Returns:
        (..., T_q, d_v), equal to ``attention(q, k, v, causal_mask(T))[0]`` up to rounding.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_float_tensor(t, name)
    check_positive("block_size", block_size)
    T_q, T_k = q.shape[-2], k.shape[-2]
    if causal and T_q != T_k:
        raise ValueError(
            error_text(
                "causal tiled attention is self-attention: q has T={T_q} but k has T={T_k}; "
                "pass causal=False for cross-attention"
            ).format(T_q=T_q, T_k=T_k)
        )
    scale = 1.0 / math.sqrt(q.shape[-1])
    blocks = []
    for i0 in range(0, T_q, block_size):
        i1 = min(i0 + block_size, T_q)
        qi = q[..., i0:i1, :] * scale  # (..., bq, d_k)
        m = qi.new_full((*qi.shape[:-1], 1), float("-inf"))  # (..., bq, 1) running max
        l = qi.new_zeros((*qi.shape[:-1], 1))  # (..., bq, 1) running sum of exp
        acc = qi.new_zeros((*qi.shape[:-1], v.shape[-1]))  # (..., bq, d_v) running output
        last_key = i1 if causal else T_k  # keys at or after i1 are in every row's future
        for j0 in range(0, last_key, block_size):
            j1 = min(j0 + block_size, T_k)
            s = qi @ k[..., j0:j1, :].transpose(-2, -1)  # (..., bq, bk) one tile of scores
            if causal and j1 > i0 + 1:  # the tile crosses the diagonal
                rows = torch.arange(i0, i1, device=q.device).unsqueeze(1)  # (bq, 1)
                cols = torch.arange(j0, j1, device=q.device).unsqueeze(0)  # (1, bk)
                s = s.masked_fill(cols > rows, float("-inf"))  # (..., bq, bk)
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))  # (..., bq, 1)
            rescale = torch.exp(m - m_new)  # (..., bq, 1); exp(-inf) = 0 on the first tile
            p = torch.exp(s - m_new)  # (..., bq, bk) unnormalised weights
            l = l * rescale + p.sum(dim=-1, keepdim=True)  # (..., bq, 1)
            acc = acc * rescale + p @ v[..., j0:j1, :]  # (..., bq, d_v)
            m = m_new
        blocks.append(acc / l)  # (..., bq, d_v)
    return torch.cat(blocks, dim=-2)  # (..., T_q, d_v)


# --- measuring ---------------------------------------------------------------------------


def peak_memory_bytes(fn: Callable, *args, **kwargs) -> int:
    """Peak bytes of CPU tensor memory allocated while ``fn(*args, **kwargs)`` runs.

    Runs the call once under ``torch.profiler`` with ``profile_memory=True`` and takes the
    maximum of the running sum of the allocator's allocations and frees (see the module
    docstring). Tensors alive before the call do not count; the returned tensors do.
    While it runs, the process's stderr (file descriptor 2) goes to /dev/null, to hide the
    profiler's own log lines.
    Example: ``peak_memory_bytes(torch.empty, 2, 3, 8, 8)`` is 2·3·8·8·4 = 1536.
    """
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile

    with _silent_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = fn(*args, **kwargs)
        del result
    events = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        if node.tag == _EventType.Allocation:
            events.append((node.start_time_ns, node.extra_fields.alloc_size))
        stack.extend(node.children)
    events.sort(key=lambda e: e[0])
    held = peak = 0
    for _, size in events:
        held += size
        peak = max(peak, held)
    return peak


@contextlib.contextmanager
def _silent_stderr() -> Iterator[None]:
    """Send file descriptor 2 to /dev/null for a moment: the profiler's C++ library prints
    time-stamped "profiler_start/stop" lines there, which would make notebook outputs differ
    from run to run. Python exceptions are unaffected."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def median_ms(
    fn: Callable, repeats: int = 7, warmup: int = 2, number: int = 1, threads: int | None = None
) -> float:
    """Median over ``repeats`` of the time per call of ``fn()`` in milliseconds.

    Each repeat times ``number`` calls in a row (use number > 1 for calls of well under
    a millisecond). ``warmup`` calls run first and are not timed. ``threads``: see
    ``interleaved_medians``.
    """
    return interleaved_medians({"fn": fn}, repeats, warmup, number, threads)["fn"]


def interleaved_medians(
    fns: Mapping[str, Callable],
    repeats: int = 7,
    warmup: int = 2,
    number: int = 1,
    threads: int | None = None,
) -> dict[str, float]:
    """Time several calls fairly: median milliseconds per call of each ``fns[name]()``.

    The calls take turns (round 1: a, b, c; round 2: a, b, c; ...), so a burst of load from
    another process on a shared machine hits all of them alike instead of one; the median
    over rounds then ignores the rounds that a burst spoiled. ``warmup`` calls of each run
    first and are not timed.

    ``threads``: PyTorch's thread count while timing (restored afterwards); None keeps it.
    On a busy machine ``threads=1`` gives much steadier numbers: a call that splits its work
    over several threads waits for the slowest, and any one of them may be paused by another
    process.
    """
    check_positive("repeats", repeats)
    check_positive("number", number)
    with cpu_threads(threads):
        for fn in fns.values():
            for _ in range(warmup):
                fn()
        samples: dict[str, list[float]] = {name: [] for name in fns}
        for _ in range(repeats):
            for name, fn in fns.items():
                start = time.perf_counter()
                for _ in range(number):
                    fn()
                samples[name].append((time.perf_counter() - start) * 1e3 / number)
    return {name: statistics.median(values) for name, values in samples.items()}


def matmul_gflops(n: int = 2048, repeats: int = 5) -> float:
    """The machine's float32 matmul speed in GFLOP/s: an (n, n) @ (n, n) product is 2·n³ FLOPs."""
    a = torch.randn(n, n)  # (n, n)
    b = torch.randn(n, n)  # (n, n)
    ms = median_ms(lambda: a @ b, repeats=repeats, warmup=1)
    return 2 * n**3 / (ms * 1e-3) / 1e9


def loglog_slope(xs, ys) -> float:
    """The exponent p of the straight line through log y against log x (least squares):
    y ~ x**p. Time or memory that grows like T² gives p ≈ 2."""
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    if len(lx) < 2:
        raise ValueError(
            error_text("need at least two points to fit a slope, got {n}").format(n=len(lx))
        )
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    sxx = sum((x - mx) ** 2 for x in lx)
    if sxx == 0:
        raise ValueError(error_text("all x values are equal; measure at two or more sizes"))
    return sum((x - mx) * (y - my) for x, y in zip(lx, ly)) / sxx
