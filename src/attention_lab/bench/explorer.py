"""How fast the explorer answers (``make bench``; never used in tests): ``benchmark_explorer``.

Kept apart from viz/explorer/widgets.py so the explorer holds only what a reader runs;
``report`` imports it only when the full run reaches the explorer (ipywidgets loads then).
"""

from __future__ import annotations

import statistics
import time

from ..viz.explorer.model import example_sequence, train_setting
from ..viz.explorer.widgets import AttentionExplorer


def benchmark_explorer(repeats: int = 20) -> dict[str, float]:
    """Time the explorer's redraw and retrain in this process (no browser).

    Returns:
        redraw_median_ms: median time of one slider change at H=8, T=16 (the window slider,
            sliding mask): forward pass, update the 8 heatmaps in place, encode the PNG the
            browser receives. Budget: 150 ms.
        redraw_cpu_median_ms: the same, CPU time of this process (less sensitive to a busy
            machine).
        redraw_new_titles_median_ms: a d_model change at H=8 (the titles change, so they
            are repainted too).
        panel_count_median_ms: a change of n_heads through 1, 2, 4, 8 after ``prebuild``
            (the first visit to each panel count included).
        first_draw_ms: the first picture of a new explorer (the whole figure is drawn once).
        prebuild_ms: drawing the grids of the other panel counts ahead (``prebuild``).
        redraw_kv_median_ms: the window slider's redraw again with 2 kv heads for the 8 heads
            (grouped-query attention: "kv" in the titles, the panels framed by group).
        redraw_kv_cpu_median_ms: the same, CPU time of this process.
        kv_change_median_ms: a change of the kv heads toggle through 8, 4, 2, 1 at H=8
            (untrained: a model per count, built on the first visit).
        retrain_s: training a fresh TinyLM for a new setting (copy task, H=8, d_model=32,
            64 Adam steps on one thread). Budget: 1.5 s on 2 cores.
        retrain_cpu_s: the same, CPU time of this process.
        first_train_s: the first training of a Python session, measured before: it also
            pays once for PyTorch importing its compiler package (torch._dynamo) at the
            optimiser's first step, several seconds on a slow machine.
        retrain_kv_s, retrain_kv_cpu_s: ``retrain_s`` with 2 kv heads for the 8 heads.
    """
    sequence = example_sequence("previous")
    start = time.perf_counter()
    explorer = AttentionExplorer(
        n_heads=8, d_model=32, sequence=sequence, mask="sliding", prebuild=False
    )
    first_draw_ms = 1000 * (time.perf_counter() - start)
    start = time.perf_counter()
    explorer.prebuild()
    prebuild_ms = 1000 * (time.perf_counter() - start)
    walls, cpus = [], []
    for i in range(repeats + 2):  # two warm-up changes (first visit of each window)
        wall, cpu = time.perf_counter(), time.process_time()
        explorer.window.value = 4 + i % 2
        if i >= 2:
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
    titles = []
    for i in range(repeats + 2):
        wall = time.perf_counter()
        explorer.d_model.value = (32, 64)[i % 2]
        if i >= 2:
            titles.append(time.perf_counter() - wall)
    panels = []
    for n_heads in (4, 2, 1, 2, 4, 8) * max(1, repeats // 6):
        wall = time.perf_counter()
        explorer.n_heads.value = n_heads
        panels.append(time.perf_counter() - wall)
    explorer.d_model.value = 32
    kv_changes = []
    for i, n_kv in enumerate((4, 2, 1, 2, 4, 8) * max(1, repeats // 6)):
        wall = time.perf_counter()
        explorer.n_kv_heads.value = n_kv
        if i >= 6:  # after the first visit of each count (its model is built then)
            kv_changes.append(time.perf_counter() - wall)
    explorer.n_kv_heads.value = 2
    kv_walls, kv_cpus = [], []
    for i in range(repeats + 2):
        wall, cpu = time.perf_counter(), time.process_time()
        explorer.window.value = 4 + i % 2
        if i >= 2:
            kv_walls.append(time.perf_counter() - wall)
            kv_cpus.append(time.process_time() - cpu)
    start = time.perf_counter()
    train_setting("copy", 32, 4, "causal", None)  # the first training of a session
    first_train_s = time.perf_counter() - start
    start, cpu = time.perf_counter(), time.process_time()
    train_setting("copy", 32, 8, "causal", None)
    retrain_s = time.perf_counter() - start
    retrain_cpu_s = time.process_time() - cpu
    start, cpu = time.perf_counter(), time.process_time()
    train_setting("copy", 32, 8, "causal", None, n_kv_heads=2)
    retrain_kv_s = time.perf_counter() - start
    retrain_kv_cpu_s = time.process_time() - cpu
    return {
        "redraw_median_ms": 1000 * statistics.median(walls),
        "redraw_cpu_median_ms": 1000 * statistics.median(cpus),
        "redraw_new_titles_median_ms": 1000 * statistics.median(titles),
        "panel_count_median_ms": 1000 * statistics.median(panels),
        "first_draw_ms": first_draw_ms,
        "prebuild_ms": prebuild_ms,
        "redraw_kv_median_ms": 1000 * statistics.median(kv_walls),
        "redraw_kv_cpu_median_ms": 1000 * statistics.median(kv_cpus),
        "kv_change_median_ms": 1000 * statistics.median(kv_changes or [0.0]),
        "retrain_s": retrain_s,
        "retrain_cpu_s": retrain_cpu_s,
        "first_train_s": first_train_s,
        "retrain_kv_s": retrain_kv_s,
        "retrain_kv_cpu_s": retrain_kv_cpu_s,
    }
