"""The sandbox a submission's kernel runs in, for ``hub/grading/grade.py`` (``make grade``).

nbgrader's ``autograde`` stays the trusted driver: it runs as root, restores the locked cells,
sends each cell to a kernel and writes the gradebook. Only the **kernel** runs here, and each
notebook gets its own sandbox (``Sandbox``):

* a throwaway system user (``useradd --system``, no home, no login shell), removed afterwards,
  so the kernel has no rights of root, the teacher or any student;
* a memory cgroup with a limit (cgroup v1's memory controller, or cgroup v2's ``memory.max``),
  at most ``processes`` processes and threads (``prlimit --nproc``; the uid is new, so they
  are all the sandbox's) and a wall-clock limit for the whole notebook (``timeout``);
* bubblewrap (Debian's ``bwrap``), started as that user: new user, mount, pid, network, IPC,
  UTS and cgroup namespaces, no nested user namespaces, an empty environment but for a few
  variables, and an allow-list of mounts: ``/usr`` and the hub's venv (which holds
  ``attention_lab``, torch and ipykernel) read-only, a private ``/tmp`` of its own size,
  ``/proc`` of its own pid namespace, a minimal ``/dev``, and the folder of the kernel's
  connection file and sockets. Nothing else exists in there: not the students' homes, the
  hub's state, ``/root``, the checkout or the course folder;
* the network namespace has only its own loopback; the driver talks to the kernel over ipc
  sockets (``--KernelManager.transport=ipc``) in that one shared folder, which is owned by
  root: the user may create its sockets there until the kernel has answered, and the folder
  is then sealed (read-only for it) before the first cell runs, so no student code can swap
  a socket for a link that root would follow.

When the notebook ends (or the kernel dies, or a limit stops it) ``Sandbox.end`` kills every
process of the user, checks that none is left (by uid, in the whole machine, and in the
cgroup), and only then does ``SandboxedExecute`` return the notebook to nbgrader, which writes
the gradebook. A survivor raises ``SandboxError``: nbgrader then records nothing for that
notebook and ``grade.py`` says so.

``SandboxedExecute`` takes the place of nbgrader's ``Execute`` in
``Autograde.autograde_preprocessors`` (grade.py writes that configuration), and
``KeepSafeOutputs`` strips what a browser would run or render as HTML from the autograded
notebook (the teacher may open it in the Formgrader).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

# The throwaway users' names: never a hub student's (the hub's are its prefix, "alab-" by
# default, and a name of [a-z][a-z0-9_-]).
USER_PREFIX = "alabgrade-"
VERDICT_MIME = "application/vnd.attention-lab.verdict+json"  # attention_lab.exercises._record
GiB = 1024**3
MiB = 1024**2
TOOLS = ("bwrap", "setpriv", "prlimit", "timeout", "useradd", "userdel")
CGROUP = Path("/sys/fs/cgroup")


class SandboxError(RuntimeError):
    """The sandbox could not be made, or something of the user outlived it."""


@dataclass(frozen=True)
class Limits:
    memory: int = 2 * GiB  # bytes, the kernel and everything it starts (cgroup)
    seconds: int = 900  # the whole notebook, from the kernel's start (timeout)
    processes: int = 256  # processes and threads of the user (RLIMIT_NPROC)
    tmp: int = 256 * MiB  # the private /tmp, a tmpfs (counted in the memory too)


def missing_tools() -> list[str]:
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def memory_controller() -> str | None:
    """ "v1" or "v2" when this machine has a memory cgroup the grader can use, else None."""
    if (CGROUP / "memory" / "memory.limit_in_bytes").exists():
        return "v1"
    controllers = CGROUP / "cgroup.controllers"
    if controllers.exists() and "memory" in controllers.read_text().split():
        return "v2"
    return None


def processes_of(uid: int) -> list[int]:
    """Every live process whose real, effective or saved uid is ``uid`` (from /proc). A
    zombie runs nothing and is left out: bubblewrap's pid 1 of a sandbox becomes one, until
    the machine's init reaps it."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue  # gone meanwhile
        if fields.get("State", "").split()[:1] in (["Z"], ["X"]):
            continue
        if str(uid) in fields.get("Uid", "").split()[:3]:
            found.append(int(entry))
    return found


