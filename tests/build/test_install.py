"""The install of `make lab` / `make lab-zh` / `make test`: which build of PyTorch (the
Makefile's TORCH_STEP), and the index every package comes from.

Everything runs for real and offline, against throwaway virtualenvs and simple indexes on
127.0.0.1 that record what they are asked for: one stands for PyTorch's CPU index, one for PyPI,
one for a mirror; 127.0.0.1:9 refuses at once, and a socket that never answers stands for an
index that hangs. The torch step runs alone (`make --eval` adds a target that runs the
Makefile's TORCH_STEP); the mirror tests run the install itself, in a throwaway project beside
the Makefile (a pyproject.toml whose lab extra needs torch and ipykernel, built by a backend
inside it, so nothing is fetched to build it). Every request for another host goes through a
proxy on 127.0.0.1 that records it and refuses it, so a request to pypi.org or
download.pytorch.org is seen, not made. pip runs with no configuration of this machine
(PIP_CONFIG_FILE=/dev/null, or the test's own file), so this machine's wheel directory takes no
part.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import importlib.util
import os
import re
import shutil
import socket
import socketserver
import subprocess
import sys
import threading
import venv
import zipfile
from base64 import urlsafe_b64encode
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pytest itself depends on tomli there
    import tomli as tomllib

# Import setuptools while this process is clean: after the throwaway-venv test below, a first
# import of setuptools in the same process trips its distutils shim (an AssertionError that
# broke tests/build/test_assignment.py, which imports nbgrader -> setuptools, when run after this file).
import setuptools  # noqa: E402, F401

ROOT = Path(__file__).resolve().parents[2]
MAKEFILE = ROOT / "Makefile"
CONSTRAINTS = ROOT / "constraints.txt"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PIN = re.search(r"^torch==([^\s;#]+)", CONSTRAINTS.read_text(), re.MULTILINE).group(1)
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
STAMPS = [".venv/.installed-lab", ".venv/.installed-lab-zh-CN", ".venv/.installed-test"]


# ---- what make would run (make -n: nothing is run) ----------------------------------------


def dry(*args, env=None) -> str:
    """What `make -n ARGS` would run (nothing is run; -B: as on a fresh machine)."""
    out = subprocess.run(
        ["make", "-f", MAKEFILE, "-n", *args], cwd=ROOT, capture_output=True, text=True,
        check=True, env=env,
    )  # fmt: skip
    return out.stdout


def picked(*args, env=None) -> str:
    """The build the torch step takes: the word after `case` in what make would run."""
    return re.search(r"^case (\S+) in", dry("-B", STAMPS[0], *args, env=env), re.M).group(1)


@pytest.mark.parametrize(
    "torch, system, nvidia, build",
    [
        ("auto", "Linux", "", "cpu"),
        ("auto", "Linux", "/proc/driver/nvidia", "pip"),
        ("auto", "Darwin", "", "pip"),
        ("cpu", "Linux", "/usr/bin/nvidia-smi", "cpu"),
        ("cpu", "Darwin", "", "cpu"),
        ("cuda", "Linux", "", "cuda"),
        ("default", "Linux", "", "default"),
    ],
)
def test_the_build_follows_the_machine_unless_forced(torch, system, nvidia, build):
    assert picked(f"TORCH={torch}", f"SYSTEM={system}", f"NVIDIA={nvidia}") == build


def test_a_gpu_is_seen_by_its_tool(tmp_path):
    tool = tmp_path / "nvidia-smi"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    env = dict(os.environ, PATH=f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert picked("SYSTEM=Linux", env=env) == "pip"
    if not Path("/proc/driver/nvidia").exists() and not shutil.which("nvidia-smi"):
        assert picked("SYSTEM=Linux") == "cpu"  # this machine, as it is


@pytest.mark.parametrize("stamp", STAMPS)
def test_make_runs_the_step_before_the_install_and_a_new_choice_reinstalls(stamp):
    for torch in ("cpu", "cuda", "default", "auto"):
        lines = dry("-B", stamp, f"TORCH={torch}").splitlines()
        step = [i for i, line in enumerate(lines) if line.startswith("case ")]
        pip_install = [i for i, line in enumerate(lines) if "pip install --quiet -c" in line]
        assert len(step) == 1 and pip_install and step[0] < pip_install[0]
    # a choice never made in this .venv is a new prerequisite of the install
    assert "touch .venv/.torch-never-made" in dry(stamp, "TORCH=never-made")


def test_only_the_cpu_step_names_an_index():
    """pip's own configuration (a mirror, say) decides where every other package comes from."""
    for target in ("lab", "lab-zh", "test"):
        for line in dry("-B", target).splitlines():
            found = re.findall(r"--index-url ([^\s;]+)", line)
            assert found == ([CPU_INDEX] if line.startswith("case ") else []), line
            assert " -i " not in line and "--extra-index-url" not in line


