"""Grading a class in the sandbox (hub/grading/grade.py, `make grade`), attacked as a student
would (issue 38, attacks 1-5), and the honest and wrong answers graded in both editions.

One module-scoped run, as a teacher on the class hub would do it: the course built as
`make assignment` builds it (en and zh), the assignment handed out into the students' homes,
the students' answers saved there as each student, then one grading run of both assignments:

* bob answers everything (the solutions) in both editions; wrong gives the known-wrong answer
  of tests/build/test_assignment.py in the first exercise of each lesson (both editions);
* mallory's first answer cell is an attack (1-3): it reports its uid, reads the hub's cookie
  secret, bob's notebook (home and submitted/) and the solutions, writes a file into /tmp and
  the course folder, connects to a TCP port of the machine, starts two detached processes
  (one that sleeps, one that waits until autograde has finished and then rewrites
  gradebook.db: mallory full marks, bob none), prints what it read, and displays a
  ``<script>``;
* alice's exercises.ipynb is a link to bob's notebook and her notes.txt a link to the cookie
  secret (attack 4);
* the course folder lies in a folder every user can enter, as build/course lies in a
  checkout (attack 5).

The students are system users made here as the hub makes them (``<prefix><name>``, a home of
mode 700), and the hub's state folder is a root-only folder with a cookie secret as the hub
writes it: no hub server is needed to grade. ``ATTENTION_LAB_GRADING_WORKFLOW=guide`` grades
the same class the way teaching/grading.md said before `make grade` (root `cp` of each
returned notebook into submitted/, `nbgrader autograde` and `nbgrader generate_feedback` as
root), to show what each attack achieved there; run it from a checkout of that commit (the
tests of attacks 1-5 then fail, and print what the attack got).

Needs root, bwrap, setpriv, a memory cgroup and the hub's venv (tools/hub_env.sh builds it,
once a session for every hub test: tests/hub_helpers.py's ``hub_venv``; ATTENTION_LAB_HUB_BUILD=0
skips that); skipped otherwise, except where ATTENTION_LAB_REQUIRE_HUB=1
or CI=true.
"""

from __future__ import annotations

import contextlib
import html
import io
import json
import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest

from tests.build import (
    test_assignment as ta,  # the assignment's own fixtures: submission(), wrong_answers()
)

pytestmark = pytest.mark.hub  # real system users: only `make test-hub`

REPO = Path(__file__).resolve().parents[2]
REQUIRED = os.environ.get("CI") == "true" or os.environ.get("ATTENTION_LAB_REQUIRE_HUB") == "1"
WORKFLOW = os.environ.get("ATTENTION_LAB_GRADING_WORKFLOW", "grader")  # or "guide"
EN, ZH = ta.ASSIGNMENT, ta.ZH_ASSIGNMENT
NOTEBOOK = ta.NOTEBOOK
HUB_VENV = Path(os.environ.get("HUB_VENV", "/opt/attention-lab-hub/venv"))
TOKEN = secrets.token_hex(6)  # names this run's attack processes and files
GREEDY_BYTES = 3 * 1024**3  # more than grade.py's default memory limit, 2 GiB


def _missing() -> str | None:
    if os.name != "posix" or os.geteuid() != 0:
        return "needs root: grading creates a throwaway user for each notebook"
    tools = ["useradd", "userdel", "runuser"]
    if WORKFLOW == "grader":
        tools += ["bwrap", "setpriv", "prlimit", "timeout"]
    for tool in tools:
        if shutil.which(tool) is None:
            return f"needs {tool} (Debian: apt-get install bubblewrap)"
    if WORKFLOW == "grader":
        sys.path.insert(0, str(REPO / "hub" / "grading"))
        import sandbox

        if sandbox.memory_controller() is None:
            return "needs a memory cgroup (v1 memory controller or v2 memory.max)"
    return None


