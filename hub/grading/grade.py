"""Grade the exercises of a class in a sandbox (``make grade``; teaching/grading.md).

    sudo make grade                                   # attention_lab, from the hub's homes
    sudo make grade LANG_EDITION=zh-CN                # attention_lab_zh
    sudo .venv/bin/python hub/grading/grade.py --course build/course attention_lab
    sudo .venv/bin/python hub/grading/grade.py --from returned/ attention_lab
    sudo .venv/bin/python hub/grading/grade.py --release attention_lab    # hand it out

Runs as root, from the course folder that ``make assignment`` makes (mode 0700, root's: the
grader refuses one that other users can read). For each assignment:

1. **Collect** (``collect.py``): each student's ``~/assignments/<assignment>/exercises.ipynb``
   in their home on the class hub (system users ``<prefix><name>``), or ``DIR/<student>/``
   with ``--from DIR``. Links, files that are not regular, files the student does not own
   and files over ``--max-size`` are refused and reported, never followed into
   ``submitted/``; only the assignment's notebooks are read.
2. **Autograde** with nbgrader, its ``Execute`` replaced by ``sandbox.SandboxedExecute``:
   nbgrader stays the trusted driver (as root it restores the locked cells and writes the
   gradebook); each notebook's kernel runs in a fresh sandbox (a throwaway user, bubblewrap
   namespaces with no network and an allow-list of mounts, memory and time limits), and
   every process of it is killed and checked gone before the gradebook is written.
3. **Feedback** (``feedback.py``): ``feedback/<student>/<assignment>/exercises.html`` with
   the scores and the checkers' verdicts only, escaped; ``--return-feedback`` also saves it,
   as the student, to ``~/assignments/<assignment>/feedback.html``.

``--release`` hands the assignment out instead: ``release/<assignment>/*.ipynb`` copied, as
each student, to ``~/assignments/<assignment>/`` (a notebook already there is kept).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import collect  # noqa: E402  (hub/grading/collect.py)
import sandbox  # noqa: E402  (hub/grading/sandbox.py)

COURSE = REPO / "build" / "course"
PREFIX = os.environ.get("ATTENTION_LAB_HUB_USER_PREFIX", "alab-")
HUB_VENV = Path(os.environ.get("HUB_VENV", "/opt/attention-lab-hub/venv"))

NBGRADER_CONFIG = """\
# Written by hub/grading/grade.py for one run: nbgrader's Execute is replaced by the sandbox.
from nbgrader.converters import Autograde
from sandbox import replace_execute