def test_the_pin_is_read_from_constraints():
    assert PIN == "2.13.0"
    assert f'"torch=={PIN}+cpu"' in dry("-B", STAMPS[0])


def installed_extras(*args) -> list[str]:
    """The extras of every `pip install -e ".[...]"` that `make -n -B ARGS` would run."""
    return re.findall(r'pip install .*-e "\.\[([^\]]*)\]"', dry("-B", *args))


def test_make_lab_installs_only_what_the_chapter_needs_and_make_test_adds_the_test_tools():
    # a reader's `make lab` on a fresh machine: the lab extra, no test or class tools
    assert installed_extras("lab") == ["lab"]
    assert installed_extras("slides") == installed_extras("explore") == ["lab"]
    assert installed_extras("demo") == ["lab"]
    # the Chinese edition adds JupyterLab's Chinese menus, and only them
    assert installed_extras("lab-zh") == installed_extras("lab", "LANG_EDITION=zh-CN")
    assert installed_extras("lab-zh") == ["lab,zh"]
    # `make test` and the maintainers' tools: every extra the tests import from
    everything = "lab,test,zh,class"
    for target in ("test", "unit", "nbval", "lint", "translations", "exercises", "assignment"):
        assert installed_extras(target) == [everything], target
    extras = set(PYPROJECT["project"]["optional-dependencies"])
    assert set(everything.split(",")) == extras - {"hub"}  # hub: the hub's own venv
    # the test install holds both lab installs, so it marks them done too
    touch = [line for line in dry("-B", ".venv/.installed-test").splitlines() if "touch" in line]
    assert set(touch[-1].split()[1:]) == set(STAMPS)


def test_the_lab_extra_holds_no_test_tool():
    extras = PYPROJECT["project"]["optional-dependencies"]
    names = {re.split(r"[<>=!~ \[]", r, maxsplit=1)[0].lower() for r in extras["lab"]}
    assert names.isdisjoint({"pytest", "pytest-xdist", "nbval", "hypothesis", "ruff", "playwright"})


# ---- for real: throwaway virtualenvs, indexes and a proxy on 127.0.0.1 --------------------


def make_venv(path: Path) -> str:
    """A virtualenv whose pip is the running one's (linked in: seconds faster than ensurepip)."""
    venv.EnvBuilder(with_pip=False).create(path)
    python = path / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    pip_dir = Path(importlib.util.find_spec("pip").origin).parent
    (Path(site) / "pip").symlink_to(pip_dir)
    return str(python)


def installed_torch(python: str) -> str | None:
    """The version of torch installed for `python` (e.g. '2.13.0+cpu'), or None."""
    code = (
        "import importlib.metadata as m\n"
        "try: print(m.version('torch'))\n"
        "except m.PackageNotFoundError: pass\n"
    )
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip() or None


def fake_wheel(directory: Path, name: str, version: str) -> Path:
    """A pure-Python wheel: a dist-info and a package that says what it is (and runs as -m)."""
    wheel_name = f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f'__version__ = "{version}"  # a stand-in for tests\n',
        f"{name}/__main__.py": "",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    with zipfile.ZipFile(directory / wheel_name, "w") as wheel:
        for path, text in files.items():
            wheel.writestr(path, text)
    return directory / wheel_name


