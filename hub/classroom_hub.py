"""What keeps the students of hub/jupyterhub_config.py apart: its authenticator, handlers,
spawner and hooks (the config sets ``SETTINGS`` and names the classes).

- ``ClassroomAuthenticator``: NativeAuthenticator where a name is one person and nothing a
  student sends blocks the hub. Approving and discarding by POST with the XSRF token; one
  message for every refused login; a lock-out per name and client address with backoff,
  for logins (never locking an admin) and for wrong old passwords at /hub/change-password;
  every bcrypt hash and check off the event loop, logins in a thread of their own and
  sign-ups and password changes in another (NativeAuthenticator's own modules get a bcrypt
  that refuses to run in the loop); a sign-up under a name the hub already knows (a user
  created through the API, the admin) is refused, and so is creating a user through the
  API while a sign-up under that name waits; pending sign-ups capped per address and in
  total; no admin is approved by signing up (``python classroom_hub.py admin-password``
  writes the admin's password before the hub listens); ``refresh_user`` refuses an
  un-approved student's cookie and tokens; ``delete_user`` removes the system user.
- ``ClassroomSpawner``: LocalProcessSpawner as ``<prefix><name>``, umask 077 and a process
  limit for every process of the student, their memory limited (a cgroup v1 memory cgroup
  for all their processes together, or RLIMIT_AS on each where cgroups are not writable),
  TMPDIR and the caches in the home, kernels on ipc sockets in the mode-700 runtime folder.
- ``prepare_home`` (pre_spawn_hook: the system user, the home as a loop-mounted ext4 image
  of the disk limit, the memory cgroup, the chapter) and ``kill_every_process``
  (post_stop_hook: every process of the student, then the cgroup and the mount).
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import pwd
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import bcrypt
from jupyterhub import orm
from jupyterhub.spawner import LocalProcessSpawner
from jupyterhub.utils import new_token, utcnow
from nativeauthenticator import NativeAuthenticator
from nativeauthenticator import handlers as native
from nativeauthenticator import nativeauthenticator as native_auth
from nativeauthenticator import orm as native_orm
from nativeauthenticator.orm import UserInfo
from tornado import web

TEMPLATES = Path(__file__).resolve().parent / "templates"
# One message for a wrong password, an unknown name, a locked name and a sign-up that waits:
# nothing tells a guesser which of them it was.
REFUSED = (
    "Invalid username or password, or your sign-up is still waiting for the teacher's approval."
)
# NativeAuthenticator's messages, so a sign-up refused here reads like one refused there: a
# name the hub knows gets the message of a name already signed up (a sign-up page always
# tells whether a name is free; it does not tell who holds it, a student or the admin).
TAKEN = (
    "Something went wrong!\nIt appears that this username is already in use. "
    "Please try again with a different username."
)
SENT = "Your information has been sent to the admin."
TOO_MANY = (
    "Too many sign-ups are waiting for the teacher's approval. Please ask your teacher to "
    "approve the waiting ones, then try again."
)
WRONG_OLD = (
    "Your current password was incorrect (after several wrong ones, the page waits a while "
    "before it checks again). Please try again."
)
GiB = 1024**3


@dataclass
class Settings:
    prefix: str = "alab-"
    home_base: Path = Path("/home")
    state: Path = Path("/var/lib/attention-lab-hub")
    chapter: Path = Path("/opt/attention-lab-hub/chapter")
    admin: str = "teacher"
    nproc: int = 512  # RLIMIT_NPROC per student (threads count)
    lockout_after: int = 5  # failed logins (or old passwords) per (name, address) before a lock
    lockout_seconds: float = 60  # the first lock; doubles with every further failure
    lockout_max_seconds: float = 900
    signups_per_address: int = 3  # sign-ups waiting for approval, per client address
    signups_pending: int = 100  # ... and in all
    # the addresses (or networks, "10.0.0.0/8") of reverse proxies in front of the hub's
    # proxy (nginx, Caddy, an ingress): the address a limit counts is the last one of
    # X-Forwarded-For that is not one of these
    trusted_proxies: frozenset = frozenset()
    memory: str = "rlimit"  # "cgroup" (v1 memory controller) or "rlimit" (RLIMIT_AS)
    # RLIMIT_AS per process where cgroups are not writable, as a multiple of mem_limit:
    # address space, not memory used (a kernel that ran notebook 11 had reserved 1.95 GB of
    # it for 0.71 GB in memory)
    address_space_factor: float = 2.0
    cgroup_root: Path = Path("/sys/fs/cgroup/memory")
    disk_limit: int = 0  # bytes of each home's ext4 image; 0: plain homes, no limit
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


def gib(n: int) -> str:
    return f"{n / GiB:.2g} GiB" if n >= GiB else f"{n / 1024**2:.0f} MiB"


# --- system users ---------------------------------------------------------------------------


def system_user(hub_name: str) -> str:
    return SETTINGS.prefix + hub_name


def ensure_system_user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    home = SETTINGS.home_base / name
    # with a disk limit the home is a mount point (mount_home), so useradd leaves it alone
    create = "--no-create-home" if SETTINGS.disk_limit else "--create-home"
    subprocess.run(
        ["useradd", create, "--home-dir", str(home), "--shell", "/bin/bash",
         "--user-group", "--comment", "Attention Lab student", "--key", "UMASK=077", name],
        check=True,
    )  # fmt: skip
    pw = pwd.getpwnam(name)
    image = home_image(name)
    if image.exists():  # a home image whose user was removed without the hub: not theirs
        _archive(image, name, ".img")
    home.mkdir(mode=0o700, exist_ok=True)
    os.chown(home, pw.pw_uid, pw.pw_gid)
    os.chmod(home, 0o700)  # whatever HOME_MODE login.defs sets: no one else may enter
    return pw


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


# --- memory: a cgroup per student, or RLIMIT_AS on every process -----------------------------


def cgroup_of(name: str) -> Path:
    return SETTINGS.cgroup_root / "attention-lab" / name


def choose_memory_limiter(wanted: str = "auto") -> tuple[str, str]:
    """("cgroup" or "rlimit", why): cgroup v1's memory controller when this process can
    create a cgroup under ``SETTINGS.cgroup_root`` and give it a limit, else RLIMIT_AS."""
    if wanted == "rlimit":
        return "rlimit", "ATTENTION_LAB_HUB_MEMORY=rlimit"
    parent = SETTINGS.cgroup_root / "attention-lab"
    try:
        parent.mkdir(exist_ok=True)
        probe = parent / f"probe-{os.getpid()}"
        probe.mkdir(exist_ok=True)
        try:
            (probe / "memory.limit_in_bytes").write_text(str(64 * 1024**2))
        finally:
            probe.rmdir()
    except OSError as e:
        if wanted == "cgroup":
            raise SystemExit(f"ATTENTION_LAB_HUB_MEMORY=cgroup, but {parent}: {e}") from e
        return "rlimit", f"no writable cgroup v1 memory controller at {SETTINGS.cgroup_root}: {e}"
    return "cgroup", f"cgroup v1 memory controller at {SETTINGS.cgroup_root}"


def limit_memory(name: str, limit: int) -> None:
    """Create the student's memory cgroup (root-owned: they cannot leave it or raise its
    limit) with ``limit`` bytes for all their processes together, swap included."""
    if SETTINGS.memory != "cgroup" or not limit:
        return
    group = cgroup_of(name)
    group.mkdir(parents=True, exist_ok=True)
    memsw = group / "memory.memsw.limit_in_bytes"  # RAM + swap; absent without swap accounting
    if memsw.exists():
        memsw.write_text("-1")  # memory.limit_in_bytes may never exceed it
    (group / "memory.limit_in_bytes").write_text(str(limit))
    if memsw.exists():
        memsw.write_text(str(limit))


def release_memory(name: str, log) -> None:
    group = cgroup_of(name)
    for _ in range(50):
        try:
            group.rmdir()  # only an empty cgroup can go
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)
    log.warning("cgroup %s still has processes; left in place", group)


# --- disk: each home a loop-mounted ext4 image of the disk limit -----------------------------


def home_image(name: str) -> Path:
    return SETTINGS.state / "homes" / f"{name}.img"


def check_loop_mounts() -> None:
    """Raise OSError (with the command's message) unless an ext4 image can be made and
    loop-mounted here."""
    with tempfile.TemporaryDirectory(dir=SETTINGS.state, prefix="loop-probe-") as tmp:
        image, mnt = Path(tmp, "probe.img"), Path(tmp, "mnt")
        mnt.mkdir()
        with open(image, "wb") as f:
            f.truncate(16 * 1024**2)
        for cmd in (["mkfs.ext4", "-q", str(image)], ["mount", "-o", "loop", image, mnt]):
            r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
            if r.returncode != 0:
                raise OSError(f"{' '.join(map(str, cmd))}: {r.stderr.strip() or r.returncode}")
        subprocess.run(["umount", str(mnt)], check=True)


def mount_home(pw: pwd.struct_passwd) -> None:
    """Mount the student's ext4 image (made on their first spawn, sparse, of the disk
    limit) on their home, nosuid and nodev: what they write past the limit fails with
    ENOSPC for them alone. A home that has files and no image yet (a class started before
    the limit) has them copied into it."""
    home = Path(pw.pw_dir)
    if not SETTINGS.disk_limit or os.path.ismount(home):
        return
    image = home_image(pw.pw_name)
    if not image.exists():
        image.parent.mkdir(mode=0o700, exist_ok=True)
        with open(image, "xb") as f:
            f.truncate(SETTINGS.disk_limit)
        os.chmod(image, 0o600)
        subprocess.run(
            ["mkfs.ext4", "-q", "-m", "0", "-E", f"root_owner={pw.pw_uid}:{pw.pw_gid}",
             str(image)],
            check=True, capture_output=True,
        )  # fmt: skip
        if home.is_dir() and any(home.iterdir()):
            _move_into_image(home, image)
    home.mkdir(mode=0o700, exist_ok=True)
    subprocess.run(
        ["mount", "-o", "loop,nosuid,nodev", str(image), str(home)], check=True,
        capture_output=True,
    )  # fmt: skip
    lost = home / "lost+found"  # mkfs's; the student could not remove it (it is root's)
    if lost.is_dir() and not any(lost.iterdir()):
        lost.rmdir()
    os.chown(home, pw.pw_uid, pw.pw_gid)
    os.chmod(home, 0o700)


def _move_into_image(home: Path, image: Path) -> None:
    """Copy a home's files into its new image (symbolic links as links, never followed;
    owners and modes kept), then delete them from under the mount point."""
    with tempfile.TemporaryDirectory(dir=SETTINGS.state, prefix="home-") as mnt:
        subprocess.run(["mount", "-o", "loop,nosuid,nodev", str(image), mnt], check=True)
        try:
            subprocess.run(["cp", "-a", "--no-target-directory", str(home), mnt], check=True)
        finally:
            subprocess.run(["umount", mnt], check=True)
    subprocess.run(["find", str(home), "-xdev", "-mindepth", "1", "-delete"], check=True)


def unmount_home(home: Path, log) -> None:
    if not os.path.ismount(home):
        return
    r = subprocess.run(["umount", str(home)], capture_output=True, text=True)
    if r.returncode != 0:  # still open somewhere (a root shell in it): detach it now
        log.warning("umount %s: %s; detaching it (umount --lazy)", home, r.stderr.strip())
        subprocess.run(["umount", "--lazy", str(home)], capture_output=True)


# --- the hooks ------------------------------------------------------------------------------


def _kill_all(pw: pwd.struct_passwd) -> list[int]:
    for _ in range(50):
        if not processes_of(pw.pw_uid):
            return []
        _kill_as(pw.pw_uid, pw.pw_gid)
        time.sleep(0.1)
    return processes_of(pw.pw_uid)


def _end_student(pw: pwd.struct_passwd, log) -> None:
    left = _kill_all(pw)
    if left:
        log.error("processes of %s survived SIGKILL: %s", pw.pw_name, left)
        return
    release_memory(pw.pw_name, log)
    unmount_home(Path(pw.pw_dir), log)


async def kill_every_process(spawner) -> None:
    """post_stop_hook: the server has stopped; end every process its student still runs
    (a kernel's children started with setsid or start_new_session included), then remove
    their memory cgroup and unmount their home (in a thread: not in the event loop)."""
    try:
        pw = pwd.getpwnam(spawner.system_user)
    except KeyError:
        return
    await asyncio.get_running_loop().run_in_executor(None, _end_student, pw, spawner.log)


def _archive(path: Path, name: str, suffix: str) -> None:
    """Move a home (or its image) into the root-only ``deleted/<name>-<time><suffix>``."""
    archive = SETTINGS.state / "deleted"
    archive.mkdir(mode=0o700, exist_ok=True)
    os.chmod(archive, 0o700)
    path.rename(archive / f"{name}-{time.strftime('%Y%m%dT%H%M%S')}{suffix}")


def remove_system_user(hub_name: str, log) -> None:
    """Delete a student for good: kill their processes, move their home (or its image)
    into the hub's root-only state folder (``deleted/<name>-<time>``, ``.img`` for an
    image), delete their files in /tmp, /var/tmp and /dev/shm, and remove the system user
    and its group, so that a new student under the same name starts with an empty home."""
    name = system_user(hub_name)
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        return
    _kill_all(pw)
    release_memory(name, log)
    home = Path(pw.pw_dir)
    unmount_home(home, log)
    if home_image(name).exists():
        _archive(home_image(name), name, ".img")
    if home.is_dir() and home.parent == SETTINGS.home_base:
        if any(home.iterdir()):
            _archive(home, name, "")
        else:
            home.rmdir()  # an image's mount point
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
    umask 077, the student's process limit and memory limit, TMPDIR and caches in the home."""

    @property
    def system_user(self) -> str:
        return system_user(self.user.name)

    def make_preexec_fn(self, name):
        become = super().make_preexec_fn(self.system_user)
        nproc = SETTINGS.nproc
        limit = int(self.mem_limit or 0)
        address_space = int(limit * SETTINGS.address_space_factor)
        procs = None
        if limit and SETTINGS.memory == "cgroup":
            procs = str(cgroup_of(self.system_user) / "cgroup.procs")

        def preexec():
            os.umask(0o077)
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
            if procs is not None:  # this process and all it starts: the student's cgroup
                with open(procs, "w") as f:
                    f.write(str(os.getpid()))
            elif limit:
                resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
            become()

        return preexec

    def user_env(self, env):
        pw = pwd.getpwnam(self.system_user)
        env.update(USER=pw.pw_name, LOGNAME=pw.pw_name, HOME=pw.pw_dir, SHELL=pw.pw_shell)
        env.update({k: str(Path(pw.pw_dir, v)) for k, v in SETTINGS.folders.items()})
        return env


