"""Install the right build of PyTorch into a virtualenv, before the rest of the package.

PyPI's torch wheel for Linux is the CUDA build: it pulls in about 3 GB of NVIDIA libraries
(cuBLAS, cuDNN, NCCL, ...), which a machine without an NVIDIA GPU never uses. PyTorch's CPU
index has the same release without them. `make lab` and `make test` run this script first,
then `pip install -c constraints.txt -e ".[...]"`, which keeps the torch found installed (its
version satisfies the pin) and installs torch's own dependencies from PyPI.

    python tools/torch_index.py [--torch auto|cpu|cuda|default] [--python PY] [--dry-run]

--torch (`make lab TORCH=...`):
    auto     the CPU build on Linux without an NVIDIA GPU (no nvidia-smi on PATH, no
             /proc/driver/nvidia); elsewhere leave it to pip (macOS and Windows wheels on
             PyPI are CPU builds already, and a Linux machine with a GPU wants CUDA)
    cpu      the CPU build, wherever this runs
    cuda     PyPI's build (CUDA on Linux): a CPU build found installed is removed first, so
             that the install that follows brings PyPI's
    default  do nothing; pip takes torch from whatever index it is configured with

The CPU index is asked first (a few seconds at most); where it cannot be reached, or has no
wheel for this Python, one line says so and torch comes from the default index instead. Only
the standard library is used, so it runs in a virtualenv that holds nothing but pip.

Why not uv's torch backend (issue 29): `uv pip install --torch-backend=cpu` (or `auto`) picks
the CPU index as this script does, but cannot fall back. Tried with uv 0.13.9 (the version
`make lock` uses) where the CPU index cannot be reached (2026-12-02): both modes stop with exit
code 2 after three retries in about 10 s ("Failed to fetch:
https://download.pytorch.org/whl/cpu/torch/"), and uv does not read pip's configuration, so
the torch wheel pip finds through it there stays out of reach. `make lab` must keep working
offline and behind such networks, and must not make uv a requirement for a reader.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
MODES = ("auto", "cpu", "cuda", "default")
PROBE_TIMEOUT = 5.0


def has_nvidia_gpu(which=shutil.which, driver: Path = Path("/proc/driver/nvidia")) -> bool:
    """An NVIDIA driver is loaded, or its tools are installed."""
    return which("nvidia-smi") is not None or driver.exists()


def choose_build(mode: str, system: str, nvidia: bool) -> str:
    """'cpu', 'cuda' or 'default': which torch to install, from the mode and the machine."""
    if mode not in MODES:
        raise ValueError(f"TORCH={mode!r}: expected one of {', '.join(MODES)}")
    if mode == "auto":
        return "cpu" if system == "Linux" and not nvidia else "default"
    return mode


def probe(index_url: str, timeout: float = PROBE_TIMEOUT) -> str | None:
    """None when the index answers for torch, else why not (one short phrase)."""
    url = index_url.rstrip("/") + "/torch/"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            if response.status == 200:
                return None
            return f"HTTP {response.status}"
    except urllib.error.HTTPError as error:
        return f"HTTP {error.code}"
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        return str(reason) or type(reason).__name__


def installed_torch(python: str) -> str | None:
    """The version of torch installed for `python` (e.g. '2.13.0+cpu'), or None."""
    code = (
        "import importlib.metadata as m\n"
        "try: print(m.version('torch'))\n"
        "except m.PackageNotFoundError: pass\n"
    )
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip() or None


def pinned_torch(constraints: Path) -> str | None:
    """The torch version constraints.txt pins (its torch line carries no marker)."""
    for line in constraints.read_text().splitlines():
        match = re.match(r"\s*torch\s*==\s*([^\s;#]+)", line)
        if match:
            return match.group(1)
    return None


@dataclass
class Plan:
    message: str
    commands: list[list[str]] = field(default_factory=list)
    # what to say, and do instead, if the commands fail (None: failing is an error)
    fallback: str | None = None


def plan(
    build: str,
    python: str,
    constraints: Path,
    index_url: str,
    installed: str | None,
    reachable: callable,
) -> Plan:
    """What to run for `build`, given the torch already installed. `reachable(url)` is probe."""
    pin = pinned_torch(constraints)
    pip = [python, "-m", "pip", "install", "--quiet", "-c", str(constraints)]
    if build == "default":
        return Plan("torch: left to pip (TORCH=default)")
    if build == "cuda":
        if installed and installed.endswith("+cpu"):
            return Plan(
                f"torch: removing the CPU build {installed}; PyPI's build comes next",
                [[python, "-m", "pip", "uninstall", "--yes", "--quiet", "torch"]],
            )
        return Plan("torch: PyPI's build (TORCH=cuda)")
    # build == "cpu"
    if installed and installed.endswith("+cpu") and (pin is None or installed.split("+")[0] == pin):
        return Plan(f"torch: the CPU build {installed} is installed")
    why = reachable(index_url)
    if why is not None:
        return Plan(
            f"torch: the CPU index {index_url} is unreachable ({why}); "
            "torch comes from the default index instead"
        )
    fallback = (
        f"torch: no CPU build of torch {pin or '(any)'} for this Python at {index_url}; "
        "torch comes from the default index instead"
    )
    command = [*pip, "--no-deps", "--index-url", index_url]
    if installed:  # another build of the same release would count as installed
        command.append("--force-reinstall")
    command.append("torch")
    return Plan(f"torch: the CPU build, from {index_url}", [command], fallback=fallback)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch", default=os.environ.get("TORCH", "auto"), choices=MODES)
    parser.add_argument("--python", default=sys.executable, help="the virtualenv's interpreter")
    parser.add_argument("--constraints", type=Path, default=Path("constraints.txt"))
    parser.add_argument("--index-url", default=os.environ.get("TORCH_CPU_INDEX", CPU_INDEX))
    parser.add_argument("--timeout", type=float, default=PROBE_TIMEOUT)
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run none")
    args = parser.parse_args(argv)

    build = choose_build(args.torch, platform.system(), has_nvidia_gpu())
    the_plan = plan(
        build,
        args.python,
        args.constraints,
        args.index_url,
        installed_torch(args.python),
        lambda url: probe(url, args.timeout),
    )
    print(the_plan.message, flush=True)
    for command in the_plan.commands:
        if args.dry_run:
            print("would run:", " ".join(command))
            continue
        if subprocess.run(command).returncode != 0:
            if the_plan.fallback is None:
                return 1
            print(the_plan.fallback, flush=True)
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
