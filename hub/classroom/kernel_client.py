"""A Jupyter server's REST and kernel API from Python, as a browser uses them: ``Server``
(one single-user server through the hub's proxy, with a token or a session) and ``Kernel``
(a kernel's channels over the websocket: run code, run a notebook). ``classroom.py`` hands
out a ``Server`` per student (``Hub.server``).

Needs ``requests`` and ``websocket-client``: direct dependencies of the ``hub`` and ``test``
extras.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Server:
    """One student's single-user server, through the proxy, with a token or a session."""

    base: str
    token: str | None = None
    session: object = None

    def _headers(self) -> dict:
        return {"Authorization": f"token {self.token}"} if self.token else {}

    def request(self, method: str, path: str, **kw):
        import requests

        getter = self.session or requests
        return getter.request(
            method, f"{self.base}{path}", headers=self._headers(), timeout=60, **kw
        )

    def put_text(self, path: str, text: str):
        body = {"type": "file", "format": "text", "content": text}
        return self.request("PUT", f"/api/contents/{path}", json=body)

    def start_kernel(self) -> str:
        r = self.request("POST", "/api/kernels", json={"name": "python3"})
        assert r.status_code == 201, (r.status_code, r.text)
        return r.json()["id"]

    def stop_kernel(self, kernel_id: str) -> None:
        self.request("DELETE", f"/api/kernels/{kernel_id}")

    @contextmanager
    def kernel(self) -> Iterator[Kernel]:
        kid = self.start_kernel()
        k = Kernel(self, kid)
        try:
            k.connect()
            yield k
        finally:
            k.close()
            self.stop_kernel(kid)


class KernelError(RuntimeError):
    pass


class Kernel:
    """A kernel's channels over the websocket of the Jupyter server's kernel API."""

    def __init__(self, server: Server, kernel_id: str):
        self.server, self.id = server, kernel_id
        self.session = uuid.uuid4().hex
        self.ws = None

    def connect(self, timeout: float = 120) -> None:
        import websocket

        url = self.server.base.replace("http", "ws", 1)
        url += f"/api/kernels/{self.id}/channels?session_id={self.session}"
        headers = [f"{k}: {v}" for k, v in self.server._headers().items()]
        self.ws = websocket.create_connection(url, header=headers, timeout=timeout)
        # the kernel is ready when it answers kernel_info
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg_id = self._send("kernel_info_request", {})
            try:
                for msg in self._replies(msg_id, time.monotonic() + 5):
                    if msg["msg_type"] == "kernel_info_reply":
                        self._drain()
                        return
            except TimeoutError:
                continue
        raise TimeoutError("kernel did not answer kernel_info")

    def close(self) -> None:
        if self.ws is not None:
            self.ws.close()

    def _send(self, msg_type: str, content: dict, channel: str = "shell") -> str:
        msg_id = uuid.uuid4().hex
        header = {
            "msg_id": msg_id,
            "username": "attention-lab",
            "session": self.session,
            "msg_type": msg_type,
            "version": "5.3",
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        msg = {"header": header, "parent_header": {}, "metadata": {}, "content": content}
        msg.update(channel=channel, buffers=[])
        self.ws.send(json.dumps(msg))
        return msg_id

    def _replies(self, msg_id: str, deadline: float) -> Iterator[dict]:
        import websocket

        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no reply from the kernel")
            self.ws.settimeout(left)
            try:
                raw = self.ws.recv()
            except websocket.WebSocketTimeoutException as e:
                raise TimeoutError("no reply from the kernel") from e
            if isinstance(raw, bytes):  # a message with binary buffers (widgets): not ours
                continue
            msg = json.loads(raw)
            if msg.get("parent_header", {}).get("msg_id") == msg_id:
                msg["msg_type"] = msg["header"]["msg_type"]
                yield msg

    def _drain(self) -> None:
        self.ws.settimeout(0.2)
        try:
            while True:
                self.ws.recv()
        except Exception:
            pass

    def execute(self, code: str, timeout: float = 600) -> dict:
        """Run one cell; return its execute_reply content plus ``stdout`` and ``error``
        (the iopub error message's ename/evalue, or None)."""
        msg_id = self._send(
            "execute_request",
            {
                "code": code,
                "silent": False,
                "store_history": True,
                "user_expressions": {},
                "allow_stdin": False,
                "stop_on_error": True,
            },
        )
        reply, idle, stdout, error = None, False, [], None
        for msg in self._replies(msg_id, time.monotonic() + timeout):
            kind = msg["msg_type"]
            if kind == "execute_reply":
                reply = msg["content"]
            elif kind == "stream" and msg["content"].get("name") == "stdout":
                stdout.append(msg["content"]["text"])
            elif kind == "error":
                error = f"{msg['content']['ename']}: {msg['content']['evalue']}"
            elif kind == "status" and msg["content"]["execution_state"] == "idle":
                idle = True
            if reply is not None and idle:
                break
        return dict(reply, stdout="".join(stdout), error=error)

    def run_notebook(self, path: Path, timeout: float = 600) -> int:
        """Execute every code cell of the notebook in order; raise KernelError on the first
        error. Returns the number of code cells run."""
        import nbformat

        nb = nbformat.read(str(path), as_version=4)
        n = 0
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or not cell.source.strip():
                continue
            out = self.execute(cell.source, timeout)
            n += 1
            if out.get("status") != "ok" or out["error"]:
                raise KernelError(f"{path.name} cell {i}: {out['error'] or out.get('status')}")
        return n
