"""What the classroom hub's tests share (tests/hub/test_hub.py, tests/hub/test_hub_grading.py,
tests/hub/test_hub_redteam.py, tests/hub/test_hub_redteam2.py,
tests/hub/test_hub_redteam2_alone.py): the
session fixtures ``hub_venv`` (tools/hub_env.sh, run once a session), ``classroom``
(hub/classroom/classroom.py, with the checkout private while the hub tests run),
``shared_hub`` (one hub a session, in each pytest-xdist worker that needs one, for every
test that needs a running one: the teacher logged in, each test making students of its own on
it; stopping it at the end is checked to leave no process, mount, home or system user behind)
and ``red`` (that hub with alice and bob created by the teacher's script, their servers
running, for both red-team rounds), the forms a browser would post, and ``health`` (the
hub's latency as another client sees it).

Needs root (one system user per student), useradd, Node.js, npm and curl; the hub tests are
skipped with the reason otherwise, except in CI (CI=true or ATTENTION_LAB_REQUIRE_HUB=1),
where they must run. ATTENTION_LAB_HUB_DIR runs them against another hub folder (a copy of
an older hub/, to show that an attack worked there); ATTENTION_LAB_HUB_BUILD=0 skips
tools/hub_env.sh.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The test files that share one ``shared_hub`` with alice and bob on it (``red``): under
# pytest-xdist (make test-hub runs with -n 3 --dist loadfile) they are one unit of work, for
# one worker, so one hub serves both red-team rounds in their order, while the grading tests
# run in a second worker and tests/hub/test_hub.py, on a hub of its own, in a third
# (tests/conftest.py, pytest_xdist_make_scheduler).
SHARED_HUB_FILES = ("test_hub_redteam.py", "test_hub_redteam2.py")
REQUIRED = os.environ.get("CI") == "true" or os.environ.get("ATTENTION_LAB_REQUIRE_HUB") == "1"
TEACHER = "teacher"
TEACHER_PW = "teacher-pass-42"  # hub/classroom/classroom.py's ADMIN_PASSWORD
GOOD = "correct-horse-42"


def missing() -> str | None:
    if os.name != "posix" or os.geteuid() != 0:
        return "needs root: the hub runs each student's server as their own system user"
    for tool in ("useradd", "userdel", "runuser", "node", "npm", "curl"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    return None


def _classroom_module():
    # class operations live beside the hub, not in the package: hub/classroom/classroom.py
    if str(REPO / "hub" / "classroom") not in sys.path:
        sys.path.insert(0, str(REPO / "hub" / "classroom"))
    import classroom

    return classroom


@pytest.fixture(scope="session")
def hub_venv(tmp_path_factory) -> Path:
    """tools/hub_env.sh, once a run (the hub's venv with this checkout's attention_lab, the
    chapter and the proxy): every hub test module and the grading tests use the same.
    Request it after checking what the tests need (it does not skip by itself). Under
    pytest-xdist each worker has a session of its own: the first to get here builds, the
    others wait for it (classroom.build_hub_env's lock) and find it done; building again
    would replace the chapter while the first worker's hub copies it into a home."""
    classroom = _classroom_module()
    if os.environ.get("ATTENTION_LAB_HUB_BUILD") == "0":
        return classroom.HUB_VENV
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        classroom.build_hub_env()
        return classroom.HUB_VENV
    done = tmp_path_factory.getbasetemp().parent / "hub_env.done"  # this run's, every worker's
    with open(done.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            classroom.build_hub_env()
            done.write_text(os.environ["PYTEST_XDIST_WORKER"])
    return classroom.HUB_VENV


@pytest.fixture(scope="session")
def classroom(request):
    """hub/classroom/classroom.py, with the hub's venv and proxy built (``hub_venv``) and
    the checkout private for as long as the session runs hub tests."""
    reason = missing()
    if reason:
        if REQUIRED:
            pytest.fail(f"the hub tests must run in CI: {reason}")
        pytest.skip(reason)
    request.getfixturevalue("hub_venv")
    classroom = _classroom_module()
    if os.environ.get("ATTENTION_LAB_HUB_DIR"):
        classroom.HUB_DIR = Path(os.environ["ATTENTION_LAB_HUB_DIR"])
    with classroom.private_checkout():
        yield classroom


# --- what a browser posts ---------------------------------------------------------------------


def run_as(user: str, *cmd: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", user, "--", *cmd], capture_output=True, text=True, **kw)


def xsrf(session, url: str) -> str | None:
    page = session.get(url, timeout=60)
    m = re.search(r'name="_xsrf" value="([^"]+)"', page.text)
    return m.group(1) if m else None


def form(session, url: str, data: dict):
    """POST a hub form with the _xsrf token its page carries."""
    token = xsrf(session, url)
    if token:
        data = dict(data, _xsrf=token)
    return session.post(url, data=data, timeout=60, allow_redirects=False)


def signup(session, hub, name: str, password: str = GOOD):
    fields = {"signup_password": password, "signup_password_confirmation": password}
    return form(session, f"{hub.url}/hub/signup", {"username": name, **fields})


def login(session, hub, name: str, password: str):
    return form(session, f"{hub.url}/hub/login", {"username": name, "password": password})


def logged_in(session, hub) -> bool:
    return session.get(f"{hub.url}/hub/api/user", timeout=60).status_code == 200


def teacher_button(teacher, hub, action: str, name: str) -> None:
    """The teacher's button on /hub/authorize: a POST with the XSRF token. (Where the hub
    has only NativeAuthenticator's GET link, as on the main of issue 31, the link.)"""
    token = xsrf(teacher, f"{hub.url}/hub/authorize")
    if token is None:  # a page of links, no form
        r = teacher.get(f"{hub.url}/hub/{action}/{name}", allow_redirects=False, timeout=120)
    else:
        r = teacher.post(
            f"{hub.url}/hub/{action}/{name}",
            data={"_xsrf": token},
            allow_redirects=False,
            timeout=120,
        )
    assert r.status_code == 302, (action, name, r.status_code, r.text[:300])


def approved(teacher, hub, name: str) -> bool | None:
    """What /hub/authorize says of a sign-up: True, False, or None when it is not there."""
    page = teacher.get(f"{hub.url}/hub/authorize", timeout=60).text
    m = re.search(rf'id="?{name}"?>\s*<td>{name}</td>.*?<td>(Yes|No)</td>', page, re.S)
    return None if m is None else m.group(1) == "Yes"


def wait_no_processes(classroom, uid: int, timeout: float = 30) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = classroom.processes_of(uid)
        if not left:
            return []
        time.sleep(0.5)
    return [(p.pid, " ".join(p.cmdline())) for p in classroom.processes_of(uid)]


def session_from(address: str):
    """A requests session whose connections leave from ``address`` (127.0.0.x: another
    client of the hub, as its proxy sees it; the hub counts waiting sign-ups per address)."""
    import requests
    from requests.adapters import HTTPAdapter

    class FromAddress(HTTPAdapter):
        def init_poolmanager(self, *args, **kwargs):
            kwargs["source_address"] = (address, 0)
            super().init_poolmanager(*args, **kwargs)

    s = requests.Session()
    s.mount("http://", FromAddress())
    return s


# A kernel's cell for attack 10 (tests/test_hub_redteam2*.py): {mib} MiB, every page touched.
ALLOCATE = """
blocks = []
for i in range({mib} // 64):  # 64 MiB at a time, every page touched
    blocks.append(bytearray(64 * 2**20))
    blocks[-1][::4096] = b"x" * len(blocks[-1][::4096])
print("touched", 64 * len(blocks), "MiB")
"""

# The shared hub's limits, smaller than a class's so the attacks on them are quick: memory
# and disk (each home an image of that size), sign-ups waiting per address and in all, and
# how often a user's approval is checked again (30 s in a class).
RED_ENV = {
    "ATTENTION_LAB_HUB_MEM_LIMIT": "1G",
    "ATTENTION_LAB_HUB_DISK_LIMIT": "256M",
    "ATTENTION_LAB_HUB_SIGNUPS_PER_ADDRESS": "3",
    "ATTENTION_LAB_HUB_SIGNUPS_PENDING": "12",
    "ATTENTION_LAB_HUB_AUTH_REFRESH_AGE": "2",
}


@pytest.fixture(scope="session")
def shared_hub(classroom):
    """One hub, started once a session (so once in each pytest-xdist worker that needs it),
    for every test that needs a running hub (tests/hub/test_hub.py, both red-team rounds), with
    the limits of ``RED_ENV``; the teacher logged in. Each test
    makes students of its own on it (``add_students``). Stopping it at the end of the
    session is checked as a class's end: see ``class_hub``."""
    with class_hub(classroom, env=RED_ENV) as hub:
        yield hub


@pytest.fixture(scope="session")
def red(shared_hub):
    """The shared hub for every attack of both red-team rounds (tests/hub/test_hub_redteam.py,
    then tests/hub/test_hub_redteam2.py), with alice and bob created by the teacher's script,
    with tokens and running servers."""
    add_students(shared_hub, ["alice", "bob"])
    return shared_hub


def add_students(hub, names) -> None:
    """Create ``names`` as the teacher's script does (through the REST API), a token each in
    ``hub.tokens``, and start all their servers at once."""
    for name in names:
        hub.create_student(name)
        hub.tokens[name] = hub.token_for(name)
    hub.start_servers(list(names))


def health(hub, n: int) -> list[float]:
    """/hub/health's latency in seconds, from another process (curl), n times 50 ms apart."""
    loop = f"for i in $(seq {n}); do curl -s -o /dev/null -w '%{{time_total}} ' "
    loop += f"{hub.url}/hub/health; sleep 0.05; done"
    out = subprocess.run(["bash", "-c", loop], capture_output=True, text=True).stdout
    return [float(x) for x in out.split()]


def _described(procs) -> list[tuple[int, str]]:
    """(pid, command line) of each process still running."""
    import psutil

    found = []
    for p in procs:
        with contextlib.suppress(psutil.Error):
            found.append((p.pid, " ".join(p.cmdline())[:120]))
    return found


@contextlib.contextmanager
def class_hub(classroom, students=(), env: dict | None = None):
    """A running hub, the teacher logged in (``hub.teacher``, a requests session), and
    ``students`` created by the teacher's script with a token each (``hub.tokens``) and a
    running server. On exit, the end of a class, checked: the hub stopped (SIGTERM, as
    Ctrl+C), with it the proxy and every server still running, and no process of a student
    left, no home mounted; then, once running_hub has deleted the class, no system user and
    no home of theirs left."""
    import psutil
    import requests

    with classroom.running_hub(env=env) as hub:
        teacher = requests.Session()
        r = login(teacher, hub, TEACHER, TEACHER_PW)
        assert r.status_code == 302 and logged_in(teacher, hub), r.text[-500:]
        hub.teacher, hub.login_cookies = teacher, r.raw.headers.getlist("Set-Cookie")
        hub.tokens = {}
        add_students(hub, students)
        yield hub
        tree = psutil.Process(hub.proc.pid).children(recursive=True)
        users = classroom.users_with_prefix(hub.prefix)
        classroom.stop_hub(hub)
        _, alive = psutil.wait_procs(tree, timeout=15)
        alive = _described(alive)  # (before running_hub's clean-up kills what is left)
        # stopping the hub stopped every server: no process of a student, no home mounted
        left = {pw.pw_name: classroom.processes_of(pw.pw_uid) for pw in users}
        mounted = [pw.pw_dir for pw in users if os.path.ismount(pw.pw_dir)]
        prefix = hub.prefix
    assert hub.proc.returncode is not None, "the hub did not stop"
    assert not alive, f"left behind by the hub: {alive}"
    assert not [(name, [p.pid for p in procs]) for name, procs in left.items() if procs]
    assert not mounted, f"homes left mounted after the hub stopped: {mounted}"
    # running_hub removed the system users and their homes; nothing of the class may be left
    assert not classroom.users_with_prefix(prefix), "system users left behind"
    assert not [pw.pw_dir for pw in users if os.path.exists(pw.pw_dir)], "homes left behind"
