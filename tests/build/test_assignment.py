"""The exercises as an nbgrader assignment (tools/make_assignment.py, `make assignment`).

The fast tests check the source assignment's cell metadata. The ``nbgrader``-marked ones
(``pytest -m nbgrader``; 30-60 s) run the teacher's whole path once, with nbgrader's commands
as a teacher types them: build the source assignment, ``nbgrader generate_assignment``, then
``nbgrader autograde`` two submissions made from the *release* version, and
``nbgrader generate_feedback``:

* "full": every answer cell holds the solution, so every exercise gets all its points;
* "wrong": the same, except that in each lesson the 1st, 3rd, 5th, ... graded exercise
  (counting those whose function no other answer calls) returns a perturbed result (its
  solution, wrapped: tensors shifted by 0.5 or inverted, numbers + 1, a module's output
  shifted), so exactly those exercises lose their points, and the feedback report shows, in
  each one's test cell, the message the checker gives for it when run here in-process;
* "others": the same with the 2nd, 4th, ... of each lesson perturbed instead, so that the two
  together give every such exercise a known-wrong answer, and each keeps right answers beside
  its wrong ones;
* "rebind" and "patch": the wrong answers of "wrong", each followed in its answer cell by
  a cheat: a fake checker that always says "passed", bound to the notebook's name
  ``check_x`` ("rebind") or to the attribute ``check_x`` of every attention_lab module that
  holds it ("patch"). The test cells use the library's own checker, so both score exactly
  what "wrong" scores.

Nothing here names an exercise: both submissions follow the notebook's markers, tags and
checker calls, so the tests hold while the exercise set changes.
"""

from __future__ import annotations

import ast
import html
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENT, NOTEBOOK = "attention_lab", "exercises.ipynb"


from tools import assignment_cells, make_assignment  # noqa: E402

SOLUTIONS = nbformat.read(make_assignment.SOLUTIONS, as_version=4)
SOURCE = make_assignment.source_notebook(SOLUTIONS)


def _meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def _by_id(nb) -> dict:
    return {_meta(c)["grade_id"]: c for c in nb.cells if _meta(c).get("grade_id")}


def _answer(source: str) -> str:
    """A student's answer: the solution without its marker lines."""
    markers = ("### BEGIN SOLUTION", "### END SOLUTION")
    return "\n".join(line for line in source.split("\n") if line.strip() not in markers)


# --- the source assignment: metadata only, no nbgrader run ----------------------------------


def test_every_solution_block_is_an_answer_cell_and_every_check_a_test_cell():
    solution_cells = [
        c
        for c in SOLUTIONS.cells
        if c.cell_type == "code"
        and assignment_cells.has_solution(c.source)
        and "solution" not in c.metadata.get("tags", [])
    ]
    checks = [
        call
        for c in SOLUTIONS.cells
        if c.cell_type == "code" and "solution" not in c.metadata.get("tags", [])
        for call in assignment_cells.checker_calls(c.source) or []
    ]
    answers = [c for c in SOURCE.cells if _meta(c).get("solution")]
    tests = [c for c in SOURCE.cells if _meta(c).get("grade")]
    assert len(answers) == len(solution_cells) > 0
    assert len(tests) == len(checks) > 0
    for cell in answers:
        assert _meta(cell)["grade"] is False and _meta(cell)["locked"] is False
        assert cell.source.count("### BEGIN SOLUTION") == cell.source.count("### END SOLUTION")
    for cell, call in zip(tests, checks, strict=True):
        meta = _meta(cell)
        assert meta["locked"] and not meta["solution"] and meta["points"] == 1
        assert meta["grade_id"] == f"lesson{assignment_cells.lesson_of(cell)}-{call.func.id[6:]}"
        # the library's own checker, never the name the notebook bound
        assert ast.unparse(assignment_cells.graded_call(call)) in cell.source
        assert f"{call.func.id}(" not in cell.source
        assert 'assert _verdict.status == "passed"' in cell.source
    # the exercises of every lesson of the solutions notebook are graded
    lessons = {assignment_cells.lesson_of(c) for c in SOLUTIONS.cells} - {None}
    assert {assignment_cells.lesson_of(c) for c in tests} == lessons


