"""`make test` creates no system user: the classroom hub's tests run only under `make test-hub`.

The Makefile's `test` target selects tests by marker expression; every test of the hub files
carries the `hub` marker, so those expressions leave all of them out, and `test-hub`'s
expression takes all of them. Checked by pytest's own collection, not by reading test names.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HUB_FILES = ["tests/test_hub.py", "tests/test_hub_redteam.py"]

pytestmark = pytest.mark.slow


def target_expressions(target: str) -> list[str]:
    """The `-m "..."` expressions of the pytest lines of one Makefile target."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    body = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", text, re.MULTILINE)
    assert body, f"no target {target!r} in the Makefile"
    lines = [line for line in body.group(1).splitlines() if "-m pytest" in line]
    found = [re.search(r'-m (?:"([^"]+)"|(\S+))', line.split("-m pytest", 1)[1]) for line in lines]
    return [m.group(1) or m.group(2) for m in found if m]


def collected(expression: str) -> int:
    """How many tests of the hub files pytest selects with `-m expression`."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-m", expression, *HUB_FILES],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode in (0, 5), run.stdout + run.stderr  # 5: nothing selected
    return sum(1 for line in run.stdout.splitlines() if "::" in line)


def test_make_test_selects_no_hub_test():
    expressions = target_expressions("test")
    assert len(expressions) == 2, expressions
    for expression in expressions:
        assert collected(expression) == 0, f"`make test` (-m {expression!r}) runs a hub test"


def test_make_test_hub_selects_every_hub_test():
    (expression,) = target_expressions("test-hub")
    everything = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         *HUB_FILES],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    n_all = sum(1 for line in everything.stdout.splitlines() if "::" in line)
    assert n_all >= 10, everything.stdout
    assert collected(expression) == n_all