async def prepare_home(spawner) -> None:
    """pre_spawn_hook: create the student's system user, mount their home's image (with a
    disk limit), create their memory cgroup, their TMPDIR and cache folders (mode 700) and
    copy the chapter into ~/attention-lab, all as the student (so every file is theirs and
    no symbolic link they planted can make root write elsewhere), skipping notebooks they
    have. In a thread: useradd, mkfs and cp never hold up the event loop."""
    name, limit = spawner.system_user, int(spawner.mem_limit or 0)
    await asyncio.get_running_loop().run_in_executor(None, _prepare, name, limit, spawner.log)


def _prepare(name: str, limit: int, log) -> None:
    pw = ensure_system_user(name)
    mount_home(pw)
    limit_memory(pw.pw_name, limit)
    folders = sorted(set(SETTINGS.folders.values()))
    script = 'umask 077 && mkdir -p -- "$@" && chmod 700 -- "$@"'
    if SETTINGS.chapter.is_dir():
        script += ' && cp -r --no-clobber --no-target-directory "$CHAPTER" attention-lab'
    else:
        log.warning("no chapter at %s (run tools/hub_env.sh)", SETTINGS.chapter)
    subprocess.run(
        ["/bin/sh", "-c", script, "prepare_home", *folders],
        user=pw.pw_uid, group=pw.pw_gid, extra_groups=[], cwd=pw.pw_dir, check=True,
        env={"PATH": "/usr/bin:/bin", "HOME": pw.pw_dir, "CHAPTER": str(SETTINGS.chapter)},
    )  # fmt: skip


