"""Re-run notebooks top to bottom in a fresh kernel and save them with their outputs.

    python tools/run_notebooks.py                 # every notebook in notebooks/
    python tools/run_notebooks.py notebooks/04*.ipynb

Execution counts come out 1, 2, 3, ... as strict nbval expects. Per-cell execution
timestamps (``metadata.execution``) are dropped before saving, so re-running an unchanged
notebook changes no line. Prints each run time.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def run(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    seconds = time.perf_counter() - start
    nb.metadata.pop("widgets", None) if not _has_widgets(nb) else None
    write_clean(nb, path)
    return seconds


def strip_timestamps(nb) -> None:
    """Drop what nbclient records about each run (``metadata.execution``: start/end times)."""
    for cell in nb.cells:
        cell.metadata.pop("execution", None)


def merge_streams(nb) -> None:
    """Join neighbouring stream outputs of the same stream (stdout, stderr) into one.

    How a cell's prints arrive in pieces depends on the machine's load; joined, the stored
    notebook is the same from run to run (nbval joins them too before comparing).
    """
    for cell in nb.cells:
        merged = []
        for out in cell.get("outputs", []):
            last = merged[-1] if merged else None
            if (
                last is not None
                and out.output_type == last.output_type == "stream"
                and out.name == last.name
            ):
                last.text += out.text
            else:
                merged.append(out)
        if cell.cell_type == "code":
            cell.outputs = merged


def write_clean(nb, path: Path) -> None:
    """Save ``nb`` without execution timestamps and with joined stream outputs (every tool
    that writes notebooks uses this)."""
    strip_timestamps(nb)
    merge_streams(nb)
    nbformat.write(nb, path)


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
