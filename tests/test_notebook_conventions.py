"""Conventions of the English chapter that a learner relies on, pinned mechanically.

- One name for the head width: ``d_head``. Notebook 02 names the aliases a reader will meet
  elsewhere (``d_k`` in papers, the constructor argument ``d_out``) once, in one cell; after
  that, prose and code comments say ``d_head``. ``d_out`` may appear in code (it is the
  constructor's argument) and, in prose, only as code in backticks.
- Every causal heatmap is drawn with its mask: from notebook 04 on (where the mask is taught)
  and in notebook 01 (whose weights are causal), every ``plot_heads`` call passes ``mask=``
  (or ``causal=True``), so the blocked future is grey and striped, not a learned zero.
- The chapter keeps asking the reader to predict: no lesson has fewer predict-then-run places
  than it had when the learner's review was done (issue 19).
- The README's time estimate is the teacher's guide's total.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest
from test_predict_cells import predict_places

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
ENGLISH = sorted(NOTEBOOKS.glob("*.ipynb"))
ALIAS_CELL = "papers write $d_k$"  # the one cell of notebook 02 that names the aliases
# notebooks whose attention is deliberately not causal: 02 and 03 come before the mask
NOT_CAUSAL = {"02_query_key_value", "03_scaling"}
# predict-then-run places per lesson when the review was done; a lesson may only gain
PREDICT_BASELINE = {
    "01_weighted_average": 3,
    "02_query_key_value": 2,
    "03_scaling": 3,
    "04_causal_mask": 3,
    "05_causal_head": 2,
    "06_multi_head": 3,
    "07_fused_qkv": 3,
    "08_training_copy_task": 4,  # split: its lookup, 4-or-8 and trigram predictions moved to 09;
    "09_lookup_and_heads": 3,  # 08 gained one (repeat without positions)
    "10_induction_heads": 4,
    "11_attention_on_real_text": 3,
}

MATH_ALIAS = re.compile(r"d_\{?k\}?(?![a-z_])|d_\{out\}|d_\{model\}_\{head\}")
WORD_D_K = re.compile(r"(?<![\w])d_k(?![\w])")
CODE_SPAN = re.compile(r"`[^`]*`")


def cells(path: Path):
    return nbformat.read(path, as_version=4).cells


def comments(source: str) -> list[str]:
    """The comments of a code cell (IPython magics dropped)."""
    import io
    import tokenize

    code = "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n")
    )
    return [
        tok.string
        for tok in tokenize.generate_tokens(io.StringIO(code).readline)
        if tok.type == tokenize.COMMENT
    ]


def test_the_alias_cell_exists_once():
    where = [
        (p.name, i)
        for p in ENGLISH
        for i, c in enumerate(cells(p))
        if c.cell_type == "markdown" and ALIAS_CELL in c.source
    ]
    assert len(where) == 1 and where[0][0].startswith("02_"), where


@pytest.mark.parametrize("path", ENGLISH, ids=lambda p: p.stem)
def test_one_name_for_the_head_width(path):
    problems = []
    for i, cell in enumerate(cells(path)):
        if cell.cell_type == "markdown":
            if ALIAS_CELL in cell.source:
                continue
            prose = CODE_SPAN.sub("", cell.source)
            for m in MATH_ALIAS.finditer(prose):
                problems.append(f"cell {i}: {m.group(0)!r} in prose")
            if "d_out" in prose:
                problems.append(f"cell {i}: d_out in prose outside backticks")
            if WORD_D_K.search(CODE_SPAN.sub("", cell.source)) or "`d_k`" in cell.source:
                problems.append(f"cell {i}: d_k")
        elif cell.cell_type == "code":
            if WORD_D_K.search(cell.source):
                problems.append(f"cell {i}: d_k in code")
            for comment in comments(cell.source):
                if "d_out" in comment.replace("d_out is the head width", ""):
                    problems.append(f"cell {i}: d_out in a comment: {comment.strip()}")
    assert not problems, f"{path.name}: say d_head: " + "; ".join(problems)


def plot_heads_calls(source: str):
    code = "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n")
    )
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name == "plot_heads":
                yield node


def causal_heatmap_cells():
    for path in ENGLISH:
        if path.stem in NOT_CAUSAL:
            continue
        for i, cell in enumerate(cells(path)):
            if cell.cell_type == "code" and "plot_heads(" in cell.source:
                yield pytest.param(path, i, id=f"{path.stem}-{i}")


@pytest.mark.parametrize(("path", "index"), list(causal_heatmap_cells()))
def test_every_causal_heatmap_passes_its_mask(path, index):
    source = cells(path)[index].source
    calls = list(plot_heads_calls(source))
    assert calls
    for call in calls:
        keywords = {k.arg: k.value for k in call.keywords}
        causal = (
            isinstance(keywords.get("causal"), ast.Constant) and keywords["causal"].value is True
        )
        assert "mask" in keywords or causal, (
            f"{path.name} cell {index}: {ast.unparse(call)[:80]}… draws causal weights without "
            "mask= (or causal=True): the blocked future would look like a learned weight of 0"
        )


def test_the_chapter_asks_at_least_as_many_predictions_as_before():
    counts = {p.stem: len(predict_places(p)) for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))}
    fewer = {
        name: (counts.get(name, 0), before)
        for name, before in PREDICT_BASELINE.items()
        if counts.get(name, 0) < before
    }
    assert not fewer, f"lessons that lost predict-then-run places (now, before): {fewer}"


def test_the_readme_quotes_the_guides_total_time():
    guide = (ROOT / "teaching" / "README.md").read_text(encoding="utf-8")
    total = re.search(r"\| \*\*total\*\* \|.*\| \*\*(\d+)\*\* \| \*\*(\d+)\*\* \|", guide)
    assert total, "the guide's timing table has no total row"
    present, hands_on = total.groups()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    said = re.search(r"estimates (\d+) minutes of presenting and (\d+) minutes of hands-on", readme)
    assert said, "README.md no longer quotes the guide's estimate"
    assert said.groups() == (present, hands_on)
    hours = round((int(present) + int(hands_on)) / 60)
    assert f"about {hours} hours" in readme


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("0[1-8]_*.ipynb")), ids=lambda p: p.stem)
def test_what_we_built_comes_right_before_the_exercises(path):
    """Every lesson ends the same way: "What we built" (and its checklist), then the
    exercises block, then the link to the next notebook."""
    nb = cells(path)
    built = [
        i for i, c in enumerate(nb) if c.cell_type == "markdown" and "## What we built" in c.source
    ]
    block = [i for i, c in enumerate(nb) if "lesson-exercises" in c.metadata.get("tags", [])]
    assert len(built) == 1, f"{path.name}: 'What we built' cells at {built}"
    assert block, f"{path.name} has no exercises block"
    between = nb[built[0] + 1 : block[0]]
    assert all(c.cell_type == "markdown" and c.source.startswith("Checklist") for c in between), (
        f"{path.name}: cells {built[0] + 1}..{block[0] - 1} sit between 'What we built' and the "
        "exercises"
    )
    assert block[-1] == len(nb) - 2 and "[Next:" in nb[-1].source
