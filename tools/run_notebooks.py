"""Re-run notebooks top to bottom in a fresh kernel and save them with their outputs.

    python -m tools.run_notebooks                 # every notebook in notebooks/
    python -m tools.run_notebooks notebooks/04*.ipynb

Execution counts come out 1, 2, 3, ... as strict nbval expects. Per-cell execution
timestamps (``metadata.execution``) are dropped before saving, so re-running an unchanged
notebook changes no line (tools/notebook_io.py writes it). Prints each run time.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

if not __package__:  # run as a file, not as the module tools.run_notebooks
    raise SystemExit("run it from the repository root as a module: python -m tools.run_notebooks")
from tools.notebook_io import write_notebook  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# The CPU code paths the Makefile pins for every notebook run and test (its comment says why);
# run directly, this script pins the same, and tests/build/test_run_notebooks.py keeps the two
# equal.
NUMERICS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"}
for _name, _value in NUMERICS.items():
    os.environ.setdefault(_name, _value)


def run(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    seconds = time.perf_counter() - start
    nb.metadata.pop("widgets", None) if not _has_widgets(nb) else None
    write_notebook(nb, path)
    return seconds


def _has_widgets(nb) -> bool:
    return any(
        "application/vnd.jupyter.widget-view+json" in out.get("data", {})
        for cell in nb.cells
        for out in cell.get("outputs", [])
    )


def main(argv: list[str]) -> None:
    paths = [Path(p) for p in argv] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    total = 0.0
    for path in paths:
        seconds = run(path)
        total += seconds
        print(f"{seconds:6.1f} s  {path.name}", flush=True)
    print(f"{total:6.1f} s  in all")


if __name__ == "__main__":
    main(sys.argv[1:])
