# JupyterHub for a class on one machine (`make hub`; hub/README.md says how to run it).
#
# - Sign-up with the teacher's approval (NativeAuthenticator): a student signs up at
#   /hub/signup, the teacher (the admin, whose password `make hub-admin` wrote before the
#   hub first listened) approves at /hub/authorize, then the student logs in.
# - Every student's server runs as the student's own system user, ``<prefix><name>``
#   (LocalProcessSpawner), created with useradd on the first spawn, home mode 700.
# - On the first spawn the chapter (notebooks/*.ipynb, English edition) is copied into
#   ~/attention-lab as the student, offline: no nbgitpuller, no network. A student's own
#   edits are never overwritten; a later spawn copies only notebooks that are missing.
# - The proxy is configurable-http-proxy from hub/node_modules (`npm ci` in hub/).
# - The servers run JupyterLab from the hub's own venv (tools/hub_env.sh), which every
#   student can execute; the repository's .venv usually sits under a mode-700 home.
# - Students kept apart (hub/README.md, "What the hub guarantees"): kernels talk over ipc
#   sockets in the student's mode-700 runtime folder, never TCP; TMPDIR and every cache live
#   in the home; umask 077, a process limit and a memory limit (a cgroup, or RLIMIT_AS) for
#   every student process; each home a loop-mounted image of the disk limit; approving and
#   discarding are POST forms with the XSRF token; cookies are SameSite=Lax; the lock-out is
#   per name and address, with backoff, for logins (never locking the teacher) and wrong old
#   passwords; one message for any refused login; bcrypt off the event loop, logins in a
#   worker of their own; a sign-up under a name the hub knows is refused and waiting
#   sign-ups are capped; stopping a server kills every process of the student; un-approving
#   or deleting a student revokes their tokens and cookie and stops their server; deleting
#   one archives their home and removes their system user.
# - The hub refuses to start while the admin has no password, or while students could read
#   the solutions, the course's gradebook or submissions (the checkout and the course folder).
#
# Every setting below can be changed by an environment variable, so the tests run a
# private hub on other ports with its own state folder and user prefix.
import ipaddress
import os
import secrets
import shutil
import stat
import sys
from pathlib import Path

c = get_config()  # noqa: F821 -- provided by JupyterHub when it loads this file

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import classroom_hub  # noqa: E402 -- hub/classroom_hub.py: the authenticator, spawner, hooks
from jupyterhub.traitlets import ByteSpecification  # noqa: E402

env = os.environ.get
HUB_VENV = Path(env("HUB_VENV", "/opt/attention-lab-hub/venv"))
# tools/hub_env.sh puts a world-readable copy of the chapter beside the venv.
CHAPTER = Path(env("ATTENTION_LAB_HUB_CHAPTER", str(HUB_VENV.parent / "chapter")))
STATE = Path(env("ATTENTION_LAB_HUB_STATE", str(classroom_hub.SETTINGS.state)))
USER_PREFIX = env("ATTENTION_LAB_HUB_USER_PREFIX", "alab-")
HOME_BASE = Path(env("ATTENTION_LAB_HUB_HOME_BASE", "/home"))
ADMIN = env("ATTENTION_LAB_HUB_ADMIN", classroom_hub.SETTINGS.admin)
# the teacher's checkout (this file's) and the nbgrader course folder (`make assignment`)
CHECKOUT = HERE.parent
COURSE = Path(env("ATTENTION_LAB_COURSE", str(CHECKOUT / "build" / "course")))
STATE.mkdir(parents=True, exist_ok=True, mode=0o700)
os.chmod(STATE, 0o700)

# --- network: everything on 127.0.0.1 (put a TLS reverse proxy in front for a real class)
c.JupyterHub.ip = env("ATTENTION_LAB_HUB_IP", "127.0.0.1")
c.JupyterHub.port = int(env("ATTENTION_LAB_HUB_PORT", "8000"))
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = int(env("ATTENTION_LAB_HUB_API_PORT", "8081"))
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{env('ATTENTION_LAB_PROXY_API_PORT', '8001')}"
c.ConfigurableHTTPProxy.command = [str(HERE / "node_modules" / ".bin" / "configurable-http-proxy")]
c.Spawner.ip = "127.0.0.1"

# --- state: database, cookie secret and the admin service's token, root-only
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(STATE / "jupyterhub.pid")
c.ConfigurableHTTPProxy.pid_file = str(STATE / "jupyterhub-proxy.pid")
# stopping the hub stops every student's server and the proxy with it
c.JupyterHub.cleanup_servers = True
c.JupyterHub.cleanup_proxy = True
# Every cookie the hub and the students' servers set is SameSite=Lax: no other site's page,
# <img> or form sends it along.
c.JupyterHub.tornado_settings = {"cookie_options": {"samesite": "Lax"}}
c.Spawner.cookie_options = {"samesite": "Lax"}

