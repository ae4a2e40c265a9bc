"""tools/notebook_io.py (the writer of tools/run_notebooks.py and of every other tool) stores a
run the same way every time: no timestamps, joined prints, nbformat's bytes."""

from __future__ import annotations

import copy

import nbformat
from tools import notebook_io  # tools/ (pytest's pythonpath)


def _stream(name: str, text: str):
    return nbformat.v4.new_output("stream", name=name, text=text)


def _notebook():
    cell = nbformat.v4.new_code_cell("print(...)")
    cell.outputs = [
        _stream("stdout", "a\n"),
        _stream("stdout", "b\n"),
        _stream("stderr", "warning\n"),
        _stream("stdout", "c\n"),
        nbformat.v4.new_output("display_data", data={"text/plain": "x\ny", "image/png": "iVBO"}),
    ]
    cell.metadata["execution"] = {"iopub.execute_input": "2026-12-01T00:00:00Z"}
    return nbformat.v4.new_notebook(cells=[cell, nbformat.v4.new_markdown_cell("# A\n\nb")])


def test_neighbouring_prints_of_one_stream_are_joined_and_others_kept_in_order(tmp_path):
    path = tmp_path / "x.ipynb"
    notebook_io.write_notebook(_notebook(), path)
    stored = nbformat.read(path, as_version=4).cells[0]
    assert [(o.name, o.text) for o in stored.outputs[:3]] == [
        ("stdout", "a\nb\n"),
        ("stderr", "warning\n"),
        ("stdout", "c\n"),
    ]
    assert "execution" not in stored.metadata


def test_the_writer_writes_what_nbformat_writes_for_nodes_and_plain_json(tmp_path):
    ours, theirs = tmp_path / "ours.ipynb", tmp_path / "theirs.ipynb"
    nb = _notebook()
    same = copy.deepcopy(nb)  # the same random cell ids
    notebook_io.clean(nb)
    nbformat.write(nb, theirs)
    notebook_io.write_notebook(same, ours)
    assert ours.read_text(encoding="utf-8") == theirs.read_text(encoding="utf-8")
    plain = notebook_io.read_notebook(theirs)  # outputs' text stays as stored (lists)
    notebook_io.write_notebook(plain, ours)
    assert ours.read_text(encoding="utf-8") == theirs.read_text(encoding="utf-8")


def test_notebook_runs_pin_the_same_cpu_code_paths_as_the_makefile():
    """Stored outputs are only reproducible with the kernels' CPU paths pinned: the Makefile
    exports them for every make target, run_notebooks.py sets them when run directly."""
    import re
    from pathlib import Path

    from tools import run_notebooks  # tools/

    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    exported = dict(re.findall(r"^export (\w+) := (\S+)$", makefile, flags=re.M))
    assert exported == run_notebooks.NUMERICS
    assert set(exported) == {"ATEN_CPU_CAPABILITY", "MKL_CBWR"}