def test_the_source_assignment_has_valid_nbgrader_metadata():
    validator = pytest.importorskip("nbgrader.nbgraderformat").MetadataValidator()
    validator.validate_nb(SOURCE)
    ids = [_meta(c)["grade_id"] for c in SOURCE.cells if _meta(c)]
    assert len(ids) == len(set(ids))
    assert all(_meta(c)["schema_version"] == 3 for c in SOURCE.cells if _meta(c))


def test_no_worked_solution_reaches_the_assignment():
    for cell in SOURCE.cells:
        assert "solution" not in cell.metadata.get("tags", [])
        assert "<!-- BEGIN SOLUTION -->" not in cell.source
        if cell.cell_type == "code":
            assert cell.outputs == []
            if "### BEGIN SOLUTION" in cell.source:
                assert _meta(cell)["solution"]
        else:
            assert _meta(cell)["locked"]


def test_points_can_be_set_per_exercise():
    first = make_assignment.graded(SOURCE)[0][0]  # "lessonNN-name"
    name = first.split("-", 1)[1]
    nb = make_assignment.source_notebook(SOLUTIONS, points=2, points_for={name: 5})
    points = {gid: p for gid, _, p in make_assignment.graded(nb)}
    assert points.pop(first) == 5
    assert set(points.values()) == {2}
    assert f"{5 + 2 * len(points):g} in all" in nb.cells[_grading_note_index(nb)].source


def _grading_note_index(nb) -> int:
    return next(i for i, c in enumerate(nb.cells) if _meta(c).get("grade_id") == "grading")


# --- the whole path: generate_assignment, autograde, generate_feedback ----------------------

PERTURB = """

# --- made by tests/build/test_assignment.py: a known-wrong answer, the solution above with its
# result perturbed.
def _perturbed(value):
    import torch

    if isinstance(value, torch.Tensor):
        if value.dtype == torch.bool:
            return ~value
        return value + (0.5 if value.is_floating_point() else 1)
    if isinstance(value, torch.nn.Module):
        value.register_forward_hook(lambda module, args, out: _perturbed(out))
        return value
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, tuple | list):
        items = [_perturbed(v) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    return None


_solution_{name} = {name}


def {name}(*args, **kwargs):
    return _perturbed(_solution_{name}(*args, **kwargs))
"""


@dataclass
class Wrong:
    """One known-wrong answer: the test cell it fails, and the checker's message for it."""

    grade_id: str  # the test cell
    answer_id: str  # the answer cell that defines the function
    function: str  # the function the test's checker is given
    lesson: str
    exercise: str  # the checker's name without check_
    message: str = ""


@dataclass
class Graded:
    course: Path
    points: dict[str, float]  # grade_id -> points, every test cell
    wrong: list[Wrong]
    others: list[Wrong] = field(default_factory=list)  # the second half (wrong_answers(half=1))
    scores: dict[str, dict[str, float]] = field(default_factory=dict)  # student -> grade_id
    feedback: dict[str, str] = field(default_factory=dict)  # student -> text of the report
    seconds: dict[str, float] = field(default_factory=dict)


def _test_call(cell) -> ast.Call:
    """The checker call a generated test cell makes, as the notebook writes it,
    ``check_x(fn)`` (the cell runs ``_verdict = _graded_check("x", fn)``)."""
    node = next(
        n
        for n in ast.parse(cell.source).body
        if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "_verdict"
    )
    call = node.value
    if ast.unparse(call.func) == "_graded_check":
        return assignment_cells.checker_call(call)
    return call


def _used_elsewhere(source) -> set[str]:
    """Names that an answer cell uses besides the one that defines them: perturbing one of
    those would make more than one exercise wrong."""
    used = set()
    for cell in source.cells:
        if not _meta(cell).get("solution"):
            continue
        try:
            tree = ast.parse(_answer(cell.source))
        except SyntaxError:
            continue
        own = set(assignment_cells.defined_names(cell.source))
        used |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - own
    return used


