"""Notebook 10's helpers (induction.py, induction_plots.py, diagrams/induction.py): the
baseline, the phase-change step, the split lookup, the copies of a row, and the pictures."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import raises
from matplotlib.colors import to_hex

from attention_lab import IGNORE_INDEX, causal_mask, make_batch, plot_heads
from attention_lab.induction import (
    INDUCTION_SEGMENT,
    copy_starts,
    in_context_guess,
    phase_change_step,
    split_lookup_batch,
)
from attention_lab.viz.diagrams.induction import induction_circuit
from attention_lab.viz.induction_plots import OUTLINE_COLOR, outline_block, plot_runs


def _rows(n=300, seed=0):
    return make_batch("induction", n, generator=torch.Generator().manual_seed(seed))


# --- copy_starts ----------------------------------------------------------------------


def test_copy_starts_finds_both_copies_of_the_segment():
    x, y = _rows()
    starts = copy_starts(x, y)
    assert starts.shape == (300, 2) and starts.dtype == torch.int64
    L = INDUCTION_SEGMENT
    for row, (first, second) in zip(x.tolist(), starts.tolist()):
        assert second - first >= L
        assert row[first : first + L] == row[second : second + L]
        assert len(set(row[first : first + L])) == L  # the segment, not a chance match


# --- in_context_guess -------------------------------------------------------------------


def test_in_context_guess_by_hand():
    x = torch.tensor([[5, 6, 5, 7, 5]])
    y = torch.full_like(x, IGNORE_INDEX)
    y[0, 2] = 6  # seen up to 2: {5, 6}; once: {6}
    y[0, 4] = 9  # seen up to 4: {5, 6, 7}; 9 is not among them
    assert in_context_guess(x, y) == pytest.approx((1 / 2 + 0) / 2)
    assert in_context_guess(x, y, once=True) == pytest.approx((1 / 1 + 0) / 2)


def brute_force_guess(x, y, once):
    chances = []
    for row, target in zip(x.tolist(), y.tolist()):
        for p, t in enumerate(target):
            if t == IGNORE_INDEX:
                continue
            seen = row[: p + 1]
            candidates = {i for i in seen if not once or seen.count(i) == 1}
            chances.append((t in candidates) / max(1, len(candidates)))
    return sum(chances) / len(chances)


@pytest.mark.parametrize("once", [False, True])
def test_in_context_guess_agrees_with_a_loop_over_every_scored_position(once):
    x, y = _rows(120, seed=3)
    assert in_context_guess(x, y, once=once) == pytest.approx(brute_force_guess(x, y, once))


def test_in_induction_rows_the_target_is_always_seen_once_so_once_guesses_better():
    x, y = _rows(500, seed=4)
    seen, once = in_context_guess(x, y), in_context_guess(x, y, once=True)
    assert 1 / 32 < seen < once < 1 / 4  # fewer candidates, the target always among them
    counts = torch.nn.functional.one_hot(x, 32).cumsum(dim=1)  # (N, T, V)
    keep = y != IGNORE_INDEX
    assert (counts.gather(2, y.clamp(min=0)[..., None])[..., 0][keep] == 1).all()


def test_in_context_guess_refuses_what_is_not_rows_and_targets():
    x, y = _rows(4)
    with raises(ValueError, "same shape", "(4, 32)", "(4, 31)"):
        in_context_guess(x, y[:, :-1])
    with raises(ValueError, "no target is scored", "ignore_index=-100"):
        in_context_guess(x, torch.full_like(y, IGNORE_INDEX))


# --- phase_change_step ------------------------------------------------------------------


def test_phase_change_step_is_the_first_step_that_reaches_the_level():
    assert phase_change_step([0.1, 0.3, 0.5, 0.2, 0.9]) == 3  # steps count from 1
    assert phase_change_step([0.1, 0.3, 0.49], level=0.5) is None
    assert phase_change_step([0.1, 0.3, 0.49], level=0.3) == 2
    with raises(ValueError, "level=50", "level=0.5"):
        phase_change_step([0.1], level=50)


# --- split_lookup_batch -----------------------------------------------------------------


def test_split_lookup_rows_by_hand():
    x, y = split_lookup_batch(200, generator=torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (200, 32) and x.dtype == torch.int64
    for row, target in zip(x.tolist(), y.tolist()):
        keys, values = row[0:16:2], row[1:16:2]
        assert len(set(keys)) == len(set(values)) == 8
        assert max(keys) < 16 <= min(values) and max(values) < 32
        stored = dict(zip(keys, values))
        asked = list(zip(row[16::2], row[17::2]))  # the queries: "k v"
        assert sorted(asked) == sorted(stored.items())  # every pair asked once
        assert [t for t in target[:16]] == [IGNORE_INDEX] * 16  # the pairs are not scored
        for (k, v), t_key, t_value in zip(asked, target[16::2], target[17::2]):
            assert t_key == v == stored[k]  # at a query's key: its value
            assert t_value == IGNORE_INDEX  # after the value comes a random query


def test_split_lookup_targets_follow_the_induction_rule_and_queries_are_shuffled():
    x, y = split_lookup_batch(300, generator=torch.Generator().manual_seed(1))
    for row, target in zip(x.tolist(), y.tolist()):
        for p, t in enumerate(target):
            if t != IGNORE_INDEX:
                (earlier,) = [q for q in range(p) if row[q] == row[p]]  # one earlier key
                assert t == row[earlier + 1]  # the token after it: an induction head's answer
    in_order = (x[:, 16::2] == x[:, 0:16:2]).all(dim=1)  # queries in the pairs' order
    assert in_order.float().mean() < 0.01


def test_split_lookup_sizes_and_errors():
    x, y = split_lookup_batch(3, n_pairs=2, vocab_size=6)
    assert x.shape == (3, 8) and x[:, 0:4:2].max() < 3 <= x[:, 1:4:2].min()
    with raises(ValueError, "n_pairs=9", "vocab_size=16", "n_pairs <= 8"):
        split_lookup_batch(2, n_pairs=9, vocab_size=16)
    with raises(ValueError, "n_rows=0"):
        split_lookup_batch(0)


# --- the pictures -----------------------------------------------------------------------


def test_plot_runs_draws_one_line_per_seed_and_one_legend_entry_per_group():
    fig = plot_runs(
        {"2 layers": [[0.1, 0.9, 1.0], [0.1, 0.2, 0.8]], "1 layer": [[0.1, 0.1, 0.1, 0.1]]},
        "accuracy",
        levels={"guess": 0.1, "chance": 1 / 32},
        marks={"phase change": [2, None]},
    )
    (ax,) = fig.axes
    lines = ax.get_lines()
    seeds = [line for line in lines if len(line.get_xdata()) in (3, 4)]
    assert len(seeds) == 3
    assert sorted(len(line.get_xdata()) for line in seeds) == [3, 3, 4]
    assert list(seeds[0].get_xdata()) == [1, 2, 3]  # steps count from 1
    colours = {to_hex(line.get_color()) for line in seeds[:2]}
    assert len(colours) == 1 and to_hex(seeds[2].get_color()) not in colours
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["2 layers", "1 layer", "guess", "chance", "phase change"]
    verticals = [line for line in lines if list(line.get_xdata()) == [2, 2]]
    assert len(verticals) == 1  # the mark at step 2; None draws nothing
    assert ax.get_xlabel() == "optimiser step" and ax.get_ylabel() == "accuracy"
    assert fig._repr_png_()[:8] == b"\x89PNG\r\n\x1a\n"
    with raises(ValueError, "runs must map each label"):
        plot_runs({"2 layers": []}, "accuracy")


def test_outline_block_boxes_the_same_cells_on_every_panel():
    w = torch.softmax(torch.randn(2, 10, 10).masked_fill(causal_mask(10), -math.inf), -1)
    fig = plot_heads(w, tokens=list(range(10)), mask=causal_mask(10))
    outline_block(fig, range(6, 9), range(1, 4), "the repeat")
    boxes = [p for ax in fig.axes for p in ax.patches if p.get_gid() == "outlined block"]
    assert len(boxes) == 2
    for box in boxes:
        assert (box.get_x(), box.get_y()) == (0.5, 5.5)  # key 1, query 6: cell edges
        assert (box.get_width(), box.get_height()) == (3, 3)
        assert to_hex(box.get_edgecolor()) == OUTLINE_COLOR.lower()
    legends = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert "the repeat" in legends and "blocked" in legends
    # the legend fits inside the figure (the label is not cut at the right edge)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    width = fig.bbox.width
    assert all(legend.get_window_extent(renderer).x1 <= width for legend in fig.legends)
    with raises(ValueError, "non-empty ranges"):
        outline_block(fig, range(3, 3), range(1, 4), "empty")


def test_the_circuit_diagram_names_the_row_the_positions_and_the_sizes():
    row = [9, 3, 4, 5, 8, 3, 4, 5]  # 3 4 5 repeats; at p = 6 (token 4) the answer is 5
    fig = induction_circuit(row, 6, 64, 4)
    shown = " ".join(t.get_text() for ax in fig.axes for t in ax.texts) + fig.get_suptitle()
    for text in ("2:4", "3:5", "6:4", "prev 4", "query 4 matches key 4", "value 5 copied to 6"):
        assert text in shown, text
    assert "predicts 5" in shown and "token at 7" in shown
    assert "D = 64" in shown and "4 heads" in shown and "d_head = 16" in shown and "T = 8" in shown
    gids = {p.get_gid() for ax in fig.axes for p in ax.patches}
    assert {"token 2", "token 3", "token 6", "previous 3", "query", "key"} <= gids
    sizes = [t.get_fontsize() for ax in fig.axes for t in ax.texts]
    assert min(sizes) >= 9
    w, h = fig.get_size_inches() * fig.dpi
    assert w <= 1280 and h <= 800  # a laptop screen without scaling
    assert fig._repr_png_()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_circuit_diagram_refuses_a_position_without_an_earlier_occurrence():
    row = [9, 3, 4, 5, 8, 3, 4, 5]
    with raises(ValueError, "p=4", "'8'", "second copy"):
        induction_circuit(row, 4, 64, 4)
    with raises(ValueError, "p=3", "'3'"):  # 3 occurred just before p: no j between them
        induction_circuit([5, 1, 3, 3], 3, 64, 4)
    with raises(ValueError, "p=1", "between 2 and 3"):
        induction_circuit([5, 1, 3, 3], 1, 64, 4)
    with raises(ValueError, "d_model=30", "n_heads=4"):
        induction_circuit(row, 6, 30, 4)


def test_the_circuit_diagram_speaks_chinese(zh):
    from test_figures_zh import CHINESE, english_words, texts

    row = [9, 3, 4, 5, 8, 3, 4, 5]
    strings = texts(induction_circuit(row, 6, 64, 4))
    assert any(CHINESE.search(s) for s in strings), strings
    assert english_words(strings) == [], strings
    assert any("归纳头" in s for s in strings)


def test_the_pictures_come_from_the_package_too():
    import attention_lab
    from attention_lab.viz import induction_plots

    assert attention_lab.plot_runs is induction_plots.plot_runs
    assert attention_lab.outline_block is induction_plots.outline_block
    assert {"plot_runs", "outline_block"} <= set(attention_lab.__all__)
