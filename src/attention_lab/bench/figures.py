"""How fast the chapter's figures render, on the fast path and on the plain-Agg fallback
(``make bench``; never used in tests).

Issue-10 goal: a drawn diagram renders in under 100 ms. Each figure is built at the sizes
its notebook uses and turned into the PNG a notebook stores: the first time on a path
(labels not yet rasterised: the text cache is emptied when the path changes), then
``repeats`` more times (median; garbage collected before each, so a collection of earlier
figures does not land on one figure). Both paths are measured in the same run, the fast one
first, and printed side by side with their ratio (issue 20: ``_mpl_fast``).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable

import numpy as np

GOAL_MS = 100.0
PATHS = ("fast", "plain")  # _mpl_fast's fast path, then its plain-Agg fallback
NOT_DIAGRAMS = ("plot_heads", "plot_loss")  # timed too, but the goal is the diagrams'


def _goal(name: str) -> bool:
    return not name.startswith(NOT_DIAGRAMS)


def _cases() -> dict[str, Callable]:
    from ..viz import diagrams
    from ..viz.heatmaps import plot_heads
    from ..viz.lines import plot_loss

    rng = np.random.default_rng(0)
    scores = rng.normal(size=(6, 6))  # (T, T), as in notebook 04
    row = np.exp(rng.normal(size=6))
    row /= row.sum()  # (T,), a row of weights, as in 01 and 05
    tokens = ["the", "cat", "sat", "on", "the", "mat"]
    weights = rng.random((4, 8, 8))
    weights = np.where(np.triu(np.ones((8, 8), bool), 1), 0.0, weights)
    weights /= weights.sum(-1, keepdims=True)  # (H, T, T), causal, as in 06 and 08
    return {
        "weighted_average (01)": lambda: diagrams.weighted_average(row, tokens, query=2),
        "qkv_flow (02, 03)": lambda: diagrams.qkv_flow(6, 8, 4),
        "causal_mask_grid (04)": lambda: diagrams.causal_mask_grid(6),
        "mask_before_vs_after (04)": lambda: diagrams.mask_before_vs_after(scores),
        "dropout_row (05)": lambda: diagrams.dropout_row(row, 0.5, seed=4),
        "head_rows (06)": lambda: diagrams.head_rows(32, 4),
        "head_split (06)": lambda: diagrams.head_split(6, 32, 4, 2),
        "head_split (explorer, H=8)": lambda: diagrams.head_split(16, 128, 8),
        "head_rows fused (07)": lambda: diagrams.head_rows(32, 4, fused=True),
        "training_setup (08)": lambda: diagrams.training_setup(64, 16, 32, 4),
        "tiled_softmax (bonus)": lambda: diagrams.tiled_softmax(16, 4),
        "roadmap (01-11)": lambda: diagrams.roadmap(highlight=4),
        "plot_heads, 4 heads (06, 08)": lambda: plot_heads(weights, causal=True),
        "plot_loss (08)": lambda: plot_loss([4.2, 3.0, 2.1, 1.2, 0.6], chance=4.16),
    }


def figure_times(repeats: int = 7) -> list[tuple[str, float, float, float]]:
    """(name, first ms, median build + PNG ms, median PNG-only ms) for every figure, on the
    path figures draw on now."""
    rows = []
    for name, make in _cases().items():
        start = time.process_time()
        make()._repr_png_()
        first = time.process_time() - start
        totals, renders = [], []
        for _ in range(repeats):
            gc.collect()
            start = time.process_time()
            figure = make()
            built = time.process_time()
            figure._repr_png_()
            done = time.process_time()
            totals.append(done - start)
            renders.append(done - built)
        rows.append(
            (
                name,
                1000 * first,
                1000 * statistics.median(totals),
                1000 * statistics.median(renders),
            )
        )
    return rows


def figure_times_both_paths(repeats: int = 7) -> dict[str, list[tuple[str, float, float, float]]]:
    """``figure_times`` on the fast path, then on the plain-Agg fallback: {path: rows}."""
    from ..viz import _mpl_fast

    _cases()["qkv_flow (02, 03)"]()._repr_png_()  # load the fonts once, for neither path
    results = {}
    try:
        for path in PATHS:
            _mpl_fast.use_plain_agg(path == "plain")  # also empties the text cache
            if path == "fast" and not _mpl_fast.fast_path():
                raise RuntimeError(f"the fast path is off here: {_mpl_fast.status()}")
            results[path] = figure_times(repeats)
    finally:
        _mpl_fast.use_plain_agg(False)
    return results


def format_both_paths(results) -> str:
    """Both paths side by side: first and median build + PNG ms, and plain / fast."""
    fast, plain = results["fast"], results["plain"]
    lines = [
        "figures: CPU ms per figure, fast path (_mpl_fast) and plain-Agg fallback, one run "
        f"(goal: under {GOAL_MS:.0f} ms to build and encode)",
        f"  {'':30s} {'---- fast path ----':>19s} {'---- plain Agg ----':>20s} "
        f"{'plain / fast':>13s}",
        f"  {'figure':30s} {'first':>7s} {'median':>11s} {'first':>8s} {'median':>11s} "
        f"{'first':>6s} {'median':>6s}",
    ]
    for (name, f_first, f_total, _), (_, p_first, p_total, _) in zip(fast, plain):
        mark = "" if f_total < GOAL_MS or not _goal(name) else "  fast path over the goal"
        lines.append(
            f"  {name:30s} {f_first:7.0f} {f_total:11.0f} {p_first:8.0f} {p_total:11.0f} "
            f"{p_first / f_first:5.1f}x {p_total / f_total:5.1f}x{mark}"
        )
    for path, rows in results.items():
        rows = [row for row in rows if _goal(row[0])]
        met = sum(total < GOAL_MS for _, _, total, _ in rows)
        total = statistics.median([t for _, _, t, _ in rows])
        lines.append(
            f"  {path + ' path' if path == 'fast' else 'plain Agg'}: {met} of {len(rows)} "
            f"diagrams under {GOAL_MS:.0f} ms; median of their medians {total:.0f} ms"
        )
    ratios = [p[2] / f[2] for f, p in zip(fast, plain)]
    lines.append(
        f"  plain / fast, median build + PNG: {statistics.median(ratios):.1f}x "
        f"(from {min(ratios):.1f}x to {max(ratios):.1f}x)"
    )
    return "\n".join(lines)