# --- sign-up with approval (hub/classroom_hub.py: ClassroomAuthenticator)
MEM_LIMIT = ByteSpecification().validate(None, env("ATTENTION_LAB_HUB_MEM_LIMIT", "2G"))
DISK_LIMIT = ByteSpecification().validate(None, env("ATTENTION_LAB_HUB_DISK_LIMIT", "2G"))
TRUSTED_PROXIES = env("ATTENTION_LAB_HUB_TRUSTED_PROXIES", "").split()
for proxy in TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(proxy, strict=False)
    except ValueError as e:
        raise SystemExit(
            f"jupyterhub_config.py: ATTENTION_LAB_HUB_TRUSTED_PROXIES: {e} (give addresses or "
            "networks, space-separated, e.g. 127.0.0.1 or 10.0.0.0/8)"
        ) from e
classroom_hub.SETTINGS = classroom_hub.Settings(
    prefix=USER_PREFIX,
    home_base=HOME_BASE,
    state=STATE,
    chapter=CHAPTER,
    admin=ADMIN,
    nproc=int(env("ATTENTION_LAB_HUB_NPROC", "512")),
    lockout_after=int(env("ATTENTION_LAB_HUB_LOCKOUT_AFTER", "5")),
    lockout_seconds=float(env("ATTENTION_LAB_HUB_LOCKOUT_SECONDS", "60")),
    # sign-ups that may wait for approval, from one client address and in all
    signups_per_address=int(env("ATTENTION_LAB_HUB_SIGNUPS_PER_ADDRESS", "3")),
    signups_pending=int(env("ATTENTION_LAB_HUB_SIGNUPS_PENDING", "100")),
    # the addresses or networks of reverse proxies in front of the hub (space-separated), so
    # that the limits above count each client's own address, not the reverse proxy's
    trusted_proxies=frozenset(TRUSTED_PROXIES),
    disk_limit=DISK_LIMIT,
)
c.JupyterHub.authenticator_class = classroom_hub.ClassroomAuthenticator
# the authorization page with POST forms (hub/templates/authorization-area.html)
c.JupyterHub.template_paths = [str(HERE / "templates")]
c.NativeAuthenticator.open_signup = False  # every sign-up waits for an admin
c.NativeAuthenticator.minimum_password_length = 8
c.NativeAuthenticator.check_common_password = True
# The admin signs up nowhere: `make hub-admin` writes their password before the hub listens
# (checked at the end of this file), and a sign-up under their name is refused.
c.Authenticator.admin_users = {ADMIN}
# NativeAuthenticator itself refuses anyone not approved; past that, every user may log in.
c.Authenticator.allow_all = True
# Names that make a safe system user name once prefixed (``alab-`` + at most 20 characters).
c.Authenticator.username_pattern = r"^[a-z][a-z0-9_-]{0,19}$"
# An un-approved student's cookie and tokens stop working within 30 s even if their access
# was not revoked (un-approving revokes it at once), and before any spawn.
c.Authenticator.auth_refresh_age = int(env("ATTENTION_LAB_HUB_AUTH_REFRESH_AGE", "30"))
c.Authenticator.refresh_pre_spawn = True

# --- a token for scripts (creating students, starting servers): the "class-admin" service
token_file = STATE / "class-admin.token"
ADMIN_TOKEN = env("ATTENTION_LAB_HUB_ADMIN_TOKEN")
if not ADMIN_TOKEN:
    if not token_file.exists():
        token_file.write_text(secrets.token_hex(32) + "\n")
    os.chmod(token_file, 0o600)
    ADMIN_TOKEN = token_file.read_text().strip()
c.JupyterHub.services = [{"name": "class-admin", "api_token": ADMIN_TOKEN}]
c.JupyterHub.load_roles = [
    {
        "name": "class-admin",
        "scopes": ["admin:users", "admin:servers", "tokens", "list:users", "read:users"],
        "services": ["class-admin"],
    }
]