def wrong_answers(source, half: int = 0) -> list[Wrong]:
    """The known-wrong answers of one submission, each with its answer cell: in each lesson,
    of the graded exercises whose checker is given a function that an answer cell defines and
    no other cell uses, the 1st, 3rd, 5th, ... (``half=0``) or the 2nd, 4th, ... (``half=1``).
    The two halves together cover every such exercise."""
    wrong, counted, answers = [], {}, {}
    used = _used_elsewhere(source)
    for cell in source.cells:
        meta = _meta(cell)
        if meta.get("solution"):
            for name in assignment_cells.defined_names(cell.source):
                answers[name] = meta["grade_id"]  # the latest definition wins, as in a kernel
        elif meta.get("grade"):
            lesson = assignment_cells.lesson_of(cell)
            args = _test_call(cell).args
            fn = args[0].id if args and isinstance(args[0], ast.Name) else None
            if fn not in answers or fn in used:
                continue
            index = counted.get(lesson, 0)
            counted[lesson] = index + 1
            if index % 2 != half:
                continue
            exercise = assignment_cells.exercise_of(_test_call(cell))
            wrong.append(Wrong(meta["grade_id"], answers[fn], fn, lesson, exercise))
    return wrong


def checker_message(source, wrong: Wrong) -> str:
    """What the checker says about the wrong answer, run here in-process, independently of
    nbgrader: the lesson's setup cells and answers (solutions, the wrong one perturbed), then
    the test's checker call with record=False. Should the answer need a name that another
    cell of the lesson defines, every earlier code cell of the lesson runs instead."""
    cells = []
    for cell in source.cells:
        if assignment_cells.lesson_of(cell) == wrong.lesson and cell.cell_type == "code":
            if _meta(cell).get("grade_id") == wrong.grade_id:
                break
            cells.append(cell)
    else:
        raise AssertionError(f"no test cell {wrong.grade_id}")
    call = _test_call(cell)
    call.keywords.append(ast.keyword("record", ast.Constant(False)))
    check = compile(ast.Expression(ast.fix_missing_locations(call)), "check", "eval")

    def run(every_cell: bool):
        namespace: dict = {}
        for earlier in cells:
            meta = _meta(earlier)
            if meta.get("grade"):
                continue
            if (
                every_cell
                or meta.get("solution")
                or assignment_cells.imports_checkers(earlier.source)
            ):
                code = _answer(earlier.source)
                if meta.get("grade_id") == wrong.answer_id:
                    code += PERTURB.format(name=wrong.function)
                exec(compile(code, meta.get("grade_id", "cell"), "exec"), namespace)
        return eval(check, namespace)

    try:
        verdict = run(every_cell=False)
        retry = "NameError" in verdict.message  # the checker reports what the answer raised
    except NameError:
        retry = True
    if retry:
        verdict = run(every_cell=True)
    assert verdict.status != "passed", f"{wrong.grade_id}: the checker passes the perturbed answer"
    return verdict.message


# --- cheats: after a wrong answer, a fake checker of its exercise that always says "passed"
FAKE = """

# --- made by tests/build/test_assignment.py: a cheat, a checker that always says "passed".
class _Passed:
    status = "passed"
    message = "passed"
    hint = ""

    def __bool__(self):
        return True

    def __str__(self):
        return "✅ passed: (fake)"


def _fake_check(*args, **kwargs):
    print("✅ passed: (fake)")
    return _Passed()
"""
CHEATS = {
    # the name the notebook imported (and the locked test cell of main called)
    "rebind": FAKE + "\n\ncheck_{exercise} = _fake_check\n",
    # the attribute of every module of the library that holds the checker
    "patch": FAKE
    + """

import sys as _sys

for _module in list(_sys.modules.values()):
    if getattr(_module, "__name__", "").startswith("attention_lab") and hasattr(
        _module, "check_{exercise}"
    ):
        setattr(_module, "check_{exercise}", _fake_check)
""",
}


