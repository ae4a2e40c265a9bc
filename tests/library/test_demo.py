"""``python -m attention_lab demo``: the seed's main.py, run as a learner would run it."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from attention_lab.viz.heatmaps import SHADES


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "x.png"
    # One thread: the model is tiny, and a busy CI machine makes extra threads slower.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    result = subprocess.run(
        [sys.executable, "-m", "attention_lab", "demo", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout, out


def test_demo_prints_a_first_loss_near_ln_64(demo):
    stdout, _ = demo
    match = re.search(r"loss before training: (\d+\.\d+)", stdout)
    assert match, stdout
    assert abs(float(match.group(1)) - math.log(64)) < 0.3
    assert "chance = ln 64 = 4.159" in stdout


def test_demo_prints_a_falling_loss_that_ends_near_zero(demo):
    stdout, _ = demo
    epochs = [float(v) for v in re.findall(r"epoch \d+: mean training loss (\d+\.\d+)", stdout)]
    assert len(epochs) == 3, stdout
    assert epochs[0] > 10 * max(epochs[1:])  # the first epoch learns, later ones sit near 0
    # the copy task has only 64 different rows, all in training: a fresh batch, not held out
    final = re.search(r"fresh-batch loss (\d+\.\d+), accuracy (\d+\.\d)%", stdout)
    assert final, stdout
    assert float(final.group(1)) <= 0.01
    assert float(final.group(2)) >= 99.0


def test_demo_prints_a_text_heatmap_of_one_head(demo):
    stdout, _ = demo
    rows = re.findall(rf"^\s*(\d+) \|([{re.escape(SHADES)}]{{12}})$", stdout, flags=re.M)
    assert [int(r[0]) for r in rows] == list(range(12)), stdout
    # Causal: nothing drawn above the diagonal, and every row puts weight somewhere.
    for i, (_, cells) in enumerate(rows):
        assert cells[i + 1 :].strip() == "", f"row {i} looks at the future: {cells!r}"
        assert cells[: i + 1].strip() != "", f"row {i} is empty"


def test_demo_writes_a_png(demo):
    stdout, out = demo
    assert out.exists()
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out.stat().st_size > 5_000
    assert str(out) in stdout


def test_demo_refuses_a_head_that_does_not_exist(capsys):
    from attention_lab.demo import run

    with pytest.raises(SystemExit):
        run(["--head", "4", "--n-heads", "4"])
    err = capsys.readouterr().err
    assert "--head=4" in err and "from 0 to 3" in err


def test_an_unknown_command_names_it_and_the_known_ones(capsys):
    from attention_lab.__main__ import main

    with pytest.raises(SystemExit) as exit_info:
        main(["frobnicate"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "'frobnicate'" in err and "demo" in err and "bench" in err


@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-m", "attention_lab", "--help"],
        [str(Path(sys.executable).parent / "attention-lab"), "--help"],
    ],
    ids=["python -m attention_lab", "attention-lab"],
)
def test_help_lists_the_subcommands_and_exits_0(command):
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "demo" in result.stdout and "bench" in result.stdout
    assert "unknown command" not in result.stdout + result.stderr


def test_demo_help_exits_0_and_names_its_options():
    result = subprocess.run(
        [sys.executable, "-m", "attention_lab", "demo", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "--n-heads" in result.stdout and "--out" in result.stdout


def test_demo_writes_into_an_ignored_folder_not_the_repository_root():
    from attention_lab.demo import DEFAULT_OUT

    root = Path(__file__).resolve().parents[2]
    folder = DEFAULT_OUT.parts[0]
    assert len(DEFAULT_OUT.parts) > 1, DEFAULT_OUT
    ignored = (root / ".gitignore").read_text().split()
    assert f"{folder}/" in ignored, f"{folder}/ is not in .gitignore"