# --- bcrypt, never in the event loop ---------------------------------------------------------


def _not_in_the_loop(what: str) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return  # a worker thread (or no hub at all): fine
    raise RuntimeError(
        f"bcrypt.{what} called in the hub's event loop: a NativeAuthenticator handler that "
        "ClassroomAuthenticator.get_handlers does not replace (hub/classroom_hub.py)"
    )


class _BcryptOffTheLoop:
    """NativeAuthenticator's modules get this bcrypt: it refuses to hash or check in the
    event loop (a request fails instead of stalling the hub for everyone)."""

    def __getattr__(self, name):
        return getattr(bcrypt, name)

    def hashpw(self, password: bytes, salt: bytes) -> bytes:
        _not_in_the_loop("hashpw")
        return bcrypt.hashpw(password, salt)

    def checkpw(self, password: bytes, hashed: bytes) -> bool:
        _not_in_the_loop("checkpw")
        return bcrypt.checkpw(password, hashed)


native_auth.bcrypt = native_orm.bcrypt = _BcryptOffTheLoop()


def client_address(handler) -> str:
    """The client's address as the hub's proxy saw it: the last entry of X-Forwarded-For
    that is not a trusted reverse proxy's (configurable-http-proxy appends the address it
    saw), or the connection's. Never X-Real-Ip, which JupyterHub's server (xheaders) takes
    from any client as it comes."""
    request = handler.request
    chain = []
    for value in request.headers.get_list("X-Forwarded-For"):
        chain += [a.strip() for a in value.split(",") if a.strip()]
    address = getattr(request.connection.context, "address", None)
    peer = address[0] if isinstance(address, tuple) and address else request.remote_ip
    for candidate in reversed(chain):
        if not _trusted(candidate):
            return candidate
    return chain[0] if chain else peer


