"""How fast the chapter's figures render (``make bench``; never used in tests).

Issue-10 goal: a drawn diagram renders in under 100 ms. Each diagram is built at the sizes
its notebook uses and turned into the PNG a notebook stores: the first time in this
process (labels not yet rasterised), then 7 more times (median; garbage collected before
each, so a collection of earlier figures does not land on one diagram).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable

import numpy as np

GOAL_MS = 100.0


def _cases() -> dict[str, Callable]:
    from .. import diagrams

    rng = np.random.default_rng(0)
    scores = rng.normal(size=(6, 6))  # (T, T), as in notebook 04
    row = np.exp(rng.normal(size=6))
    row /= row.sum()  # (T,), a row of weights, as in 01 and 05
    tokens = ["the", "cat", "sat", "on", "the", "mat"]
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
    }


def figure_times(repeats: int = 7) -> list[tuple[str, float, float, float]]:
    """(name, first ms, median build + PNG ms, median PNG-only ms) for every diagram."""
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


def format_figure_times(rows) -> str:
    lines = [
        f"diagrams: CPU ms per figure (goal: under {GOAL_MS:.0f} ms to build and encode)",
        f"  {'diagram':30s} {'first':>7s} {'build+PNG':>10s} {'PNG only':>9s}",
    ]
    for name, first, total, render in rows:
        mark = "" if total < GOAL_MS else "  over the goal"
        lines.append(f"  {name:30s} {first:7.0f} {total:10.0f} {render:9.0f}{mark}")
    met = sum(total < GOAL_MS for _, _, total, _ in rows)
    lines.append(f"  {met} of {len(rows)} diagrams under {GOAL_MS:.0f} ms (median build + PNG)")
    return "\n".join(lines)