def submission(
    release, source, wrong: list[Wrong] = (), cheat: str | None = None
) -> nbformat.NotebookNode:
    """The release notebook with every answer cell filled in from the source's solutions;
    the answers named in ``wrong`` are perturbed, and followed by ``CHEATS[cheat]``."""
    nb = nbformat.from_dict(release)
    solutions = _by_id(source)
    perturbed = {w.answer_id for w in wrong}
    for cell in nb.cells:
        meta = _meta(cell)
        if meta.get("solution"):
            answer = solutions[meta["grade_id"]]
            cell.source = _answer(answer.source)
            if meta["grade_id"] in perturbed:
                w = next(w for w in wrong if w.answer_id == meta["grade_id"])
                cell.source += PERTURB.format(name=w.function)
                if cheat:
                    cell.source += CHEATS[cheat].format(exercise=w.exercise)
    return nb


def _nbgrader(course: Path, *args: str) -> float:
    env = dict(os.environ)
    # nbgrader runs `alembic` from PATH; the kernel uses one thread (2 shared cores)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["OMP_NUM_THREADS"] = "1"
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{result.stderr[-4000:]}"
    return time.perf_counter() - start


def _text(report: Path) -> str:
    """The visible text of an HTML report: tags dropped, entities decoded, ANSI codes gone."""
    raw = report.read_text()
    raw = re.sub(r"<(script|style)\b.*?</\1>", " ", raw, flags=re.DOTALL)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", raw)))


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> Graded:
    pytest.importorskip("nbgrader")
    from nbgrader.api import Gradebook

    course = tmp_path_factory.mktemp("course")
    seconds = {}
    make_assignment.write_course(course)
    source = nbformat.read(course / "source" / ASSIGNMENT / NOTEBOOK, as_version=4)
    seconds["generate_assignment"] = _nbgrader(course, "generate_assignment", ASSIGNMENT)
    release = nbformat.read(course / "release" / ASSIGNMENT / NOTEBOOK, as_version=4)
    wrong, others = wrong_answers(source), wrong_answers(source, half=1)
    for w in wrong + others:
        w.message = checker_message(source, w)
    for student, nb in (
        ("full", submission(release, source)),
        ("wrong", submission(release, source, wrong)),
        ("others", submission(release, source, others)),
        ("rebind", submission(release, source, wrong, cheat="rebind")),
        ("patch", submission(release, source, wrong, cheat="patch")),
    ):
        path = course / "submitted" / student / ASSIGNMENT / NOTEBOOK
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
    seconds["autograde"] = _nbgrader(course, "autograde", ASSIGNMENT)
    seconds["generate_feedback"] = _nbgrader(course, "generate_feedback", ASSIGNMENT)
    result = Graded(
        course,
        {gid: p for gid, _, p in make_assignment.graded(source)},
        wrong,
        others,
        seconds=seconds,
    )
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in ("full", "wrong", "others", "rebind", "patch"):
            notebook = gb.find_submission_notebook(Path(NOTEBOOK).stem, ASSIGNMENT, student)
            result.scores[student] = {g.name: g.score for g in notebook.grades}
            report = (
                course / "feedback" / student / ASSIGNMENT / Path(NOTEBOOK).with_suffix(".html")
            )
            result.feedback[student] = _text(report)
    print(f"\nnbgrader timings (s): {seconds}")
    for student, scores in result.scores.items():
        print(f"{student}: {sum(scores.values()):g} of {sum(result.points.values()):g}", scores)
    return result


def _cells(report: str) -> dict[str, str]:
    """grade_id -> the report's text for that grade cell (from its "Score: x / y" on)."""
    parts = re.split(r"Grade cell: ([A-Za-z0-9_-]+) ", report)[1:]
    return dict(zip(parts[::2], parts[1::2], strict=True))


def _total(scores: dict[str, float]) -> str:
    return f"{sum(scores.values()):.1f}"


@pytest.mark.nbgrader
def test_the_solutions_get_full_marks(graded):
    assert graded.scores["full"] == graded.points
    report = graded.feedback["full"]
    total = _total(graded.points)
    assert f"(Score: {total} / {total})" in report
    cells = _cells(report)
    assert set(cells) == set(graded.points)
    for grade_id, text in cells.items():
        points = f"{graded.points[grade_id]:.1f}"
        assert text.startswith(f"Score: {points} / {points}"), grade_id
        assert "AssertionError" not in text and "❌ not yet:" not in text, grade_id