def _trusted(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in ipaddress.ip_network(n, strict=False) for n in SETTINGS.trusted_proxies)


# --- approvals, logins, sign-ups, passwords --------------------------------------------------


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


class SignUpHandler(native.SignUpHandler):
    """/hub/signup: a name the hub knows is refused (a sign-up, a user created through the
    API or by the admin page, an admin), pending sign-ups are capped per address and in
    all, the password is hashed in the sign-up worker, and nobody is approved by signing
    up. (Email, two-factor and reCAPTCHA sign-ups are not offered: __init__ refuses them.)"""

    async def post(self):
        auth = self.authenticator
        if not auth.enable_signup:
            raise web.HTTPError(404)
        name = auth.normalize_username(self.get_body_argument("username", "", strip=False))
        password = self.get_body_argument("signup_password", "", strip=False)
        confirmation = self.get_body_argument("signup_password_confirmation", "", strip=False)
        alert, message = "alert-danger", None
        if not auth.validate_username(name) or not auth.is_password_strong(password):
            length = auth.minimum_password_length
            message = (
                "Something went wrong!\nBe sure your username does not contain spaces, "
                f"commas or slashes, your password has at least {length} characters and is "
                "not too common."
            )
        elif auth.name_is_known(name):
            message = TAKEN
        elif password != confirmation:
            message = "Your password did not match the confirmation. Please try again."
        else:
            refused = auth.reserve_signup(name, client_address(self))
            if refused:
                message = refused
            else:
                try:
                    hashed = await auth.in_signup_worker(
                        bcrypt.hashpw, password.encode(), bcrypt.gensalt()
                    )
                    if auth.name_is_known(name, signing_up=False):  # made meanwhile
                        message = TAKEN
                    else:
                        self.db.add(UserInfo(username=name, password=hashed))
                        self.db.commit()
                        alert, message = "alert-info", SENT
                finally:
                    auth.end_signup(name, created=message == SENT)
        html = await self.render_template(
            "signup.html",
            ask_email=False,
            result_message=message,
            alert=alert,
            two_factor_auth=False,
            two_factor_auth_user=False,
            two_factor_auth_value="",
            recaptcha_key=None,
            tos=auth.tos,
        )
        self.finish(html)


