"""Notebook 10's helpers (induction.py, induction_plots.py, diagrams/induction.py): the
baseline, the phase-change step, the split lookup, the copies of a row, the recorder that
measures the heads while a model trains (and leaves the training bitwise alone), Olsson's
in-context learning score, repeats of any length with the ideal rule, and the pictures."""

from __future__ import annotations

import math

import pytest
import torch
from matplotlib.colors import to_hex

from attention_lab import (
    IGNORE_INDEX,
    TinyLM,
    TinyLMConfig,
    causal_mask,
    make_batch,
    plot_heads,
    source_shares,
    train,
    train_tiny_lm,
)
from attention_lab.induction import (
    INDUCTION_SEGMENT,
    InductionRecorder,
    after_previous_guess,
    copy_starts,
    icl_score,
    in_context_guess,
    loss_per_position,
    phase_change_step,
    repeat_batch,
    repeated_rows,
    split_lookup_batch,
)
from attention_lab.interventions import after_previous_occurrence
from attention_lab.viz.diagrams.induction import induction_circuit
from attention_lab.viz.induction_plots import (
    OUTLINE_COLOR,
    outline_block,
    plot_run_panels,
    plot_runs,
)
from tests.conftest import raises


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


@pytest.mark.parametrize("once", [False, True])
def test_the_guess_loss_is_the_mean_log_of_the_candidates(once):
    x, y = _rows(80, seed=5)
    losses = []
    for row, target in zip(x.tolist(), y.tolist()):
        for p, t in enumerate(target):
            if t != IGNORE_INDEX:
                seen = row[: p + 1]
                candidates = {i for i in seen if not once or seen.count(i) == 1}
                assert t in candidates  # induction rows: the target is always one
                losses.append(math.log(len(candidates)))
    assert in_context_guess(x, y, once=once, loss=True) == pytest.approx(sum(losses) / len(losses))
    by_hand = torch.tensor([[5, 6, 5, 7, 5]]), torch.tensor([[-100, -100, 6, -100, -100]])
    assert in_context_guess(*by_hand, loss=True) == pytest.approx(math.log(2))  # {5, 6}
    assert in_context_guess(*by_hand, once=True, loss=True) == pytest.approx(0.0)  # {6}


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


# --- the recorder: measures while training, changes nothing ------------------------------

SMALL = dict(n_layers=2, d_model=16, n_heads=2, context_length=32, vocab_size=32)


def _train_small(on_step=None, dropout=0.1, seed=0):
    """A small two-layer model on 640 induction rows (10 steps); dropout makes the mode matter."""
    torch.manual_seed(seed)
    model = TinyLM(TinyLMConfig(**SMALL, dropout=dropout))
    history = train(model, "induction", n_rows=640, progress=False, seed=seed, on_step=on_step)
    return model, history


def _same_run(a, b) -> bool:
    (model_a, hist_a), (model_b, hist_b) = a, b
    pairs = zip(model_a.state_dict().values(), model_b.state_dict().values())
    same_weights = all(torch.equal(x, y) for x, y in pairs)
    return same_weights and hist_a.step_losses == hist_b.step_losses


def _probe():
    x, _ = _rows(16, seed=9)
    return x, repeated_rows(8, 16, generator=torch.Generator().manual_seed(1))


def test_the_recorder_leaves_the_training_bitwise_the_same():
    x, twice = _probe()
    recorder = InductionRecorder(x, repeated=twice, every=2)
    assert _same_run(_train_small(), _train_small(recorder))
    assert recorder.steps == [0, 2, 4, 6, 8, 10]
    assert recorder.previous.shape == recorder.prefix.shape == (6, 2, 2)  # (R, L, H)
    assert recorder.losses.shape == (6, 31) and recorder.icl.shape == (6,)


class _InTrainingMode(InductionRecorder):
    """Broken on purpose: measures in training mode, so dropout draws random numbers."""

    def __call__(self, step, model):
        with torch.no_grad():
            model(self.rows)


class _DrawsANumber(InductionRecorder):
    """Broken on purpose: draws from torch's global generator (say, to subsample rows)."""

    def __call__(self, step, model):
        torch.randperm(len(self.rows))
        super().__call__(step, model)


@pytest.mark.parametrize("broken", [_InTrainingMode, _DrawsANumber])
def test_the_bitwise_check_catches_a_recorder_that_disturbs_the_training(broken):
    x, twice = _probe()
    assert not _same_run(_train_small(), _train_small(broken(x, repeated=twice, every=2)))


def test_the_recorded_scores_are_the_models_own_at_those_steps():
    x, twice = _probe()
    recorder = InductionRecorder(x, repeated=twice, every=5)
    model, _ = _train_small(recorder, dropout=0.0)
    torch.manual_seed(0)
    untrained = TinyLM(TinyLMConfig(**SMALL, dropout=0.0)).eval()
    for index, m in ((0, untrained), (-1, model.eval())):  # step 0 and step 10
        with torch.no_grad():
            _, w = m(x, return_weights=True)  # (N, L, H, T, T)
        torch.testing.assert_close(recorder.previous[index], source_shares(w, offsets=1))
        rule = after_previous_occurrence(x)
        torch.testing.assert_close(recorder.prefix[index], source_shares(w, keys=rule))
        torch.testing.assert_close(recorder.losses[index], loss_per_position(m, twice).mean(0))
    assert recorder.steps == [0, 5, 10]


