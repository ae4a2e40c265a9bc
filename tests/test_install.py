"""tools/torch_index.py, the step of `make lab` / `make test` that picks PyTorch's build.

Both paths run for real, against a throwaway virtualenv and without the network: a CPU index
that cannot be reached (127.0.0.1:9 refuses at once) leaves torch to the default index with a
line saying so, and a reachable one (a `http.server` on 127.0.0.1 serving a simple index with
a small stand-in wheel `torch-2.13.0+cpu`) is installed from; then TORCH=cuda removes that CPU
build again. pip runs with no configuration (PIP_CONFIG_FILE=/dev/null), so this machine's
own wheel directory takes no part. The decision itself is tested on every kind of machine.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import importlib.util
import os
import re
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
# broke tests/test_assignment.py, which imports nbgrader -> setuptools, when run after this file).
import setuptools  # noqa: E402, F401

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "torch_index.py"
CONSTRAINTS = ROOT / "constraints.txt"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
_spec = importlib.util.spec_from_file_location("torch_index", SCRIPT)
torch_index = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("torch_index", torch_index)
_spec.loader.exec_module(torch_index)


# ---- the decision -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mode, system, nvidia, build",
    [
        ("auto", "Linux", False, "cpu"),
        ("auto", "Linux", True, "default"),
        ("auto", "Darwin", False, "default"),
        ("auto", "Windows", False, "default"),
        ("cpu", "Linux", True, "cpu"),
        ("cpu", "Darwin", False, "cpu"),
        ("cuda", "Linux", False, "cuda"),
        ("default", "Linux", False, "default"),
    ],
)
def test_the_build_follows_the_machine_unless_forced(mode, system, nvidia, build):
    assert torch_index.choose_build(mode, system, nvidia) == build


def test_an_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="TORCH='rocm'"):
        torch_index.choose_build("rocm", "Linux", False)


def test_a_gpu_is_seen_by_its_tool_or_its_driver(tmp_path):
    def nowhere(_name):
        return None

    assert not torch_index.has_nvidia_gpu(nowhere, tmp_path / "absent")
    assert torch_index.has_nvidia_gpu(lambda name: f"/usr/bin/{name}", tmp_path / "absent")
    (tmp_path / "nvidia").mkdir()
    assert torch_index.has_nvidia_gpu(nowhere, tmp_path / "nvidia")


def plan(build, installed, why_unreachable=None):
    return torch_index.plan(
        build, "py", CONSTRAINTS, "http://index", installed, lambda url: why_unreachable
    )


def test_the_cpu_build_comes_from_the_cpu_index_without_dependencies():
    p = plan("cpu", None)
    assert p.commands == [
        ["py", "-m", "pip", "install", "--quiet", "-c", str(CONSTRAINTS), "--no-deps",
         "--index-url", "http://index", "torch"]
    ]  # fmt: skip
    assert "default index" in p.fallback  # a Python the index has no wheel for
    # PyPI's build of the same release counts as installed: it is replaced
    assert plan("cpu", "2.13.0").commands[0][-2:] == ["--force-reinstall", "torch"]
    assert plan("cpu", "2.12.0+cpu").commands  # another release: brought to the pin
    assert plan("cpu", "2.13.0+cpu").commands == []  # already there: nothing, not even a probe


def test_an_unreachable_index_leaves_torch_to_the_default_one():
    p = plan("cpu", None, "Connection refused")
    assert p.commands == []
    assert p.message == (
        "torch: the CPU index http://index is unreachable (Connection refused); "
        "torch comes from the default index instead"
    )


def test_cuda_removes_a_cpu_build_and_default_touches_nothing():
    assert plan("cuda", "2.13.0+cpu").commands == [
        ["py", "-m", "pip", "uninstall", "--yes", "--quiet", "torch"]
    ]
    assert plan("cuda", "2.13.0").commands == plan("cuda", None).commands == []
    assert plan("default", "2.13.0+cpu").commands == []


def test_the_pin_is_read_from_constraints():
    assert torch_index.pinned_torch(CONSTRAINTS) == "2.13.0"


# ---- both paths for real, in a throwaway virtualenv ---------------------------------------


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


def fake_wheel(directory: Path, version: str) -> Path:
    """A pure-Python wheel named torch: a dist-info and a package that says what it is."""
    name = f"torch-{version}-py3-none-any.whl"
    info = f"torch-{version}.dist-info"
    files = {
        "torch/__init__.py": f'__version__ = "{version}"  # a stand-in for tests\n',
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    with zipfile.ZipFile(directory / name, "w") as wheel:
        for path, text in files.items():
            wheel.writestr(path, text)
    return directory / name


@pytest.fixture
def index(tmp_path):
    """A simple index on 127.0.0.1 holding one wheel of torch; yields (url, requests seen)."""
    root = tmp_path / "index"
    (root / "simple" / "torch").mkdir(parents=True)
    seen: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            seen.append(self.path)

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=str(root))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def publish(version):
        wheel = fake_wheel(root / "simple" / "torch", version)
        href = wheel.name.replace("+", "%2B")
        page = f'<html><body><a href="{href}">{wheel.name}</a></body></html>\n'
        (root / "simple" / "torch" / "index.html").write_text(page)

    yield f"http://127.0.0.1:{server.server_port}/simple", seen, publish
    server.shutdown()
    server.server_close()


def run(python, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # no local wheel directory, no extra index
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return subprocess.run(
        [sys.executable, SCRIPT, "--python", python, "--constraints", CONSTRAINTS, *args],
        capture_output=True, text=True, env=env, timeout=240,
    )  # fmt: skip


def test_both_paths_and_the_switch_for_real(tmp_path, index):
    url, seen, publish = index
    python = make_venv(tmp_path / "venv")
    assert torch_index.installed_torch(python) is None

    # unreachable: one line, nothing installed, and make goes on
    out = run(python, "--torch", "cpu", "--index-url", "http://127.0.0.1:9/")
    assert out.returncode == 0, out.stderr
    [line] = out.stdout.splitlines()
    assert line.startswith("torch: the CPU index http://127.0.0.1:9/ is unreachable (")
    assert "refused" in line and line.endswith("); torch comes from the default index instead")
    assert torch_index.installed_torch(python) is None

    # reachable, but no wheel of the pinned release: the same fallback, after pip tried
    publish("2.12.0+cpu")
    out = run(python, "--torch", "cpu", "--index-url", url)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1].endswith("torch comes from the default index instead")
    assert torch_index.installed_torch(python) is None

    # reachable: the CPU build is installed from it, without its dependencies
    publish("2.13.0+cpu")
    out = run(python, "--torch", "cpu", "--index-url", url)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"torch: the CPU build, from {url}"]
    assert torch_index.installed_torch(python) == "2.13.0+cpu"
    assert "/simple/torch/torch-2.13.0%2Bcpu-py3-none-any.whl" in seen

    # run again (as make does after pyproject.toml changes): nothing to do, the index not asked
    asked = len(seen)
    out = run(python, "--index-url", url, "--torch", "auto" if sys.platform == "linux" else "cpu")
    assert out.stdout.splitlines() == ["torch: the CPU build 2.13.0+cpu is installed"]
    assert len(seen) == asked

    # TORCH=cuda: the CPU build goes, so that pip's next install brings PyPI's build
    out = run(python, "--torch", "cuda", "--index-url", url)
    assert out.returncode == 0, out.stderr
    assert torch_index.installed_torch(python) is None


def dry(*args) -> str:
    """What `make -n ARGS` would run (nothing is run; -B: as on a fresh machine)."""
    out = subprocess.run(
        ["make", "-n", *args], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return out.stdout


STAMPS = [".venv/.installed-lab", ".venv/.installed-lab-zh-CN", ".venv/.installed-test"]


@pytest.mark.parametrize("stamp", STAMPS)
def test_make_runs_it_before_the_install_and_a_new_choice_reinstalls(stamp):
    for torch in ("cpu", "cuda", "default", "auto"):
        lines = dry("-B", stamp, f"TORCH={torch}").splitlines()
        step = [i for i, line in enumerate(lines) if "tools/torch_index.py" in line]
        pip_install = [i for i, line in enumerate(lines) if "pip install" in line]
        assert len(step) == 1 and f"--torch {torch} " in lines[step[0]] + " "
        assert pip_install and step[0] < pip_install[0]
    # a choice never made in this .venv is a new prerequisite of the install
    assert "touch .venv/.torch-never-made" in dry(stamp, "TORCH=never-made")


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
