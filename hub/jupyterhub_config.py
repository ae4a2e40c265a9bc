# JupyterHub for a class on one machine (`make hub`; hub/README.md says how to run it).
#
# - Sign-up with the teacher's approval (NativeAuthenticator): a student signs up at
#   /hub/signup, the teacher (an admin) approves at /hub/authorize, then the student logs in.
# - Every student's server runs as the student's own system user, ``<prefix><name>``
#   (LocalProcessSpawner), created with useradd on the first spawn, home mode 700.
# - On the first spawn the chapter (notebooks/*.ipynb, English edition) is copied into
#   ~/attention-lab as the student, offline: no nbgitpuller, no network. A student's own
#   edits are never overwritten; a later spawn copies only notebooks that are missing.
# - The proxy is configurable-http-proxy from hub/node_modules (`npm ci` in hub/).
# - The servers run JupyterLab from the hub's own venv (tools/hub_env.sh), which every
#   student can execute; the repository's .venv usually sits under a mode-700 home.
#
# Every setting below can be changed by an environment variable, so the tests run a
# private hub on other ports with its own state folder and user prefix.
import os
import pwd
import secrets
import shutil
import subprocess
from pathlib import Path

from jupyterhub.spawner import LocalProcessSpawner

c = get_config()  # noqa: F821 -- provided by JupyterHub when it loads this file

HERE = Path(__file__).resolve().parent
env = os.environ.get
HUB_VENV = Path(env("HUB_VENV", "/opt/attention-lab-hub/venv"))
# tools/hub_env.sh puts a world-readable copy of the chapter beside the venv.
CHAPTER = Path(env("ATTENTION_LAB_HUB_CHAPTER", str(HUB_VENV.parent / "chapter")))
STATE = Path(env("ATTENTION_LAB_HUB_STATE", "/var/lib/attention-lab-hub"))
USER_PREFIX = env("ATTENTION_LAB_HUB_USER_PREFIX", "alab-")
HOME_BASE = Path(env("ATTENTION_LAB_HUB_HOME_BASE", "/home"))
ADMIN = env("ATTENTION_LAB_HUB_ADMIN", "teacher")
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

# --- sign-up with approval
c.JupyterHub.authenticator_class = "native"
c.NativeAuthenticator.open_signup = False  # every sign-up waits for an admin
c.NativeAuthenticator.minimum_password_length = 8
c.NativeAuthenticator.check_common_password = True
c.NativeAuthenticator.allowed_failed_logins = 5
c.NativeAuthenticator.seconds_before_next_try = 60
c.Authenticator.admin_users = {ADMIN}  # the teacher signs up first and is approved at once
# NativeAuthenticator itself refuses anyone not approved; past that, every user may log in.
c.Authenticator.allow_all = True
# Names that make a safe system user name once prefixed (``alab-`` + at most 20 characters).
c.Authenticator.username_pattern = r"^[a-z][a-z0-9_-]{0,19}$"

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


# --- one system user per student
def system_user(hub_name: str) -> str:
    return USER_PREFIX + hub_name


def ensure_system_user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    home = HOME_BASE / name
    subprocess.run(
        ["useradd", "--create-home", "--home-dir", str(home), "--shell", "/bin/bash",
         "--user-group", "--comment", "Attention Lab student", "--key", "UMASK=077", name],
        check=True,
    )  # fmt: skip
    os.chmod(home, 0o700)  # whatever HOME_MODE login.defs sets: no one else may enter
    return pwd.getpwnam(name)


class ClassroomSpawner(LocalProcessSpawner):
    """LocalProcessSpawner that runs ``<prefix><hub name>``, never the hub name itself, so no
    sign-up can ever name an existing account such as root."""

    @property
    def system_user(self) -> str:
        return system_user(self.user.name)

    def make_preexec_fn(self, name):
        return super().make_preexec_fn(self.system_user)

    def user_env(self, env):
        pw = pwd.getpwnam(self.system_user)
        env.update(USER=pw.pw_name, LOGNAME=pw.pw_name, HOME=pw.pw_dir, SHELL=pw.pw_shell)
        return env


def copy_chapter(spawner) -> None:
    """pre_spawn_hook: create the student's system user and copy the chapter into
    ~/attention-lab, as the student (so every file is theirs), skipping files they have."""
    pw = ensure_system_user(spawner.system_user)
    dest = Path(pw.pw_dir) / "attention-lab"
    if not CHAPTER.is_dir():
        spawner.log.warning("no chapter at %s (run tools/hub_env.sh)", CHAPTER)
        return
    subprocess.run(
        ["cp", "-r", "--no-clobber", "--no-target-directory", str(CHAPTER), str(dest)],
        user=pw.pw_uid, group=pw.pw_gid, extra_groups=[], cwd=pw.pw_dir, check=True,
        env={"PATH": "/usr/bin:/bin", "HOME": pw.pw_dir},
    )  # fmt: skip


c.JupyterHub.spawner_class = ClassroomSpawner
c.Spawner.pre_spawn_hook = copy_chapter
c.Spawner.cmd = [str(HUB_VENV / "bin" / "jupyterhub-singleuser")]
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
# The limits of the teacher's guide. LocalProcessSpawner does not enforce them (it passes
# MEM_LIMIT and CPU_LIMIT to the server); Kubernetes does (hub/z2jh/values.yaml).
c.Spawner.mem_guarantee = env("ATTENTION_LAB_HUB_MEM_GUARANTEE", "1G")
c.Spawner.mem_limit = env("ATTENTION_LAB_HUB_MEM_LIMIT", "2G")
c.Spawner.cpu_guarantee = float(env("ATTENTION_LAB_HUB_CPU_GUARANTEE", "0.5"))
c.Spawner.cpu_limit = float(env("ATTENTION_LAB_HUB_CPU_LIMIT", "1"))

if shutil.which("useradd") is None:
    raise SystemExit(
        "jupyterhub_config.py: useradd not found; the hub creates one user per student"
    )
