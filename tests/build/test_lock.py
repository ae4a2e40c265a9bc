"""constraints.txt agrees with pyproject.toml (`make lock` writes one from the other).

Offline: every requirement of pyproject.toml (dependencies and every extra) and of
tools/lock.in holds for the pin constraints.txt gives it, on every Python from 3.10 and on
Linux, macOS and Windows; no package is pinned twice anywhere; and every pin says what asks
for it (uv's `# via` annotations): a pin asked for by pyproject.toml is named there, one asked
for by tools/lock.in is named there, and one asked for by another package has that package
pinned too. So a range changed, a dependency added or one removed without `make lock` fails
here, with the package named. The checks also run on broken copies, which must fail.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from packaging.markers import Marker, default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pytest itself depends on tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "attention-lab"
PYPROJECT_SOURCE = f"{PROJECT} (pyproject.toml)"
LOCK_IN = "tools/lock.in"
PLATFORMS = [  # sys_platform, platform_system, platform_machine, os_name
    ("linux", "Linux", "x86_64", "posix"),
    ("linux", "Linux", "aarch64", "posix"),
    ("darwin", "Darwin", "arm64", "posix"),
    ("win32", "Windows", "AMD64", "nt"),
]


def requirements_of_pyproject(text: str) -> list[Requirement]:
    project = tomllib.loads(text)["project"]
    reqs = [Requirement(r) for r in project.get("dependencies", [])]
    for extra in project.get("optional-dependencies", {}).values():
        reqs += [Requirement(r) for r in extra]
    return [r for r in reqs if canonicalize_name(r.name) != PROJECT]


def requirements_of_lines(text: str) -> list[Requirement]:
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return [Requirement(line) for line in lines if line]


def read_pins(text: str) -> list[tuple[Requirement, list[str]]]:
    """Each pin of constraints.txt with the sources its `# via` comment names."""
    pins = []
    for line in text.splitlines():
        body, _, comment = line.partition("#")
        if not body.strip():
            continue
        req = Requirement(body.strip())
        via = re.match(r"\s*via\s+(.*)", comment)
        sources = [s.strip() for s in via.group(1).split(",")] if via else []
        pins.append((req, sources))
    return pins


def python_versions(pins) -> list[str]:
    """3.10 onwards, plus each version a marker names and the release just before it."""
    versions = {f"3.{minor}.{patch}" for minor in range(10, 16) for patch in (0, 12)}
    for req, _ in pins:
        for literal in re.findall(
            r"python_(?:full_)?version\s*[<>=!~]+\s*['\"]([\d.]+)['\"]", str(req.marker or "")
        ):
            v = Version(literal)
            major, minor, micro = (list(v.release) + [0, 0])[:3]
            versions.add(f"{major}.{minor}.{micro}")
            versions.add(f"{major}.{minor}.{micro - 1}" if micro else f"{major}.{minor - 1}.99")
    return sorted((v for v in versions if Version(v) >= Version("3.10")), key=Version)


def environments(pins):
    for full in python_versions(pins):
        for sys_platform, system, machine, os_name in PLATFORMS:
            env = default_environment()
            env.update(
                python_full_version=full,
                python_version=".".join(full.split(".")[:2]),
                sys_platform=sys_platform,
                platform_system=system,
                platform_machine=machine,
                os_name=os_name,
                implementation_name="cpython",
                platform_python_implementation="CPython",
            )
            yield f"Python {full} on {sys_platform} {machine}", env


def disagreements(pyproject_text: str, lock_in_text: str, constraints_text: str) -> list[str]:
    """Why constraints.txt does not fit pyproject.toml and tools/lock.in (empty: it does)."""
    problems: list[str] = []
    pins = read_pins(constraints_text)
    asked = {
        "pyproject.toml": requirements_of_pyproject(pyproject_text),
        LOCK_IN: requirements_of_lines(lock_in_text),
    }
    pinned_names = {canonicalize_name(req.name) for req, _ in pins}

    for req, _ in pins:
        if len(req.specifier) != 1 or next(iter(req.specifier)).operator != "==":
            problems.append(f"{req}: a pin is one exact version (==)")
    where_seen: dict[str, list[str]] = {}  # a problem of some environments: which ones
    for where, env in environments(pins):
        here: dict[str, Version] = {}
        for req, _ in pins:
            if req.marker is None or req.marker.evaluate(env):
                name = canonicalize_name(req.name)
                if name in here:
                    where_seen.setdefault(f"{name} is pinned twice", []).append(where)
                here[name] = Version(next(iter(req.specifier)).version)
        for source, reqs in asked.items():
            for req in reqs:
                if req.marker is not None and not req.marker.evaluate(env):
                    continue
                name = canonicalize_name(req.name)
                if name not in here:
                    problem = f"{source} asks for {req}, constraints.txt pins none"
                elif not req.specifier.contains(here[name], prereleases=True):
                    problem = f"{source} asks for {req}, constraints.txt pins {here[name]}"
                else:
                    continue
                where_seen.setdefault(problem, []).append(where)
    for problem, wheres in where_seen.items():
        more = f" and {len(wheres) - 1} more" if len(wheres) > 1 else ""
        problems.append(f"{problem} ({wheres[0]}{more})")

    names_asked = {
        source: {canonicalize_name(r.name) for r in reqs} for source, reqs in asked.items()
    }
    for req, sources in pins:
        name = canonicalize_name(req.name)
        if not sources:
            problems.append(f"{name}: no '# via' says what asks for it (run make lock)")
        for source in sources:
            if source == PYPROJECT_SOURCE:
                if name not in names_asked["pyproject.toml"]:
                    problems.append(
                        f"{name}: pinned for pyproject.toml, which no longer asks for it"
                    )
            elif source == f"-r {LOCK_IN}":
                if name not in names_asked[LOCK_IN]:
                    problems.append(f"{name}: pinned for {LOCK_IN}, which no longer asks for it")
            elif canonicalize_name(source) not in pinned_names:
                problems.append(f"{name}: pinned for {source}, which is not pinned itself")
    return sorted(set(problems))


def read(path: str) -> str:
    return (ROOT / path).read_text()


def test_constraints_agree_with_pyproject():
    problems = disagreements(read("pyproject.toml"), read(LOCK_IN), read("constraints.txt"))
    assert not problems, "constraints.txt is out of date: run make lock\n" + "\n".join(problems)


def test_torch_is_pinned_to_the_release_of_lock_in():
    wanted = [r for r in requirements_of_lines(read(LOCK_IN)) if r.name == "torch"]
    pins = [r for r, _ in read_pins(read("constraints.txt")) if r.name == "torch"]
    assert [str(r.specifier) for r in wanted] == ["==2.13.0"]
    assert len(pins) == 1 and pins[0].marker is None and str(pins[0].specifier) == "==2.13.0"


def test_every_extra_make_installs_exists_and_the_lock_covers_them_all():
    extras = set(tomllib.loads(read("pyproject.toml"))["project"]["optional-dependencies"])
    makefile = read("Makefile")
    for installed in re.findall(r'-e "\.\[([\w,]+)\]"', makefile):
        assert set(installed.split(",")) <= extras, installed
    lock = makefile[makefile.index("\nlock:") :].split("\n\n")[0]
    assert "--all-extras" in lock and "--universal" in lock and "--python-version 3.10" in lock
    assert "pyproject.toml tools/lock.in" in lock


PYPROJECT = """
[project]
name = "attention-lab"
dependencies = ["numpy>=1.24"]
[project.optional-dependencies]
test = ["pytest>=7.4", "tomli>=2; python_version < '3.11'"]
"""
CONSTRAINTS = """# a header
iniconfig==2.3.1          # via pytest
numpy==2.2.6 ; python_full_version < '3.11'  # via attention-lab (pyproject.toml)
numpy==2.4.6 ; python_full_version >= '3.11'  # via attention-lab (pyproject.toml)
pytest==9.2.0             # via attention-lab (pyproject.toml)
tomli==2.5.0 ; python_full_version < '3.11'  # via attention-lab (pyproject.toml), pytest
torch==2.13.0             # via -r tools/lock.in
"""
LOCK = "torch==2.13.0\n"


def test_a_small_lock_that_agrees_passes():
    assert disagreements(PYPROJECT, LOCK, CONSTRAINTS) == []


@pytest.mark.parametrize(
    "pyproject, lock, constraints, expected",
    [
        # a dependency added to pyproject.toml without make lock
        (
            PYPROJECT.replace('"numpy>=1.24"', '"numpy>=1.24", "rich>=13"'),
            LOCK,
            CONSTRAINTS,
            "asks for rich>=13, constraints.txt pins none",
        ),
        # a range raised past the pin (only Python 3.10's pin is too old)
        (
            PYPROJECT.replace("numpy>=1.24", "numpy>=2.3"),
            LOCK,
            CONSTRAINTS,
            "pyproject.toml asks for numpy>=2.3, constraints.txt pins 2.2.6 "
            "(Python 3.10.0 on linux x86_64 and ",
        ),
        # a dependency removed from pyproject.toml, its pin left behind
        (
            PYPROJECT.replace(", \"tomli>=2; python_version < '3.11'\"", ""),
            LOCK,
            CONSTRAINTS,
            "tomli: pinned for pyproject.toml, which no longer asks for it",
        ),
        (
            PYPROJECT,
            "",
            CONSTRAINTS,
            "torch: pinned for tools/lock.in, which no longer asks for it",
        ),
        # a pin added by hand
        (PYPROJECT, LOCK, CONSTRAINTS + "rich==13.0.0\n", "rich: no '# via' says what asks"),
        # two pins where the markers overlap, and one for a package nothing pins
        (PYPROJECT, LOCK, CONSTRAINTS.replace(">= '3.11'", ">= '3.10.5'"), "numpy is pinned twice"),
        (
            PYPROJECT,
            LOCK,
            CONSTRAINTS.replace("via pytest\n", "via nbval\n"),
            "iniconfig: pinned for nbval, which is not pinned itself",
        ),
        (PYPROJECT, LOCK, CONSTRAINTS.replace("pytest==9.2.0", "pytest>=9"), "one exact version"),
    ],
)
def test_a_lock_that_disagrees_fails_and_names_the_package(pyproject, lock, constraints, expected):
    problems = disagreements(pyproject, lock, constraints)
    assert any(expected in p for p in problems), problems


def test_marker_boundaries_are_tested_on_both_sides():
    pins = read_pins("soupsieve==2.10 ; python_full_version < '3.11.5'  # via beautifulsoup4\n")
    versions = python_versions(pins)
    assert "3.11.5" in versions and "3.11.4" in versions
    assert Marker("python_full_version < '3.11.5'").evaluate({"python_full_version": "3.11.4"})