def test_the_recorder_restores_each_modules_mode_and_takes_a_one_layer_model():
    model = TinyLM(TinyLMConfig(**{**SMALL, "n_layers": 1, "residual": True}))
    model.train()
    model.attn.eval()  # a mixed state, as a learner might leave it
    x, twice = _probe()
    keys = torch.zeros(32, 32, dtype=torch.bool)
    keys[5, 4] = True  # only query 5, on key 4
    recorder = InductionRecorder(x, repeated=twice[:, :20], previous_keys=keys)
    recorder(0, model)
    recorder(3, model)  # not a multiple of every=10: nothing recorded
    assert model.training and not model.attn.training
    assert recorder.steps == [0] and recorder.previous.shape == (1, 1, 2)
    with torch.no_grad():
        _, w = model.eval()(x, return_weights=True)  # (N, H, T, T)
    torch.testing.assert_close(recorder.previous[0, 0], w[:, :, 5, 4].mean(0))
    assert recorder.losses.shape == (1, 19)  # repeated rows of another length: run apart


def test_train_calls_on_step_before_the_first_step_and_after_each():
    calls = []
    _train_small(lambda step, model: calls.append((step, model.training)))
    assert calls == [(0, True)] + [(s, True) for s in range(1, 11)]
    with raises(TypeError, "on_step must be a function", "int"):
        train_tiny_lm("induction", n_rows=64, progress=False, on_step=3)
    with raises(ValueError, "rows must be (N, T) token ids", "(4,)"):
        InductionRecorder(torch.zeros(4, dtype=torch.long))
    with raises(ValueError, "every=0"):
        InductionRecorder(_probe()[0], every=0)


# --- the in-context learning score on repeated rows -----------------------------------


def test_repeated_rows_are_distinct_ids_twice():
    x = repeated_rows(50, 16, generator=torch.Generator().manual_seed(0))
    assert x.shape == (50, 32) and x.dtype == torch.int64
    assert torch.equal(x[:, :16], x[:, 16:])
    assert all(len(set(row[:16])) == 16 for row in x.tolist())
    with raises(ValueError, "half=40", "vocab_size=32"):
        repeated_rows(2, 40)


def test_loss_per_position_is_the_cross_entropy_of_each_next_id():
    torch.manual_seed(0)
    model = TinyLM(TinyLMConfig(**SMALL, dropout=0.5))  # in training mode, with dropout
    x = repeated_rows(4, 16, generator=torch.Generator().manual_seed(2))
    losses = loss_per_position(model, x)
    assert model.training  # the mode is restored
    model.eval()
    with torch.no_grad():
        logp = model(x).log_softmax(-1)  # (N, T, V)
    for n in range(4):
        for t in range(31):
            assert losses[n, t].item() == pytest.approx(-logp[n, t, x[n, t + 1]].item(), abs=1e-5)


def test_icl_score_is_the_second_copy_minus_the_first():
    losses = torch.tensor([[4.0, 4.0, 9.0, 1.0, 2.0], [3.0, 5.0, 0.0, 1.0, 1.0]])  # half = 3
    # first copy: columns 0, 1; the second copy's first id (column 2) is left out; second: 3, 4
    torch.testing.assert_close(icl_score(losses), torch.tensor([1.5 - 4.0, 1.0 - 4.0]))
    with raises(ValueError, "4 positions", "odd"):
        icl_score(torch.zeros(4))


# --- repeats of any length, and the ideal rule -----------------------------------------


@pytest.mark.parametrize("segment", [2, 5, 16])
def test_repeat_batch_repeats_one_segment_and_scores_its_second_copy(segment):
    x, y = repeat_batch(200, segment, generator=torch.Generator().manual_seed(segment))
    assert x.shape == y.shape == (200, 32)
    for row, target in zip(x.tolist(), y.tolist()):
        scored = [p for p, t in enumerate(target) if t != IGNORE_INDEX]
        assert len(scored) == segment - 1 and scored == list(range(scored[0], scored[-1] + 1))
        second = scored[0]
        copy = row[second : second + segment]
        assert any(  # an earlier copy, at least `segment` before
            row[a : a + segment] == copy for a in range(0, second - segment + 1)
        )
        assert all(target[p] == row[p + 1] for p in scored)
    repeats = [len(set(row)) < 32 - segment for row in x.tolist()]
    assert sum(repeats) > 150  # ids recur outside the copy, unlike the task's rows
    with raises(ValueError, "segment=17", "2 to 16"):
        repeat_batch(2, 17)
    with raises(ValueError, "segment=1"):
        repeat_batch(2, 1)