def _run_as(user: str, *cmd: str, data: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", user, "--", *cmd], input=data, capture_output=True)


def _save_as(user: str, path: str, data: bytes) -> None:
    script = 'umask 077; mkdir -p "$(dirname "$1")" && cat > "$1"'
    r = _run_as(user, "sh", "-c", script, "sh", path, data=data)
    assert r.returncode == 0, r.stderr


def _processes_with(token: str) -> list[tuple[int, int, str]]:
    """(pid, uid, command line) of every live process whose command line holds ``token``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        if token in cmd and "\nState:\tZ" not in status:
            uid = int(re.search(r"^Uid:\s+(\d+)", status, re.M).group(1))
            found.append((int(entry), uid, cmd.strip()))
    return found


# --- mallory's answer cell: attacks 1, 2 and 3 -----------------------------------------------

REWRITER = """
import os, sqlite3, sys, time
gradebook, done = sys.argv[1], sys.argv[2]
course = os.path.dirname(gradebook)
def grading():  # is an nbgrader autograde running in this course folder?
    for pid in os.listdir("/proc"):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd == course and b"nbgrader" in cmd and b"autograde" in cmd:
            return True
    return False
end = time.time() + 300
time.sleep(2)
while time.time() < end and grading():
    time.sleep(0.2)
db = sqlite3.connect(gradebook, timeout=30)
for student, full in (("mallory", 1), ("bob", 0)):
    db.execute(
        "UPDATE grade SET auto_score = CASE WHEN ? THEN (SELECT max_score FROM grade_cells "
        "WHERE grade_cells.id = grade.cell_id) ELSE 0 END, manual_score = NULL "
        "WHERE notebook_id IN (SELECT sn.id FROM submitted_notebook sn JOIN "
        "submitted_assignment sa ON sn.assignment_id = sa.id WHERE sa.student_id = ?)",
        (full, student),
    )
db.commit()
open(done, "w").write("rewritten")
"""

ATTACK = """\
# mallory's answer: everything a kernel running as root could do
import json, os, socket, subprocess, sys

_got = {{"uid": os.getuid()}}


def _try(label, action):
    try:
        _got[label] = action()
    except Exception as e:
        _got[label] = "refused: " + type(e).__name__


_try("cookie_secret", lambda: open({secret!r}).read().strip())
_try("bob_home", lambda: open({bob_home!r}).read())
_try("bob_submitted", lambda: open({bob_submitted!r}).read())
_try("solutions", lambda: open({solutions!r}).read()[:200])
_try("tmp_file", lambda: open({tmp_file!r}, "w").write("mallory was here"))
_try("course_file", lambda: open({course_file!r}, "w").write("mallory was here"))
_try("network", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=3).close())
_quiet = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(900)", {sleeper!r}],
                 start_new_session=True, **_quiet)
subprocess.Popen([sys.executable, "-c", {rewriter!r}, {gradebook!r}, {done!r}],
                 start_new_session=True, **_quiet)
print("PRINTED-DURING-GRADING", json.dumps(_got))

from IPython.display import HTML, display

