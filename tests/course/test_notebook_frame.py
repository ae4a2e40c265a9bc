"""Every notebook keeps the chapter's frame (STYLE.md) and is committed as a clean run.

nbval checks that the outputs are reproduced; these tests check what nbval does not:
the frame, the Colab cells generated from pyproject's Repository URL, and that the stored
outputs come from one top-to-bottom run.
"""

from __future__ import annotations

import json
import sys
import types
from importlib.metadata import version
from pathlib import Path

import nbformat
import pytest

from tools import badges  # tools/badges.py (pytest's pythonpath)

ROOT = Path(__file__).resolve().parents[2]

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _cells_tagged(nb, tag):
    return [c for c in nb.cells if tag in c.get("metadata", {}).get("tags", [])]


@pytest.fixture(params=NOTEBOOKS, ids=lambda p: p.name)
def notebook(request):
    return request.param, nbformat.read(request.param, as_version=4)


def test_the_chapter_has_its_notebooks():
    names = {p.name for p in NOTEBOOKS}
    chapter = [
        "01_weighted_average.ipynb",
        "02_query_key_value.ipynb",
        "03_scaling.ipynb",
        "04_causal_mask.ipynb",
        "05_causal_head.ipynb",
        "06_multi_head.ipynb",
        "07_fused_qkv.ipynb",
        "08_training_copy_task.ipynb",
        "09_lookup_and_heads.ipynb",
        "10_induction_heads.ipynb",
        "11_attention_on_real_text.ipynb",
        "12_attention_in_todays_llms.ipynb",
    ]
    missing = [name for name in chapter if name not in names]
    assert not missing, f"missing notebooks: {missing}"


def test_notebook_opens_with_a_title_and_learning_goals(notebook):
    path, nb = notebook
    first = nb.cells[0]
    assert first.cell_type == "markdown" and first.source.startswith("# "), path.name
    assert "learning goals" in first.source.lower() or "you will" in first.source.lower()


def test_colab_badge_and_setup_cell_match_the_repository_url(notebook):
    path, nb = notebook
    badge = _cells_tagged(nb, "colab-badge")
    setup = _cells_tagged(nb, "colab-setup")
    assert len(badge) == 1 and len(setup) == 1, f"{path.name}: needs one badge and one setup cell"
    assert badge[0].source == badges.badge_source(path.name), "run `make badges`"
    assert setup[0].source == badges.setup_source(), "run `make badges`"


def test_notebook_is_committed_as_one_clean_top_to_bottom_run(notebook):
    path, nb = notebook
    code = [c for c in nb.cells if c.cell_type == "code"]
    counts = [c.execution_count for c in code]
    assert counts == list(range(1, len(code) + 1)), f"{path.name}: re-run it top to bottom"
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, f"{path.name} has stored error outputs"


def test_notebook_closes_with_what_we_built_and_a_way_on(notebook):
    path, nb = notebook
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "what we built" in markdown.lower() or "what you built" in markdown.lower(), path.name
    if path.name.startswith("0"):
        assert "[Next" in markdown, f"{path.name} should point to the next notebook"


def _run_setup_cell(on_colab: bool, monkeypatch, capsys) -> tuple[list[str], str]:
    """Run the generated setup cell as IPython would; return (magics called, printed text)."""
    from IPython.core.inputtransformer2 import TransformerManager

    code = TransformerManager().transform_cell(badges.setup_source())
    magics: list[str] = []

    class FakeShell:
        def run_line_magic(self, name, line, _stack_depth=1):
            magics.append(f"%{name} {line}")

    if on_colab:
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    exec(code, {"get_ipython": FakeShell})  # our own generated cell
    return magics, capsys.readouterr().out


def test_the_colab_setup_cell_says_in_one_line_what_it_installed(monkeypatch, capsys):
    magics, printed = _run_setup_cell(True, monkeypatch, capsys)
    assert magics == [f'%pip install --quiet "attention-lab @ git+{badges.repository_url()}"']
    lines = printed.splitlines()
    assert len(lines) == 1, printed
    for package in ("attention-lab", "torch", "ipywidgets"):
        assert f"{package} {version(package)}" in lines[0]


def test_the_setup_cell_does_nothing_and_prints_nothing_off_colab(monkeypatch, capsys):
    magics, printed = _run_setup_cell(False, monkeypatch, capsys)
    assert magics == [] and printed == ""


def test_notebooks_are_stored_without_execution_timestamps():
    stamped = []
    for path in sorted((ROOT / "notebooks").rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        nb = json.loads(path.read_text(encoding="utf-8"))
        for i, cell in enumerate(nb["cells"]):
            if "execution" in cell.get("metadata", {}):
                stamped.append(f"{path.name} cell {i}")
    assert not stamped, f"cells with execution timestamps: {stamped[:5]} (+{len(stamped) - 5})"
