"""The classroom JupyterHub of hub/ (`make hub`), started for real on 127.0.0.1: the session's
shared hub (tests/hub_helpers.py, ``shared_hub``), on which each test makes its own students.

- A class of five: students created through the REST API, five servers asked for at once,
  each running as its student's own system user, each running notebook 01 through the
  kernel API; the hub stays up. Stopping the hub at the end of the session leaves no
  process, mount or home behind and deleting the class no system user (checked when the
  shared hub stops: ``class_hub``).
- An intruder: student A cannot read or write B's files (through the file system, A's own
  kernel or A's own contents API), nor reach B's server or kernel through the proxy, B's
  server's own port or the hub's API with A's token or A's login cookie; an unapproved
  sign-up cannot log in; a wrong password is refused.

Needs root (one system user per student), useradd, Node.js and npm; skipped with the reason
otherwise, except in CI (CI=true or ATTENTION_LAB_REQUIRE_HUB=1), where it must run. The
first run builds the hub's venv (tools/hub_env.sh, about 1.5 min); later runs reuse it. The
session fixtures ``classroom`` and ``shared_hub`` are tests/hub_helpers.py's.
"""

from __future__ import annotations

import pwd
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.hub_helpers import TEACHER_PW, form, logged_in, run_as, session_from

# A real hub, real system users: only `make test-hub` runs these (never `make test`).
pytestmark = pytest.mark.hub

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks" / "01_weighted_average.ipynb"
ADDRESS = "127.0.0.2"  # the intruder test's browsers


def test_class_of_five(classroom, shared_hub):
    t0 = time.perf_counter()
    hub = shared_hub
    prefix = hub.prefix
    names = [f"s{i}" for i in range(1, 6)]
    for name in names:
        hub.create_student(name)
    tokens = {name: hub.token_for(name) for name in names}
    hub.start_servers(names)  # all five asked for at once, as a class does
    t_ready = time.perf_counter() - t0

    uids = {}
    for name in names:
        pw = pwd.getpwnam(prefix + name)
        uids[name] = pw.pw_uid
        home = Path(pw.pw_dir)
        st = home.stat()
        assert (st.st_uid, st.st_mode & 0o777) == (pw.pw_uid, 0o700), home
        copied = home / "attention-lab" / NOTEBOOK.name
        assert copied.stat().st_uid == pw.pw_uid
        assert copied.read_bytes() == (classroom.CHAPTER / NOTEBOOK.name).read_bytes()
        pid = hub.server_pid(name)
        assert pid is not None, f"no server process runs as {pw.pw_name}"
    assert len(set(uids.values())) == 5  # five system users, not one shared one

    def run(name: str) -> tuple[str, int, float]:
        t = time.perf_counter()
        with hub.server(name, tokens[name]).kernel() as k:
            whoami = k.execute("import os; print(os.getuid())")["stdout"].strip()
            assert whoami == str(uids[name]), (name, whoami)
            # the student's own copy: the chapter as the hub's venv was built with it
            cells = k.run_notebook(
                Path(pwd.getpwnam(prefix + name).pw_dir, "attention-lab", NOTEBOOK.name)
            )
        return name, cells, time.perf_counter() - t

    import psutil

    tree = psutil.Process(hub.proc.pid).children(recursive=True)
    assert any("configurable-http-proxy" in " ".join(p.cmdline()) for p in tree)
    with ThreadPoolExecutor(len(names)) as pool:
        results = list(pool.map(run, names))
    assert [r[0] for r in results] == names and all(r[1] >= 8 for r in results)
    assert hub.proc.poll() is None, "the hub went down"
    assert hub.api("GET", "/").status_code == 200
    users = {u["name"]: u for u in hub.api("GET", "/users").json()}
    assert all(users[n]["servers"][""]["ready"] for n in names)
    # their servers keep running: stopping the shared hub at the end of the session stops
    # them, and hub_helpers.class_hub checks that nothing of theirs is left
    times = ", ".join(f"{t:.0f}" for _, _, t in results)
    print(
        f"\nclass of five: servers ready after {t_ready:.0f} s; notebook 01 in each ({times} s); "
        f"{time.perf_counter() - t0:.0f} s in all"
    )


