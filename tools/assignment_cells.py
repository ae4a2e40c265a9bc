"""The cell conversion of tools/make_assignment.py: a solutions notebook in, the nbgrader
*source* notebook out (``source_notebook``), and the graded cells of one (``graded``).

Every rule reads the markers, tags and checker calls of the solutions notebook; the rules
themselves are described in make_assignment.py's docstring.
"""

from __future__ import annotations

import ast
import copy
import re

import nbformat

SCHEMA_VERSION = 3
CHECKER = re.compile(r"^check_\w+$")
DROPPED_TAGS = {"colab-badge", "colab-setup"}
CHECKERS_MODULE = "attention_lab.exercises"
NBGRADER_BEGIN = "BEGIN SOLUTION"  # nbgrader's ClearSolutions.begin_solution_delimeter

from tools.make_exercises import SOLUTION_TAG, lesson_of, stub_markdown  # noqa: E402

GRADING_NOTE = """\
**How this assignment is graded.** nbgrader runs the notebook top to bottom. The check cell
below each exercise is locked: it runs the exercise's checker, which prints its verdict as
usual, and raises `AssertionError` when the verdict is not ✅ passed. An exercise scores its
points only when its check passes. Points: {points}."""

GRADED_CHECK = "graded_check"  # attention_lab.exercises._record: the library's own checker
TEST_CELL = """\
# Autograded test of exercise {exercise} ({lesson}{points:g} point{s}): the library's own
# checker (not a name this notebook bound) prints its verdict; the points are given only
# when it says "passed".
from {module}._record import {graded_check} as _graded_check

_verdict = {call}
assert _verdict.status == "passed", str(_verdict)"""

# The Chinese edition (tools/make_assignment.py --edition zh-CN): the same cells, built from
# notebooks/zh-CN/exercises_solutions.ipynb, with the assignment's own text in Chinese and a
# first cell that makes the library speak Chinese (the solutions notebook does it in its
# Colab setup cell, which an assignment leaves out). The test compares the verdict's status,
# the same code "passed" in both languages; the checker prints it as ✅ 通过.
EDITIONS = ("en", "zh-CN")
GRADING_NOTE_ZH = """\
**本作业如何评分。** nbgrader 从头到尾运行这个笔记本。每道练习下面的检查单元格\
是锁定的：它运行这道练习的检查器，检查器照常打印结论；结论不是 ✅ 通过时，它抛出\
 `AssertionError`。只有检查通过，这道练习才得分。分数：{points}。"""
TEST_CELL_ZH = """\
# 练习 {exercise} 的自动评分测试（{lesson}{points:g} 分）：运行库自己的检查器（而不是这个笔记本
# 绑定的名字），它打印结论；只有结论是 ✅ 通过（status 为 "passed"）时才给分。
from {module}._record import {graded_check} as _graded_check

_verdict = {call}
assert _verdict.status == "passed", str(_verdict)"""
LANGUAGE_CELL_ZH = """\
# 检查器的结论和提示用简体中文显示
import attention_lab

attention_lab.set_language("zh_CN")"""


class AssignmentError(ValueError):
    """The solutions notebook has something this tool cannot turn into an assignment."""


def _tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _nbgrader(cell, grade_id: str, *, grade=False, solution=False, locked=False, points=None):
    meta = {
        "grade": grade,
        "solution": solution,
        "locked": locked,
        "grade_id": grade_id,
        "schema_version": SCHEMA_VERSION,
    }
    if grade:
        meta["points"] = points
    cell.metadata["nbgrader"] = meta
    return cell


def checker_calls(source: str) -> list[ast.Call] | None:
    """The checker calls of a cell made only of ``check_x(...)`` statements, else None.

    Calls with ``record=False`` (demonstrations of a wrong answer) do not count: a cell with
    one is not a test cell."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return None
    calls = []
    for node in body:
        if not (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and CHECKER.match(node.value.func.id)
        ):
            return None
        if any(k.arg == "record" for k in node.value.keywords):
            return None
        calls.append(node.value)
    return calls or None


def exercise_of(call: ast.Call) -> str:
    """``single_head_forward`` for ``check_single_head_forward(...)``: the exercise's name
    in the checkers' registry (attention_lab.exercises._summary)."""
    return call.func.id.removeprefix("check_")


def graded_call(call: ast.Call) -> ast.Call:
    """``_graded_check("x", fn, ...)`` for ``check_x(fn, ...)``: the test cell asks the
    library for its own checker of exercise x (attention_lab.exercises._record), so a
    rebinding of ``check_x`` in the notebook, or of the module's attribute, changes nothing."""
    name = ast.Constant(exercise_of(call))
    return ast.Call(ast.Name("_graded_check", ast.Load()), [name, *call.args], call.keywords)


def checker_call(graded: ast.Call) -> ast.Call:
    """The notebook's ``check_x(fn, ...)`` for a test cell's ``_graded_check("x", fn, ...)``."""
    name, *args = graded.args
    return ast.Call(ast.Name(f"check_{name.value}", ast.Load()), args, graded.keywords)