class ChangePasswordHandler(native.ChangePasswordHandler):
    """/hub/change-password: the old password checked and the new one hashed in the
    sign-up worker; wrong old passwords lock the page out per name and address, with
    backoff, as wrong logins lock the login page (before any bcrypt runs)."""

    @web.authenticated
    async def post(self):
        auth = self.authenticator
        user = self.current_user
        old = self.get_body_argument("old_password", "", strip=False)
        new = self.get_body_argument("new_password", "", strip=False)
        confirmation = self.get_body_argument("new_password_confirmation", "", strip=False)
        info = auth.get_user(user.name)
        key = ("change-password", user.name, client_address(self))
        alert = "alert-danger"
        if info is None:
            message = "Your account has no password here: your teacher created it."
        elif not auth.begin_check(key) or not await auth.checked(key, old, info.password):
            message = WRONG_OLD
        elif new != confirmation:
            message = "Your new password didn't match the confirmation. Please try again."
        elif not auth.is_password_strong(new):
            message = (
                "Something went wrong!\nBe sure your new password has at least "
                f"{auth.minimum_password_length} characters and is not too common."
            )
        else:
            hashed = await auth.in_signup_worker(bcrypt.hashpw, new.encode(), bcrypt.gensalt())
            info = auth.get_user(user.name)
            info.password = hashed
            self.db.commit()
            alert, message = "alert-success", "Your password has been changed successfully!"
        html = await self.render_template(
            "change-password.html", user_name=user.name, result_message=message, alert=alert
        )
        self.finish(html)