c = get_config()  # noqa: F821
c.Autograde.autograde_preprocessors = replace_execute(
    Autograde.class_traits()["autograde_preprocessors"].default()
)
c.SandboxedExecute.venv = {venv!r}
c.SandboxedExecute.memory = {memory!r}
c.SandboxedExecute.seconds = {seconds!r}
c.SandboxedExecute.report = {report!r}
"""


class GradingError(SystemExit):
    """A reason not to grade at all, said to the teacher (exit status 2)."""

    def __init__(self, message: str):
        super().__init__(f"grade.py: {message}")


@dataclass
class Result:
    assignment: str
    refused: list[tuple[str, str, str]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # students with no notebook saved
    graded: dict[str, dict] = field(default_factory=dict)  # student -> sandbox record
    scores: dict[str, tuple[float, float]] = field(default_factory=dict)  # student -> total
    failed: list[str] = field(default_factory=list)  # what went wrong, one line each
    feedback: dict[str, Path] = field(default_factory=dict)


# --- checks before anything runs -------------------------------------------------------------


def course_problem(course: Path) -> str | None:
    """Why the course folder must not be used as it is, or None: it must be a folder of
    root's that no other user can enter (it holds the solutions in source/, gradebook.db and
    every submission)."""
    try:
        st = os.lstat(course)
    except FileNotFoundError:
        return f"{course} does not exist: run make assignment first"
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        return f"{course} is not a folder (a link?): use the folder make assignment made"
    if st.st_mode & 0o077:
        return (
            f"{course} is mode {stat.S_IMODE(st.st_mode):o}: other users can read the "
            f"solutions (source/), gradebook.db and the submissions in it; run "
            f"chmod 700 {course}"
        )
    if st.st_uid != 0:
        return f"{course} belongs to uid {st.st_uid}, not root: run chown -R root: {course}"
    return None


def preflight(course: Path, venv: Path) -> None:
    if os.geteuid() != 0:
        raise GradingError("runs as root: it creates a throwaway user for each notebook")
    missing = sandbox.missing_tools()
    if missing:
        raise GradingError(
            f"needs {', '.join(missing)} (Debian: apt-get install bubblewrap util-linux "
            "coreutils passwd)"
        )
    if sandbox.memory_controller() is None:
        raise GradingError("no memory cgroup on this machine: the grader cannot limit memory")
    python = venv / "bin" / "python"
    if not python.exists():
        raise GradingError(f"{python} does not exist: run make hub-env (HUB_VENV={venv})")
    problem = course_problem(course)
    if problem:
        raise GradingError(problem)


def notebooks_of(course: Path, assignment: str) -> list[str]:
    names = sorted(p.name for p in (course / "source" / assignment).glob("*.ipynb"))
    if not names:
        raise GradingError(
            f"{course}/source/{assignment} has no notebook: run make assignment "
            "(LANG_EDITION=zh-CN for attention_lab_zh)"
        )
    return names


# --- grading ---------------------------------------------------------------------------------


def run_autograde(course: Path, assignment: str, run_dir: Path, args) -> tuple[int, str]:
    """nbgrader autograde, every submission of the assignment, with the sandbox; returns its
    exit status and log."""
    config = run_dir / "nbgrader_config.py"  # found through JUPYTER_CONFIG_DIR
    config.write_text(
        NBGRADER_CONFIG.format(
            venv=str(args.venv),
            memory=args.memory,
            seconds=args.time_limit,
            report=str(run_dir / "sandbox.jsonl"),
        )
    )
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    env["PYTHONPATH"] = str(HERE)
    env["JUPYTER_CONFIG_DIR"] = str(run_dir)
    cmd = [sys.executable, "-m", "nbgrader", "autograde", assignment, "--force"]
    r = subprocess.run(cmd, cwd=course, env=env, capture_output=True, text=True)
    (course / f"autograde-{assignment}.log").write_text(r.stdout + r.stderr)
    return r.returncode, r.stdout + r.stderr


def sandbox_records(run_dir: Path) -> list[dict]:
    path = run_dir / "sandbox.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def scores_of(course: Path, assignment: str, student: str, notebook: str):
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        try:
            nb = gb.find_submission_notebook(notebook, assignment, student)
        except MissingEntry:
            return None
        return {g.name: (g.score or 0.0, g.max_score) for g in nb.grades}


def write_feedback(course: Path, assignment: str, student: str, notebook: str, scores) -> Path:
    import feedback
    import nbformat

    autograded = course / "autograded" / student / assignment / f"{notebook}.ipynb"
    nb = nbformat.read(autograded, as_version=4)
    html = feedback.page(nb, scores, student, assignment, notebook)
    path = course / "feedback" / student / assignment / f"{notebook}.html"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text(html, encoding="utf-8")
    return path


def as_student(user: str, script: str, *args: str, data: bytes = b"") -> int:
    """Run a short sh script as the student (their rights, their links), data on stdin."""
    cmd = ["runuser", "-u", user, "--", "sh", "-c", f"umask 077; {script}", "sh", *args]
    return subprocess.run(cmd, input=data, capture_output=True).returncode


def return_feedback(user: str, home: Path, assignment: str, page: Path) -> bool:
    folder = f"{home}/{collect.HOME_FOLDER}/{assignment}"
    code = as_student(
        user, 'mkdir -p "$1" && cat > "$1/feedback.html"', folder, data=page.read_bytes()
    )
    return code == 0


def grade(course: Path, assignment: str, args) -> Result:
    result = Result(assignment)
    notebooks = notebooks_of(course, assignment)
    if args.from_dir:
        students = collect.folder_students(args.from_dir, args.student)
    else:
        students = collect.hub_students(args.prefix, assignment, args.student)
    found = collect.collect(students, notebooks, args.max_size)
    result.refused, result.missing = found.refused, found.missing
    collect.write_submissions(course, assignment, found)
    if not (course / "submitted").exists() or not any(
        (d / assignment).is_dir() for d in (course / "submitted").iterdir()
    ):
        return result
    run_dir = Path(tempfile.mkdtemp(prefix="attention-lab-grade-"))  # root's, 0700
    try:
        status, log = run_autograde(course, assignment, run_dir, args)
        records = sandbox_records(run_dir)
        if status != 0:
            tail = "\n".join(log.strip().splitlines()[-15:])
            result.failed.append(f"nbgrader autograde exited with {status}:\n{tail}")
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    by_student = {r["student"]: r for r in records if r.get("assignment") == assignment}
    for student_dir in sorted((course / "submitted").iterdir()):
        student = student_dir.name
        if not (student_dir / assignment).is_dir():
            continue
        record = by_student.get(student)
        if record is None:
            result.failed.append(f"{student}: not run in the sandbox; no grades or feedback")
            continue
        if record.get("left"):
            result.failed.append(f"{student}: processes {record['left']} outlived grading")
            continue
        if record.get("error") or not record.get("sealed"):
            why = record.get("error") or "the kernel folder was not sealed before the first cell"
            result.failed.append(f"{student}: not graded ({why}); see autograde-{assignment}.log")
            continue
        result.graded[student] = record
        for notebook in (Path(n).stem for n in notebooks):
            scores = scores_of(course, assignment, student, notebook)
            if scores is None:
                result.failed.append(f"{student}: no grades for {notebook} in the gradebook")
                continue
            result.scores[student] = (
                sum(s for s, _ in scores.values()),
                sum(m for _, m in scores.values()),
            )
            page = write_feedback(course, assignment, student, notebook, scores)
            result.feedback[student] = page
            if args.return_feedback and not args.from_dir:
                user = f"{args.prefix}{student}"
                home = next((s.root for s in students if s.id == student), None)
                if home is None or not return_feedback(user, home, assignment, page):
                    result.failed.append(f"{student}: feedback not returned to {user}")
    return result


def release(course: Path, assignment: str, args) -> list[str]:
    """Copy release/<assignment>/*.ipynb to each student's ~/assignments/<assignment>/, as
    the student; a notebook already there is kept (the student's work)."""
    lines = []
    notebooks = sorted((course / "release" / assignment).glob("*.ipynb"))
    if not notebooks:
        raise GradingError(f"{course}/release/{assignment} is empty: run make assignment")
    for student in collect.hub_students(args.prefix, assignment, args.student):
        user = f"{args.prefix}{student.id}"
        folder = f"{student.root}/{collect.HOME_FOLDER}/{assignment}"
        for nb in notebooks:
            code = as_student(
                user,
                'mkdir -p "$1" && if [ -e "$1/$2" ]; then exit 3; fi && cat > "$1/$2"',
                folder,
                nb.name,
                data=nb.read_bytes(),
            )
            what = {0: "handed out", 3: "already there, kept"}.get(code, f"failed ({code})")
            lines.append(f"{student.id}: {folder}/{nb.name} {what}")
    return lines


def _size(text: str) -> int:
    units = {"k": 1024, "m": 1024**2, "g": 1024**3}
    text = text.strip().lower().removesuffix("ib").removesuffix("b")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("assignments", nargs="*", default=["attention_lab"])
    parser.add_argument("--course", type=Path, default=COURSE, help="default: build/course")
    parser.add_argument("--prefix", default=PREFIX, help="the hub's user prefix (alab-)")
    parser.add_argument("--student", action="append", help="only this student (repeat)")
    parser.add_argument("--from", dest="from_dir", type=Path, help="DIR/<student>/*.ipynb")
    parser.add_argument("--venv", type=Path, default=HUB_VENV, help="the kernel's venv")
    parser.add_argument("--memory", type=_size, default=sandbox.Limits.memory, help="2G")
    parser.add_argument("--time-limit", type=int, default=sandbox.Limits.seconds, help="s")
    parser.add_argument("--max-size", type=_size, default=collect.MAX_BYTES, help="20M")
    parser.add_argument("--return-feedback", action="store_true")
    parser.add_argument("--release", action="store_true", help="hand the assignment out")
    args = parser.parse_args(argv)
    course = args.course.absolute()
    preflight(course, args.venv)
    os.umask(0o077)
    if args.release:
        for assignment in args.assignments:
            print("\n".join(release(course, assignment, args)))
        return 0
    status = 0
    for assignment in args.assignments:
        start = time.perf_counter()
        result = grade(course, assignment, args)
        took = time.perf_counter() - start
        print(
            f"{assignment}: {len(result.graded)} graded, {len(result.refused)} refused "
            f"({took:.0f} s)"
        )
        if result.missing:
            print(f"  no notebook saved: {', '.join(sorted(set(result.missing)))}")
        for student, _path, reason in result.refused:
            print(f"  refused {student}: {reason}")
        for student, (score, total) in sorted(result.scores.items()):
            record = result.graded[student]
            print(
                f"  {student}: {score:g} / {total:g} ({record['seconds']:.0f} s, "
                f"{record.get('peak_mib', 0)} MiB at most, kernel as uid {record['uid']}, "
                f"{record['killed']} processes killed after it, none left"
                + (f"; stopped: {record['stopped']}" if record.get("stopped") else "")
                + ")"
            )
        for line in result.failed:
            print(f"  FAILED {line}")
            status = 1
        if result.feedback:
            print(f"  feedback: {course}/feedback/<student>/{assignment}/")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