def _merged_usr_links() -> list[str]:
    """bwrap arguments for /bin, /lib, /lib64, /sbin: links into /usr where the machine has
    them (Debian's merged /usr), read-only binds otherwise."""
    args = []
    for top in ("bin", "lib", "lib64", "sbin"):
        path = Path("/", top)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    return args


class Sandbox:
    """One notebook's sandbox: ``with Sandbox(venv, limits) as box: box.command([...])``.

    ``box.command(argv)`` is the command line that runs ``argv`` inside it; ``box.seal()``
    makes the kernel folder read-only for the user; leaving the ``with`` block ends it
    (``end``): every process of the user killed and checked gone, the cgroup, the folder and
    the user removed."""

    def __init__(self, venv: Path, limits: Limits = Limits()):
        self.venv = Path(venv)
        self.limits = limits
        self.user = ""
        self.uid = self.gid = -1
        self.dir: Path | None = None
        self.cgroups: list[Path] = []
        self.sealed = False
        self.killed: list[int] = []
        self.peak = 0  # bytes: the most memory the cgroup held (read as it ends)

    # --- making it
    def __enter__(self) -> Sandbox:
        try:
            self._create_user()
            self._create_dirs()
            self._create_cgroups()
        except BaseException:
            self.end()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.end()

    def _create_user(self) -> None:
        for _ in range(5):
            name = USER_PREFIX + secrets.token_hex(4)
            r = subprocess.run(
                ["useradd", "--system", "--user-group", "--no-create-home",
                 "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name],
                capture_output=True, text=True,
            )  # fmt: skip
            if r.returncode == 9:  # the name exists: draw another
                continue
            if r.returncode != 0:
                raise SandboxError(f"useradd {name} failed: {r.stderr.strip()}")
            self.user = name
            pw = pwd.getpwnam(name)
            self.uid, self.gid = pw.pw_uid, pw.pw_gid
            break
        else:
            raise SandboxError("useradd: no free name for the grading user")
        # a uid can come back after userdel: nothing may run under it already
        if processes_of(self.uid):
            raise SandboxError(f"uid {self.uid} ({self.user}) already has processes")

    def _create_dirs(self) -> None:
        base = "/run" if os.access("/run", os.W_OK) else None
        self.dir = Path(tempfile.mkdtemp(prefix="attention-lab-grading-", dir=base))
        os.chmod(self.dir, 0o711)  # the user may pass through, not list
        kernel = self.kernel_dir
        kernel.mkdir(mode=0o700)
        os.chown(kernel, 0, self.gid)
        os.chmod(kernel, 0o770)  # until sealed: the kernel creates its sockets here
        for name, line in (
            ("passwd", f"{self.user}:x:{self.uid}:{self.gid}::/tmp:/usr/sbin/nologin\n"),
            ("group", f"{self.user}:x:{self.gid}:\n"),
        ):
            (self.dir / name).write_text(line)
            os.chmod(self.dir / name, 0o644)

    def _create_cgroups(self) -> None:
        kind = memory_controller()
        if kind is None:
            raise SandboxError(
                "no memory cgroup on this machine (cgroup v1's memory controller or cgroup "
                "v2 with memory in cgroup.controllers): the grader cannot limit memory"
            )
        name = f"attention-lab-grading-{self.user}"
        if kind == "v1":
            group = CGROUP / "memory" / name
            group.mkdir()
            self.cgroups.append(group)
            (group / "memory.limit_in_bytes").write_text(str(self.limits.memory))
            if (group / "memory.memsw.limit_in_bytes").exists():  # swap counts too
                (group / "memory.memsw.limit_in_bytes").write_text(str(self.limits.memory))
        else:  # v2: a group of ours under the root, with the memory controller enabled
            parent = CGROUP / "attention-lab-grading"
            parent.mkdir(exist_ok=True)
            with contextlib.suppress(OSError):
                (CGROUP / "cgroup.subtree_control").write_text("+memory")
            (parent / "cgroup.subtree_control").write_text("+memory")
            group = parent / name
            group.mkdir()
            self.cgroups.append(group)
            (group / "memory.max").write_text(str(self.limits.memory))
            if (group / "memory.swap.max").exists():
                (group / "memory.swap.max").write_text("0")

    # --- using it
    @property
    def kernel_dir(self) -> Path:
        assert self.dir is not None
        return self.dir / "kernel"

    def environment(self) -> dict[str, str]:
        """The kernel's whole environment (bwrap --clearenv drops the driver's)."""
        return {
            "PATH": f"{self.venv / 'bin'}:/usr/bin:/bin",
            "HOME": "/tmp",
            "USER": self.user,
            "LOGNAME": self.user,
            "LANG": "C.UTF-8",
            "TMPDIR": "/tmp",
            "XDG_CACHE_HOME": "/tmp/.cache",
            "MPLCONFIGDIR": "/tmp/.matplotlib",
            "IPYTHONDIR": "/tmp/.ipython",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            # attention_lab.exercises._record hands each verdict to the grader as data
            "ATTENTION_LAB_GRADING": "1",
        }

    def bwrap(self, argv: list[str]) -> list[str]:
        """bubblewrap's command line for ``argv``: the allow-list of mounts, new namespaces."""
        assert self.dir is not None
        args = ["bwrap", "--unshare-user", "--unshare-all", "--disable-userns",
                "--die-with-parent", "--new-session", "--clearenv"]  # fmt: skip
        for key, value in self.environment().items():
            args += ["--setenv", key, value]
        args += ["--ro-bind", "/usr", "/usr", *_merged_usr_links()]
        if not self.venv.resolve().is_relative_to("/usr"):
            args += ["--ro-bind", str(self.venv), str(self.venv)]
        args += [
            "--proc", "/proc", "--dev", "/dev",
            "--size", str(self.limits.tmp), "--tmpfs", "/tmp",
            "--ro-bind", str(self.dir / "passwd"), "/etc/passwd",
            "--ro-bind", str(self.dir / "group"), "/etc/group",
            "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
            # the same path inside: the connection file names its sockets by it
            "--bind", str(self.kernel_dir), str(self.kernel_dir),
            "--chdir", "/tmp",
        ]  # fmt: skip
        return [*args, "--", *argv]

    def command(self, argv: list[str]) -> list[str]:
        """The whole chain, run by root: join the cgroup, then ``timeout`` (the notebook's
        time), ``prlimit`` (processes, no core files), ``setpriv`` (the throwaway user, no
        groups, no capabilities, no new privileges) and bubblewrap."""
        join = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'
        procs = [str(group / "cgroup.procs") for group in self.cgroups]
        return [
            "/bin/sh", "-c", join, "sh", *procs, "--",
            "timeout", "--signal=KILL", str(self.limits.seconds),
            "prlimit", f"--nproc={self.limits.processes}", "--core=0", "--",
            "setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--",
            *self.bwrap(argv),
        ]  # fmt: skip

    def seal(self) -> None:
        """Once the kernel has answered (before any cell runs): every entry of the kernel
        folder must be a socket of the user or root's connection file, and the folder
        becomes read-only for the user, so nothing it runs can replace them."""
        for entry in self.kernel_dir.iterdir():
            st = entry.lstat()
            ours = stat.S_ISREG(st.st_mode) and st.st_uid == 0
            if not (ours or (stat.S_ISSOCK(st.st_mode) and st.st_uid == self.uid)):
                raise SandboxError(f"unexpected {entry} in the kernel folder: {st}")
        os.chmod(self.kernel_dir, 0o750)
        self.sealed = True

    # --- ending it
    def kill_all(self, timeout: float = 20) -> list[int]:
        """SIGKILL every process of the user (by uid, and in the cgroup) until none is left
        or ``timeout`` passes; returns the pids still there (should be [])."""
        if self.uid < 0:
            return []
        deadline = time.monotonic() + timeout
        while True:
            pids = set(processes_of(self.uid))
            for group in self.cgroups:
                with contextlib.suppress(OSError):
                    pids |= {int(p) for p in (group / "cgroup.procs").read_text().split()}
            if not pids:
                return []
            if time.monotonic() > deadline:
                return sorted(pids)
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                    self.killed.append(pid)
            time.sleep(0.1)

    def end(self) -> None:
        """Kill, check, remove. Raises SandboxError if a process of the user survives (then
        the user, its cgroup and its folder are kept for the teacher to look at)."""
        left = self.kill_all()
        if left:
            raise SandboxError(
                f"processes {left} of the grading user {self.user} (uid {self.uid}) survived "
                "SIGKILL: this notebook's grades are not recorded; kill them and run again"
            )
        for group in self.cgroups:
            for name in ("memory.max_usage_in_bytes", "memory.peak"):  # v1, v2
                with contextlib.suppress(OSError, ValueError):
                    self.peak = max(self.peak, int((group / name).read_text()))
            for _ in range(50):  # the kernel may still be reaping the last task
                try:
                    group.rmdir()
                    break
                except OSError as e:
                    if e.errno != errno.EBUSY:
                        raise
                    time.sleep(0.1)
        self.cgroups = []
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        if self.user:
            subprocess.run(["userdel", self.user], capture_output=True)
            subprocess.run(["groupdel", self.user], capture_output=True)
            with contextlib.suppress(KeyError):
                pwd.getpwnam(self.user)
                raise SandboxError(f"userdel {self.user} failed")
            self.user = ""


# --- nbgrader's side: the kernel manager and the preprocessors ------------------------------
# (imported by nbgrader's autograde, which grade.py starts with PYTHONPATH=hub/grading)

try:
    from jupyter_client.kernelspec import KernelSpec
    from jupyter_client.manager import AsyncKernelManager
    from nbclient.exceptions import DeadKernelError
    from nbclient.util import run_sync
    from nbconvert.preprocessors import Preprocessor
    from nbformat import NotebookNode
    from nbgrader.preprocessors import Execute
    from traitlets import Int, Unicode
except ImportError:  # the sandbox alone (tests, grade.py's checks) needs none of them
    Execute = None

if Execute is not None:

    class SandboxKernelManager(AsyncKernelManager):
        """A kernel manager whose kernel is ``ipykernel`` of the hub's venv, in ``box``:
        its connection file and ipc sockets in the box's kernel folder, interrupts sent as
        messages (a signal would reach bwrap, not the kernel), its output to /dev/null (not
        the teacher's terminal)."""

        def __init__(self, box: Sandbox, **kwargs):
            super().__init__(**kwargs)
            self.box = box
            self.transport = "ipc"
            self.ip = str(box.kernel_dir / "ipc")
            self.connection_file = str(box.kernel_dir / "kernel.json")
            python = str(box.venv / "bin" / "python")
            argv = [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
            self._kernel_spec = KernelSpec(
                argv=box.command(argv),
                display_name="Python 3 (grading sandbox)",
                language="python",
                interrupt_mode="message",
                env={},
            )

        async def _async_launch_kernel(self, kernel_cmd: list[str], **kw) -> None:
            # the user reads the connection file, never writes it
            os.chown(self.connection_file, 0, self.box.gid)
            os.chmod(self.connection_file, 0o640)
            kw.update(
                cwd=str(self.box.dir),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            await super()._async_launch_kernel(kernel_cmd, **kw)

    class SandboxedExecute(Execute):
        """nbgrader's Execute with each notebook's kernel in a fresh ``Sandbox``; every
        process of it is killed and checked gone before nbgrader goes on to save grades."""

        venv = Unicode("/opt/attention-lab-hub/venv", help="the kernel's venv").tag(config=True)
        memory = Int(Limits.memory, help="bytes of memory for the kernel").tag(config=True)
        seconds = Int(Limits.seconds, help="seconds for the whole notebook").tag(config=True)
        processes = Int(Limits.processes, help="processes and threads").tag(config=True)
        report = Unicode("", help="a JSON-lines file: one line per notebook").tag(config=True)

        def preprocess(self, nb, resources, km=None):
            who = dict(resources.get("nbgrader", {}))
            limits = Limits(memory=self.memory, seconds=self.seconds, processes=self.processes)
            record = {"student": who.get("student"), "notebook": who.get("notebook")}
            record["assignment"] = who.get("assignment")
            start = time.monotonic()
            self._executed: set[int] = set()
            box = Sandbox(Path(self.venv), limits)
            try:
                with box:
                    record.update(user=box.user, uid=box.uid)
                    self._box = box
                    try:
                        nb, resources = super().preprocess(
                            nb, resources, km=SandboxKernelManager(box, parent=self)
                        )
                    except (DeadKernelError, RuntimeError, TimeoutError) as e:
                        if not box.sealed:  # the kernel never started: not the student's doing
                            raise
                        self._stopped(nb, e, limits)
                        record["stopped"] = f"{type(e).__name__}: {e}"[:300]
            except BaseException as e:
                record["error"] = f"{type(e).__name__}: {e}"[:300]
                raise
            finally:
                record.update(killed=len(set(box.killed)), seconds=time.monotonic() - start)
                record["peak_mib"] = box.peak // MiB
                record["sealed"] = box.sealed
                record["left"] = processes_of(record.get("uid", -1)) if box.user else []
                if self.report:
                    with open(self.report, "a") as f:
                        f.write(json.dumps(record) + "\n")
            return nb, resources

        async def async_start_new_kernel_client(self):
            kc = await super().async_start_new_kernel_client()
            self._box.seal()  # before the first cell: no student code has run yet
            return kc

        # nbclient's synchronous name is bound to its own coroutine: bind it to ours
        start_new_kernel_client = run_sync(async_start_new_kernel_client)

        def preprocess_cell(self, cell, resources, index):
            result = super().preprocess_cell(cell, resources, index)
            self._executed.add(index)
            return result

        def _stopped(self, nb, error: Exception, limits: Limits) -> None:
            """The kernel died or was stopped (a limit): every code cell that did not run to
            its end gets an error, so no test cell after it scores."""
            text = (
                f"the grading kernel stopped ({type(error).__name__}): memory limit "
                f"{limits.memory // MiB} MiB or time limit {limits.seconds} s"
            )
            for index, cell in enumerate(nb.cells):
                if cell.cell_type == "code" and index not in self._executed:
                    error = {"ename": "KernelStopped", "evalue": text, "traceback": [text]}
                    cell.setdefault("outputs", []).append(
                        NotebookNode(output_type="error", **error)
                    )

    class KeepSafeOutputs(Preprocessor):
        """Outputs a browser would run or render as markup are dropped from the autograded
        notebook: only text, PNG/JPEG images, errors and the checkers' verdicts stay."""

        keep = ("text/plain", "image/png", "image/jpeg", VERDICT_MIME)

        def preprocess_cell(self, cell, resources, index):
            if cell.cell_type != "code":
                return cell, resources
            outputs = []
            for out in cell.get("outputs", []):
                if out.output_type in ("display_data", "execute_result"):
                    out.data = {k: v for k, v in out.get("data", {}).items() if k in self.keep}
                    out.metadata = {}
                    if not out.data:
                        continue
                outputs.append(out)
            cell.outputs = outputs
            return cell, resources


def replace_execute(preprocessors: list) -> list:
    """nbgrader's autograde preprocessors with Execute replaced by SandboxedExecute and
    KeepSafeOutputs right after it; raises if nbgrader's list has no Execute."""
    if Execute is None or Execute not in preprocessors:
        raise SandboxError(f"nbgrader's autograde_preprocessors hold no Execute: {preprocessors}")
    out = []
    for p in preprocessors:
        out += [SandboxedExecute, KeepSafeOutputs] if p is Execute else [p]
    return out