class ChangePasswordAdminHandler(native.ChangePasswordAdminHandler):
    """/hub/change-password/<name> (admins): the new password hashed in the sign-up worker."""

    @native.admin_users_scope
    async def post(self, user_name):
        auth = self.authenticator
        new = self.get_body_argument("new_password", "", strip=False)
        confirmation = self.get_body_argument("new_password_confirmation", "", strip=False)
        alert = "alert-danger"
        if auth.get_user(user_name) is None:
            raise web.HTTPError(404)
        if new != confirmation:
            message = "The new password didn't match the confirmation. Please try again."
        elif not auth.is_password_strong(new):
            message = (
                f"Something went wrong!\nBe sure the new password for {user_name} has at "
                f"least {auth.minimum_password_length} characters and is not too common."
            )
        else:
            hashed = await auth.in_signup_worker(bcrypt.hashpw, new.encode(), bcrypt.gensalt())
            auth.get_user(user_name).password = hashed
            self.db.commit()
            alert = "alert-success"
            message = f"The password for {user_name} has been changed successfully"
        html = await self.render_template(
            "change-password-admin.html",
            user_name=user_name,
            result_message=message,
            alert=alert,
        )
        self.finish(html)


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
        unsupported = [
            name
            for name in ("ask_email_on_signup", "allow_2fa", "recaptcha_key", "open_signup")
            if getattr(self, name)
        ] + (["allow_self_approval_for"] if self.allow_self_approval_for else [])
        if unsupported:
            raise ValueError(
                f"ClassroomAuthenticator does not offer NativeAuthenticator's {unsupported}: "
                "every sign-up here waits for the teacher, with a name and a password"
            )
        self._failures: dict[tuple, tuple[int, float]] = {}
        self._checking: dict[tuple, int] = {}  # passwords being checked, per key
        self._started = utcnow(with_tz=False)
        # sign-ups being hashed (name -> address) and the address of each waiting sign-up
        # made since the hub started
        self._signing_up: dict[str, str] = {}
        self._signup_address: dict[str, str] = {}
        # bcrypt takes ~0.2 s of CPU: never in the event loop, and in two workers of one
        # thread each, so a flood of sign-ups or password changes never queues ahead of a
        # login (and the guessing rate stays bounded)
        self._login_worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bcrypt-login")
        self._signup_worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bcrypt-signup")

    def get_handlers(self, app):
        replace = {
            native.ToggleAuthorizationHandler: ApproveHandler,
            native.DiscardHandler: DiscardHandler,
            native.LoginHandler: LoginHandler,
            native.SignUpHandler: SignUpHandler,
            native.ChangePasswordHandler: ChangePasswordHandler,
            native.ChangePasswordAdminHandler: ChangePasswordAdminHandler,
        }
        return [(route, replace.get(h, h)) for route, h in super().get_handlers(app)]

    async def in_signup_worker(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self._signup_worker, fn, *args)

    async def checked(self, key, password: str, hashed: bytes) -> bool:
        """An old password checked in the sign-up worker, after ``begin_check(key)``."""
        valid = False
        try:
            valid = await self.in_signup_worker(bcrypt.checkpw, password.encode(), hashed)
        finally:
            self.end_check(key, valid)
        return valid

    # --- names
    def name_is_known(self, name: str, signing_up: bool = True) -> bool:
        """A sign-up, a JupyterHub user (created through the API, the admin page or a
        login) or an admin already has this name, or (``signing_up``) a sign-up for it is
        being made."""
        return (
            name in self.admin_users
            or (signing_up and name in self._signing_up)
            or self.get_user(name) is not None
            or orm.User.find(self.db, name) is not None
        )

    def reserve_signup(self, name: str, address: str) -> str | None:
        """Hold ``name`` for a sign-up from ``address`` while its password is hashed, or
        say why not: too many sign-ups wait, from this address or in all."""
        if name in self._signing_up:
            return TAKEN
        pending = self.db.query(UserInfo).filter(UserInfo.is_authorized.is_not(True))
        waiting = [i.username for i in pending]
        here = [n for n in waiting if self._signup_address.get(n) == address]
        here += [n for n, a in self._signing_up.items() if a == address]
        if len(waiting) + len(self._signing_up) >= SETTINGS.signups_pending:
            self.log.warning("sign-up %s refused: %d sign-ups wait", name, len(waiting))
            return TOO_MANY
        if len(here) >= SETTINGS.signups_per_address:
            self.log.warning("sign-up %s refused: %d wait from %s", name, len(here), address)
            return TOO_MANY
        self._signing_up[name] = address
        return None

    def end_signup(self, name: str, created: bool) -> None:
        address = self._signing_up.pop(name, None)
        if created:
            self._signup_address[name] = address

    async def add_user(self, user):
        """A user created through the API (or the admin page) while a sign-up under that
        name waits is refused: the teacher approves or discards the sign-up first, at
        /hub/authorize, so a stranger's sign-up can never become a student's account."""
        created_now = user.orm_user.created and user.orm_user.created >= self._started
        info = self.get_user(user.name)
        waiting = info is not None and not info.is_authorized
        if created_now and (waiting or user.name in self._signing_up):
            raise ValueError(
                f"a sign-up under the name {user.name} waits for approval: approve or discard "
                "it at /hub/authorize first"
            )
        return super().add_user(user)

    # --- lock-outs, per name and address, with backoff
    def begin_check(self, key) -> bool:
        """Whether a password may be checked now for ``key`` (a name and an address): not
        while it is locked, and no more checks at once than the failures it has left before
        the lock (one at a time once it has been locked), so a burst sent at once is cut as
        short as the same attempts one after another. ``end_check`` after each check."""
        count, until = self._failures.get(key, (0, 0.0))
        left = max(SETTINGS.lockout_after - count, 1)
        if time.monotonic() < until or self._checking.get(key, 0) >= left:
            self.log.warning("password check for %s refused unchecked: locked", key)
            return False
        self._checking[key] = self._checking.get(key, 0) + 1
        return True

    def end_check(self, key, valid: bool) -> None:
        self._checking[key] -= 1
        if not self._checking[key]:
            del self._checking[key]
        if valid:
            self._failures.pop(key, None)
            return
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
        # cannot shut the teacher out (bcrypt's cost and a worker of one bound their rate).
        key = (username, client_address(handler) if handler is not None else "")
        if not admin and not self.begin_check(key):
            return None
        valid = False
        try:
            valid = await asyncio.get_running_loop().run_in_executor(
                self._login_worker, bcrypt.checkpw, password.encode(), info.password
            )
        finally:
            if not admin:
                self.end_check(key, valid)
        return username if valid and info.is_authorized else None

    async def refresh_user(self, user, handler=None):
        """A student whose sign-up is no longer approved loses their cookie and tokens at the
        next request (students the teacher created through the API have no sign-up, and no
        sign-up can be made under their name)."""
        info = self.get_user(user.name)
        return info is None or bool(info.is_authorized) or user.name in self.admin_users

    def delete_user(self, user):
        super().delete_user(user)
        self._signup_address.pop(user.name, None)
        remove_system_user(user.name, self.log)


