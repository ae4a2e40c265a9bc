"""Each lesson's exercises come after what they need and stay out of the lesson's way.

The notebooks are parsed (``ast`` over their code cells), not listed by hand:

* an exercise of lesson NN uses only the ``attention_lab`` names that the lesson notebooks
  01..NN have introduced in their own cells (imports, or ``attention_lab.X`` attributes);
* an exercise cell never rebinds a top-level name that its lesson notebook's own cells bind,
  so re-running a cell of the lesson after its exercises still works;
* each lesson's import cell imports only names that its exercises use;
* every checker has a test in tests/library/test_exercises.py that shows it accepts the solution and
  names a known-wrong answer with a hint;
* notebooks/exercises_solutions.ipynb groups the lessons in the order of the lessons.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import nbformat
import pytest

import attention_lab.exercises as ex

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
SOLUTIONS = NOTEBOOKS / "exercises_solutions.ipynb"
LESSON_TAG = re.compile(r"^lesson-(\d\d)$")
BLOCK_TAG = "lesson-exercises"
CHECKERS = "attention_lab.exercises"  # the checker module: imported, not taught


def _tree(source: str) -> ast.Module:
    """A code cell as Python: IPython magics and shell lines become ``pass``."""
    lines = [
        line[: len(line) - len(line.lstrip())] + "pass" if line.lstrip()[:1] in ("%", "!") else line
        for line in source.splitlines()
    ]
    return ast.parse("\n".join(lines))


def _lesson_of(cell) -> str | None:
    for tag in cell.get("metadata", {}).get("tags", []):
        match = LESSON_TAG.match(tag)
        if match:
            return match.group(1)
    return None


@cache
def _solutions():
    return nbformat.read(SOLUTIONS, as_version=4)


def _exercise_cells(lesson: str) -> list:
    """The code cells of ``lesson`` in the solutions notebook (solution-only cells included)."""
    return [c for c in _solutions().cells if c.cell_type == "code" and _lesson_of(c) == lesson]


def _lesson_path(lesson: str) -> Path:
    (path,) = sorted(NOTEBOOKS.glob(f"{lesson}_*.ipynb"))
    return path


@cache
def _lesson_cells(lesson: str) -> tuple:
    """The lesson notebook's own code cells: its exercises block left out."""
    nb = nbformat.read(_lesson_path(lesson), as_version=4)
    return tuple(
        c
        for c in nb.cells
        if c.cell_type == "code" and BLOCK_TAG not in c.get("metadata", {}).get("tags", [])
    )


def _lessons() -> list[str]:
    return list(ex.LESSONS)


# --- which attention_lab names a cell uses ----------------------------------------------------


def _library_names(tree: ast.Module) -> set[str]:
    """The attention_lab names a cell brings in: ``from attention_lab[.mod] import X`` gives X,
    ``attention_lab.X`` (or an alias of the package, ``lab.X``) gives X; the checkers'
    own module, attention_lab.exercises, is left out."""
    aliases, names = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "attention_lab":
                    aliases.add(alias.asname or "attention_lab")
                elif alias.name.startswith("attention_lab.") and alias.name != CHECKERS:
                    names.add(alias.name.split(".", 1)[1])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("attention_lab"):
            if node.module == CHECKERS or node.module.startswith(CHECKERS + "."):
                continue
            names.update(alias.name for alias in node.names)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr != "exercises"
        ):
            names.add(node.attr)
    return names


@cache
def _taught(lesson: str) -> frozenset[str]:
    """Every attention_lab name that lessons 01..lesson use in their own cells."""
    names: set[str] = set()
    for earlier in _lessons():
        if earlier > lesson:
            break
        for cell in _lesson_cells(earlier):
            names |= _library_names(_tree(cell.source))
    return frozenset(names)


# --- which top-level names a cell binds -------------------------------------------------------


def _bindings(tree: ast.Module) -> dict[str, str]:
    """{name: how it is bound} for the cell's top level (function bodies, classes' insides and
    comprehensions are their own scopes). An import is recorded as ``import module.name``, so
    that re-importing the very object the lesson imported counts as the same binding."""
    bound: dict[str, str] = {}

    def targets(node):
        if isinstance(node, ast.Name):
            bound[node.id] = "assigned"
        elif isinstance(node, (ast.Tuple, ast.List)):
            for element in node.elts:
                targets(element)
        elif isinstance(node, ast.Starred):
            targets(node.value)

    def visit(statements):
        for node in statements:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound[node.name] = "defined"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    name = alias.asname or alias.name.split(".")[0]
                    bound[name] = f"import {alias.name}"
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    bound[alias.asname or alias.name] = f"import {node.module}.{alias.name}"
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    targets(target)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets(node.target)
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                targets(node.target)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        targets(item.optional_vars)
            elif isinstance(node, ast.Try):
                for handler in node.handlers:
                    if handler.name:
                        bound[handler.name] = "assigned"
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue  # a scope of its own
            for field in ("body", "orelse", "finalbody", "handlers"):
                children = getattr(node, field, None)
                if isinstance(children, list):
                    visit(children)

    visit(tree.body)
    return bound


