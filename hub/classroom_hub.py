"""What keeps the students of hub/jupyterhub_config.py apart: its authenticator, handlers,
spawner and hooks (the config sets ``SETTINGS`` and names the classes).

- ``ClassroomAuthenticator``: NativeAuthenticator with approving and discarding by POST
  with the XSRF token (its own handlers are GETs), one message for every refused login, a
  lock-out per name and client address with backoff that never locks an admin, bcrypt for
  logins and sign-ups in a thread of its own (off the event loop), ``refresh_user``
  refusing an un-approved student's cookie and tokens, and ``delete_user`` removing the
  student's system user.
- ``ClassroomSpawner``: LocalProcessSpawner as ``<prefix><name>``, umask 077 and a process
  limit for every process of the student, TMPDIR and the caches in the home, kernels on ipc
  sockets in the mode-700 runtime folder.
- ``prepare_home`` (pre_spawn_hook) and ``kill_every_process`` (post_stop_hook).
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import pwd
import resource
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import bcrypt
from jupyterhub.spawner import LocalProcessSpawner
from jupyterhub.utils import new_token
from nativeauthenticator import NativeAuthenticator
from nativeauthenticator import handlers as native
from nativeauthenticator import nativeauthenticator as native_auth
from tornado import web

TEMPLATES = Path(__file__).resolve().parent / "templates"
# One message for a wrong password, an unknown name, a locked name and a sign-up that waits:
# nothing tells a guesser which of them it was.
REFUSED = (
    "Invalid username or password, or your sign-up is still waiting for the teacher's approval."
)


@dataclass
class Settings:
    prefix: str = "alab-"
    home_base: Path = Path("/home")
    state: Path = Path("/var/lib/attention-lab-hub")
    chapter: Path = Path("/opt/attention-lab-hub/chapter")
    nproc: int = 512  # RLIMIT_NPROC per student (threads count)
    lockout_after: int = 5  # failed logins per (name, address) before a lock
    lockout_seconds: float = 60  # the first lock; doubles with every further failure
    lockout_max_seconds: float = 900
    # what a student's processes see: every temporary file and cache inside the home
    folders: dict = field(
        default_factory=lambda: {
            "TMPDIR": ".tmp",
            "XDG_CACHE_HOME": ".cache",
            "TORCHINDUCTOR_CACHE_DIR": ".cache/torchinductor",
            "TRITON_CACHE_DIR": ".cache/triton",
            "PIP_CACHE_DIR": ".cache/pip",
            "MPLCONFIGDIR": ".config/matplotlib",
            "JUPYTER_RUNTIME_DIR": ".local/share/jupyter/runtime",
        }
    )


SETTINGS = Settings()


# --- system users ---------------------------------------------------------------------------


def system_user(hub_name: str) -> str:
    return SETTINGS.prefix + hub_name


def ensure_system_user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    home = SETTINGS.home_base / name
    subprocess.run(
        ["useradd", "--create-home", "--home-dir", str(home), "--shell", "/bin/bash",
         "--user-group", "--comment", "Attention Lab student", "--key", "UMASK=077", name],
        check=True,
    )  # fmt: skip
    os.chmod(home, 0o700)  # whatever HOME_MODE login.defs sets: no one else may enter
    return pwd.getpwnam(name)


def processes_of(uid: int) -> list[int]:
    """The pids whose real or effective uid is ``uid`` (from /proc)."""
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status") as f:
                for line in f:
                    if line.startswith("Uid:"):
                        real, effective = line.split()[1:3]
                        if uid in (int(real), int(effective)):
                            pids.append(int(entry.name))
                        break
        except OSError:
            pass
    return pids


def _kill_as(uid: int, gid: int) -> None:
    """kill(-1, SIGKILL) as the student: every process of that uid, in one system call
    (a process cannot escape it by forking, setsid or a new process group)."""
    subprocess.run(
        [sys.executable, "-I", "-S", "-c", "import os; os.kill(-1, 9)"],
        user=uid, group=gid, extra_groups=[], capture_output=True, env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip


async def kill_every_process(spawner) -> None:
    """post_stop_hook: the server has stopped; end every process its student still runs
    (a kernel's children started with setsid or start_new_session included)."""
    try:
        pw = pwd.getpwnam(spawner.system_user)
    except KeyError:
        return
    for _ in range(50):
        if not processes_of(pw.pw_uid):
            return
        await asyncio.get_running_loop().run_in_executor(None, _kill_as, pw.pw_uid, pw.pw_gid)
        await asyncio.sleep(0.1)
    spawner.log.error("processes of %s survived SIGKILL: %s", pw.pw_name, processes_of(pw.pw_uid))


def remove_system_user(hub_name: str, log) -> None:
    """Delete a student for good: kill their processes, move their home into the hub's
    root-only state folder (``deleted/<name>-<time>``), delete their files in /tmp,
    /var/tmp and /dev/shm, and remove the system user and its group, so that a new student
    under the same name starts with an empty home."""
    name = system_user(hub_name)
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        return
    for _ in range(50):
        if not processes_of(pw.pw_uid):
            break
        _kill_as(pw.pw_uid, pw.pw_gid)
        time.sleep(0.1)
    home = Path(pw.pw_dir)
    if home.is_dir() and home.parent == SETTINGS.home_base:
        archive = SETTINGS.state / "deleted"
        archive.mkdir(mode=0o700, exist_ok=True)
        os.chmod(archive, 0o700)
        home.rename(archive / f"{name}-{time.strftime('%Y%m%dT%H%M%S')}")
    for shared in ("/tmp", "/var/tmp", "/dev/shm"):
        if os.path.isdir(shared):
            subprocess.run(
                ["find", shared, "-xdev", "-mindepth", "1", "-uid", str(pw.pw_uid), "-delete"],
                capture_output=True,
            )
    done = subprocess.run(["userdel", name], capture_output=True, text=True)
    subprocess.run(["groupdel", name], capture_output=True)
    if done.returncode != 0:
        log.error("userdel %s failed: %s", name, done.stderr.strip())
    else:
        log.info("removed the system user %s; home archived in %s", name, SETTINGS.state)


# --- the spawner ----------------------------------------------------------------------------


class ClassroomSpawner(LocalProcessSpawner):
    """LocalProcessSpawner that runs ``<prefix><hub name>``, never the hub name itself, so no
    sign-up can ever name an existing account such as root; every process it starts has
    umask 077 and the student's process limit, TMPDIR and caches in the home."""

    @property
    def system_user(self) -> str:
        return system_user(self.user.name)

    def make_preexec_fn(self, name):
        become = super().make_preexec_fn(self.system_user)
        nproc = SETTINGS.nproc

        def preexec():
            os.umask(0o077)
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
            become()

        return preexec

    def user_env(self, env):
        pw = pwd.getpwnam(self.system_user)
        env.update(USER=pw.pw_name, LOGNAME=pw.pw_name, HOME=pw.pw_dir, SHELL=pw.pw_shell)
        env.update({k: str(Path(pw.pw_dir, v)) for k, v in SETTINGS.folders.items()})
        return env


def prepare_home(spawner) -> None:
    """pre_spawn_hook: create the student's system user, their TMPDIR and cache folders
    (mode 700) and copy the chapter into ~/attention-lab, all as the student (so every file
    is theirs and no symbolic link they planted can make root write elsewhere), skipping
    notebooks they have."""
    pw = ensure_system_user(spawner.system_user)
    folders = sorted(set(SETTINGS.folders.values()))
    script = 'umask 077 && mkdir -p -- "$@" && chmod 700 -- "$@"'
    if SETTINGS.chapter.is_dir():
        script += ' && cp -r --no-clobber --no-target-directory "$CHAPTER" attention-lab'
    else:
        spawner.log.warning("no chapter at %s (run tools/hub_env.sh)", SETTINGS.chapter)
    subprocess.run(
        ["/bin/sh", "-c", script, "prepare_home", *folders],
        user=pw.pw_uid, group=pw.pw_gid, extra_groups=[], cwd=pw.pw_dir, check=True,
        env={"PATH": "/usr/bin:/bin", "HOME": pw.pw_dir, "CHAPTER": str(SETTINGS.chapter)},
    )  # fmt: skip


# --- approvals, logins, revocation ----------------------------------------------------------


async def revoke(handler, hub_name: str) -> None:
    """Stop every server of the student, delete every token (API and OAuth) and log out
    every browser of theirs (a new cookie id)."""
    user = handler.find_user(hub_name)
    if user is None:
        return
    for server_name, spawner in list(user.spawners.items()):
        if spawner.active:
            await handler.stop_single_user(user, server_name)
    for token in list(user.orm_user.api_tokens):
        handler.db.delete(token)
    user.orm_user.cookie_id = new_token()
    handler.db.commit()


class ApproveHandler(native.ToggleAuthorizationHandler):
    """/hub/authorize/<name>: approve or un-approve, by POST with the XSRF token only (a GET,
    an <img> or a link, changes nothing). Un-approving revokes the student's access."""

    async def get(self, slug):
        raise web.HTTPError(405, "approve with the button of /hub/authorize (a POST form)")

    @native.admin_users_scope
    async def post(self, slug):
        if slug in self.authenticator.admin_users:
            raise web.HTTPError(400, f"{slug} is an admin: an admin cannot be un-approved")
        info = self.authenticator.get_user(slug)
        if info is None:
            raise web.HTTPError(404, f"no sign-up named {slug}")
        info = native.UserInfo.change_authorization(self.db, slug)
        if not info.is_authorized:
            await revoke(self, slug)
        self.redirect(self.hub.base_url + "authorize#" + slug)


class DiscardHandler(native.DiscardHandler):
    """/hub/discard/<name>: delete a sign-up that waits (POST with the XSRF token only); its
    server, tokens and system user go with it."""

    async def get(self, user_name):
        raise web.HTTPError(405, "discard with the button of /hub/authorize (a POST form)")

    @native.admin_users_scope
    async def post(self, user_name):
        info = self.authenticator.get_user(user_name)
        if info is not None and not info.is_authorized:
            await revoke(self, user_name)
            user = self.find_user(user_name)
            if user is not None:
                self.authenticator.delete_user(user)
                self.users.delete(user_name)
            else:
                self.authenticator.delete_user(type("User", (), {"name": user_name}))
        self.redirect(self.hub.base_url + "authorize")


# A sign-up's bcrypt hash, computed in the pool by SignUpHandler before NativeAuthenticator's
# create_user (synchronous) asks for it: the shim below hands it over instead of hashing in
# the event loop.
_PREHASHED: contextvars.ContextVar = contextvars.ContextVar("prehashed", default=None)


class _BcryptShim:
    def __getattr__(self, name):
        return getattr(bcrypt, name)

    def hashpw(self, password: bytes, salt: bytes) -> bytes:
        pre = _PREHASHED.get()
        if pre is not None and pre[0] == password:
            return pre[1]
        return bcrypt.hashpw(password, salt)


native_auth.bcrypt = _BcryptShim()


class SignUpHandler(native.SignUpHandler):
    """NativeAuthenticator's sign-up, with the password hashed in the bcrypt pool."""

    async def post(self):
        password = self.get_body_argument("signup_password", "", strip=False).encode()
        hashed = await asyncio.get_running_loop().run_in_executor(
            self.authenticator._bcrypt, lambda: bcrypt.hashpw(password, bcrypt.gensalt())
        )
        token = _PREHASHED.set((password, hashed))
        try:
            await super().post()
        finally:
            _PREHASHED.reset(token)


class LoginHandler(native.LoginHandler):
    """The login page with one message for every refusal (NativeAuthenticator's tells a
    waiting sign-up's right password from a wrong one, and runs bcrypt to do so)."""

    async def post(self):
        data = {arg: self.get_argument(arg, strip=False) for arg in self.request.arguments}
        user = await self.login_user(data)
        if user:
            self._jupyterhub_user = user
            self.redirect(self.get_next_url(user))
            return
        html = await self._render(login_error=REFUSED, username=data.get("username", ""))
        self.finish(html)


class ClassroomAuthenticator(NativeAuthenticator):
    """NativeAuthenticator for a class: see the module's docstring."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._failures: dict[tuple[str, str], tuple[int, float]] = {}
        # bcrypt takes ~0.2 s of CPU: one at a time, never in the event loop, so a flood of
        # wrong passwords leaves the other cores to the hub (and bounds the guessing rate)
        self._bcrypt = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bcrypt")

    def get_handlers(self, app):
        replace = {
            native.ToggleAuthorizationHandler: ApproveHandler,
            native.DiscardHandler: DiscardHandler,
            native.LoginHandler: LoginHandler,
            native.SignUpHandler: SignUpHandler,
        }
        return [(route, replace.get(h, h)) for route, h in super().get_handlers(app)]

    def _locked(self, key) -> bool:
        count, until = self._failures.get(key, (0, 0.0))
        return time.monotonic() < until

    def _failed(self, key) -> None:
        count, _until = self._failures.get(key, (0, 0.0))
        count += 1
        until = 0.0
        if count >= SETTINGS.lockout_after:
            doublings = count - SETTINGS.lockout_after
            wait = min(SETTINGS.lockout_seconds * 2**doublings, SETTINGS.lockout_max_seconds)
            until = time.monotonic() + wait
        self._failures[key] = (count, until)

    async def authenticate(self, handler, data):
        username = self.normalize_username(data.get("username", ""))
        password = data.get("password", "")
        info = self.get_user(username)
        if info is None:
            return None
        admin = username in self.admin_users
        # The lock-out is per name *and* address, and an admin is never locked: a guesser
        # cannot shut the teacher out (bcrypt's cost and a pool of one bound their rate).
        key = (username, handler.request.remote_ip if handler is not None else "")
        if not admin and self._locked(key):
            return None
        hashed = info.password
        valid = await asyncio.get_running_loop().run_in_executor(
            self._bcrypt, lambda: bcrypt.checkpw(password.encode(), hashed)
        )
        if not valid:
            if not admin:
                self._failed(key)
            return None
        self._failures.pop(key, None)
        return username if info.is_authorized else None

    async def refresh_user(self, user, handler=None):
        """A student whose sign-up is no longer approved loses their cookie and tokens at the
        next request (students the teacher created through the API have no sign-up)."""
        info = self.get_user(user.name)
        return info is None or bool(info.is_authorized) or user.name in self.admin_users

    def delete_user(self, user):
        super().delete_user(user)
        remove_system_user(user.name, self.log)
