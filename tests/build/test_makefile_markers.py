"""`make test` and `make unit` create no system user: the classroom hub's tests run only
under `make test-hub`.

The Makefile's `test` target selects tests by marker expression; every test of the hub files
carries the `hub` marker, so those expressions leave all of them out, and `test-hub`'s
expression takes all of them. Checked by pytest's own collection, not by reading test names:
one fresh interpreter runs `pytest --collect-only -m EXPRESSION` for every expression of both
targets (and once with no -m), and reports the test ids each run selected. One interpreter,
not one per expression: each start imports torch and the test modules again (about 5 s).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HUB_FILES = [
    "tests/hub/test_hub.py",
    "tests/hub/test_hub_redteam.py",
    "tests/hub/test_hub_redteam2.py",
    "tests/hub/test_hub_redteam2_alone.py",
    "tests/hub/test_hub_grading.py",
]

pytestmark = pytest.mark.slow

# Run in a fresh interpreter: argv[1] is a JSON list of marker expressions (null: no -m), the
# rest the files to collect. pytest.main's own -m selection; session.items after it is what
# pytest would run. Prints one line "SELECTED {expression: [test ids]}".
COLLECT = """
import json, sys
import pytest

class Selected:
    def pytest_collection_finish(self, session):
        self.ids = [item.nodeid for item in session.items]

found = {}
for expression in json.loads(sys.argv[1]):
    selected = Selected()
    marker = [] if expression is None else ["-m", expression]
    args = ["--collect-only", "-q", "-p", "no:cacheprovider", *marker, *sys.argv[2:]]
    code = pytest.main(args, plugins=[selected])
    assert code in (0, 5), f"pytest {args} exited with {code}"  # 5: nothing selected
    found[json.dumps(expression)] = selected.ids
print("SELECTED " + json.dumps(found))
"""


def target_expressions(target: str) -> list[str]:
    """The `-m "..."` expressions of the pytest lines of one Makefile target."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    body = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", text, re.MULTILINE)
    assert body, f"no target {target!r} in the Makefile"
    lines = [line for line in body.group(1).splitlines() if "-m pytest" in line]
    found = [re.search(r'-m (?:"([^"]+)"|(\S+))', line.split("-m pytest", 1)[1]) for line in lines]
    return [m.group(1) or m.group(2) for m in found if m]


@pytest.fixture(scope="module")
def selected() -> dict[str | None, list[str]]:
    """Expression (None: no -m) -> the ids of the hub files' tests pytest selects with it."""
    expressions = [None, *target_expressions("test"), *target_expressions("unit")]
    expressions += target_expressions("test-hub")
    run = subprocess.run(
        [sys.executable, "-c", COLLECT, json.dumps(expressions), *HUB_FILES],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    line = next(x for x in run.stdout.splitlines() if x.startswith("SELECTED "))
    return {json.loads(k): ids for k, ids in json.loads(line.removeprefix("SELECTED ")).items()}


def test_make_test_selects_no_hub_test(selected):
    expressions = target_expressions("test")
    assert len(expressions) == 2, expressions
    for expression in expressions:
        assert selected[expression] == [], f"`make test` (-m {expression!r}) runs a hub test"


def test_make_unit_selects_no_hub_test(selected):
    """Issue 41, item 7: run as root, `make unit` would start hubs and create system users."""
    (expression,) = target_expressions("unit")
    assert selected[expression] == [], f"`make unit` (-m {expression!r}) runs a hub test"


def test_make_test_hub_selects_every_hub_test(selected):
    (expression,) = target_expressions("test-hub")
    everything = selected[None]
    assert len(everything) >= 10, everything
    assert {path.split("::")[0] for path in everything} == set(HUB_FILES)
    assert selected[expression] == everything