@cache
def _lesson_bindings(lesson: str) -> dict[str, str]:
    bound: dict[str, str] = {}
    for cell in _lesson_cells(lesson):
        for name, how in _bindings(_tree(cell.source)).items():
            bound.setdefault(name, how)
    return bound


# --- the tests --------------------------------------------------------------------------------


def test_the_helpers_read_imports_attributes_and_bindings():
    tree = _tree(
        "%pip install x\nimport attention_lab as lab\nfrom attention_lab import causal_mask\n"
        "from attention_lab.exercises import check_x\nimport attention_lab.widgets\n"
        "w = lab.SingleHeadAttention(2, 2)\nfor i, (a, b) in []: pass\n"
        "def f(x):\n    hidden = 1\nwith open('f') as handle: pass\n[z for z in ()]"
    )
    assert _library_names(tree) == {"causal_mask", "SingleHeadAttention", "widgets"}
    bound = _bindings(tree)
    assert set(bound) == {"lab", "causal_mask", "check_x", "attention_lab", "w", "i", "a", "b",
                          "f", "handle"}  # fmt: skip
    assert bound["causal_mask"] == "import attention_lab.causal_mask"


def test_the_solutions_group_the_lessons_in_the_order_of_the_lessons():
    order = [lesson for c in _solutions().cells if (lesson := _lesson_of(c))]
    groups = list(dict.fromkeys(order))
    assert groups == _lessons(), groups
    assert order == sorted(order), "a lesson's cells must stand together, in lesson order"
    headings = [
        c.source.splitlines()[0]
        for c in _solutions().cells
        if c.cell_type == "markdown" and c.source.startswith("## Lesson ")
    ]
    assert [h.split()[2] for h in headings] == groups
    for lesson in groups:
        assert _lesson_path(lesson).exists()


def test_exercise_numbers_follow_the_lessons():
    """Each lesson numbers its exercises N.1, N.2, ... in order, one checker per exercise."""
    for lesson in _lessons():
        titles = [
            c.source.splitlines()[0]
            for c in _solutions().cells
            if _lesson_of(c) == lesson and c.source.startswith("### Exercise ")
        ]
        numbers = [t.split()[2] for t in titles]
        n = int(lesson)
        assert numbers == [f"{n}.{k}" for k in range(1, len(numbers) + 1)], (lesson, titles)
        assert len(numbers) == len(ex.EXERCISES[lesson]), (lesson, numbers)
        checks = [
            c.source.split("(")[0].removeprefix("check_")
            for c in _exercise_cells(lesson)
            if c.source.startswith("check_")
        ]
        assert checks == ex.EXERCISES[lesson], (lesson, checks)


@pytest.mark.parametrize("lesson", _lessons())
def test_exercises_use_only_library_names_their_lesson_has_taught(lesson):
    taught = _taught(lesson)
    for cell in _exercise_cells(lesson):
        untaught = _library_names(_tree(cell.source)) - taught
        assert not untaught, (
            f"lesson {lesson}'s exercises use {sorted(untaught)}, which notebooks 01..{lesson} "
            f"never use in their own cells: {cell.source[:80]!r}"
        )


@pytest.mark.parametrize("lesson", _lessons())
def test_exercises_do_not_rebind_a_name_of_their_lesson(lesson):
    """An exercise cell may import the very object its lesson imported, nothing else."""
    lesson_names = _lesson_bindings(lesson)
    for cell in _exercise_cells(lesson):
        for name, how in _bindings(_tree(cell.source)).items():
            if name not in lesson_names or name == "_":  # `_` holds nothing anyone reads
                continue
            same_import = how.startswith("import ") and how == lesson_names[name]
            assert same_import, (
                f"lesson {lesson}'s exercises rebind `{name}` ({how}), which "
                f"{_lesson_path(lesson).name} binds ({lesson_names[name]}): "
                f"{cell.source[:80]!r}"
            )


@pytest.mark.parametrize("lesson", _lessons())
def test_each_lessons_import_cell_imports_only_what_its_exercises_use(lesson):
    cells = _exercise_cells(lesson)
    imports = _tree(cells[0].source)
    imported = {
        name
        for name, how in _bindings(imports).items()
        if how.startswith("import ") and name != "summary"
    }
    used = set()
    for cell in cells:
        used |= {n.id for n in ast.walk(_tree(cell.source)) if isinstance(n, ast.Name)}
    assert imported <= used, f"lesson {lesson} imports {sorted(imported - used)} and never uses it"
    assert "summary" in _bindings(imports)


def test_every_checker_is_tested_against_its_solution_and_a_known_wrong_answer():
    from tests.library import test_exercises

    cases = {
        checker.__name__: (solution, mistakes)
        for checker, solution, mistakes in test_exercises.CASES
    }
    for lesson, names in ex.EXERCISES.items():
        for name in names:
            assert f"check_{name}" in cases, f"check_{name} (lesson {lesson}) has no test case"
            solution, mistakes = cases[f"check_{name}"]
            assert callable(solution) and mistakes, f"check_{name} needs a known-wrong answer"
            assert all(words for _, words in mistakes)