display(HTML("<script>alert('mallory {token}')</script><b>mallory's own page</b>"))
"""


@dataclass
class Class:
    """What the grading run left behind, read after it (the same for both workflows)."""

    course: Path
    prefix: str
    secret: str
    bob_marker: str
    output: str = ""  # the grader's (or the guide's commands') output
    seconds: float = 0.0
    points: dict[str, dict[str, float]] = field(default_factory=dict)  # assignment -> id -> pts
    scores: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    feedback: dict[tuple[str, str], str] = field(default_factory=dict)  # raw HTML
    wrong: dict[str, list] = field(default_factory=dict)  # assignment -> [ta.Wrong]
    mallory: dict = field(default_factory=dict)  # what her cell printed
    mallory_outputs: str = ""  # every output of her autograded notebook, as JSON
    connections: list = field(default_factory=list)  # who reached the TCP port
    host_files: dict[str, bool] = field(default_factory=dict)  # planted file -> exists
    survivors: list = field(default_factory=list)  # her processes after grading
    rewritten: bool = False


def _listen() -> tuple[socket.socket, list]:
    """A TCP port on 127.0.0.1 that records each connection (the machine's network)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.5)
    seen: list = []

    def accept():
        while True:
            try:
                conn, peer = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            seen.append(peer)
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    return server, seen


def _build_course(parent: Path) -> Path:
    """As `make assignment` and `make assignment LANG_EDITION=zh-CN` do: make_assignment's
    write_course (which makes the folder private), then nbgrader generate_assignment under
    umask 077 (here once for both assignments)."""
    course = parent / "course"
    for edition, (solutions, assignment) in ta.make_assignment.EDITION_DEFAULTS.items():
        ta.make_assignment.write_course(course, solutions, assignment, edition=edition)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    script = '"$1" -m nbgrader generate_assignment "attention_lab*" --force'
    if WORKFLOW == "grader":  # the Makefile of the commit before had no umask
        script = "umask 077; " + script
    r = subprocess.run(
        ["sh", "-c", script, "sh", sys.executable],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert (course / "release" / EN / NOTEBOOK).exists() and (
        course / "release" / ZH / NOTEBOOK
    ).exists()
    return course


def _add_student(prefix: str, name: str) -> tuple[str, Path]:
    user = prefix + name
    subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", user], check=True)
    home = Path(pwd.getpwnam(user).pw_dir)
    os.chmod(home, 0o700)  # as the hub makes each home
    return user, home


def _grade_as_the_guide_said(c: Class, homes: dict[str, Path]) -> str:
    """teaching/grading.md before `make grade`: as root, put each returned notebook at
    submitted/<student>/<assignment>/ (cp), then nbgrader autograde and generate_feedback."""
    log = []
    for assignment in (EN, ZH):
        for student, home in homes.items():
            src = home / "assignments" / assignment
            if not src.exists():
                continue
            dst = c.course / "submitted" / student / assignment
            dst.mkdir(parents=True, exist_ok=True)
            r = subprocess.run(["sh", "-c", f"cp {src}/* {dst}/"], capture_output=True, text=True)
            log.append(f"cp {src}/* {dst}/: {r.returncode} {r.stderr.strip()}")
        for command in ("autograde", "generate_feedback"):
            ta._nbgrader(c.course, command, assignment)
            log.append(f"nbgrader {command} {assignment}")
    return "\n".join(log)


def _grade_with_the_grader(c: Class) -> str:
    cmd = [sys.executable, str(REPO / "hub" / "grading" / "grade.py"), "--course", str(c.course)]
    cmd += ["--prefix", c.prefix, "--venv", str(HUB_VENV), "--return-feedback", EN, ZH]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"grade.py failed:\n{r.stdout}\n{r.stderr[-3000:]}"
    return r.stdout


def _read_results(c: Class) -> None:
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(f"sqlite:///{c.course / 'gradebook.db'}") as gb:
        for assignment in (EN, ZH):
            for student in ("bob", "wrong", "mallory", "alice", "greedy"):
                try:
                    nb = gb.find_submission_notebook(Path(NOTEBOOK).stem, assignment, student)
                except MissingEntry:
                    continue
                c.scores[(assignment, student)] = {g.name: g.score for g in nb.grades}
                page = c.course / "feedback" / student / assignment / "exercises.html"
                if page.exists():
                    c.feedback[(assignment, student)] = page.read_text()
    graded = c.course / "autograded" / "mallory" / EN / NOTEBOOK
    if graded.exists():
        nb = nbformat.read(graded, as_version=4)
        c.mallory_outputs = json.dumps([cell.get("outputs", []) for cell in nb.cells])
        for cell in nb.cells:
            for out in cell.get("outputs", []):
                text = out.get("text", "")
                if out.get("output_type") == "stream" and "PRINTED-DURING-GRADING" in text:
                    c.mallory = json.loads(text.split("PRINTED-DURING-GRADING", 1)[1])


@pytest.fixture(scope="module")
def graded(request):
    reason = _missing()
    if reason:
        if REQUIRED:
            pytest.fail(f"the grading tests must run in CI: {reason}")
        pytest.skip(reason)
    prefix = f"alab-gt{secrets.token_hex(2)}-"
    parent = Path(tempfile.mkdtemp(prefix="attention-lab-grading-test-"))
    os.chmod(parent, 0o755)  # every user may enter it, as a checkout's build/
    state = Path(tempfile.mkdtemp(prefix="attention-lab-hub-"))  # root's, mode 700
    secret = secrets.token_hex(32)
    (state / "jupyterhub_cookie_secret").write_text(secret + "\n")
    os.chmod(state / "jupyterhub_cookie_secret", 0o600)
    server, connections = _listen()
    planted = {
        "tmp_file": Path(f"/tmp/attention-lab-grading-{TOKEN}-root-file"),
        "done": Path(f"/tmp/attention-lab-grading-{TOKEN}-gradebook-rewritten"),
    }
    homes: dict[str, Path] = {}
    try:
        course = _build_course(parent)
        planted["course_file"] = course / f"mallory-{TOKEN}"
        c = Class(course, prefix, secret, f"bob-private-{TOKEN}")
        names = ("bob", "wrong", "mallory", "alice", "greedy")
        users = {name: _add_student(prefix, name) for name in names}
        homes = {name: home for name, (_, home) in users.items()}
        for assignment, edition in ((EN, "en"), (ZH, "zh-CN")):
            source = nbformat.read(course / "source" / assignment / NOTEBOOK, as_version=4)
            release = nbformat.read(course / "release" / assignment / NOTEBOOK, as_version=4)
            wrong = ta.wrong_answers(source)
            import attention_lab

            attention_lab.set_language("zh_CN" if edition == "zh-CN" else "en")
            try:
                with contextlib.redirect_stdout(io.StringIO()):  # the checkers print verdicts
                    for w in wrong:
                        w.message = ta.checker_message(source, w)
            finally:
                attention_lab.set_language("en")
            c.wrong[assignment] = wrong
            c.points[assignment] = {gid: p for gid, _, p in ta.make_assignment.graded(source)}
            answers = {
                "bob": ta.submission(release, source),
                "wrong": ta.submission(release, source, wrong),
            }
            first = next(cell for cell in answers["bob"].cells if ta._meta(cell).get("solution"))
            first.source += f"\n# {c.bob_marker}\n"
            if assignment == EN:  # greedy's first answer takes more than the memory limit
                answers["greedy"] = nbformat.from_dict(release)
                cell = next(x for x in answers["greedy"].cells if ta._meta(x).get("solution"))
                cell.source = f"_hog = bytearray({GREEDY_BYTES})  # 3 GiB, touched\n"
            if assignment == EN:  # mallory's attack: her first answer cell
                answers["mallory"] = nbformat.from_dict(release)
                cell = next(x for x in answers["mallory"].cells if ta._meta(x).get("solution"))
                cell.source = ATTACK.format(
                    secret=str(state / "jupyterhub_cookie_secret"),
                    bob_home=str(homes["bob"] / "assignments" / EN / NOTEBOOK),
                    bob_submitted=str(course / "submitted" / "bob" / EN / NOTEBOOK),
                    solutions=str(course / "source" / EN / NOTEBOOK),
                    tmp_file=str(planted["tmp_file"]),
                    course_file=str(planted["course_file"]),
                    port=server.getsockname()[1],
                    sleeper=f"mallory-sleeper-{TOKEN}",
                    rewriter=REWRITER + f"# mallory-rewriter-{TOKEN}\n",
                    gradebook=str(course / "gradebook.db"),
                    done=str(planted["done"]),
                    token=TOKEN,
                )
            for name, nb in answers.items():
                path = homes[name] / "assignments" / assignment / NOTEBOOK
                _save_as(users[name][0], str(path), nbformat.writes(nb).encode())
        # alice: links to bob's notebook and to the hub's cookie secret (attack 4)
        alice_dir = homes["alice"] / "assignments" / EN
        bob_nb = homes["bob"] / "assignments" / EN / NOTEBOOK
        links = ((bob_nb, NOTEBOOK), (state / "jupyterhub_cookie_secret", "notes.txt"))
        for target, name in links:
            script = f'mkdir -p {alice_dir} && ln -sf "$1" "$2"'
            r = _run_as(
                users["alice"][0], "sh", "-c", script, "sh", str(target), str(alice_dir / name)
            )
            assert r.returncode == 0, r.stderr
        start = time.perf_counter()
        if WORKFLOW == "guide":
            c.output = _grade_as_the_guide_said(c, homes)
        else:
            # the kernels' venv, with this checkout's attention_lab (tests/hub_helpers.py:
            # once a run; asked for only here, so that the class above is made while the
            # other pytest-xdist worker builds it)
            request.getfixturevalue("hub_venv")
            c.output = _grade_with_the_grader(c)
        c.seconds = time.perf_counter() - start
        # the rewriter waits for autograde to end: while it lives, give it time to strike
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline and not planted["done"].exists():
            if not [p for p in _processes_with(TOKEN) if "rewriter" in p[2]]:
                break
            time.sleep(0.2)
        c.rewritten = planted["done"].exists()
        c.survivors = _processes_with(TOKEN)
        c.connections = list(connections)
        c.host_files = {str(p): p.exists() for k, p in planted.items() if k != "done"}
        _read_results(c)
        print(f"\n{WORKFLOW}: graded in {c.seconds:.0f} s\n{c.output}")
        yield c
    finally:
        server.close()
        for pid, _uid, _cmd in _processes_with(TOKEN):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        for path in planted.values():
            path.unlink(missing_ok=True)
        for name in homes:
            subprocess.run(["userdel", "--remove", prefix + name], capture_output=True)
        shutil.rmtree(parent, ignore_errors=True)
        shutil.rmtree(state, ignore_errors=True)


# --- the attacks -------------------------------------------------------------------------------


def test_a_students_cell_runs_with_no_rights_beyond_the_submission(graded):
    """Attack 1: mallory's answer cell, graded, reads nothing of anyone else's, writes
    nothing outside its sandbox, reaches no network, and leaves no process behind."""
    got = graded.mallory
    print(f"\nmallory's cell during grading: {json.dumps(got)[:600]}")
    print(f"connections to the machine's port: {graded.connections}; files: {graded.host_files}")
    print(f"her processes after grading: {graded.survivors}")
    assert got, "mallory's cell did not run"
    students = {pwd.getpwnam(graded.prefix + n).pw_uid for n in ("bob", "wrong", "alice")}
    assert got["uid"] != 0 and got["uid"] not in students
    for label in ("cookie_secret", "bob_home", "bob_submitted", "solutions", "course_file"):
        assert str(got[label]).startswith("refused:"), (label, str(got[label])[:200])
    assert str(got["network"]).startswith("refused:") and graded.connections == []
    assert graded.secret not in graded.mallory_outputs
    assert graded.bob_marker not in graded.mallory_outputs
    assert not any(graded.host_files.values()), graded.host_files
    assert graded.survivors == []


def test_nothing_the_student_started_rewrites_the_gradebook(graded):
    """Attack 2: mallory's detached process waits for autograde to end, then rewrites
    gradebook.db (mallory full marks, bob none). It must not live that long."""
    en = graded.points[EN]
    mallory, bob = graded.scores[(EN, "mallory")], graded.scores[(EN, "bob")]
    print(
        f"\nafter grading: mallory {sum(mallory.values()):g}, bob {sum(bob.values()):g} of "
        f"{sum(en.values()):g}; the rewriter struck: {graded.rewritten}"
    )
    assert not graded.rewritten
    assert bob == en
    assert sum(mallory.values()) == 0  # no answer, attack cell aside: nothing passes
    assert graded.survivors == []


def test_the_feedback_holds_only_the_verdicts_and_the_scores(graded):
    """Attack 3: mallory's feedback carries no <script> of hers, nothing her cell printed,
    and no secret."""
    page = graded.feedback[(EN, "mallory")]
    found = {
        "script": "<script" in page.lower(),
        "printed": "PRINTED-DURING-GRADING" in page,
        "secret": graded.secret in page,
        "her html": "mallory's own page" in html.unescape(page),
    }
    print(f"\nmallory's feedback page ({len(page)} bytes): {found}")
    assert not any(found.values()), found
    # what it holds: her score and each check's verdict
    assert f'<b id="total">0 / {sum(graded.points[EN].values()):g}</b>' in page
    assert len(_rows(page)) == len(graded.points[EN])


def test_links_are_refused_at_collection(graded):
    """Attack 4: alice's exercises.ipynb links to bob's notebook, her notes.txt to the
    hub's cookie secret; neither reaches submitted/."""
    submitted = graded.course / "submitted"
    leaked = []
    for path in submitted.rglob("*"):
        if path.is_symlink():
            leaked.append(f"{path}: a link")
        elif path.is_file():
            text = path.read_text(errors="replace")
            if graded.secret in text:
                leaked.append(f"{path}: the cookie secret")
            if graded.bob_marker in text and "/bob/" not in str(path):
                leaked.append(f"{path}: bob's notebook")
    print(f"\nin submitted/ after collection: {leaked or 'nothing of bob or the hub'}")
    assert leaked == []
    assert not (submitted / "alice").exists()
    assert (EN, "alice") not in graded.scores
    assert re.search(r"refused alice: .*exercises\.ipynb is a symbolic link", graded.output)


def test_the_course_folder_is_private(graded):
    """Attack 5: a student cannot read the solutions, the gradebook or another student's
    submission; the grader refuses a course folder that others can read."""
    user = graded.prefix + "mallory"
    targets = [
        graded.course / "source" / EN / NOTEBOOK,
        graded.course / "gradebook.db",
        graded.course / "submitted" / "bob" / EN / NOTEBOOK,
    ]
    read = [str(t) for t in targets if _run_as(user, "head", "-c", "1", str(t)).returncode == 0]
    print(
        f"\n{user} could read: {read or 'nothing'} (course mode {graded.course.stat().st_mode:o})"
    )
    assert read == []
    assert graded.course.stat().st_mode & 0o077 == 0
    sys.path.insert(0, str(REPO / "hub" / "grading"))
    import grade

    os.chmod(graded.course, 0o755)
    try:
        with pytest.raises(SystemExit) as refused:
            grade.main(["--course", str(graded.course), "--venv", str(HUB_VENV), EN])
    finally:
        os.chmod(graded.course, 0o700)
    print(f"grade.py on a readable course folder: {refused.value.code}")
    assert f"{graded.course} is mode 755" in str(refused.value.code)
    assert f"chmod 700 {graded.course}" in str(refused.value.code)
    assert grade.course_problem(graded.course) is None  # mode 700 again: accepted


# --- honest and wrong answers, both editions --------------------------------------------------


def _rows(page: str) -> dict[str, tuple[str, str]]:
    """grade_id -> (score text, verdict text) of a feedback page of grade.py."""
    rows = re.findall(
        r'<tr id="([^"]+)" class="[^"]*">\s*<td>[^<]*</td><td>([^<]*)</td>\s*<td><pre>(.*?)</pre>',
        page,
        re.S,
    )
    return {gid: (html.unescape(score), html.unescape(text)) for gid, score, text in rows}


@pytest.mark.skipif(WORKFLOW != "grader", reason="the guide's path: tests/build/test_assignment.py")
@pytest.mark.parametrize("assignment", [EN, ZH])
def test_the_solutions_get_full_marks_in_the_sandbox(graded, assignment):
    points = graded.points[assignment]
    assert graded.scores[(assignment, "bob")] == points
    rows = _rows(graded.feedback[(assignment, "bob")])
    assert set(rows) == set(points)
    passed = "✅ 通过" if assignment == ZH else "✅ passed"
    for gid, (score, text) in rows.items():
        assert score == f"{points[gid]:g} / {points[gid]:g}" and text.startswith(passed), gid


@pytest.mark.skipif(WORKFLOW != "grader", reason="the guide's path: tests/build/test_assignment.py")
@pytest.mark.parametrize("assignment", [EN, ZH])
def test_wrong_answers_lose_exactly_their_points_with_their_mistakes(graded, assignment):
    points, wrong = graded.points[assignment], graded.wrong[assignment]
    expected = dict(points)
    for w in wrong:
        expected[w.grade_id] = 0
    assert graded.scores[(assignment, "wrong")] == expected
    rows = _rows(graded.feedback[(assignment, "wrong")])
    not_yet = "❌ 还没通过：" if assignment == ZH else "❌ not yet: "
    for w in wrong:
        score, text = rows[w.grade_id]
        assert score == f"0 / {points[w.grade_id]:g}", w.grade_id
        assert text.startswith(f"{not_yet}{w.message}"), (w.grade_id, text)
    # and the page went back to the student, written as the student
    returned = (
        Path(pwd.getpwnam(graded.prefix + "wrong").pw_dir)
        / "assignments"
        / assignment
        / "feedback.html"
    )
    assert returned.read_text() == graded.feedback[(assignment, "wrong")]
    assert returned.stat().st_uid == pwd.getpwnam(graded.prefix + "wrong").pw_uid


# --- the limits and the collector, each seen holding ------------------------------------------


@pytest.mark.skipif(WORKFLOW != "grader", reason="the guide had no limits")
def test_a_kernel_over_the_memory_limit_scores_nothing_and_grading_goes_on(graded):
    """greedy's first answer allocates 3 GiB: the cgroup's limit (2 GiB) stops the kernel,
    every test cell after it scores 0 with the reason in the feedback, and the students
    graded after greedy are graded as usual."""
    assert sum(graded.scores[(EN, "greedy")].values()) == 0
    assert re.search(r"greedy: 0 / \d+ .*stopped: ", graded.output), graded.output
    rows = _rows(graded.feedback[(EN, "greedy")])
    stopped = [gid for gid, (_, text) in rows.items() if "KernelStopped" in text]
    assert stopped == list(graded.points[EN])  # the first answer is before every test
    assert graded.scores[(EN, "wrong")] != {} and graded.scores[(EN, "mallory")] != {}


def _sandbox():
    sys.path.insert(0, str(REPO / "hub" / "grading"))
    import sandbox

    return sandbox


def _in_sandbox(limits, code: str, timeout: float = 60) -> tuple[subprocess.CompletedProcess, dict]:
    """Run python code in a fresh Sandbox; also return what was left after it ended."""
    sandbox = _sandbox()
    python = str(HUB_VENV / "bin" / "python")
    with sandbox.Sandbox(HUB_VENV, limits) as box:
        start = time.monotonic()
        r = subprocess.run(
            box.command([python, "-c", code]), capture_output=True, text=True, timeout=timeout
        )
        seconds = time.monotonic() - start
        user, uid, groups = box.user, box.uid, list(box.cgroups)
    left = {
        "processes": sandbox.processes_of(uid),
        "cgroups": [g for g in groups if g.exists()],
        "seconds": seconds,
    }
    with pytest.raises(KeyError):
        pwd.getpwnam(user)  # the throwaway user is gone
    return r, left


@pytest.mark.skipif(WORKFLOW != "grader", reason="the guide had no sandbox")
def test_the_sandbox_limits_hold(graded):
    sandbox = _sandbox()
    mib = 1024**2
    small = sandbox.Limits(memory=256 * mib, seconds=3, processes=32)
    allocate = "x = bytearray({n} * 1024**2); print('allocated', len(x) // 1024**2)"
    # memory: 100 MiB fits under 256 MiB, 1 GiB does not
    ok, _ = _in_sandbox(small, allocate.format(n=100))
    over, left = _in_sandbox(small, allocate.format(n=1024))
    print(f"\nmemory 256 MiB: 100 MiB -> {ok.returncode} {ok.stdout.strip()!r}; 1 GiB -> "
          f"{over.returncode} {over.stdout.strip()!r}")  # fmt: skip
    assert ok.returncode == 0 and "allocated 100" in ok.stdout
    assert over.returncode != 0 and "allocated" not in over.stdout
    # time: a loop is stopped at the limit; a short job is not
    quick, _ = _in_sandbox(small, "import time; time.sleep(0.5); print('done')")
    loop, left = _in_sandbox(small, "while True: pass")
    print(f"time 3 s: a busy loop stopped after {left['seconds']:.1f} s ({loop.returncode})")
    assert quick.returncode == 0 and "done" in quick.stdout
    assert loop.returncode != 0 and left["seconds"] < 15
    # processes: 32 processes and threads in all
    spawn = (
        "import subprocess\nok = failed = 0\nfor _ in range({n}):\n"
        "    try:\n        subprocess.Popen(['sleep', '30']); ok += 1\n"
        "    except OSError:\n        failed += 1\nprint(ok, failed)"
    )
    few, _ = _in_sandbox(small, spawn.format(n=5))
    many, left = _in_sandbox(small, spawn.format(n=60))
    print(f"processes 32: 5 -> {few.stdout.strip()}; 60 -> {many.stdout.strip()}")
    assert few.stdout.split() == ["5", "0"]
    assert int(many.stdout.split()[1]) > 0
    assert left["processes"] == [] and left["cgroups"] == []  # the sleeps died with it


@pytest.mark.skipif(WORKFLOW != "grader", reason="the guide had no sandbox")
def test_the_sandbox_sees_only_its_allow_list(graded):
    server, seen = _listen()
    port = server.getsockname()[1]
    code = textwrap.dedent(
        f"""
        import os, socket
        print(sorted(os.listdir("/")))
        print([p for p in ("/home", "/root", "/var", {str(REPO)!r}, {str(graded.course)!r})
               if os.path.exists(p)])
        print(len([p for p in os.listdir("/proc") if p.isdigit()]))
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=3)
            print("connected")
        except OSError as e:
            print("refused", type(e).__name__)
        """
    )
    try:
        r, left = _in_sandbox(_sandbox().Limits(), code)
    finally:
        server.close()
    top, present, processes, network = r.stdout.strip().split("\n")
    print(f"\n/ in the sandbox: {top}; present: {present}; processes seen: {processes}; {network}")
    assert r.returncode == 0, r.stderr
    assert set(eval(top)) <= {"bin", "dev", "etc", "lib", "lib64", "opt", "proc", "run", "sbin",
                               "tmp", "usr"}  # fmt: skip
    assert eval(present) == [] and int(processes) <= 3
    assert network.startswith("refused") and seen == []


@pytest.mark.skipif(WORKFLOW != "grader", reason="the guide had no collector")
def test_the_collector_refuses_what_a_student_can_plant():
    """Beyond attack 4's links: a link to a folder, a FIFO, a hard link to a file the
    student does not own, a file over the size limit, a file that is not a notebook; the
    student's own notebook is read (the control)."""
    sys.path.insert(0, str(REPO / "hub" / "grading"))
    import collect

    user, home = _add_student(f"alab-gc{secrets.token_hex(2)}-", "eve")
    other = Path(tempfile.mkdtemp())  # root's
    try:
        uid = pwd.getpwnam(user).pw_uid
        base = home / "assignments"
        notebook = nbformat.writes(nbformat.v4.new_notebook()).encode()
        (other / "secret.ipynb").write_bytes(notebook)
        cases = {
            "good": ("a/exercises.ipynb", None),
            "linked folder": ("b/exercises.ipynb", "folder link"),
            "fifo": ("c/exercises.ipynb", "regular"),
            "hard link": ("d/exercises.ipynb", "uid 0"),
            "too big": ("e/exercises.ipynb", "more than"),
            "not a notebook": ("f/exercises.ipynb", "not a notebook"),
        }
        script = (
            f"umask 077; cd {base} && mkdir a c d e f && cat > a/exercises.ipynb && "
            f"ln -s {other} b && mkfifo c/exercises.ipynb && "
            "truncate -s 21M e/exercises.ipynb && echo 'hello' > f/exercises.ipynb"
        )
        _run_as(user, "mkdir", "-p", str(base))
        r = _run_as(user, "sh", "-c", script, data=notebook)
        assert r.returncode == 0, r.stderr
        os.link(other / "secret.ipynb", base / "d" / "exercises.ipynb")  # root's file
        results = {}
        for label, (path, _) in cases.items():
            found = collect.collect(
                [collect.Student("eve", home, uid, ("assignments", *path.split("/")[:-1]))],
                ["exercises.ipynb"],
            )
            results[label] = found.refused[0][2] if found.refused else "collected"
        print(f"\ncollector: {json.dumps(results, indent=1)}")
        assert results["good"] == "collected"
        assert "symbolic link" in results["linked folder"]
        assert "not a regular file" in results["fifo"]
        assert "belongs to uid 0" in results["hard link"]
        assert "more than" in results["too big"]
        assert "not a notebook" in results["not a notebook"]
    finally:
        subprocess.run(["userdel", "--remove", user], capture_output=True)
        shutil.rmtree(other, ignore_errors=True)