def test_the_known_wrong_answers_cover_every_exercise_whose_answer_stands_alone():
    """Every graded exercise whose function an answer cell defines and no other answer uses
    has a known-wrong answer in one of the two halves, and in one only; every lesson has one
    in the first half. (The new exercises of each lesson are graded against a wrong answer
    too, not only the first one.)"""
    first, second = wrong_answers(SOURCE), wrong_answers(SOURCE, half=1)
    ids = [w.grade_id for w in first + second]
    assert len(ids) == len(set(ids))
    used = _used_elsewhere(SOURCE)
    defined = {
        name
        for c in SOURCE.cells
        if _meta(c).get("solution")
        for name in assignment_cells.defined_names(c.source)
    }
    standalone = set()
    for c in SOURCE.cells:
        if _meta(c).get("grade"):
            args = _test_call(c).args
            fn = args[0].id if args and isinstance(args[0], ast.Name) else None
            if fn in defined and fn not in used:
                standalone.add(_meta(c)["grade_id"])
    assert set(ids) == standalone
    lessons = {assignment_cells.lesson_of(c) for c in SOURCE.cells if _meta(c).get("grade")}
    assert {w.lesson for w in first} == lessons
    assert len(standalone) >= len(lessons) + 9  # lessons with two or three exercises


def _loses_exactly(graded, student: str, wrong: list[Wrong]) -> None:
    expected = dict(graded.points)
    for w in wrong:
        expected[w.grade_id] = 0
    assert graded.scores[student] == expected
    report = graded.feedback[student]
    assert f"(Score: {_total(expected)} / {_total(graded.points)})" in report


@pytest.mark.nbgrader
def test_one_wrong_answer_per_lesson_loses_exactly_its_points(graded):
    lessons = {assignment_cells.lesson_of(c) for c in SOURCE.cells if _meta(c).get("grade")}
    assert {w.lesson for w in graded.wrong} == lessons
    _loses_exactly(graded, "wrong", graded.wrong)


@pytest.mark.nbgrader
def test_the_other_wrong_answers_lose_exactly_their_points(graded):
    """The 2nd, 4th, ... exercise of each lesson wrong: each loses its points, the rest keep
    theirs, with the checker's own message in the feedback."""
    assert graded.others
    _loses_exactly(graded, "others", graded.others)
    cells = _cells(graded.feedback["others"])
    for w in graded.others:
        text = cells[w.grade_id]
        assert text.startswith(f"Score: 0.0 / {graded.points[w.grade_id]:.1f}"), w.grade_id
        assert f"❌ not yet: {w.message}" in text.split("AssertionError")[0], w.grade_id


@pytest.mark.nbgrader
def test_the_feedback_shows_the_checkers_message_for_each_wrong_answer(graded):
    cells = _cells(graded.feedback["wrong"])
    wrong = {w.grade_id: w for w in graded.wrong}
    for grade_id, text in cells.items():
        points = f"{graded.points[grade_id]:.1f}"
        if grade_id not in wrong:
            assert text.startswith(f"Score: {points} / {points}"), grade_id
            assert "AssertionError" not in text, grade_id
            continue
        message = wrong[grade_id].message
        assert message
        assert text.startswith(f"Score: 0.0 / {points}"), grade_id
        # printed by the checker, then again as the failed test's AssertionError
        assert f"❌ not yet: {message}" in text.split("AssertionError")[0], grade_id
        assert f"AssertionError: ❌ not yet: {message}" in text, grade_id


@pytest.mark.nbgrader
@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_a_fake_checker_earns_nothing(graded, cheat):
    """A wrong answer followed by a fake checker bound to the notebook's name ("rebind") or
    to the library's module attributes ("patch") scores 0, as the wrong answer alone; every
    honest answer of the same submission keeps its points."""
    expected = dict(graded.points)
    for w in graded.wrong:
        expected[w.grade_id] = 0
    assert graded.scores[cheat] == expected
    cells = _cells(graded.feedback[cheat])
    for w in graded.wrong:  # the real checker's verdict, up to the failed assertion
        own = cells[w.grade_id].split("AssertionError")[0]
        assert "❌ not yet:" in own and "(fake)" not in own, w.grade_id


