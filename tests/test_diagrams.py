"""The drawn diagrams (diagrams.py): what they draw matches the sizes asked for."""

from __future__ import annotations

import io
import time

import numpy as np
import pytest
from matplotlib.colors import to_hex
from matplotlib.patches import Rectangle

from attention_lab import diagrams
from attention_lab.palette import HEAD_COLORS, head_color
from attention_lab.plotting import LabFigure


def head_patches(fig) -> dict[int, list]:
    """The patches tagged ``head h`` in a figure, by head."""
    found: dict[int, list] = {}
    for ax in fig.axes:
        for patch in ax.patches:
            gid = patch.get_gid() or ""
            if gid.startswith("head "):
                found.setdefault(int(gid.split()[1]), []).append(patch)
    return found


def render_seconds(fig) -> float:
    start = time.perf_counter()
    fig.savefig(io.BytesIO(), format="png")
    return time.perf_counter() - start


@pytest.mark.parametrize(("T", "D", "H"), [(6, 32, 4), (16, 128, 8), (4, 8, 1), (5, 12, 3)])
def test_head_split_draws_every_head_in_its_colour_at_every_stage(T, D, H):
    fig = diagrams.head_split(T, D, H)
    assert isinstance(fig, LabFigure)
    patches = head_patches(fig)
    assert sorted(patches) == list(range(H))
    for h, drawn in patches.items():
        assert len(drawn) == 4  # x, split, one matrix per head, merged
        assert {to_hex(p.get_facecolor()) for p in drawn} == {head_color(h).lower()}
    texts = " ".join(t.get_text() for ax in fig.axes for t in ax.texts)
    assert f"= (1, {T}, {H}, {D // H})" in texts and f"= (1, {H}, {T}, {D // H})" in texts


def test_head_split_slices_are_d_head_wide_and_tile_d_model():
    fig = diagrams.head_split(6, 32, 4)
    first = [head_patches(fig)[h][0] for h in range(4)]  # the x stage
    widths = {round(p.get_width(), 9) for p in first}
    assert len(widths) == 1  # equal slices: d_head columns each
    xs = [p.get_x() for p in first]
    assert np.allclose(np.diff(xs), first[0].get_width())  # side by side, no gap


def test_head_split_draws_into_an_existing_axes():
    fig = LabFigure(figsize=(8, 3))
    ax = fig.subplots()
    patches = diagrams.draw_head_split(ax, 6, 16, 2)
    assert len(patches) == 8 and all(isinstance(p, Rectangle) for p in patches)
    assert diagrams.head_split(6, 16, 2, ax=ax) is fig


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((6, 30, 4), "d_model=30 is not divisible by n_heads=4"),
        ((6, 32, 9), "n_heads=9 must be a whole number between 1 and 8"),
        ((6, 256, 4), "d_model=256"),
        ((0, 32, 4), "T=0"),
    ],
)
def test_head_split_refuses_sizes_it_cannot_draw(args, message):
    with pytest.raises(ValueError, match=message):
        diagrams.head_split(*args)


def test_head_colours_are_distinct_and_there_are_enough():
    assert len(set(HEAD_COLORS)) == len(HEAD_COLORS) >= 8
    assert head_color(0) == head_color(len(HEAD_COLORS))


def test_head_split_renders_fast_enough_for_the_explorer():
    diagrams.head_split(16, 128, 8).savefig(io.BytesIO(), format="png")  # warm up fonts
    best = min(render_seconds(diagrams.head_split(16, 128, 8)) for _ in range(3))
    assert best < 0.5  # generous: the measured time (well under 0.1 s idle) is in the report