# --- one system user per student (hub/classroom_hub.py: ClassroomSpawner and its hooks)
system_user = classroom_hub.system_user  # tests and scripts: the system user of a hub name
c.JupyterHub.spawner_class = classroom_hub.ClassroomSpawner
c.Spawner.pre_spawn_hook = classroom_hub.prepare_home  # user, TMPDIR, caches, the chapter
c.Spawner.post_stop_hook = classroom_hub.kill_every_process  # nothing outlives the server
c.Spawner.cmd = [str(HUB_VENV / "bin" / "jupyterhub-singleuser")]
# Kernels talk to the server over ipc sockets beside their connection files, in the
# student's mode-700 runtime folder: no other user can subscribe to them (over TCP, any
# local user could connect to a kernel's IOPub port and read what it runs and prints).
c.Spawner.args = ["--KernelManager.transport=ipc"]
c.Spawner.notebook_dir = "~"
c.Spawner.default_url = "/lab/tree/attention-lab/01_weighted_average.ipynb"
c.Spawner.disable_user_config = True
# Several students start at once on a small machine: give JupyterLab time to import.
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 120
# One core's worth of threads per student: PyTorch otherwise starts one thread per core in
# every kernel, and a class of them fights over the cores (teaching/README.md, "Running it
# for a class", measured it).
THREADS = env("ATTENTION_LAB_HUB_THREADS", "1")
c.Spawner.environment = {
    "PATH": f"{HUB_VENV / 'bin'}:/usr/local/bin:/usr/bin:/bin",
    "OMP_NUM_THREADS": THREADS,
    "MKL_NUM_THREADS": THREADS,
}
# The limits of the teacher's guide. The memory limit holds: every process of a student in
# one memory cgroup (cgroup v1) with mem_limit for all of them together, or, where this hub
# cannot write cgroups, RLIMIT_AS of mem_limit on each process. So does the disk limit: each
# home is an ext4 image of ATTENTION_LAB_HUB_DISK_LIMIT, loop-mounted (0: no limit). The
# CPU figures are passed to the server as CPU_LIMIT and the like, not enforced; Kubernetes
# enforces all of them (hub/z2jh/values.yaml).
c.Spawner.mem_guarantee = env("ATTENTION_LAB_HUB_MEM_GUARANTEE", "1G")
c.Spawner.mem_limit = MEM_LIMIT
c.Spawner.cpu_guarantee = float(env("ATTENTION_LAB_HUB_CPU_GUARANTEE", "0.5"))
c.Spawner.cpu_limit = float(env("ATTENTION_LAB_HUB_CPU_LIMIT", "1"))
MEMORY, why = classroom_hub.choose_memory_limiter(env("ATTENTION_LAB_HUB_MEMORY", "auto"))
classroom_hub.SETTINGS.memory = MEMORY
if MEMORY == "cgroup":
    print(
        f"jupyterhub_config.py: memory: {classroom_hub.gib(MEM_LIMIT)} per student, every "
        f"process of theirs together, in the cgroup {classroom_hub.cgroup_of('<user>')} ({why})",
        file=sys.stderr,
    )
else:
    address_space = int(MEM_LIMIT * classroom_hub.SETTINGS.address_space_factor)
    print(
        f"jupyterhub_config.py: memory: RLIMIT_AS of {classroom_hub.gib(address_space)} "
        f"(address space, {classroom_hub.SETTINGS.address_space_factor:g} x mem_limit) on each "
        f"process of a student, not on all of them together ({why})",
        file=sys.stderr,
    )
if DISK_LIMIT:
    try:
        classroom_hub.check_loop_mounts()
    except OSError as e:
        raise SystemExit(
            f"jupyterhub_config.py: each home is to be a loop-mounted ext4 image of "
            f"{classroom_hub.gib(DISK_LIMIT)}, but that does not work here ({e}). Run as root "
            "on a machine with loop devices, or set ATTENTION_LAB_HUB_DISK_LIMIT=0 for homes "
            "with no disk limit."
        ) from e
    print(
        f"jupyterhub_config.py: disk: each home a loop-mounted ext4 image of "
        f"{classroom_hub.gib(DISK_LIMIT)} in {STATE / 'homes'}",
        file=sys.stderr,
    )
else:
    print("jupyterhub_config.py: disk: no limit (ATTENTION_LAB_HUB_DISK_LIMIT=0)", file=sys.stderr)

if shutil.which("useradd") is None:
    raise SystemExit(
        "jupyterhub_config.py: useradd not found; the hub creates one user per student"
    )


# --- the solutions, gradebook and submissions stay with the teacher
def readable_by_others(path: Path) -> bool:
    """Whether a user who is neither the owner nor in the group (a student: each is alone
    in their own group) can reach ``path`` and read it: every folder above it searchable
    by others, and the file readable (a folder readable or searchable) by others."""
    try:
        if not all(p.stat().st_mode & stat.S_IXOTH for p in path.parents):
            return False
        mode = path.stat().st_mode
    except OSError:
        return False
    wanted = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(mode) else 0)
    return bool(mode & wanted)


SECRETS = [
    *sorted((CHECKOUT / "notebooks").rglob("*solutions*.ipynb")),
    *sorted((CHECKOUT / "i18n").rglob("*solutions*.po")),  # the solutions' Chinese text
    COURSE,
    *(COURSE / name for name in ("source", "gradebook.db", "submitted", "autograded", "feedback")),
]
exposed = [p for p in SECRETS if readable_by_others(p)]
if exposed:
    lines = "\n".join(f"  {p}\n      fix: chmod o-rwx {p}" for p in exposed)
    at_once = ""
    if any(p.is_relative_to(CHECKOUT) for p in exposed):
        at_once = (
            f"\nOr the whole checkout at once: chmod o-rwx {CHECKOUT} (the hub reads it as "
            f"root; students get the chapter from {CHAPTER}, which tools/hub_env.sh fills)."
        )
    raise SystemExit(
        "jupyterhub_config.py: refusing to start: every user of this machine, students "
        f"included, can read what holds solutions, gradebooks or submissions:\n{lines}{at_once}"
    )

# --- the admin has a password before the hub listens (no "first to sign up is the admin")
if not classroom_hub.admin_has_password(STATE / "jupyterhub.sqlite", ADMIN):
    raise SystemExit(
        f"jupyterhub_config.py: refusing to start: the admin, {ADMIN}, has no password yet. "
        f"Set it first: sudo make hub-admin (that is, python hub/classroom_hub.py "
        f"admin-password with ATTENTION_LAB_HUB_STATE={STATE})."
    )