# --- the admin's password, written before the hub listens ------------------------------------


def admin_has_password(db: Path, name: str) -> bool:
    """Whether the hub's database ``db`` holds an approved password for ``name``."""
    if not db.exists():
        return False
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        row = con.execute(
            "SELECT is_authorized FROM users_info WHERE username = ?", (name,)
        ).fetchone()
    except sqlite3.OperationalError:  # no users_info table yet
        return False
    finally:
        con.close()
    return bool(row and row[0])


def set_password(db_url: str, name: str, password: str) -> None:
    """Write ``name``'s bcrypt hash, approved, into the hub's database (created with
    JupyterHub's schema if it does not exist yet)."""
    session = orm.new_session_factory(db_url)()  # creates and stamps a new database
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt())
    info = UserInfo.find(session, name)
    if info is None:
        session.add(UserInfo(username=name, password=hashed, is_authorized=True))
    else:
        info.password, info.is_authorized = hashed, True
    session.commit()
    session.close()


def _admin_password_command(argv: list[str]) -> int:
    """``python hub/classroom_hub.py admin-password [--password-stdin]``: the admin's
    password (ATTENTION_LAB_HUB_ADMIN, default teacher) in the hub's database
    (ATTENTION_LAB_HUB_STATE), asked twice on the terminal or read from stdin."""
    import getpass

    state = Path(os.environ.get("ATTENTION_LAB_HUB_STATE", str(SETTINGS.state)))
    name = os.environ.get("ATTENTION_LAB_HUB_ADMIN", SETTINGS.admin)
    if os.geteuid() != 0 and not os.access(state, os.W_OK):
        print(f"admin-password: run as root (the hub's state, {state}, is root's)", file=sys.stderr)
        return 1
    pid_file = state / "jupyterhub.pid"
    if pid_file.exists():
        try:
            os.kill(int(pid_file.read_text().strip()), 0)
            print(
                "admin-password: the hub is running; stop it first (or change the password "
                "at /hub/change-password, logged in as the admin)",
                file=sys.stderr,
            )
            return 1
        except (ValueError, ProcessLookupError):
            pass
    if "--password-stdin" in argv:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = getpass.getpass(f"A password for the hub's admin, {name}: ")
        if getpass.getpass("The same again: ") != password:
            print("admin-password: the two did not match; nothing changed", file=sys.stderr)
            return 1
    common_file = Path(native_auth.__file__).parent / "common-credentials.txt"
    common = set(common_file.read_text().splitlines())
    if len(password) < 12 or password in common:
        print(
            "admin-password: choose at least 12 characters, not a common password (the "
            "admin is never locked out: the password's length is what protects it)",
            file=sys.stderr,
        )
        return 1
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(state, 0o700)
    set_password(f"sqlite:///{state / 'jupyterhub.sqlite'}", name, password)
    os.chmod(state / "jupyterhub.sqlite", 0o600)
    print(f"admin-password: {name}'s password is set in {state / 'jupyterhub.sqlite'}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] != ["admin-password"]:
        print(f"usage: {sys.argv[0]} admin-password [--password-stdin]", file=sys.stderr)
        sys.exit(2)
    sys.exit(_admin_password_command(sys.argv[2:]))