# --- the library's own checker, in-process (attention_lab.exercises._record) ---------------


@pytest.fixture
def _results_kept():
    """The checkers below record verdicts: leave the summary's registry as it was."""
    from attention_lab.exercises import RESULTS

    saved = dict(RESULTS)
    yield
    RESULTS.clear()
    RESULTS.update(saved)


def _naive_softmax(scores):
    import torch

    e = torch.exp(scores)  # overflows at scores of 1000
    return e / e.sum(dim=-1, keepdim=True)


def test_graded_check_runs_the_checker_the_library_kept(monkeypatch, capsys, _results_kept):
    import attention_lab.exercises as exercises
    from attention_lab.exercises import _record, lesson01

    class Passed:
        status = "passed"

    def fake(*args, **kwargs):
        return Passed()

    monkeypatch.setattr(exercises, "check_stable_softmax", fake)
    monkeypatch.setattr(lesson01, "check_stable_softmax", fake)
    verdict = _record.graded_check("stable_softmax", _naive_softmax)
    assert type(verdict) is exercises.Verdict and verdict.status == "not yet"
    assert "not yet" in capsys.readouterr().out  # printed, as a checker does


def test_graded_check_refuses_a_verdict_the_checker_did_not_record(monkeypatch, _results_kept):
    from attention_lab.exercises import _record, core

    class Passed:
        status, message, hint = "passed", "", ""

    # code in the kernel that replaces the library's internals: the verdict is not the
    # library's, and the test cell raises (0 points) instead of trusting it
    monkeypatch.setattr(core, "_grade", lambda *args, **kwargs: Passed())
    with pytest.raises(RuntimeError, match="not the one attention_lab's checker recorded"):
        _record.graded_check("stable_softmax", _naive_softmax)
    with pytest.raises(LookupError, match="names 0 checkers"):
        _record.graded_check("no_such_exercise", _naive_softmax)


# --- the Chinese edition (make assignment LANG_EDITION=zh-CN) --------------------------------

ZH_SOLUTIONS_PATH, ZH_ASSIGNMENT = make_assignment.EDITION_DEFAULTS["zh-CN"]
ZH_SOURCE = make_assignment.source_notebook(
    nbformat.read(ZH_SOLUTIONS_PATH, as_version=4), edition="zh-CN"
)


def test_the_chinese_assignment_grades_the_same_exercises_in_chinese():
    """The same graded cells (grade_ids, points, checker calls) as the English assignment; the
    text it adds is Chinese, and a locked cell sets the library's language before any check."""
    assert make_assignment.graded(ZH_SOURCE) == make_assignment.graded(SOURCE)

    def code(nb):  # each test cell without its comment lines: the same test in both
        return [
            "\n".join(line for line in c.source.split("\n") if not line.startswith("#"))
            for c in nb.cells
            if _meta(c).get("grade")
        ]

    assert code(ZH_SOURCE) == code(SOURCE)
    ids = [_meta(c).get("grade_id") for c in ZH_SOURCE.cells]
    language = ids.index("setup-language")
    first_test = next(i for i, c in enumerate(ZH_SOURCE.cells) if _meta(c).get("grade"))
    assert language < first_test
    cell = ZH_SOURCE.cells[language]
    assert _meta(cell)["locked"] and 'set_language("zh_CN")' in cell.source
    note = ZH_SOURCE.cells[ids.index("grading")].source
    assert "本作业如何评分" in note and "✅ 通过" in note
    assert f"共 {sum(p for _, _, p in make_assignment.graded(SOURCE)):g} 分" in note
    for c in ZH_SOURCE.cells:
        if _meta(c).get("grade"):
            assert c.source.startswith("# 练习 ") and "只有结论是 ✅ 通过" in c.source
    assert "setup-language" not in [_meta(c).get("grade_id") for c in SOURCE.cells]
    pytest.importorskip("nbgrader.nbgraderformat").MetadataValidator().validate_nb(ZH_SOURCE)