class Index:
    """A simple index on 127.0.0.1; `seen` holds the path of every request it answered."""

    def __init__(self, root: Path):
        self.root = root / "simple"
        self.root.mkdir(parents=True)
        self.seen: list[str] = []
        seen = self.seen

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):
                seen.append(self.path)

        self.server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(Handler, directory=str(root))
        )
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/simple"

    def publish(self, name: str, *versions: str) -> None:
        folder = self.root / name
        folder.mkdir(exist_ok=True)
        for version in versions:
            fake_wheel(folder, name, version)
        links = "".join(
            f'<a href="{w.name.replace("+", "%2B")}">{w.name}</a>\n' for w in folder.glob("*.whl")
        )
        (folder / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Proxy(socketserver.ThreadingTCPServer):
    """An HTTP(S) proxy on 127.0.0.1 that records each request line and refuses it."""

    daemon_threads = True

    def __init__(self):
        self.seen: list[str] = []
        seen = self.seen

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                seen.append(self.rfile.readline().decode(errors="replace").strip())
                self.wfile.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def hosts(self) -> list[str]:
        """The hosts asked for, in order: 'pypi.org:443' for a CONNECT to PyPI."""
        return [line.split()[1] for line in self.seen if line.startswith("CONNECT ")]


@pytest.fixture
def proxy():
    server = Proxy()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def indexes(tmp_path):
    """Three simple indexes: PyTorch's CPU index's stand-in, PyPI's, a mirror's."""
    made = {name: Index(tmp_path / "indexes" / name) for name in ("cpu", "pypi", "mirror")}
    for name in ("pypi", "mirror"):  # PyPI's torch is the CUDA build: no +cpu
        made[name].publish("torch", PIN)
        made[name].publish("ipykernel", "7.3.0", "7.4.0")  # constraints.txt: by Python
    yield made
    for index in made.values():
        index.close()


def pip_env(proxy: Proxy, config: str = os.devnull, **pip: str) -> dict[str, str]:
    """This environment without its pip settings: pip reads `config` and PIP_<pip>; every
    host but 127.0.0.1 is reached through `proxy` (which refuses)."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(("PIP_", "NO_PROXY"))}
    env |= {"PIP_CONFIG_FILE": config, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        env[name] = proxy.url
    env["no_proxy"] = env["NO_PROXY"] = "127.0.0.1,localhost"
    env |= {f"PIP_{key.upper()}": value for key, value in pip.items()}
    return env


def lines_of(out: subprocess.CompletedProcess) -> list[str]:
    """The torch step's lines of a make run that succeeded."""
    assert out.returncode == 0, out.stdout + out.stderr
    return [line for line in out.stdout.splitlines() if line.startswith("torch:")]


class Step:
    """The Makefile's TORCH_STEP alone, in a throwaway .venv (`make --eval`: nothing else)."""

    def __init__(self, root: Path, proxy: Proxy):
        self.venv = root / "venv"
        self.python = make_venv(self.venv)
        self.proxy = proxy

    def __call__(self, *args: str, config: str = os.devnull, timeout: float = 240, **pip: str):
        return subprocess.run(
            ["make", "--no-print-directory", "-f", MAKEFILE, "--eval", "step: ; @$(TORCH_STEP)",
             "step", f"VENV={self.venv}", *args],
            cwd=ROOT, capture_output=True, text=True, env=pip_env(self.proxy, config, **pip),
            timeout=timeout,
        )  # fmt: skip


@pytest.fixture
def step(tmp_path, proxy):
    return Step(tmp_path, proxy)


def test_the_cpu_build_where_its_index_answers_else_the_default_index(step, indexes):
    cpu = indexes["cpu"]
    # unreachable: one line, nothing installed, and make goes on
    out = step("TORCH=cpu", "TORCH_CPU_INDEX=http://127.0.0.1:9")
    [line] = lines_of(out)
    assert line.startswith("torch: the CPU index http://127.0.0.1:9 is unreachable (")
    assert "refused" in line and line.endswith("); torch comes from the default index instead")
    assert installed_torch(step.python) is None

    # reachable, but no wheel of the pinned release: the same fallback, after pip tried
    cpu.publish("torch", "2.12.0+cpu")
    out = step("TORCH=cpu", f"TORCH_CPU_INDEX={cpu.url}")
    assert lines_of(out) == [
        f"torch: no CPU build of torch {PIN} for this Python at {cpu.url}; "
        "torch comes from the default index instead"
    ]
    assert installed_torch(step.python) is None and "/simple/torch/" in cpu.seen

    # reachable: the CPU build is installed from it, without its dependencies
    cpu.publish("torch", f"{PIN}+cpu")
    out = step("TORCH=cpu", f"TORCH_CPU_INDEX={cpu.url}")
    assert lines_of(out) == [f"torch: the CPU build, from {cpu.url}"]
    assert installed_torch(step.python) == f"{PIN}+cpu"
    assert f"/simple/torch/torch-{PIN}%2Bcpu-py3-none-any.whl" in cpu.seen

    # run again (as make does after pyproject.toml changes), as auto: nothing to do, no index
    # asked, not even the configured one
    asked = len(cpu.seen)
    out = step("TORCH=auto", "SYSTEM=Linux", "NVIDIA=", f"TORCH_CPU_INDEX={cpu.url}")
    assert lines_of(out) == [f"torch: the CPU build {PIN}+cpu, found without the network"]
    assert len(cpu.seen) == asked

    # TORCH=cuda: the CPU build goes, so that pip's next install brings PyPI's build
    out = step("TORCH=cuda", f"TORCH_CPU_INDEX={cpu.url}")
    assert lines_of(out) == ["torch: the CPU build removed; PyPI's comes next"]
    assert installed_torch(step.python) is None

    # PyPI's build installed, TORCH=cpu: the CPU build replaces it
    pypi = indexes["pypi"]
    subprocess.run(
        [step.python, "-m", "pip", "install", "-q", "--index-url", pypi.url, f"torch=={PIN}"],
        env=pip_env(step.proxy), check=True,
    )  # fmt: skip
    assert installed_torch(step.python) == PIN
    out = step("TORCH=cpu", f"TORCH_CPU_INDEX={cpu.url}")
    assert lines_of(out) == [f"torch: the CPU build, from {cpu.url}"]
    assert installed_torch(step.python) == f"{PIN}+cpu"
    # TORCH=cuda and TORCH=default leave PyPI's build where it is; no host but 127.0.0.1 asked
    out = step("TORCH=default")
    assert lines_of(out) == ["torch: from pip's index with the rest (TORCH=default)"]
    assert step.proxy.seen == []


def test_offline_where_the_wheel_is_at_hand(step, indexes, tmp_path):
    """A --find-links folder holding the CPU wheel, no index at all: installed from it."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    fake_wheel(wheels, "torch", f"{PIN}+cpu")
    out = step("TORCH=cpu", f"TORCH_CPU_INDEX={indexes['cpu'].url}", find_links=str(wheels))
    assert lines_of(out) == [f"torch: the CPU build {PIN}+cpu, found without the network"]
    assert installed_torch(step.python) == f"{PIN}+cpu"
    assert step.proxy.seen == [] and not any(index.seen for index in indexes.values())


def test_an_index_that_does_not_answer_is_left_after_five_seconds(step):
    silent = socket.create_server(("127.0.0.1", 0))  # accepts, never answers
    try:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/simple"
        out = step("TORCH=cpu", f"TORCH_CPU_INDEX={url}", timeout=60)  # not forever
    finally:
        silent.close()
    [line] = lines_of(out)
    assert line.startswith(f"torch: the CPU index {url} is unreachable (timed out)")
    assert installed_torch(step.python) is None


def test_an_unknown_mode_is_refused(step):
    out = step("TORCH=rocm")
    assert out.returncode != 0
    assert out.stdout.splitlines() == ["TORCH=rocm: expected auto, cpu, cuda or default"]


# ---- a mirror: the whole install, in a throwaway project ----------------------------------

# Its lab extra needs torch and ipykernel (make runs `python -m ipykernel install`); the
# backend writes the editable wheel with that metadata, so pip fetches nothing to build it.
PROJECT_TOML = """\
[build-system]
requires = []
build-backend = "backend"
backend-path = ["."]

[project]
name = "fake-lab"
version = "0"
"""
BACKEND = """\
import base64
import hashlib
import zipfile

EXTRAS = ("lab", "zh", "test", "class")
NEEDS = ("torch", "ipykernel")
METADATA = (
    "Metadata-Version: 2.1\\nName: fake-lab\\nVersion: 0\\n"
    + "".join(f"Provides-Extra: {e}\\n" for e in EXTRAS)
    + "".join(f'Requires-Dist: {d}; extra == "{e}"\\n' for e in EXTRAS for d in NEEDS)
)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    info = "fake_lab-0.dist-info"
    files = {
        f"{info}/METADATA": METADATA,
        f"{info}/WHEEL": "Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
        "fake_lab.pth": "",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\\n".join([*record, f"{info}/RECORD,,"]) + "\\n"
    name = "fake_lab-0-py3-none-any.whl"
    with zipfile.ZipFile(f"{wheel_directory}/{name}", "w") as wheel:
        for path, text in files.items():
            wheel.writestr(path, text)
    return name


def get_requires_for_build_editable(config_settings=None):
    return []


build_wheel = build_editable
"""


class Lab:
    """A throwaway project beside the Makefile, its .venv, and `make STAMP` run in it."""

    def __init__(self, root: Path, proxy: Proxy):
        self.dir = root / "project"
        self.dir.mkdir()
        (self.dir / "pyproject.toml").write_text(PROJECT_TOML)
        (self.dir / "backend.py").write_text(BACKEND)
        shutil.copy(CONSTRAINTS, self.dir / "constraints.txt")
        (self.dir / "tools").mkdir()  # the script the Makefile runs after each install
        shutil.copy(ROOT / "tools" / "lighten_venv.sh", self.dir / "tools" / "lighten_venv.sh")
        self.python = make_venv(self.dir / ".venv")
        self.proxy = proxy

    def make(self, *args: str, config: str = os.devnull, **pip: str):
        for stamp in (self.dir / ".venv").glob(".installed-*"):
            stamp.unlink()  # as after an edit of pyproject.toml: the install runs again
        return subprocess.run(
            ["make", "--no-print-directory", "-f", MAKEFILE, *args],
            cwd=self.dir, capture_output=True, text=True, env=pip_env(self.proxy, config, **pip),
            timeout=240,
        )  # fmt: skip


@pytest.fixture
def lab(tmp_path, proxy):
    return Lab(tmp_path, proxy)


@pytest.mark.parametrize("how", ["PIP_INDEX_URL", "pip.conf"])
def test_a_mirror_set_once_serves_every_package_and_no_other_host_is_asked(
    lab, indexes, how, tmp_path
):
    """A reader in mainland China sets a PyPI mirror once; `make lab-zh` then takes every
    package from it and asks neither PyPI nor PyTorch's CPU index (download.pytorch.org)."""
    mirror, cpu = indexes["mirror"], indexes["cpu"]
    if how == "PIP_INDEX_URL":
        setup = {"config": os.devnull, "index_url": mirror.url}
    else:  # the file `pip config set global.index-url URL` writes
        (tmp_path / "pip.conf").write_text(f"[global]\nindex-url = {mirror.url}\n")
        setup = {"config": str(tmp_path / "pip.conf")}
    # as on this machine (Linux, no GPU), where auto takes the CPU build, but not past a mirror
    out = lab.make(STAMPS[1], "TORCH=auto", "SYSTEM=Linux", "NVIDIA=", **setup)
    assert lines_of(out) == [
        f"torch: from pip's index {mirror.url} with the rest (PyPI's build, CUDA on Linux); "
        f"TORCH=cpu asks {CPU_INDEX}"
    ]
    assert (lab.dir / STAMPS[1]).exists()
    assert installed_torch(lab.python) == PIN
    assert f"/simple/torch/torch-{PIN}-py3-none-any.whl" in mirror.seen
    assert any(path.startswith("/simple/ipykernel/ipykernel-7.") for path in mirror.seen)
    assert lab.proxy.seen == []  # no request to pypi.org, download.pytorch.org or any host
    assert not indexes["pypi"].seen and not cpu.seen

    if how != "PIP_INDEX_URL":
        return  # the rest is the same for both ways of setting the mirror
    # TORCH=cpu still asks the CPU index (TORCH_CPU_INDEX), and the mirror for the rest
    cpu.publish("torch", f"{PIN}+cpu")
    asked = len(mirror.seen)
    out = lab.make(STAMPS[1], "TORCH=cpu", f"TORCH_CPU_INDEX={cpu.url}", **setup)
    assert lines_of(out) == [f"torch: the CPU build, from {cpu.url}"]
    assert installed_torch(lab.python) == f"{PIN}+cpu"
    assert (lab.dir / STAMPS[1]).exists() and lab.proxy.seen == []
    assert not [path for path in mirror.seen[asked:] if path.startswith("/simple/torch/")]


def test_what_counts_as_a_mirror_is_the_index_pip_would_use(step, indexes, tmp_path):
    """PIP_INDEX_URL over pip.conf's [install] over its [global], as pip reads them."""
    mirror, pypi, cpu = indexes["mirror"], indexes["pypi"], indexes["cpu"]
    config = tmp_path / "pip.conf"
    auto = (
        "TORCH=auto",
        "SYSTEM=Linux",
        "NVIDIA=",
        f"PYPI={pypi.url}",
        f"TORCH_CPU_INDEX={cpu.url}",
    )
    mirrored = [
        f"torch: from pip's index {mirror.url} with the rest (PyPI's build, CUDA on Linux); "
        f"TORCH=cpu asks {cpu.url}"
    ]
    # pip's index is PyPI's: the CPU index is asked (it holds no torch here)
    unreachable = f"torch: the CPU index {cpu.url} is unreachable (HTTP Error 404"
    config.write_text(f"[global]\nindex-url = {mirror.url}\n")
    assert lines_of(step(*auto, config=str(config))) == mirrored
    assert lines_of(step(*auto, config=str(config), index_url=pypi.url))[0].startswith(unreachable)
    config.write_text(f"[global]\nindex-url = {mirror.url}\n[install]\nindex-url = {pypi.url}/\n")
    assert lines_of(step(*auto, config=str(config)))[0].startswith(unreachable)
    config.write_text(f"[global]\nindex-url = {pypi.url}\n[install]\nindex-url = {mirror.url}\n")
    assert lines_of(step(*auto, config=str(config))) == mirrored
    assert set(cpu.seen) == {"/simple/torch/"}  # the probe, for the two cases above
    assert not mirror.seen and step.proxy.seen == []


def test_without_a_mirror_the_hosts_asked_are_pytorchs_then_pypis(lab):
    """The control of the test above: the same install with no index configured."""
    out = lab.make(STAMPS[1], "TORCH=auto", "SYSTEM=Linux", "NVIDIA=", retries="0")
    assert out.returncode != 0  # the proxy refused pypi.org
    assert out.stdout.splitlines()[0] == (
        f"torch: the CPU index {CPU_INDEX} is unreachable (<urlopen error Tunnel connection "
        "failed: 403 Forbidden>); torch comes from the default index instead"
    )
    assert lab.proxy.hosts() == ["download.pytorch.org:443", "pypi.org:443"]