def test_after_previous_guess_is_the_id_after_the_most_recent_earlier_occurrence():
    x, _ = repeat_batch(60, 4, generator=torch.Generator().manual_seed(3))
    guess, found = after_previous_guess(x)
    for row, g, f in zip(x.tolist(), guess.tolist(), found.tolist()):
        for i, token in enumerate(row):
            earlier = [j for j in range(i) if row[j] == token]  # occurrences before i
            assert f[i] == bool(earlier)
            if earlier:
                assert g[i] == row[earlier[-1] + 1]  # the id just after the latest one
    assert after_previous_guess(torch.tensor([[3, 3, 1]]))[0].tolist() == [[0, 3, 0]]


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


def test_plot_run_panels_stacks_panels_on_one_step_axis_with_one_colour_per_label():
    accuracy = {"2 layers": [[0.1, 0.5, 0.9, 1.0]], "1 layer": [[0.1, 0.1, 0.1, 0.1]]}
    scores = {"2 layers": [[0.1, 0.8], [0.2, 0.9]]}
    fig = plot_run_panels(
        [
            {"runs": accuracy, "ylabel": "accuracy"},
            {"runs": scores, "steps": {"2 layers": [0, 4]}, "ylabel": "score",
             "levels": {"even spread": 0.1}},
        ],
        marks={"phase change": [3]},
        title="while training",
    )  # fmt: skip
    top, bottom = fig.axes
    assert top.get_shared_x_axes().joined(top, bottom)
    assert [list(line.get_xdata()) for line in bottom.get_lines()[:2]] == [[0, 4], [0, 4]]
    two_top, two_bottom = top.get_lines()[0].get_color(), bottom.get_lines()[0].get_color()
    assert to_hex(two_top) == to_hex(two_bottom) != to_hex(top.get_lines()[1].get_color())
    assert [line for line in bottom.get_lines() if list(line.get_xdata()) == [3, 3]]  # the mark
    top_labels = [t.get_text() for t in top.get_legend().get_texts()]
    bottom_labels = [t.get_text() for t in bottom.get_legend().get_texts()]
    assert top_labels == ["2 layers", "1 layer", "phase change"]
    assert bottom_labels == ["2 layers", "even spread"]  # the mark listed once, on top
    assert top.get_title() == "while training" and bottom.get_xlabel() == "optimiser step"
    w, h = fig.get_size_inches() * fig.dpi
    assert w <= 1280 and h <= 800
    four = plot_run_panels([{"runs": accuracy, "ylabel": "a"}] * 4)  # notebook 10's figure
    w, h = four.get_size_inches() * four.dpi
    assert w <= 1280 and h <= 800
    with raises(ValueError, "'2 layers'", "4 values", "steps gives 2"):
        plot_run_panels([{"runs": accuracy, "steps": {"2 layers": [0, 4]}, "ylabel": "a"}])
    with raises(ValueError, "panels is empty"):
        plot_run_panels([])


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


def test_outline_block_can_box_one_panel_only():
    w = torch.softmax(torch.randn(2, 10, 10).masked_fill(causal_mask(10), -math.inf), -1)
    fig = plot_heads(w, tokens=list(range(10)), mask=causal_mask(10))
    outline_block(fig, range(6, 9), range(1, 4), "the repeat", panels=[1])
    panels = [ax for ax in fig.axes if ax.images]
    boxed = [[p for p in ax.patches if p.get_gid() == "outlined block"] for ax in panels]
    assert [len(b) for b in boxed] == [0, 1]  # the layer-1 panel only
    with raises(ValueError, "panels=[2]", "2 heatmap panel(s)"):
        outline_block(fig, range(6, 9), range(1, 4), "x", panels=[2])


def test_the_circuit_diagram_names_the_row_the_positions_and_the_sizes():
    row = [9, 3, 4, 5, 8, 3, 4, 5]  # 3 4 5 repeats; at p = 6 (token 4) the answer is 5
    fig = induction_circuit(row, 6, 64, 4)
    shown = " ".join(t.get_text() for ax in fig.axes for t in ax.texts) + fig.get_suptitle()
    for text in ("2:4", "3:5", "6:4", "prev 4", "query 4 matches key 4", "value 5 copied to 6"):
        assert text in shown, text
    assert "predicts 5" in shown and "token at 7" in shown
    assert "D = 64" in shown and "4 heads" in shown and "d_head = 16" in shown and "T = 8" in shown
    gids = [p.get_gid() for ax in fig.axes for p in ax.patches]
    assert {"token 2", "token 3", "token 6", "stream 3", "sum 3", "query", "key"} <= set(gids)
    # the stream is ONE vector per position (a sum), not two boxes side by side
    streams = [p for ax in fig.axes for p in ax.patches if str(p.get_gid()).startswith("stream")]
    tokens = [p for ax in fig.axes for p in ax.patches if p.get_gid() == "token 3"]
    assert sorted(p.get_gid() for p in streams) == ["stream 3", "stream 6"]
    assert all(p.get_width() == tokens[0].get_width() for p in streams)
    assert not any(str(g).startswith(("own", "previous")) for g in gids)
    assert "5 + " in shown and "a box of the stream is one vector of D = 64" in shown
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
    from tests.library.test_figures_zh import CHINESE, english_words, texts

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
