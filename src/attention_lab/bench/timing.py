"""Timing and memory at one shape for ``make bench``: ``measure_shape`` -> one ``Row`` each.

Times are medians over repeats that take turns across implementations
(``cost.interleaved_medians``); peak memory is ``cost.peak_memory_bytes``; FLOPs are
counted the dense way (``cost.attention_flops``). Every implementation passes the gates of
``bench.checks`` before anything is timed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn as nn

from ..cost import attention_flops, interleaved_medians, peak_memory_bytes
from ..fused import MultiHeadSelfAttention
from .checks import check_all, check_causal, check_matches_reference
from .implementations import COMPILED, FAST, REFERENCE, build_implementations, in_order, try_compile

MIB = 2**20


@dataclass
class Row:
    """One implementation at one shape; times in ms, memory in MiB, ratios to the REFERENCE."""

    shape: str
    B: int
    T: int
    D: int
    H: int
    implementation: str
    fwd_ms: float = math.nan
    fwd_bwd_ms: float = math.nan
    fwd_mib: float = math.nan
    fwd_bwd_mib: float = math.nan
    gflops: float = math.nan
    matmul_gflops: float = math.nan
    ratios: dict[str, float] = field(default_factory=dict)
    note: str = ""


def _forward(module: nn.Module, x: torch.Tensor) -> Callable[[], torch.Tensor]:
    def call():
        with torch.no_grad():
            return module(x)

    return call


def _forward_backward(module: nn.Module, x: torch.Tensor, grad: torch.Tensor, params) -> Callable:
    x = x.detach().clone().requires_grad_(True)

    def call():
        for p in params:  # fresh gradients each call, like after optimizer.zero_grad()
            p.grad = None
        x.grad = None
        module(x).backward(grad)

    return call


def _matmul(n: int) -> tuple[Callable, int]:
    a, b = torch.randn(n, n), torch.randn(n, n)  # (n, n)
    return (lambda: a @ b), 2 * n**3


def _seconds(fn: Callable) -> float:
    fn()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure_shape(
    label: str,
    shape: tuple[int, int, int, int],
    repeats: int,
    compile_fast: bool,
    extra: dict[str, Callable[[MultiHeadSelfAttention], nn.Module]] | None = None,
    matmul_n: int = 2048,
    log=print,
) -> list[Row]:
    """Check, then time every implementation at ``shape`` = (B, T, D, H); one Row each."""
    B, T, D, H = shape
    ref, impls = build_implementations(D, H, T)
    for name, factory in (extra or {}).items():
        impls[name] = factory(ref).eval()
    x = torch.randn(B, T, D)  # (B, T, D)
    log(f"\n[{label}] B={B} T={T} D={D} H={H}: checking every implementation ...")
    check_all(impls, ref, x)
    notes = {}
    if compile_fast:
        compiled, notes[COMPILED] = try_compile(impls[FAST], x)
        log(f"  torch.compile: {notes[COMPILED]}")
        if compiled is not None:  # checked at the very shape it was compiled for
            check_matches_reference(COMPILED, compiled, ref, x)
            check_causal(COMPILED, compiled, x)
            impls[COMPILED] = compiled
    else:
        notes[COMPILED] = "skipped (--quick or --no-compile)"
    log("  all outputs equal the reference and are causal; timing ...")

    grad = torch.randn(B, T, D)  # (B, T, D) the same upstream gradient for everyone
    fwd = {name: _forward(m, x) for name, m in impls.items()}
    fwd_bwd = {
        name: _forward_backward(m, x, grad, list(m.parameters())) for name, m in impls.items()
    }
    # the machine's matmul speed first, on its own: timed in turn with tiny calls, the BLAS
    # threads that a big matmul leaves spinning would slow down whatever runs right after it
    matmul, matmul_flops = _matmul(matmul_n)
    matmul_ms = interleaved_medians({"matmul": matmul}, max(repeats, 9), warmup=2)["matmul"]
    matmul_gflops = matmul_flops / (matmul_ms * 1e-3) / 1e9
    # calls well under a millisecond are timed in groups so the clock's own cost vanishes
    per_call = min(_seconds(fwd[REFERENCE]) for _ in range(3))
    number = max(1, min(50, int(0.02 / max(per_call, 1e-6))))
    warmup = 1 if number == 1 else 3
    fwd_ms = interleaved_medians(fwd, repeats, warmup, number)
    fwd_bwd_ms = interleaved_medians(fwd_bwd, repeats, warmup, number)
    flops = attention_flops(B, T, D)

    rows = []
    names = in_order(impls) + ([] if COMPILED in impls else [COMPILED])  # skipped rows last
    for name in names:
        row = Row(label, B, T, D, H, name, matmul_gflops=matmul_gflops, note=notes.get(name, ""))
        if name in impls:
            row.fwd_ms, row.fwd_bwd_ms = fwd_ms[name], fwd_bwd_ms[name]
            row.fwd_mib = peak_memory_bytes(fwd[name]) / MIB
            row.fwd_bwd_mib = peak_memory_bytes(fwd_bwd[name]) / MIB
            row.gflops = flops / (row.fwd_ms * 1e-3) / 1e9
        rows.append(row)
    base = next(r for r in rows if r.implementation == REFERENCE)
    for row in rows:
        for key in ("fwd_ms", "fwd_bwd_ms", "fwd_mib", "fwd_bwd_mib"):
            row.ratios[key] = getattr(row, key) / getattr(base, key)
    return rows
