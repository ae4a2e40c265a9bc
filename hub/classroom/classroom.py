"""Drive the classroom JupyterHub of ``hub/`` from Python: start a private hub, create
students through its REST API, start their servers and run notebooks in them through the
Jupyter kernel API (the websocket a browser uses: ``kernel_client.py``).
``tests/hub/test_hub.py`` and ``make bench-capacity`` (``capacity.py``) are built on it.

Class operations, not the library: these scripts live beside the hub, outside the
``attention_lab`` package; callers put ``hub/classroom`` on ``sys.path`` (tests) or run them
as scripts (``python hub/classroom/capacity.py``).

Runs as root only (the hub starts each server as the student's own system user). Needs
``requests``, ``websocket-client`` and ``psutil``: direct dependencies of the ``hub`` and
``test`` extras.
"""

from __future__ import annotations

import fcntl
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from kernel_client import Server  # hub/classroom/kernel_client.py, beside this file

REPO = Path(__file__).resolve().parents[2]
HUB_DIR = REPO / "hub"
ADMIN = "teacher"
ADMIN_PASSWORD = "teacher-pass-42"  # the private test hubs' admin (make hub-admin sets it)
HUB_VENV = Path(os.environ.get("HUB_VENV", "/opt/attention-lab-hub/venv"))
CHAPTER = HUB_VENV.parent / "chapter"  # what a first spawn copies (tools/hub_env.sh)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_hub_env(log=print) -> None:
    """tools/hub_env.sh: the hub's venv and the proxy (quick when they are up to date). One
    build at a time on this machine (a lock): two at once would install into the same venv
    and replace the chapter under each other."""
    t = time.perf_counter()
    with open(Path(tempfile.gettempdir(), "attention-lab-hub-env.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        waited = time.perf_counter() - t
        subprocess.run(["bash", str(REPO / "tools" / "hub_env.sh")], check=True, cwd=REPO)
    after = f" (after {waited:.0f} s waiting for another build)" if waited >= 1 else ""
    log(f"hub environment ready in {time.perf_counter() - t:.0f} s{after}")


def processes_of(uid: int) -> list:
    import psutil

    out = []
    for p in psutil.process_iter(["uids"]):
        try:
            if p.info["uids"] and p.info["uids"].real == uid:
                out.append(p)
        except psutil.Error:
            pass
    return out


@contextmanager
def private_checkout(path: Path = REPO) -> Iterator[None]:
    """``chmod o-rwx`` on the checkout while a private hub runs from it (the tests,
    capacity.py), as hub/README.md tells a teacher: the hub refuses to start while students
    could read the solutions in it. Its mode is restored after; several runs at once share
    it, and the last one to end restores the mode (the holders and the first mode are kept
    in a file under a lock)."""
    record = Path(tempfile.gettempdir(), "attention-lab-private-checkout.json")

    def update(change) -> None:
        with open(record.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = json.loads(record.read_text()) if record.exists() else {"holders": []}
            data["holders"] = [p for p in data["holders"] if _alive(p)]
            change(data)
            if data["holders"]:
                record.write_text(json.dumps(data))
            else:
                record.unlink(missing_ok=True)

    def enter(data) -> None:
        if not data["holders"]:  # (a mode left by a run that died is the one to restore)
            data.setdefault("mode", stat.S_IMODE(path.stat().st_mode))
            os.chmod(path, stat.S_IMODE(path.stat().st_mode) & ~0o007)
        data["holders"].append(os.getpid())

    def leave(data) -> None:
        data["holders"] = [p for p in data["holders"] if p != os.getpid()]
        if not data["holders"] and "mode" in data:
            os.chmod(path, data["mode"])

    update(enter)
    try:
        yield
    finally:
        update(leave)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


@dataclass
class Hub:
    """A running hub: its public URL, the admin service's token and the user prefix."""

    url: str
    token: str
    prefix: str
    proc: subprocess.Popen
    state: Path
    log_path: Path
    admin_password: str = ADMIN_PASSWORD
    students: list[str] = field(default_factory=list)

    # --- REST API
    def api(self, method: str, path: str, token: str | None = None, **kw):
        import requests

        headers = {"Authorization": f"token {token or self.token}"}
        return requests.request(
            method, f"{self.url}/hub/api{path}", headers=headers, timeout=60, **kw
        )

    def system_user(self, name: str) -> str:
        return self.prefix + name

    def create_student(self, name: str) -> None:
        r = self.api("POST", f"/users/{name}")
        assert r.status_code == 201, (r.status_code, r.text)
        self.students.append(name)

    def token_for(self, name: str) -> str:
        r = self.api("POST", f"/users/{name}/tokens", json={"note": "attention-lab test"})
        assert r.status_code == 201, (r.status_code, r.text)
        return r.json()["token"]

    def start_server(self, name: str, timeout: float = 240) -> None:
        self.start_servers([name], timeout)

    def start_servers(self, names: list[str], timeout: float = 240) -> None:
        """Ask for every server at once, as a class does, then wait until each is ready. The
        requests go out together: the hub answers one only when its server is up (or after
        its slow_spawn_timeout, 10 s), so sent one after another they would start the
        servers one after another."""
        with ThreadPoolExecutor(max(len(names), 1)) as pool:
            answers = list(pool.map(lambda n: self.api("POST", f"/users/{n}/server"), names))
        for name, r in zip(names, answers, strict=True):
            assert r.status_code in (201, 202), (name, r.status_code, r.text)
        for name in names:
            self.wait_ready(name, timeout)

    def wait_ready(self, name: str, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            model = self.api("GET", f"/users/{name}").json()
            server = model.get("servers", {}).get("")
            if server and server.get("ready"):
                return
            if server is None and model.get("pending") is None:
                raise RuntimeError(f"{name}'s server stopped while starting: see {self.log_path}")
            time.sleep(0.5)
        raise TimeoutError(f"{name}'s server not ready after {timeout} s")

    def stop_server(self, name: str) -> None:
        self.api("DELETE", f"/users/{name}/server")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if not self.api("GET", f"/users/{name}").json().get("servers"):
                return
            time.sleep(0.5)

    def server(self, name: str, token: str) -> Server:
        return Server(f"{self.url}/user/{name}", token)

    def server_pid(self, name: str) -> int | None:
        """The pid of the student's jupyterhub-singleuser (the oldest process of their uid)."""
        procs = processes_of(pwd.getpwnam(self.system_user(name)).pw_uid)
        procs = [p for p in procs if "jupyterhub-singleuser" in " ".join(p.cmdline())]
        return min(procs, key=lambda p: p.create_time()).pid if procs else None


def _wait_http(url: str, proc: subprocess.Popen, log_path: Path, timeout: float) -> None:
    import requests

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"the hub exited ({proc.returncode}): {log_path.read_text()[-3000:]}"
            )
        try:
            if requests.get(url, timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.3)
    raise TimeoutError(f"the hub did not answer at {url} within {timeout} s")


def set_admin_password(state: Path, password: str, env: dict) -> None:
    """What `make hub-admin` does: the admin's password in the hub's database, before the
    hub starts (the hub refuses to start without it)."""
    subprocess.run(
        [str(HUB_VENV / "bin" / "python"), str(HUB_DIR / "classroom_hub.py"), "admin-password",
         "--password-stdin"],
        input=password + "\n", text=True, env=env, check=True, capture_output=True,
    )  # fmt: skip


def _sign_up_admin(hub: Hub) -> None:
    """A hub from before `make hub-admin` (ATTENTION_LAB_HUB_DIR pointing to an older copy):
    its admin is whoever signs up first under the admin's name, as its guide said to do."""
    import re

    import requests

    s = requests.Session()
    page = s.get(f"{hub.url}/hub/signup", timeout=60).text
    xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page).group(1)
    data = {"username": ADMIN, "signup_password": hub.admin_password, "_xsrf": xsrf}
    data["signup_password_confirmation"] = hub.admin_password
    s.post(f"{hub.url}/hub/signup", data=data, timeout=60)


@contextmanager
def running_hub(
    prefix: str | None = None,
    env: dict | None = None,
    keep_users: bool = False,
    admin_password: str | None = ADMIN_PASSWORD,
) -> Iterator[Hub]:
    """Start hub/jupyterhub_config.py on free ports with its own state folder and user
    prefix, its admin's password set first (``admin_password``; None: no admin password,
    and the hub refuses to start); on exit stop it, delete every system user it created
    (and their homes) and its state folder."""
    prefix = prefix or f"alab-test-{secrets.token_hex(2)}-"
    state = Path(tempfile.mkdtemp(prefix="attention-lab-hub-"))
    port = free_port()
    token = secrets.token_hex(32)
    hub_env = dict(
        os.environ,
        HUB_VENV=str(HUB_VENV),
        ATTENTION_LAB_HUB_STATE=str(state),
        ATTENTION_LAB_HUB_PORT=str(port),
        ATTENTION_LAB_HUB_API_PORT=str(free_port()),
        ATTENTION_LAB_PROXY_API_PORT=str(free_port()),
        ATTENTION_LAB_HUB_USER_PREFIX=prefix,
        ATTENTION_LAB_HUB_ADMIN_TOKEN=token,
        **(env or {}),
    )
    log_path = state / "hub.log"
    admin_command = "admin-password" in (HUB_DIR / "classroom_hub.py").read_text()
    if admin_password and admin_command:
        set_admin_password(state, admin_password, hub_env)
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [str(HUB_VENV / "bin" / "jupyterhub"), "-f", str(HUB_DIR / "jupyterhub_config.py")],
            cwd=state,
            env=hub_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    hub = Hub(f"http://127.0.0.1:{port}", token, prefix, proc, state, log_path)
    hub.admin_password = admin_password or ""
    try:
        _wait_http(f"{hub.url}/hub/api", proc, log_path, 90)
        if admin_password and not admin_command:
            _sign_up_admin(hub)
        yield hub
    finally:
        stop_hub(hub)
        if not keep_users:
            remove_users(prefix)
            shutil.rmtree(state, ignore_errors=True)


def stop_hub(hub: Hub, timeout: float = 60) -> None:
    """SIGTERM, as Ctrl+C would: the hub stops every server and the proxy, then exits."""
    if hub.proc.poll() is None:
        hub.proc.send_signal(signal.SIGTERM)
        try:
            hub.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(hub.proc.pid, signal.SIGKILL)
            hub.proc.wait(10)


def users_with_prefix(prefix: str) -> list[pwd.struct_passwd]:
    return [p for p in pwd.getpwall() if p.pw_name.startswith(prefix)]


def remove_users(prefix: str) -> None:
    """Kill what is left of each user's processes (by pid), unmount their home if the hub
    left it mounted, and userdel -r them."""
    import psutil

    for pw in users_with_prefix(prefix):
        for p in processes_of(pw.pw_uid):
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(processes_of(pw.pw_uid), timeout=10)
        if os.path.ismount(pw.pw_dir):
            subprocess.run(["umount", "--lazy", pw.pw_dir], capture_output=True)
        subprocess.run(["userdel", "--remove", pw.pw_name], capture_output=True)
        subprocess.run(["groupdel", pw.pw_name], capture_output=True)