def test_an_unknown_edition_is_refused():
    with pytest.raises(make_assignment.AssignmentError, match="edition='fr'"):
        make_assignment.source_notebook(SOLUTIONS, edition="fr")


@pytest.fixture(scope="module")
def graded_zh(tmp_path_factory) -> Graded:
    """The Chinese assignment through nbgrader: a full submission and a wrong one (the same
    known-wrong answers as the English "wrong"), autograded, with feedback."""
    pytest.importorskip("nbgrader")
    from nbgrader.api import Gradebook

    course = tmp_path_factory.mktemp("course_zh")
    make_assignment.write_course(course, ZH_SOLUTIONS_PATH, ZH_ASSIGNMENT, edition="zh-CN")
    source = nbformat.read(course / "source" / ZH_ASSIGNMENT / NOTEBOOK, as_version=4)
    _nbgrader(course, "generate_assignment", ZH_ASSIGNMENT)
    release = nbformat.read(course / "release" / ZH_ASSIGNMENT / NOTEBOOK, as_version=4)
    wrong, others = wrong_answers(source), wrong_answers(source, half=1)
    import attention_lab

    attention_lab.set_language("zh_CN")
    try:
        for w in wrong + others:
            w.message = checker_message(source, w)
    finally:
        attention_lab.set_language("en")
    for student, nb in (
        ("full", submission(release, source)),
        ("wrong", submission(release, source, wrong)),
        ("others", submission(release, source, others)),
    ):
        path = course / "submitted" / student / ZH_ASSIGNMENT / NOTEBOOK
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
    _nbgrader(course, "autograde", ZH_ASSIGNMENT)
    _nbgrader(course, "generate_feedback", ZH_ASSIGNMENT)
    result = Graded(course, {gid: p for gid, _, p in make_assignment.graded(source)}, wrong, others)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in ("full", "wrong", "others"):
            notebook = gb.find_submission_notebook(Path(NOTEBOOK).stem, ZH_ASSIGNMENT, student)
            result.scores[student] = {g.name: g.score for g in notebook.grades}
            report = (
                course / "feedback" / student / ZH_ASSIGNMENT / Path(NOTEBOOK).with_suffix(".html")
            )
            result.feedback[student] = _text(report)
    return result


@pytest.mark.nbgrader
def test_a_chinese_submission_is_graded_with_the_chinese_verdicts(graded_zh):
    """Full marks for the solutions, whose checks print ✅ 通过; the wrong answers lose exactly
    their points, and the feedback shows the checker's Chinese message (❌ 还没通过：...),
    printed and as the failed test's AssertionError."""
    assert graded_zh.scores["full"] == graded_zh.points
    full = _cells(graded_zh.feedback["full"])
    assert set(full) == set(graded_zh.points)
    for grade_id, text in full.items():
        assert "✅ 通过" in text and "AssertionError" not in text, grade_id
    lessons = {assignment_cells.lesson_of(c) for c in ZH_SOURCE.cells if _meta(c).get("grade")}
    assert {w.lesson for w in graded_zh.wrong} == lessons and graded_zh.others
    for student, wrong in (("wrong", graded_zh.wrong), ("others", graded_zh.others)):
        expected = dict(graded_zh.points)
        for w in wrong:
            expected[w.grade_id] = 0
        assert graded_zh.scores[student] == expected, student
        cells = _cells(graded_zh.feedback[student])
        for w in wrong:
            assert re.search(r"[\u4e00-\u9fff]", w.message), w.message  # it spoke Chinese
            text = cells[w.grade_id]
            assert text.startswith(f"Score: 0.0 / {graded_zh.points[w.grade_id]:.1f}"), w.grade_id
            assert f"❌ 还没通过：{w.message}" in text.split("AssertionError")[0], w.grade_id
            assert f"AssertionError: ❌ 还没通过：{w.message}" in text, w.grade_id
