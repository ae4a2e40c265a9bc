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
- A sentence about a sample or a picture names a feature that a cell counts and prints, so that
  nbval holds the sentence to the output (issue 40, item 8; STYLE.md, "Claims that can fail").
  Two checks, in both editions: a phrase of ``DESCRIBED_FEATURES`` ("names in capitals", "real
  words", ...) needs the printed label of its feature, followed by a number, in the output of a
  code cell at most ``DESCRIBED_WINDOW`` cells before or after it; and the prose right after a
  cell that prints generated text (``.generate(``) quotes a number that a cell between the two
  printed.
- The Chinese edition's folded answers say 答案, not ``Answer``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest

from tests.course.test_predict_cells import predict_places

ROOT = Path(__file__).resolve().parents[2]
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
    "11_attention_on_real_text": 4,  # issue 40 added the positive control's prediction
    "12_attention_in_todays_llms": 5,
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


# ------------------------------------------------ what the prose says of a sample, counted
EDITIONS = ENGLISH + sorted((NOTEBOOKS / "zh-CN").glob("*.ipynb"))
DESCRIBED_WINDOW = 8
# A phrase that characterises a sample or a picture (a regular expression, any case) -> the label
# a cell prints, with a number after it, for the feature the phrase names. Add a row when the
# prose gains a new kind of description; the test then holds it to a count.
DESCRIBED_FEATURES = {
    r"names? in capitals|speaker(?:'s|s'?) names?|a name and a colon": "a name and a colon",
    r"real (?:english )?words|words of the training text": "words of the training text",
    r"(?:starts?|starting) with a capital": "start with a capital",
    r"名字(?:和|加)冒号|说话人的名字|大写的(?:说话人)?名字": "名字加冒号",
    r"真正的(?:英语)?单词|训练文本里的词": "训练文本里的词",
    r"以大写字母开头": "以大写字母开头",
}
GENERATES = re.compile(r"\.generate\(")
PLAIN_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w])")


def printed(cell) -> str:
    """What a code cell printed (stdout and text/plain), '' for a markdown cell."""
    if cell.cell_type != "code":
        return ""
    parts = []
    for out in cell.get("outputs", []):
        if "text" in out:
            parts.append(out["text"])
        elif "text/plain" in out.get("data", {}):
            parts.append(out["data"]["text/plain"])
    return "".join(parts)


def unbacked_descriptions(nb_cells) -> list[str]:
    """The prose's descriptions of samples and pictures that no printed count backs."""
    problems = []
    for i, cell in enumerate(nb_cells):
        if cell.cell_type != "markdown":
            continue
        near = "".join(
            printed(c) for c in nb_cells[max(0, i - DESCRIBED_WINDOW) : i + DESCRIBED_WINDOW + 1]
        )
        for phrase, label in DESCRIBED_FEATURES.items():
            said = re.search(phrase, " ".join(cell.source.split()), re.IGNORECASE)
            if said and not re.search(re.escape(label) + r"\D{0,40}\d", near):
                problems.append(
                    f"cell {i} says {said.group(0)!r}, but no cell near it prints {label!r} "
                    "with a count"
                )
    for i, cell in enumerate(nb_cells):
        if cell.cell_type != "code" or not GENERATES.search(cell.source) or not printed(cell):
            continue
        prose = [j for j in range(i + 1, len(nb_cells)) if nb_cells[j].cell_type == "markdown"]
        after = prose[0] if prose else None
        if after is None or nb_cells[after].source.lstrip().startswith("#"):
            continue  # nothing describes the sample: a new section follows
        shown = set(PLAIN_NUMBER.findall("".join(printed(c) for c in nb_cells[i:after])))
        quoted = set(PLAIN_NUMBER.findall(CODE_SPAN.sub("", nb_cells[after].source)))
        if not quoted & shown:
            problems.append(
                f"cell {after} describes the text cell {i} generated without quoting a count "
                f"printed by cells {i}..{after - 1}"
            )
    return problems


@pytest.mark.parametrize("path", EDITIONS, ids=lambda p: str(p.relative_to(NOTEBOOKS)))
def test_what_the_prose_says_of_a_sample_is_counted_by_a_cell(path):
    problems = unbacked_descriptions(cells(path))
    assert not problems, f"{path.name}: " + "; ".join(problems)


def _md(source):
    return nbformat.v4.new_markdown_cell(source)


def _code(source, out):
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=out)]
    return cell


SAMPLE = "\nweity, the kind. Let you ple dreade:\nAnd swear\nWith hou for set not thine\n"
OLD_CELL_31 = (  # notebook 11's cell 31 before issue 40: the sample above it held no name
    "Compare it with the text before training. Now there are speakers' names in capitals, each on "
    "its own line and followed by a colon, lines of verse that start with a capital, and many real "
    "English words, though the sentences mean nothing."
)


def test_the_description_check_catches_notebook_11s_old_cell_31():
    generate = "after = model.generate(prompt, 200)\nprint(vocab.decode(after[0]))"
    old = [_code(generate, SAMPLE), _md(OLD_CELL_31)]
    problems = unbacked_descriptions(old)
    assert any("speakers' names" in p for p in problems)
    assert any("real English words" in p for p in problems)
    assert any("start with a capital" in p for p in problems)
    assert any("describes the text cell 0 generated" in p for p in problems)
    counts = (
        "lines that are a name and a colon   0/3 (0%)\n"
        "lines that start with a capital     3/3 (100%)\n"
        "words of the training text          9/12 (75%)\n"
    )
    counted = [
        _code(generate, SAMPLE),
        _code("print_counts({'trained': sample})", counts),
        _md("None of its 3 lines is a name and a colon; 3 of 3 start with a capital, and 9 of "
            "its 12 words are words of the training text."),
    ]  # fmt: skip
    assert unbacked_descriptions(counted) == []
    assert unbacked_descriptions(counted[:1] + counted[2:])  # the same prose, the count gone


@pytest.mark.parametrize(
    "path", sorted((NOTEBOOKS / "zh-CN").glob("*.ipynb")), ids=lambda p: f"zh-CN/{p.stem}"
)
def test_a_chinese_answer_box_says_答案(path):
    """The folded answer of a predict-then-run place is labelled in the reader's language
    (issue 40: zh 11's cell 36 said `Answer`)."""
    english = [
        i
        for i, c in enumerate(cells(path))
        if c.cell_type == "markdown" and "<summary>Answer</summary>" in c.source
    ]
    assert not english, f"{path.name}: cells {english} say <summary>Answer</summary>, not 答案"
