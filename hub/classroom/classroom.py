"""Drive the classroom JupyterHub of ``hub/`` from Python: start a private hub, create
students through its REST API, start their servers and run notebooks in them through the
Jupyter kernel API (the websocket a browser uses: ``kernel_client.py``).
``tests/test_hub.py`` and ``make bench-capacity`` (``capacity.py``) are built on it.

Class operations, not the library: these scripts live beside the hub, outside the
``attention_lab`` package; callers put ``hub/classroom`` on ``sys.path`` (tests) or run them
as scripts (``python hub/classroom/capacity.py``).

Runs as root only (the hub starts each server as the student's own system user). Needs
``requests``, ``websocket-client`` and ``psutil``: direct dependencies of the ``hub`` and
``test`` extras.
"""

from __future__ import annotations

import os
import pwd
import secrets
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from kernel_client import Server  # hub/classroom/kernel_client.py, beside this file

REPO = Path(__file__).resolve().parents[2]
HUB_DIR = REPO / "hub"
HUB_VENV = Path(os.environ.get("HUB_VENV", "/opt/attention-lab-hub/venv"))
CHAPTER = HUB_VENV.parent / "chapter"  # what a first spawn copies (tools/hub_env.sh)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_hub_env(log=print) -> None:
    """tools/hub_env.sh: the hub's venv and the proxy (quick when they are up to date)."""
    t = time.perf_counter()
    subprocess.run(["bash", str(REPO / "tools" / "hub_env.sh")], check=True, cwd=REPO)
    log(f"hub environment ready in {time.perf_counter() - t:.0f} s")


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


@dataclass
class Hub:
    """A running hub: its public URL, the admin service's token and the user prefix."""

    url: str
    token: str
    prefix: str
    proc: subprocess.Popen
    state: Path
    log_path: Path
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
        r = self.api("POST", f"/users/{name}/server")
        assert r.status_code in (201, 202), (r.status_code, r.text)
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


@contextmanager
def running_hub(
    prefix: str | None = None, env: dict | None = None, keep_users: bool = False
) -> Iterator[Hub]:
    """Start hub/jupyterhub_config.py on free ports with its own state folder and user
    prefix; on exit stop it and delete every system user it created (and their homes)."""
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
    try:
        _wait_http(f"{hub.url}/hub/api", proc, log_path, 90)
        yield hub
    finally:
        stop_hub(hub)
        if not keep_users:
            remove_users(prefix)


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
    """Kill what is left of each user's processes (by pid) and userdel -r them."""
    import psutil

    for pw in users_with_prefix(prefix):
        for p in processes_of(pw.pw_uid):
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(processes_of(pw.pw_uid), timeout=10)
        subprocess.run(["userdel", "--remove", pw.pw_name], capture_output=True)
        subprocess.run(["groupdel", pw.pw_name], capture_output=True)
