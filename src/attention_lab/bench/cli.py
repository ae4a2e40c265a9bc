"""``python -m attention_lab bench [--quick] [--repeats N] [--no-compile] [--out DIR]``."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn as nn

from ..fused import MultiHeadSelfAttention
from .generation import generation_report
from .report import explorer_times, figure_times, format_goals, format_table, plot_ratios, write_csv
from .timing import Row, measure_shape

DESCRIPTION = """``make bench`` / ``python -m attention_lab bench``: speed and memory of every
implementation.

Every implementation holds the same weights, converted from one ``MultiHeadSelfAttention``,
and before anything is timed each one is checked to give the reference output and to be
causal. Then, at each shape, forward time, forward+backward time and peak memory are
measured in one run and printed as ratios to a bare ``F.scaled_dot_product_attention``
block, next to the machine's own float32 matmul speed. Results go to ``bench-results/``
(``bench.csv``, ``bench.png``), which git ignores.

Then generation at notebook 11's model size: ``CharLM.generate`` with a KV cache against
without, for 32, 128 and 512 new tokens (tokens per second and the ratio, one thread, after
checking that both give the same ids), and the cache of every variant (MHA, GQA, MQA, a
sliding window, MLA) in bytes and as ratios to MHA (``bench.generation``).

    python -m attention_lab bench            # the full run: a few minutes on 2 cores
    python -m attention_lab bench --quick    # a smoke run at tiny shapes (used by the tests)
"""

# name -> (B, T, D, H)
# The small shape runs first: measured after the big one in the same process, its no-grad
# forward calls once came out ~40 ms each instead of ~0.5 ms (cause not yet found).
FULL_SHAPES = {"chapter": (32, 12, 32, 4), "GPT-2 small": (8, 1024, 768, 12)}
QUICK_SHAPES = {"chapter": (32, 12, 32, 4), "tiny": (2, 32, 32, 4)}


def run(
    argv: list[str] | None = None,
    extra: dict[str, Callable[[MultiHeadSelfAttention], nn.Module]] | None = None,
    log=print,
) -> list[Row]:
    """Run the benchmark; return every row. ``extra`` adds implementations (name -> a
    function that builds one from the reference block); they are checked like the rest."""
    parser = argparse.ArgumentParser(prog="python -m attention_lab bench", description=DESCRIPTION)
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
    generation_report(quick=args.quick, repeats=args.repeats, log=log)
    if args.quick:
        log("explorer and diagrams: skipped (--quick)")
    else:
        explorer_times(log)
        figure_times(log)
    rows = [r for table in tables for r in table]
    write_csv(rows, out / "bench.csv")
    plot_ratios(tables, out / "bench.png")
    log(f"wrote {out / 'bench.csv'} and {out / 'bench.png'} in {time.perf_counter() - start:.0f} s")
    return rows
