"""What ``make bench`` prints and writes: the table, the speed goals, ``bench.csv``, ``bench.png``,
and the explorer's redraw and retrain times."""

from __future__ import annotations

import csv
import math
from pathlib import Path

from ..cost import attention_flops
from .implementations import FAST, REFERENCE
from .timing import Row


def format_table(rows: list[Row]) -> str:
    """The rows of one shape as a text table, each time and memory also as a ratio."""
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
    """The fast path's goals at one shape, each marked met or MISSED."""
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
    """One line per row: the measurements, their ratios, GFLOP/s and the note."""
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
    """One panel per shape: forward and forward+backward time as ratios, log scale."""
    from matplotlib.ticker import NullFormatter

    from ..viz.canvas import LabFigure

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
    """Redraw and retrain times of the interactive explorer (``benchmark_explorer``), on the
    figures' fast path and on the plain-Agg fallback (``_mpl_fast``), in this one run."""
    from ..viz import _mpl_fast
    from ..viz.diagrams import head_split_png
    from .explorer import benchmark_explorer  # lazy: ipywidgets loads only here

    results = {}
    try:
        for path in ("fast", "plain"):
            _mpl_fast.use_plain_agg(path == "plain")
            if path == "fast" and not _mpl_fast.fast_path():
                log(f"explorer: the fast path is off here ({_mpl_fast.status()})")
            head_split_png.cache_clear()  # each path draws its own diagrams
            results[path] = result = benchmark_explorer()
            log(
                f"explorer ({'fast path' if path == 'fast' else 'plain Agg'}): redraw median "
                f"{result['redraw_median_ms']:.1f} ms (budget 150 ms), new titles "
                f"{result['redraw_new_titles_median_ms']:.1f} ms, n_heads change median "
                f"{result['panel_count_median_ms']:.1f} ms, first draw "
                f"{result['first_draw_ms']:.0f} ms, retrain {result['retrain_s']:.1f} s"
            )
            log(
                f"explorer ({'fast path' if path == 'fast' else 'plain Agg'}), 2 kv heads for 8: "
                f"redraw median {result['redraw_kv_median_ms']:.1f} ms (budget 150 ms; CPU "
                f"{result['redraw_kv_cpu_median_ms']:.1f} ms, MHA "
                f"{result['redraw_cpu_median_ms']:.1f} ms), kv heads change median "
                f"{result['kv_change_median_ms']:.1f} ms, retrain "
                f"{result['retrain_kv_s']:.1f} s ({result['retrain_kv_cpu_s']:.2f} CPU-s; MHA "
                f"{result['retrain_cpu_s']:.2f})"
            )
    finally:
        _mpl_fast.use_plain_agg(False)
    fast, plain = results["fast"], results["plain"]
    ratios = ", ".join(
        f"{what} {plain[key] / fast[key]:.2f}x"
        for what, key in (
            ("redraw", "redraw_median_ms"),
            ("redraw CPU", "redraw_cpu_median_ms"),
            ("new titles", "redraw_new_titles_median_ms"),
            ("n_heads change", "panel_count_median_ms"),
            ("first draw", "first_draw_ms"),
            ("prebuild", "prebuild_ms"),
        )
    )
    log(f"explorer: plain Agg / fast path = {ratios}")


def figure_times(log=print) -> None:
    """Render times of the drawn diagrams and heatmaps on both paths (``bench.figures``)."""
    from .figures import figure_times_both_paths, format_both_paths

    log(format_both_paths(figure_times_both_paths()))
