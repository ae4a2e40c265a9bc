"""What the classroom hub's tests share (tests/test_hub.py, tests/test_hub_redteam.py,
tests/test_hub_redteam2.py): the session fixtures ``classroom`` (hub/classroom/classroom.py,
with the hub's venv built once and the checkout private while the hub tests run) and
``red`` (one hub for both red-team rounds: ``class_hub`` with the teacher logged in and
alice and bob created by the teacher's script, their servers running), the forms a browser
would post, and ``health`` (the hub's latency as another client sees it).

Needs root (one system user per student), useradd, Node.js, npm and curl; the hub tests are
skipped with the reason otherwise, except in CI (CI=true or ATTENTION_LAB_REQUIRE_HUB=1),
where they must run. ATTENTION_LAB_HUB_DIR runs them against another hub folder (a copy of
an older hub/, to show that an attack worked there); ATTENTION_LAB_HUB_BUILD=0 skips
tools/hub_env.sh.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
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


@pytest.fixture(scope="session")
def classroom():
    """hub/classroom/classroom.py, with the hub's venv and proxy built (once a session) and
    the checkout private for as long as the session runs hub tests."""
    reason = missing()
    if reason:
        if REQUIRED:
            pytest.fail(f"the hub tests must run in CI: {reason}")
        pytest.skip(reason)
    # class operations live beside the hub, not in the package: hub/classroom/classroom.py
    sys.path.insert(0, str(REPO / "hub" / "classroom"))
    import classroom

    if os.environ.get("ATTENTION_LAB_HUB_BUILD") != "0":
        classroom.build_hub_env()
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


# The red-team hub's limits, smaller than a class's so the attacks on them are quick: memory
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
def red(classroom):
    """One hub for every attack of both red-team rounds (tests/test_hub_redteam.py, then
    tests/test_hub_redteam2.py): the teacher logged in; alice and bob created by the
    teacher's script, with tokens and running servers; the limits of ``RED_ENV``."""
    with class_hub(classroom, env=RED_ENV) as hub:
        yield hub


def health(hub, n: int) -> list[float]:
    """/hub/health's latency in seconds, from another process (curl), n times 50 ms apart."""
    loop = f"for i in $(seq {n}); do curl -s -o /dev/null -w '%{{time_total}} ' "
    loop += f"{hub.url}/hub/health; sleep 0.05; done"
    out = subprocess.run(["bash", "-c", loop], capture_output=True, text=True).stdout
    return [float(x) for x in out.split()]


@contextlib.contextmanager
def class_hub(classroom, students=("alice", "bob"), env: dict | None = None):
    """A running hub, the teacher logged in (``hub.teacher``, a requests session), and
    ``students`` created by the teacher's script with a token each (``hub.tokens``) and a
    running server. On exit: the hub stopped, and no system user or process of the class
    left."""
    import requests

    with classroom.running_hub(env=env) as hub:
        teacher = requests.Session()
        r = login(teacher, hub, TEACHER, TEACHER_PW)
        assert r.status_code == 302 and logged_in(teacher, hub), r.text[-500:]
        hub.teacher, hub.login_cookies = teacher, r.raw.headers.getlist("Set-Cookie")
        hub.tokens = {}
        for name in students:
            hub.create_student(name)
            hub.tokens[name] = hub.token_for(name)
        for name in students:  # all at once, as a class does
            assert hub.api("POST", f"/users/{name}/server").status_code in (201, 202)
        for name in students:
            hub.wait_ready(name)
        yield hub
        classroom.stop_hub(hub)
        prefix = hub.prefix
        users = classroom.users_with_prefix(prefix)
        # stopping the hub stopped every server: no student's home is still mounted
        mounted = [pw.pw_dir for pw in users if os.path.ismount(pw.pw_dir)]
    # running_hub removed the system users; nothing of the class may be left
    assert not mounted, f"homes left mounted after the hub stopped: {mounted}"
    assert not classroom.users_with_prefix(prefix), "system users left behind"
    assert not [p.pid for pw in users for p in classroom.processes_of(pw.pw_uid)]