def test_intruder(shared_hub):
    import psutil
    import requests

    t0 = time.perf_counter()
    hub = shared_hub
    a, b = "amy", "ben"
    good = "correct-horse-42"

    # A signs up and waits; the teacher approves (the admin page /hub/authorize/<name>).
    # The sign-ups come from an address of their own: the shared hub counts the sign-ups
    # that wait per address, and the red team's tests sign up from 127.0.0.1.
    sa = session_from(ADDRESS)
    r = form(
        sa,
        f"{hub.url}/hub/signup",
        {"username": a, "signup_password": good, "signup_password_confirmation": good},
    )
    assert r.status_code == 200
    r = form(sa, f"{hub.url}/hub/login", {"username": a, "password": good})
    assert "Invalid username or password" in r.text and not logged_in(sa, hub)
    # the teacher (the admin, whose password `make hub-admin` set) logs in and approves A
    st = requests.Session()
    r = form(st, f"{hub.url}/hub/login", {"username": "teacher", "password": TEACHER_PW})
    assert r.status_code == 302 and logged_in(st, hub)

    # a student cannot approve anyone: the page is the teacher's (its buttons are POST
    # forms with the XSRF token; tests/hub/test_hub_redteam.py shows a GET does nothing)
    def xsrf(session, page: str) -> str:
        text = session.get(f"{hub.url}/hub/{page}", timeout=30).text
        return re.search(r'name="_xsrf" value="([^"]+)"', text).group(1)

    r = sa.post(
        f"{hub.url}/hub/authorize/{a}",
        data={"_xsrf": xsrf(sa, "login")},
        allow_redirects=False,
        timeout=30,
    )
    assert r.status_code == 403, r.status_code
    approve = st.post(
        f"{hub.url}/hub/authorize/{a}",
        data={"_xsrf": xsrf(st, "authorize")},
        allow_redirects=False,
        timeout=30,
    )
    assert approve.status_code == 302, approve.status_code
    assert a in st.get(f"{hub.url}/hub/authorize", timeout=30).text

    # a wrong password is refused; the right one logs in
    r = form(sa, f"{hub.url}/hub/login", {"username": a, "password": good + "x"})
    assert "Invalid username or password" in r.text and not logged_in(sa, hub)
    r = form(sa, f"{hub.url}/hub/login", {"username": a, "password": good})
    assert r.status_code == 302 and logged_in(sa, hub)

    # an unapproved sign-up cannot log in, even with the right password
    su = session_from(ADDRESS)
    form(
        su,
        f"{hub.url}/hub/signup",
        {"username": "mal", "signup_password": good, "signup_password_confirmation": good},
    )
    r = form(su, f"{hub.url}/hub/login", {"username": "mal", "password": good})
    assert "Invalid username or password" in r.text and not logged_in(su, hub)
    assert r.status_code == 200 and "jupyterhub-session-id" not in r.headers.get("set-cookie", "")

    # B is created by the teacher; both servers run; B keeps a secret and a kernel
    hub.create_student(b)
    ta, tb = hub.token_for(a), hub.token_for(b)
    hub.start_servers([a, b])
    user_a, user_b = hub.system_user(a), hub.system_user(b)
    home_b = Path(pwd.getpwnam(user_b).pw_dir)
    srv_a, srv_b = hub.server(a, ta), hub.server(b, tb)
    assert srv_b.put_text("secret.txt", "B's secret").status_code in (200, 201)
    assert (home_b / "secret.txt").stat().st_uid == pwd.getpwnam(user_b).pw_uid
    kid_b = srv_b.start_kernel()

    # file system: A's own user cannot list, read or write B's home
    for cmd in (
        ["ls", str(home_b)],
        ["cat", str(home_b / "secret.txt")],
        ["touch", str(home_b / "from-a.txt")],
        ["cp", "/etc/hostname", str(home_b / "attention-lab" / "01_weighted_average.ipynb")],
    ):
        r = run_as(user_a, *cmd)
        assert r.returncode != 0 and "Permission denied" in r.stderr, (cmd, r)

    # A's own kernel is A's user: the same refusals from Python
    with srv_a.kernel() as k:
        for code in (
            f"open({str(home_b / 'secret.txt')!r}).read()",
            f"open({str(home_b / 'from-a.txt')!r}, 'w').write('x')",
            f"import os; os.listdir({str(home_b)!r})",
        ):
            out = k.execute(code)
            assert out["error"] and out["error"].startswith("PermissionError"), (code, out)

    # A's own contents API stays inside A's home
    rel = f"%2E%2E/{user_b}/secret.txt"
    for path in (rel, f"..%2F{user_b}%2Fsecret.txt", f"{home_b}/secret.txt"):
        r = srv_a.request("GET", f"/api/contents/{path}")
        assert r.status_code in (400, 403, 404) and "B's secret" not in r.text, (path, r)
        r = srv_a.put_text(path.replace("secret", "planted"), "from A")
        assert r.status_code in (400, 403, 404), (path, r.status_code)
    assert sorted(p.name for p in home_b.iterdir() if not p.name.startswith(".")) == [
        "attention-lab",
        "secret.txt",
    ]

    # B's server and kernel through the proxy, with A's token
    as_a_on_b = hub.server(b, ta)
    for method, path in (
        ("GET", "/api/contents/secret.txt"),
        ("GET", "/api/kernels"),
        ("GET", f"/api/kernels/{kid_b}"),
        ("POST", "/api/kernels"),
        ("DELETE", f"/api/kernels/{kid_b}"),
    ):
        r = as_a_on_b.request(method, path, allow_redirects=False)
        assert r.status_code == 403, (method, path, r.status_code)
    import websocket

    ws_url = f"{hub.url}/user/{b}/api/kernels/{kid_b}/channels".replace("http", "ws", 1)
    with pytest.raises(websocket.WebSocketBadStatusException) as refused:
        websocket.create_connection(ws_url, header=[f"Authorization: token {ta}"], timeout=30)
    assert refused.value.status_code == 403

    # ... and on B's server's own port, past the proxy
    pid_b = hub.server_pid(b)
    ports = {
        c.laddr.port
        for c in psutil.Process(pid_b).net_connections("inet")
        if c.status == psutil.CONN_LISTEN
    }
    assert ports
    for port in ports:
        r = requests.get(
            f"http://127.0.0.1:{port}/user/{b}/api/contents/secret.txt",
            headers={"Authorization": f"token {ta}"},
            timeout=30,
            allow_redirects=False,
        )
        assert r.status_code in (302, 403) and "B's secret" not in r.text, (port, r)

    # ... and with A's login cookie: A's own server answers, B's refuses
    # (opening a page logs the browser in to the server, through the hub's OAuth)
    r = sa.get(f"{hub.url}/user/{a}/lab", timeout=60)
    assert r.status_code == 200 and "JupyterLab" in r.text
    r = sa.get(f"{hub.url}/user/{a}/api/contents", timeout=60)
    assert r.status_code == 200 and r.json()["type"] == "directory"
    r = sa.get(f"{hub.url}/user/{b}/lab", timeout=60)
    assert r.status_code == 403 and "JupyterLab" not in r.text
    r = sa.get(f"{hub.url}/user/{b}/api/contents/secret.txt", timeout=60)
    assert r.status_code == 403 and "B's secret" not in r.text
    cookie = "; ".join(f"{c.name}={c.value}" for c in sa.cookies)
    with pytest.raises(websocket.WebSocketBadStatusException) as refused:
        websocket.create_connection(ws_url, header=[f"Cookie: {cookie}"], timeout=30)
    assert refused.value.status_code == 403

    # the hub's API: A's token cannot see or steer B
    for method, path in (
        ("GET", f"/users/{b}"),
        ("POST", f"/users/{b}/server"),
        ("DELETE", f"/users/{b}/server"),
        ("POST", f"/users/{b}/tokens"),
        ("GET", f"/users/{b}/tokens"),
        ("GET", "/users"),
        ("POST", "/users/eve"),
    ):
        r = hub.api(method, path, token=ta)
        assert r.status_code in (403, 404), (method, path, r.status_code)
        if method == "GET" and path == "/users":
            assert b not in r.text
    assert hub.api("GET", f"/users/{b}").json()["servers"][""]["ready"]
    assert srv_b.request("GET", f"/api/kernels/{kid_b}").status_code == 200
    assert srv_b.request("GET", "/api/contents/secret.txt").json()["content"] == "B's secret"
    print(f"\nintruder test: {time.perf_counter() - t0:.0f} s")


def test_the_hubs_venv_leaves_out_the_slow_iri_checker(classroom):
    """tools/hub_env.sh removes rfc3987-syntax (about 35 Lark parsers compiled at import, 2 to 3
    CPU-seconds in every student's server): jsonschema then leaves out only the "iri" format,
    which no Jupyter schema uses, and jupyter_events still validates its events."""
    import subprocess

    script = (
        "import importlib.util as u, jsonschema, jupyter_events.validators as v\n"
        "assert u.find_spec('rfc3987_syntax') is None, 'rfc3987_syntax is installed'\n"
        "checker = jsonschema.Draft7Validator.FORMAT_CHECKER\n"
        "assert 'iri' not in checker.checkers and 'uri-reference' in checker.checkers\n"
        "schema = {'$id': 'https://example.org/e', 'version': '1', 'title': 't',\n"
        "          'description': 'd', 'type': 'object', 'properties': {}}\n"
        "v.validate_schema(schema)\n"
        "print(sorted(checker.checkers)[:4])\n"
    )
    r = subprocess.run(
        [str(classroom.HUB_VENV / "bin" / "python"), "-c", script], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr[-2000:]
