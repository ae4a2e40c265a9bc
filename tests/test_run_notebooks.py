"""tools/run_notebooks.py stores a run the same way every time: no timestamps, joined prints."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("run_notebooks", ROOT / "tools/run_notebooks.py")
run_notebooks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run_notebooks)


def _stream(name: str, text: str):
    return nbformat.v4.new_output("stream", name=name, text=text)


def test_neighbouring_prints_of_one_stream_are_joined_and_others_kept_in_order(tmp_path):
    cell = nbformat.v4.new_code_cell("print(...)")
    cell.outputs = [
        _stream("stdout", "a\n"),
        _stream("stdout", "b\n"),
        _stream("stderr", "warning\n"),
        _stream("stdout", "c\n"),
    ]
    cell.metadata["execution"] = {"iopub.execute_input": "2026-12-01T00:00:00Z"}
    nb = nbformat.v4.new_notebook(cells=[cell])
    path = tmp_path / "x.ipynb"
    run_notebooks.write_clean(nb, path)
    stored = nbformat.read(path, as_version=4).cells[0]
    assert [(o.name, o.text) for o in stored.outputs] == [
        ("stdout", "a\nb\n"),
        ("stderr", "warning\n"),
        ("stdout", "c\n"),
    ]
    assert "execution" not in stored.metadata