def defined_names(source: str) -> list[str]:
    """The functions and classes a cell defines at top level, in order."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return []
    return [n.name for n in body if isinstance(n, ast.FunctionDef | ast.ClassDef)]


def imports_checkers(source: str) -> bool:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    return any(
        isinstance(n, ast.ImportFrom) and (n.module or "").startswith(CHECKERS_MODULE)
        for n in ast.walk(tree)
    )


def has_solution(source: str) -> bool:
    """Whether nbgrader sees a solution region: any line that contains its delimiter."""
    return any(NBGRADER_BEGIN in line for line in source.split("\n"))


def _unique(grade_id: str, seen: set[str]) -> str:
    candidate, n = grade_id, 2
    while candidate in seen:
        candidate, n = f"{grade_id}-{n}", n + 1
    seen.add(candidate)
    return candidate


def source_notebook(
    solutions,
    points: float = 1.0,
    points_for: dict[str, float] | None = None,
    edition: str = "en",
):
    """The nbgrader source version of a solutions notebook (a new NotebookNode); ``edition``
    ("en" or "zh-CN", the solutions notebook's language) picks the language of the text this
    adds (the grading note, the test cells' comments) and of the checkers' verdicts."""
    if edition not in EDITIONS:
        raise AssignmentError(f"edition={edition!r} is not one of {EDITIONS}")
    chinese = edition == "zh-CN"
    points_for = points_for or {}
    nb = copy.deepcopy(solutions)
    cells, seen = [], set()
    for index, cell in enumerate(nb.cells):
        tags = _tags(cell)
        if SOLUTION_TAG in tags or DROPPED_TAGS & set(tags):
            continue
        lesson = lesson_of(cell)
        where = f"cell {index} ({f'lesson {lesson}' if lesson else 'no lesson tag'})"
        part = lesson or "other"
        cell.metadata.pop("nbgrader", None)
        if cell.cell_type == "markdown":
            cell.source = stub_markdown(cell.source)
            if NBGRADER_BEGIN in cell.source:
                raise AssignmentError(
                    f"{where}: {NBGRADER_BEGIN!r} outside <!-- BEGIN SOLUTION --> ... "
                    "<!-- END SOLUTION --> (nbgrader would stop there)"
                )
            cells.append(_nbgrader(cell, _unique(f"text-{part}", seen), locked=True))
            continue
        if cell.cell_type != "code":
            cells.append(cell)
            continue
        cell.outputs, cell.execution_count = [], None
        calls = checker_calls(cell.source)
        if has_solution(cell.source):
            names = defined_names(cell.source)
            if not names:
                raise AssignmentError(f"{where}: a solution outside a function")
            grade_id = _unique(f"answer-{names[0]}", seen)
            cells.append(_nbgrader(cell, grade_id, solution=True))
        elif calls:
            for call in calls:
                exercise = exercise_of(call)
                worth = points_for.get(exercise, points)
                if chinese:
                    where_text = f"第 {lesson} 课，" if lesson else ""
                else:
                    where_text = f"lesson {lesson}, " if lesson else ""
                test = nbformat.v4.new_code_cell(
                    (TEST_CELL_ZH if chinese else TEST_CELL).format(
                        exercise=exercise,
                        lesson=where_text,
                        points=worth,
                        s="" if worth == 1 else "s",
                        module=CHECKERS_MODULE,
                        graded_check=GRADED_CHECK,
                        call=ast.unparse(graded_call(call)),
                    ),
                    metadata=copy.deepcopy(cell.metadata),
                )
                grade_id = _unique(f"lesson{lesson}-{exercise}" if lesson else exercise, seen)
                cells.append(_nbgrader(test, grade_id, grade=True, locked=True, points=worth))
        elif imports_checkers(cell.source):
            cells.append(_nbgrader(cell, _unique(f"setup-{part}", seen), locked=True))
        else:
            cells.append(cell)
    for cell in cells:  # stable cell ids: the grade_id where there is one
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id:
            cell["id"] = grade_id[:64]
    note = grading_note(cells, _unique("grading", seen), chinese)
    if note is not None:  # before the first lesson
        first = next((i for i, cell in enumerate(cells) if lesson_of(cell)), 0)
        cells.insert(first, note)
        if chinese:  # the checkers speak Chinese from the first check on
            language = nbformat.v4.new_code_cell(LANGUAGE_CELL_ZH)
            grade_id = _unique("setup-language", seen)
            language["id"] = grade_id
            cells.insert(first + 1, _nbgrader(language, grade_id, locked=True))
    nb.cells = cells
    return nb


def grading_note(cells, grade_id: str, chinese: bool = False):
    """A locked markdown cell that says how the notebook is graded, with the points per
    lesson (in Chinese when ``chinese``); None when nothing is graded."""
    per_lesson: dict[str | None, float] = {}
    for cell in cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade"):
            lesson = lesson_of(cell)
            per_lesson[lesson] = per_lesson.get(lesson, 0) + meta["points"]
    if not per_lesson:
        return None
    if chinese:
        text = "，".join(f"第 {les or '-'} 课 {p:g} 分" for les, p in per_lesson.items())
        total = f"共 {sum(per_lesson.values()):g} 分（{text}）"
    else:
        text = ", ".join(f"lesson {les or '-'} {p:g}" for les, p in per_lesson.items())
        total = f"{sum(per_lesson.values()):g} in all ({text})"
    note = nbformat.v4.new_markdown_cell(
        (GRADING_NOTE_ZH if chinese else GRADING_NOTE).format(points=total)
    )
    note["id"] = grade_id
    return _nbgrader(note, grade_id, locked=True)


def graded(nb) -> list[tuple[str, str, float]]:
    """``(grade_id, lesson, points)`` of every autograded test cell, in notebook order."""
    rows = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            rows.append((meta["grade_id"], lesson_of(cell), meta["points"]))
    return rows
