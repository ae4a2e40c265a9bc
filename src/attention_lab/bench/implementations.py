"""``make bench`` / ``python -m attention_lab bench``: speed and memory of every implementation.

Every implementation holds the same weights, converted from one ``MultiHeadSelfAttention``,
and before anything is timed each one is checked to give the reference output and to be
causal. Then, at each shape, forward time, forward+backward time and peak memory are
measured in one run and printed as ratios to a bare ``F.scaled_dot_product_attention``
block, next to the machine's own float32 matmul speed. Results go to ``bench-results/``
(``bench.csv``, ``bench.png``).

    python -m attention_lab bench            # the full run: a few minutes on 2 cores
    python -m attention_lab bench --quick    # a smoke run at tiny shapes (used by the tests)

Times are medians over repeats that take turns across implementations (see
``cost.interleaved_medians``); peak memory is measured with ``cost.peak_memory_bytes``.
FLOPs are counted the dense way (``cost.attention_flops``).
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from .cost import attention_flops, interleaved_medians, peak_memory_bytes
from .fused import MultiHeadSelfAttention
from .heads import CausalAttention
from .masks import causal_mask
from .multihead import merge_heads, split_heads

MIB = 2**20
REFERENCE = "bare SDPA block"
FAST = "MHSA fast path"
COMPILED = "MHSA fast, torch.compile"

# name -> (B, T, D, H)
# The small shape runs first: measured after the big one in the same process, its no-grad
# forward calls once came out ~40 ms each instead of ~0.5 ms (cause not yet found).
FULL_SHAPES = {"chapter": (32, 12, 32, 4), "GPT-2 small": (8, 1024, 768, 12)}
QUICK_SHAPES = {"chapter": (32, 12, 32, 4), "tiny": (2, 32, 32, 4)}


class ImplementationCheckError(AssertionError):
    """An implementation gave a wrong output or let a position see its future."""


# --- the implementations ------------------------------------------------------------------


class HeadList(nn.Module):
    """The first multi-head version (notebook 06): H ``CausalAttention`` heads side by side,
    their outputs concatenated, then one output projection W_o."""

    def __init__(self, heads: list[CausalAttention], W_o: nn.Linear):
        super().__init__()
        self.heads = nn.ModuleList(heads)
        self.W_o = W_o

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ctx = torch.cat([head(x) for head in self.heads], dim=-1)  # (B, T, D)
        return self.W_o(ctx)  # (B, T, D)


class ExplicitPath(nn.Module):
    """``MultiHeadSelfAttention`` forced onto its explicit path (``return_weights=True``)."""

    def __init__(self, block: MultiHeadSelfAttention):
        super().__init__()
        self.block = block

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x, return_weights=True)[0]  # (B, T, D)


class BareSDPABlock(nn.Module):
    """The shortest fast block (nanoGPT's): fused QKV, ``F.scaled_dot_product_attention``,
    output projection. No input checks, no mask buffer: the yardstick for the others."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=-1)  # 3 x (B, T, D)
        q = q.view(B, T, self.n_heads, D // self.n_heads).transpose(1, 2)  # (B, H, T, d_head)
        k = k.view(B, T, self.n_heads, D // self.n_heads).transpose(1, 2)  # (B, H, T, d_head)
        v = v.view(B, T, self.n_heads, D // self.n_heads).transpose(1, 2)  # (B, H, T, d_head)
        ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, d_head)
        return self.out_proj(ctx.transpose(1, 2).reshape(B, T, D))  # (B, T, D)


class TorchMultihead(nn.Module):
    """``torch.nn.MultiheadAttention`` with a causal mask and ``need_weights=False``.

    The boolean mask uses our convention (True = blocked); ``is_causal=True`` tells
    PyTorch it is the causal one, so it may use the fused kernel."""

    def __init__(self, mha: nn.MultiheadAttention, context_length: int):
        super().__init__()
        self.mha = mha
        self.register_buffer("mask", causal_mask(context_length))  # (ctx, ctx)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[1]
        mask = self.mask[:T, :T]  # (T, T), True = blocked
        return self.mha(x, x, x, attn_mask=mask, need_weights=False, is_causal=True)[0]


class InvertedMaskBlock(BareSDPABlock):
    """A deliberately wrong block for the tests: it hands our mask (True = blocked) to SDPA,
    whose boolean mask means the opposite (True = may attend). The bench must reject it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        q, k, v = (
            split_heads(t, self.n_heads) for t in self.qkv(x).split(D, dim=-1)
        )  # 3 x (B, H, T, d_head)
        mask = causal_mask(T, device=x.device)  # (T, T) True = blocked: wrong for SDPA
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, T, d_head)
        return self.out_proj(merge_heads(ctx))  # (B, T, D)


def build_implementations(
    d_model: int, n_heads: int, context_length: int, seed: int = 0
) -> tuple[MultiHeadSelfAttention, dict[str, nn.Module]]:
    """One ``MultiHeadSelfAttention`` (the reference) and every implementation, all holding
    its weights. Biases are off so that every layout can hold the same function."""
    torch.manual_seed(seed)
    ref = MultiHeadSelfAttention(d_model, n_heads, context_length, bias=False).eval()
    separate = ref.to_separate().eval()  # W_q, W_k, W_v, W_o (W_o's bias is zero)
    d_head = d_model // n_heads
    heads = []
    for h in range(n_heads):
        head = CausalAttention(d_model, d_head, context_length)
        rows = slice(h * d_head, (h + 1) * d_head)  # head h owns these output features
        with torch.no_grad():
            head.W_q.weight.copy_(separate.W_q.weight[rows])
            head.W_k.weight.copy_(separate.W_k.weight[rows])
            head.W_v.weight.copy_(separate.W_v.weight[rows])
        heads.append(head)
    W_o = nn.Linear(d_model, d_model)
    W_o.load_state_dict(separate.W_o.state_dict())
    bare = BareSDPABlock(d_model, n_heads)
    bare.load_state_dict({"qkv.weight": ref.qkv.weight, "out_proj.weight": ref.out_proj.weight})
    impls = {
        "list of single heads": HeadList(heads, W_o),
        "MultiHeadAttention": separate,
        "MHSA explicit path": ExplicitPath(_copy_of(ref)),
        FAST: _copy_of(ref),
        REFERENCE: bare,
        "nn.MultiheadAttention": TorchMultihead(ref.to_torch(), context_length),
    }
    return ref, {name: module.eval() for name, module in impls.items()}


def _copy_of(block: MultiHeadSelfAttention) -> MultiHeadSelfAttention:
    twin = MultiHeadSelfAttention(
        block.d_model, block.n_heads, block.context_length, bias=block.qkv.bias is not None
    )
    twin.load_state_dict(block.state_dict())
    return twin.eval()


def try_compile(module: nn.Module, x: torch.Tensor) -> tuple[nn.Module | None, str]:
    """``torch.compile(module)`` run once forward and backward on ``x``; (None, why) on failure."""
    start = time.perf_counter()
    try:
        compiled = torch.compile(module, dynamic=False)
        with torch.no_grad():
            compiled(x)
        compiled(x.detach().requires_grad_(True)).sum().backward()
        module.zero_grad(set_to_none=True)
    except Exception as error:  # any compiler failure means: skip this row, say why
        first_line = (str(error).strip().splitlines() or [""])[0][:200]
        return None, f"torch.compile failed: {type(error).__name__}: {first_line}"
    return compiled, f"compiled in {time.perf_counter() - start:.0f} s"


# --- the checks ---------------------------------------------------------------------------


def check_matches_reference(
    name: str,
    module: nn.Module,
    ref: MultiHeadSelfAttention,
    x: torch.Tensor,
    expected: torch.Tensor | None = None,
) -> None:
    """``module(x)`` must equal the explicit maths of the reference block (``expected``,
    if given, is that output computed once for many modules)."""
    with torch.no_grad():
        if expected is None:
            expected = ref(x, return_weights=True)[0]  # (B, T, D)
        out = module(x)  # (B, T, D)
    try:
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
    except AssertionError as error:
        raise ImplementationCheckError(
            f"{name} does not give the reference output: {str(error).splitlines()[1:3]}"
        ) from None


def check_causal(name: str, module: nn.Module, x: torch.Tensor) -> None:
    """Changing the tokens from position t0 on must leave every output before t0 unchanged
    (and must change the output at t0, so the check cannot pass on a module that ignores x)."""
    T = x.shape[1]
    t0 = T // 2
    changed = x.clone()  # (B, T, D)
    changed[:, t0:] = torch.randn_like(changed[:, t0:])
    with torch.no_grad():
        before = module(x)  # (B, T, D)
        after = module(changed)  # (B, T, D)
    if not torch.equal(torch.isfinite(before), torch.ones_like(before, dtype=torch.bool)):
        raise ImplementationCheckError(f"{name} gives NaN or inf outputs")
    leak = (after[:, :t0] - before[:, :t0]).abs().max().item()
    if leak > 1e-5:
        raise ImplementationCheckError(
            f"{name} is not causal: changing tokens {t0}.. moved earlier outputs by {leak:.3g}"
        )
    if torch.allclose(after[:, t0], before[:, t0]):
        raise ImplementationCheckError(f"{name} ignores its input at position {t0}")


def check_all(impls: dict[str, nn.Module], ref: MultiHeadSelfAttention, x: torch.Tensor) -> None:
    """Every module gives the reference output on the whole batch ``x`` and is causal
    (checked on its first two sequences, which is as strict and four times cheaper)."""
    with torch.no_grad():
        expected = ref(x, return_weights=True)[0]  # (B, T, D)
    for name, module in impls.items():
        check_matches_reference(name, module, ref, x, expected)
        check_causal(name, module, x[:2])


# --- measuring ----------------------------------------------------------------------------


@dataclass
class Row:
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


def measure_shape(
    label: str,
    shape: tuple[int, int, int, int],
    repeats: int,
    compile_fast: bool,
    extra: dict[str, Callable[[MultiHeadSelfAttention], nn.Module]] | None = None,
    matmul_n: int = 2048,
    log=print,
) -> list[Row]:
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
    names = list(_order(impls)) + ([] if COMPILED in impls else [COMPILED])
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


def _seconds(fn: Callable) -> float:
    fn()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _order(impls: dict) -> list[str]:
    known = [
        "list of single heads",
        "MultiHeadAttention",
        "MHSA explicit path",
        FAST,
        COMPILED,
        "nn.MultiheadAttention",
        REFERENCE,
    ]
    return [n for n in known if n in impls] + [n for n in impls if n not in known]


# --- reporting ----------------------------------------------------------------------------


def format_table(rows: list[Row]) -> str:
    r0 = rows[0]
    flops = attention_flops(r0.B, r0.T, r0.D)
    lines = [
        f"{r0.shape}: B={r0.B} T={r0.T} D={r0.D} H={r0.H}   dense forward FLOPs "
        f"{flops / 1e9:.3f} G   machine matmul {r0.matmul_gflops:.1f} GFLOP/s   "
        f"(x = ratio to the {REFERENCE})",
        "  GFLOP/s = dense FLOPs / forward time; a kernel that skips the masked half of the scores "
        "can pass 100 % of matmul",
        f"{'implementation':<26}{'fwd ms':>10}{'x':>7}{'fwd+bwd ms':>12}{'x':>7}"
        f"{'fwd MiB':>10}{'x':>7}{'f+b MiB':>10}{'x':>7}{'GFLOP/s':>9}{'% mm':>6}",
    ]
    for r in rows:
        if math.isnan(r.fwd_ms):
            lines.append(f"{r.implementation:<26}  {r.note}")
            continue
        x = r.ratios
        lines.append(
            f"{r.implementation:<26}{r.fwd_ms:>10.3f}{x['fwd_ms']:>7.2f}"
            f"{r.fwd_bwd_ms:>12.3f}{x['fwd_bwd_ms']:>7.2f}"
            f"{r.fwd_mib:>10.2f}{x['fwd_mib']:>7.2f}{r.fwd_bwd_mib:>10.2f}{x['fwd_bwd_mib']:>7.2f}"
            f"{r.gflops:>9.1f}{100 * r.gflops / r.matmul_gflops:>6.0f}"
        )
    return "\n".join(lines)


def format_goals(rows: list[Row]) -> str:
    fast = next(r for r in rows if r.implementation == FAST)
    checks = [
        (
            f"{FAST} forward <= 1.05x {REFERENCE}",
            fast.ratios["fwd_ms"],
            fast.ratios["fwd_ms"] <= 1.05,
        ),
        (
            f"{FAST} forward+backward <= 1.05x {REFERENCE}",
            fast.ratios["fwd_bwd_ms"],
            fast.ratios["fwd_bwd_ms"] <= 1.05,
        ),
    ]
    share = fast.gflops / fast.matmul_gflops
    lines = [f"goals at {fast.shape} (B={fast.B} T={fast.T} D={fast.D} H={fast.H}):"]
    for text, value, ok in checks:
        lines.append(f"  [{'met' if ok else 'MISSED'}] {text}: {value:.3f}x")
    ok = share >= 0.80
    lines.append(
        f"  [{'met' if ok else 'MISSED'}] {FAST} forward >= 80 % of matmul: "
        f"{fast.gflops:.1f} of {fast.matmul_gflops:.1f} GFLOP/s = {100 * share:.0f} %"
    )
    return "\n".join(lines)


def write_csv(rows: list[Row], path: Path) -> None:
    keys = ("fwd_ms", "fwd_bwd_ms", "fwd_mib", "fwd_bwd_mib")
    header = ["shape", "B", "T", "D", "H", "implementation", *keys]
    header += [f"{k}_ratio" for k in keys] + ["gflops", "matmul_gflops", "note"]
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        for r in rows:
            values = [getattr(r, k) for k in keys]
            ratios = [r.ratios.get(k, math.nan) for k in keys]
            writer.writerow(
                [r.shape, r.B, r.T, r.D, r.H, r.implementation]
                + [f"{v:.6g}" for v in values + ratios]
                + [f"{r.gflops:.6g}", f"{r.matmul_gflops:.6g}", r.note]
            )


def plot_ratios(tables: list[list[Row]], path: Path) -> None:
    from matplotlib.ticker import NullFormatter

    from .plotting import LabFigure

    fig = LabFigure(figsize=(7, 2.2 + 1.6 * len(tables)), dpi=100)
    axes = fig.subplots(len(tables), 1, squeeze=False)[:, 0]
    for ax, rows in zip(axes, tables):
        rows = [r for r in rows if not math.isnan(r.fwd_ms)]
        y = range(len(rows))
        ax.barh([i - 0.2 for i in y], [r.ratios["fwd_ms"] for r in rows], 0.4, label="forward")
        ax.barh([i + 0.2 for i in y], [r.ratios["fwd_bwd_ms"] for r in rows], 0.4, label="fwd+bwd")
        ax.axvline(1.0, color="black", lw=1)
        ax.set_yticks(list(y), [r.implementation for r in rows], fontsize=8)
        ax.set_xscale("log")
        ratios = [r.ratios[k] for r in rows for k in ("fwd_ms", "fwd_bwd_ms")]
        ticks = [
            t
            for t in (0.25, 0.5, 1, 2, 4, 8, 16, 32, 64)
            if min(ratios) / 2 <= t <= max(ratios) * 2
        ]
        ax.set_xticks(ticks, [f"{t:g}x" for t in ticks])
        ax.xaxis.set_minor_formatter(NullFormatter())
        r0 = rows[0]
        ax.set_title(f"{r0.shape}: B={r0.B} T={r0.T} D={r0.D} H={r0.H}", fontsize=9)
        ax.set_xlabel(f"time / time of the {REFERENCE} (log scale)")
        ax.invert_yaxis()
        ax.grid(alpha=0.3, axis="x")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, facecolor="white")


def explorer_times(log=print) -> None:
    """Redraw and retrain times of the interactive explorer (attention_lab.widgets)."""
    try:
        from . import widgets
    except ModuleNotFoundError as error:
        if error.name != "attention_lab.widgets":
            raise
        log("explorer: unavailable (attention_lab.widgets does not exist yet)")
        return
    try:
        benchmark = widgets.benchmark_explorer
    except AttributeError:
        log("explorer: unavailable (attention_lab.widgets has no benchmark_explorer yet)")
        return
    result = benchmark()
    log(
        f"explorer: redraw median {result['redraw_median_ms']:.1f} ms, "
        f"retrain {result['retrain_s']:.1f} s"
    )


# --- command line -------------------------------------------------------------------------


def run(
    argv: list[str] | None = None,
    extra: dict[str, Callable[[MultiHeadSelfAttention], nn.Module]] | None = None,
    log=print,
) -> list[Row]:
    """Run the benchmark; return every row. ``extra`` adds implementations (name -> a
    function that builds one from the reference block); they are checked like the rest."""
    parser = argparse.ArgumentParser(prog="python -m attention_lab bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny shapes, few repeats")
    parser.add_argument("--repeats", type=int, default=None, help="timing rounds per shape")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("--out", default="bench-results", help="folder for bench.csv/png")
    args = parser.parse_args(argv or [])

    shapes = QUICK_SHAPES if args.quick else FULL_SHAPES
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    log(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
        "times are medians of interleaved repeats, memory is the peak of CPU tensor allocations"
    )
    tables = []
    for label, shape in shapes.items():
        big = shape[1] * shape[2] >= 2**18
        repeats = args.repeats or (2 if args.quick else (3 if big else 15))
        rows = measure_shape(
            label,
            shape,
            repeats,
            compile_fast=not (args.quick or args.no_compile),
            extra=extra,
            matmul_n=256 if args.quick else 2048,
            log=log,
        )
        tables.append(rows)
        log(format_table(rows))
    log("")
    log(format_goals(max(tables, key=lambda rows: rows[0].T * rows[0].D)))
    if args.quick:
        log("explorer: skipped (--quick)")
    else:
        explorer_times(log)
    rows = [r for table in tables for r in table]
    write_csv(rows, out / "bench.csv")
    plot_ratios(tables, out / "bench.png")
    log(f"wrote {out / 'bench.csv'} and {out / 'bench.png'} in {time.perf_counter() - start:.0f} s")
    return rows
