"""A number the prose quotes comes from the code next to it.

For every markdown cell of every notebook, each number it quotes (a decimal such as 0.98,
a percentage, a ratio such as 3.1×, a number with thousands separators) must appear in
the source or the stored output of a code cell close by (within ``WINDOW`` cells before or
after): as an input the reader can see, or as a result the run printed. A sentence that
quotes a number the run no longer prints fails here, so prose and outputs cannot drift.

Formulas (``$...$``), inline code, link targets and exercise numbers ("Exercise 4.2") are
not claims and are skipped. A number
that is a plain fact rather than a measurement (say, a constant of a paper) goes in
``FACTS`` with the reason.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(
    p for p in (ROOT / "notebooks").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts
)
WINDOW = 6
NUMBER = re.compile(
    r"(?<![\w.\-])(\d+\.\d+|\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?\s?%|\d+(?:\.\d+)?\s?[×倍])"
)  # a ratio is written 3.1× in English and 3.1 倍 in Chinese
NOT_PROSE = [
    re.compile(p, re.S)
    for p in (
        r"\$\$.*?\$\$",  # display maths
        r"\$[^$\n]*\$",  # inline maths
        r"`[^`]*`",  # inline code
        r"\]\([^)]*\)",  # link targets
        r"(?:Exercise|练习)\s*\d+\.\d+",  # exercise numbers (lesson.exercise), both editions
    )
]
# (notebook name, number as written) -> why it needs no nearby code
FACTS: dict[tuple[str, str], str] = {}


def _code_text(cell: dict) -> str:
    if cell["cell_type"] != "code":
        return ""
    text = "".join(cell["source"])
    for out in cell.get("outputs", []):
        if "text" in out:
            text += "".join(out["text"])
        elif "text/plain" in out.get("data", {}):
            text += "".join(out["data"]["text/plain"])
    return text


def _normal(number: str) -> str:
    return number.replace(" ", "").rstrip("%×倍").replace(",", "")


def unbacked_numbers(path: Path) -> list[str]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    problems = []
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "markdown":
            continue
        prose = "".join(cell["source"])
        for pattern in NOT_PROSE:
            prose = pattern.sub(" ", prose)
        lo, hi = max(0, i - WINDOW), min(len(cells), i + WINDOW + 1)
        near = "".join(_code_text(c) for c in cells[lo:hi]).replace(",", "")
        for match in NUMBER.finditer(prose):
            quoted = match.group(1)
            if (path.name, quoted) in FACTS or _normal(quoted) in near:
                continue
            problems.append(f"cell {i}: {quoted!r} is not printed or set by a nearby code cell")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[str(p.relative_to(ROOT)) for p in NOTEBOOKS])
def test_every_number_the_prose_quotes_is_printed_or_set_nearby(path):
    problems = unbacked_numbers(path)
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


# The bonus notebook's timing cell is tagged nbval-ignore-output (times vary), so the run that
# is stored is the only one a reader sees: its printed slope must agree with the bound the
# prose states, in both editions (the Chinese run once printed T^1.22 under "2 或更高").
BONUS = [
    ROOT / "notebooks" / "bonus_cost_of_attention.ipynb",
    ROOT / "notebooks" / "zh-CN" / "bonus_cost_of_attention.ipynb",
]
SLOPE_PRINTED = re.compile(
    r"(?:explicit(?: path)?|显式路径)\s*[:：]\s*(?:time grows like|时间按) T\^(\d+\.\d+)"
)
SLOPE_BOUND = re.compile(  # "must be above 1.5", "comes out at 2 or above", "斜率为 2 或更高"
    r"(?:must\s+be\s+above|guarantees\s+more\s+than|comes\s+out\s+at|斜率(?:必须)?大于|保证它大于|"
    r"斜率为)\s+(\d+(?:\.\d+)?)"
)


@pytest.mark.parametrize("path", BONUS, ids=[str(p.relative_to(ROOT)) for p in BONUS])
def test_the_stored_timing_slope_agrees_with_the_bound_the_prose_states(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    printed = SLOPE_PRINTED.findall("".join(_code_text(c) for c in cells))
    at = [i for i, c in enumerate(cells) if SLOPE_PRINTED.search(_code_text(c))]
    near = cells[max(0, at[0] - 2) : at[0] + 2] if at else []  # the prose around that cell
    bounds = {
        float(b)
        for c in near
        if c["cell_type"] == "markdown"
        for b in SLOPE_BOUND.findall("".join(c["source"]))
    }
    assert len(printed) == 1, (
        f"{path.name}: the run prints the explicit path's slope once: {printed}"
    )
    assert bounds, f"{path.name}: the prose states no bound for the slope"
    assert all(float(printed[0]) >= b for b in bounds), (
        f"{path.name}: the run printed T^{printed[0]}, the prose says at least {max(bounds)}"
    )
    asserted = {float(b) for b in re.findall(r'slopes\["explicit"\] > (\d+\.\d+)', "".join(
        "".join(c["source"]) for c in cells if c["cell_type"] == "code"))}  # fmt: skip
    assert bounds <= asserted, f"{path.name}: the prose's bound {bounds} is not the assertion's"
