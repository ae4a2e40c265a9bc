"""The interactive explorer, driven headlessly: set a control's ``.value``, check the state.

What it computes without the page (settings, the sequence box, models, weights, read-outs'
text) is tested without ipywidgets in test_explorer_model.py. Also pins HeadGrid's fast
redraw (plotting.py): the pixels it paints in place are the pixels a full matplotlib draw gives.
"""

from __future__ import annotations

import html
import io
import itertools
import re

import ipywidgets
import numpy as np
import pytest
import torch
import traitlets
from matplotlib.colors import to_hex
from matplotlib.patches import Rectangle
from PIL import Image

from attention_lab import tasks
from attention_lab.masks import build_mask
from attention_lab.viz.diagrams import head_split
from attention_lab.viz.explorer.model import (
    ALL_HEADS,
    CONTEXT_LENGTH,
    D_MODEL_CHOICES,
    HEAD_CHOICES,
    MASK_CHOICES,
    TASK_CHOICES,
    VOCAB_SIZE,
    d_model_choices,
    example_sequence,
    kv_cache_per_token,
    kv_head_choices,
    parse_sequence,
    position_labels,
    task_context_length,
    task_vocab_size,
    untrained_model,
)
from attention_lab.viz.explorer.picture import (
    CSS_DPI,
    DIAGRAM_CSS_DPI,
    KV_COLORS,
    PIXEL_RATIO,
    RENDER_DPI,
)
from attention_lab.viz.explorer.widgets import AttentionExplorer
from attention_lab.viz.headgrid import HeadGrid
from attention_lab.viz.heatmaps import plot_heads


@pytest.fixture(scope="module")
def explorer():
    return AttentionExplorer()


def panel_count(ex: AttentionExplorer) -> int:
    """Visible heatmap panels of the last figure (the colour bar is not a panel)."""
    return sum(1 for ax in ex.figure.axes if ax.get_visible() and ax.images and ax.get_title())


def titles(ex: AttentionExplorer) -> list[str]:
    return [ax.get_title() for ax in ex.figure.axes if ax.images and ax.get_title()]


def assert_drawn(ex: AttentionExplorer) -> None:
    assert ex.message.value == "", ex.message.value
    assert ex.image.layout.display != "none"
    assert ex.image.value[:8] == b"\x89PNG\r\n\x1a\n"
    # the PNG is the whole figure at RENDER_DPI (matplotlib's canvas truncates to whole pixels)
    width, height = ex.figure.get_size_inches() * RENDER_DPI
    assert png_size(ex.image.value) == (int(width), int(height))


def test_the_figure_has_one_panel_per_head_titled_with_d_head(explorer):
    for n_heads in HEAD_CHOICES:
        explorer.n_heads.value = n_heads
        d_model = explorer.d_model.value
        d_head = d_model // n_heads
        assert_drawn(explorer)
        assert panel_count(explorer) == n_heads
        assert titles(explorer) == [f"head {h} · d_head = {d_head}" for h in range(n_heads)]
        heads = "1 head" if n_heads == 1 else f"{n_heads} heads"
        assert f"<b>{heads} · d_head = {d_head}</b>" in explorer.status.value
        assert explorer.weights.shape == (n_heads, 16, 16)


def test_the_seeds_experiment_4_to_8_heads_at_d_model_32_halves_d_head():
    ex = AttentionExplorer(n_heads=4, d_model=32)
    assert titles(ex)[0].endswith("d_head = 8")
    ex.n_heads.value = 8
    assert ex.d_model.value == 32  # 32 works with 8 heads: the width is kept
    assert panel_count(ex) == 8 and titles(ex)[0].endswith("d_head = 4")
    assert "8 heads · d_head = 4" in ex.status.value


def test_the_d_model_control_only_offers_widths_divisible_by_n_heads(explorer):
    for n_heads in HEAD_CHOICES:
        explorer.n_heads.value = n_heads
        assert explorer.d_model.options == d_model_choices(n_heads)
        assert all(d % n_heads == 0 for d in explorer.d_model.options)
        assert explorer.d_model.value % n_heads == 0


def test_a_width_that_does_not_fit_moves_to_the_nearest_valid_one():
    ex = AttentionExplorer(n_heads=4, d_model=12)
    ex.n_heads.value = 8  # 12 is not divisible by 8: 8 and 16 are both 4 away, take 8
    assert ex.d_model.value == 8
    assert_drawn(ex)


def test_an_invalid_pair_shows_a_message_instead_of_the_figure():
    ex = AttentionExplorer(n_heads=8, d_model=32)
    ex.d_model.options = (12,)  # forced from code: the controls never offer this pair
    assert "d_model=12 is not divisible by n_heads=8" in ex.message.value
    assert ex.image.layout.display == "none"
    assert ex.status.value == ""
    ex.d_model.options = d_model_choices(8)
    assert_drawn(ex)
    assert panel_count(ex) == 8


@pytest.mark.parametrize(
    "text, words",
    [
        ("1 2 x", "'x' is not a token id"),
        ("3 64", "token id 64 is outside the vocabulary"),
        ("   ", "the sequence is empty"),
        (" ".join(["1"] * 17), "17 tokens are more than the context_length=16"),
    ],
)
def test_a_bad_sequence_shows_a_friendly_message(text, words):
    ex = AttentionExplorer()
    ex.sequence.value = text
    assert words in ex.message.value.replace("&#x27;", "'")
    assert "Traceback" not in ex.message.value
    ex.sequence.value = "5 12 7 7"
    assert_drawn(ex)
    assert explorer_T(ex) == 4


def explorer_T(ex: AttentionExplorer) -> int:
    return ex.weights.shape[-1]


def test_the_token_labels_follow_the_sequence():
    ex = AttentionExplorer(sequence="9 8 7")
    first = ex.figure.axes[0]
    assert [t.get_text() for t in first.get_yticklabels()] == ["0:9", "1:8", "2:7"]


# -- the tasks the explorer offers, and how their tokens are shown ---------------------------


def test_the_task_toggle_offers_exactly_the_tasks_of_the_tables_explorer_entries():
    listed = tuple(t for t, row in tasks.TASK_SETTINGS.items() if "explorer" in row)
    ex = AttentionExplorer(diagram=False)
    assert ex.task.options == TASK_CHOICES == listed
    assert TASK_CHOICES == ("copy", "previous", "repeat", "lookup", "induction")
    assert len(ex.task.tooltips) == len(TASK_CHOICES)
    for task in TASK_CHOICES:  # each one draws, and its example's ids fit
        ex.task.value = task
        assert_drawn(ex)
        ids = parse_sequence(ex.sequence.value, task=task)
        assert len(ids) == task_context_length(task) and max(ids) < task_vocab_size(task)
        assert ex.window.max == task_context_length(task)
    with pytest.raises(ValueError, match="does not offer the trigram task.*vocab_size >= 68"):
        AttentionExplorer(task="trigram")
    with pytest.raises(ValueError, match="not known"):
        AttentionExplorer(task="reverse")


def test_ids_typed_for_lookup_are_shown_as_its_tokens_too():
    ex = AttentionExplorer(task="lookup", sequence="12 30 7")  # ids: shown as tokens too
    assert ex.message.value == ""
    assert "reads as <code>a=0 d=0 b?</code>" in ex.status.value
    ex.sequence.value = "a=0 d=0 b?"  # typed as tokens: nothing to translate
    assert "reads as" not in ex.status.value and "4 heads" in ex.status.value


@pytest.mark.parametrize(
    "task, text, words",
    [
        ("lookup", "a=3 g=1", "'g=1' is not a token of the lookup task"),
        ("lookup", "a=6 b?", "'a=6' is not a token of the lookup task"),
        ("lookup", "a=3 SEP", "queries such as c?"),
        ("lookup", "", "for example a=3 b=1 a?"),
        ("repeat", "5 sop 5", "or SEP for the separator"),
        ("copy", "a=3", "'a=3' is not a token id"),
        ("lookup", "a=3 99", "token id 99 is outside the vocabulary"),
    ],
)
def test_a_bad_token_shows_a_message_that_says_what_to_type(task, text, words):
    ex = AttentionExplorer(task=task, diagram=False)
    ex.sequence.value = text
    message = html.unescape(ex.message.value)
    assert words in message and "Traceback" not in message
    assert ex.image.layout.display == "none" and ex.status.value == ""
    ex.sequence.value = example_sequence(task)
    assert_drawn(ex)


def tick_texts(ex: AttentionExplorer) -> tuple[list[str], list[str]]:
    """(row labels of the first panel, column labels of the last panel)."""
    panels = [ax for ax in ex.figure.axes if ax.images and ax.get_title()]
    rows = [t.get_text() for t in panels[0].get_yticklabels()]
    return rows, [t.get_text() for t in panels[-1].get_xticklabels()]


@pytest.mark.parametrize("task", ["copy", "previous", "repeat", "lookup"])
def test_every_row_and_column_is_labelled_position_and_token(task):
    ex = AttentionExplorer(task=task, diagram=False)
    for n_heads in HEAD_CHOICES:
        ex.n_heads.value = n_heads
        ids = parse_sequence(ex.sequence.value, task=task)
        expected = position_labels(task, ids)
        rows, columns = tick_texts(ex)
        assert rows == columns == expected and len(expected) == CONTEXT_LENGTH
        assert len(set(expected)) == len(expected)  # unique, even where a token repeats
        names = tasks.token_labels(task, ids)
        assert expected == [f"{i}:{name}" for i, name in enumerate(names)]
        assert all(re.fullmatch(r"\d+:\S+", label) for label in expected)
    # the snapshot carries the same labels
    snapshot = ex.snapshot()
    panels = [ax for ax in snapshot.axes if ax.images and ax.get_title()]
    assert [t.get_text() for t in panels[0].get_yticklabels()] == expected


def test_the_lookup_tick_labels_name_pairs_queries_and_the_separator():
    ex = AttentionExplorer(task="lookup", sequence="a=3 c=4 c? a?", diagram=False)
    assert tick_texts(ex)[0] == ["0:a=3", "1:c=4", "2:c?", "3:a?"]
    ex.task.value = "repeat"
    rows, _ = tick_texts(ex)
    assert rows[8] == "8:SEP" and rows[0] == "0:" + ex.sequence.value.split()[0]
    ex.task.value = "copy"
    assert tick_texts(ex)[0][:2] == ["0:47", "1:47"]


@pytest.mark.parametrize("n_heads", HEAD_CHOICES)
def test_sixteen_tick_labels_are_at_least_9_pt_and_do_not_overlap(n_heads):
    ex = AttentionExplorer(task="lookup", n_heads=n_heads, diagram=False)
    renderer = ex.figure.canvas.get_renderer()
    panels = [ax for ax in ex.figure.axes if ax.images and ax.get_title()]
    for axis_labels, along in (
        (panels[0].get_yticklabels(), "y"),
        (panels[-1].get_xticklabels(), "x"),
    ):
        assert len(axis_labels) == CONTEXT_LENGTH
        assert all(t.get_fontsize() >= 9 for t in axis_labels)
        boxes = [t.get_window_extent(renderer) for t in axis_labels]
        for a, b in zip(boxes, boxes[1:]):  # neighbours leave a gap
            gap = a.y0 - b.y1 if along == "y" else b.x0 - a.x1
            assert gap > 0, (along, a, b)
        inside = ex.figure.bbox
        assert all(inside.x0 <= box.x0 and box.y0 >= inside.y0 for box in boxes)


def test_the_induction_input_is_labelled_every_other_position_at_9_pt_without_overlap():
    ex = AttentionExplorer(task="induction", diagram=False)
    ids = parse_sequence(ex.sequence.value, task="induction")
    labels = position_labels("induction", ids)
    assert len(ids) == 24
    renderer = ex.figure.canvas.get_renderer()
    rows, columns = tick_texts(ex)
    assert rows == columns == labels[::2]  # 24 rows: every other one, position:token
    panels = [ax for ax in ex.figure.axes if ax.images and ax.get_title()]
    boxes = [t.get_window_extent(renderer) for t in panels[0].get_yticklabels()]
    assert all(t.get_fontsize() >= 9 for t in panels[0].get_yticklabels())
    assert all(a.y0 - b.y1 > 0 for a, b in zip(boxes, boxes[1:]))


# -- induction: two layers and a layer selector -------------------------------------------


@pytest.fixture(scope="module")
def induction_explorer():
    return AttentionExplorer(n_heads=4, d_model=32, task="induction", trained=True, diagram=False)


def test_the_layer_toggle_shows_only_for_the_two_layer_task():
    ex = AttentionExplorer(task="copy", diagram=False)
    assert ex.layer_row.layout.display == "none" and ex.layer.options == (("layer 0", 0),)
    ex.task.value = "induction"
    assert ex.layer_row.layout.display is None
    assert ex.layer.options == (("layer 0", 0), ("layer 1", 1)) and ex.layer.value == 0
    ex.layer.value = 1
    assert_drawn(ex)
    assert "layer 1 of 2" in ex.status.value and "layer 1 of 2" in ex.figure.get_suptitle()
    assert repr(ex).endswith("task='induction', mask='causal', layer=1)")
    ex.task.value = "previous"  # one layer again: the toggle hides, layer 0 is the only one
    assert ex.layer_row.layout.display == "none" and ex.layer.value == 0
    assert "layer" not in ex.status.value and "layer" not in ex.figure.get_suptitle()
    assert_drawn(ex)
    assert ex.weights.shape == (4, 16, 16)


def test_the_picture_of_layer_1_is_the_trained_models_layer_1(induction_explorer):
    ex = induction_explorer
    ids = parse_sequence(ex.sequence.value, task="induction")
    model, history = ex.model_for(True, "induction", 32, 4, "causal", None)
    assert model.config.n_layers == 2 and len(history.step_losses) == 250
    with torch.no_grad():
        _, w = model(torch.tensor([ids]), return_weights=True)  # (1, L, H, T, T)
    try:
        for layer in (0, 1):
            ex.layer.value = layer
            assert_drawn(ex)
            np.testing.assert_array_equal(ex.weights, w[0, layer].numpy())
        ex.head.value = 3
        np.testing.assert_array_equal(ex.weights[0], w[0, 1, 3].numpy())
    finally:
        with ex.hold():
            ex.head.value, ex.layer.value = ALL_HEADS, 0


def test_induction_trains_in_the_explorer_and_layer_1_holds_an_induction_head(
    induction_explorer,
):
    history = induction_explorer.history
    assert history.held_out and history.final_accuracy > 0.9
    assert "trained on induction" in induction_explorer.metrics.value
    assert "scored on the repeat only" in induction_explorer.metrics.value
    # on 64 fresh rows: for each position whose token came before, the weight layer 1
    # puts on the token just after that earlier copy (the induction head's target)
    model, _ = induction_explorer.model_for(True, "induction", 32, 4, "causal", None)
    g = torch.Generator().manual_seed(5)
    x, _ = tasks.make_batch("induction", 64, 24, 32, generator=g)  # (N, T)
    with torch.no_grad():
        _, w = model(x, return_weights=True)  # (N, L, H, T, T)

    def after_earlier_copy(layer: int) -> torch.Tensor:  # (H,): mean over such positions
        shares = []
        for n, row in enumerate(x.tolist()):
            for p, token in enumerate(row):
                earlier = [j for j in range(p) if row[j] == token]
                if earlier and earlier[-1] + 1 < p:
                    shares.append(w[n, layer, :, p, earlier[-1] + 1])
        return torch.stack(shares).mean(0)

    assert after_earlier_copy(1).max() > 0.5  # a layer-1 head matches on content
    assert after_earlier_copy(0).max() < 0.2  # layer 0 does not: it cannot yet
    # the control: the untrained two-layer model does not look there either
    untrained = untrained_model(32, 4, "causal", None, "induction")
    with torch.no_grad():
        _, w = untrained(x, return_weights=True)
    assert after_earlier_copy(1).max() < 0.2


def test_a_layer_the_task_lacks_is_refused_with_a_message():
    with pytest.raises(ValueError, match=r"layer=1 is not offered: pick one of \(0,\)"):
        AttentionExplorer(task="copy", layer=1)
    with pytest.raises(ValueError, match=r"layer=2 is not offered: pick one of \(0, 1\)"):
        AttentionExplorer(task="induction", layer=2)
    ex = AttentionExplorer(task="induction", layer=1, diagram=False)
    assert ex.layer.value == 1 and "layer 1 of 2" in ex.status.value
    ex.sequence.value = "3 40 3"  # a bad input: a message, no traceback, no stale picture
    message = html.unescape(ex.message.value)
    assert "token id 40 is outside the vocabulary; use ids from 0 to 31" in message
    assert "Traceback" not in message and ex.image.layout.display == "none"


# -- lookup, trained in the explorer ------------------------------------------------------


def lookup_weight_on_the_asked_pair(model) -> torch.Tensor:
    """(N, H, T - P): each head's weight, from each query of 128 fresh lookup rows, on the
    pair that holds the query's key."""
    T = CONTEXT_LENGTH
    P = tasks.lookup_pairs(T)
    g = torch.Generator().manual_seed(4)
    x, _ = tasks.make_batch("lookup", 128, T, VOCAB_SIZE, generator=g)  # (N, T)
    keys = (x[:, :P] - tasks.LOOKUP_PAIR) // tasks.LOOKUP_VALUES  # (N, P)
    asked = x[:, P:] - tasks.LOOKUP_QUERY  # (N, T - P)
    source = (asked[:, :, None] == keys[:, None, :]).float().argmax(-1)  # (N, T - P)
    with torch.no_grad():
        _, w = model(x, return_weights=True)  # (N, H, T, T)
    index = source[:, None, :, None].expand(-1, w.shape[1], -1, 1)  # (N, H, T - P, 1)
    return w[:, :, P:, :P].gather(-1, index)[..., 0]  # (N, H, T - P)


@pytest.fixture(scope="module")
def lookup_explorer():
    return AttentionExplorer(n_heads=4, d_model=32, task="lookup", trained=True, diagram=False)


def test_lookup_trains_in_the_explorer_to_95_percent_held_out(lookup_explorer):
    history = lookup_explorer.history
    assert history.held_out and history.eval_rows > 400
    assert history.final_accuracy >= 0.95
    assert "trained on lookup" in lookup_explorer.metrics.value


def test_in_the_trained_lookup_each_query_row_picks_the_pair_with_its_key(lookup_explorer):
    model, _ = lookup_explorer.model_for(True, "lookup", 32, 4, "causal", None)
    on_pair = lookup_weight_on_the_asked_pair(model)  # (N, H, T - P)
    best = on_pair.max(dim=1).values  # (N, T - P): the head that looks hardest, per query
    assert best.median() > 0.9 and (best > 0.5).float().mean() > 0.9
    # the control: random weights put about an even share there, and no query gets half
    untrained = lookup_weight_on_the_asked_pair(untrained_model(32, 4, "causal", None))
    assert untrained.max(dim=1).values.median() < 0.25
    assert (untrained.max(dim=1).values > 0.5).float().mean() < 0.05
    # and in the picture on show: each query row has a head that looks at its pair
    ids = parse_sequence(lookup_explorer.sequence.value, task="lookup")
    P = tasks.lookup_pairs(len(ids))
    stored = {tasks.token_labels("lookup", [i])[0][0]: p for p, i in enumerate(ids[:P])}
    for q, i in enumerate(ids[P:], start=P):
        key = tasks.token_labels("lookup", [i])[0][0]  # "c?" -> "c"
        assert lookup_explorer.weights[:, q, stored[key]].max() > 0.5, (q, key)


def test_moving_a_pair_moves_the_column_its_queries_look_at(lookup_explorer):
    tokens = example_sequence("lookup").split()
    P = tasks.lookup_pairs(len(tokens))
    moved = tokens[:P][::-1] + tokens[P:]  # the same dictionary, pairs in reverse order
    lookup_explorer.sequence.value = " ".join(moved)
    try:
        w = lookup_explorer.weights  # (H, T, T)
        for q in range(P, len(moved)):
            pair = next(p for p in range(P) if moved[p][0] == moved[q][0])
            assert w[:, q, pair].max() > 0.5, (q, moved[q])
    finally:
        lookup_explorer.sequence.value = " ".join(tokens)


def test_every_offered_combination_renders_and_respects_its_mask():
    ex = AttentionExplorer(diagram=False)  # the diagram's sizes are tested on their own
    T = explorer_T(ex)
    for n_heads, mask in itertools.product(HEAD_CHOICES, MASK_CHOICES):
        for d_model in d_model_choices(n_heads):
            with ex.hold():
                ex.n_heads.value = n_heads
                ex.d_model.value = d_model
                ex.mask.value = mask
            assert_drawn(ex)
            assert panel_count(ex) == n_heads
            w = torch.from_numpy(ex.weights)  # (H, T, T)
            torch.testing.assert_close(w.sum(-1), torch.ones(n_heads, T))
            window = ex.window.value if mask == "sliding" else None
            blocked = build_mask(mask, T, window=window)  # (T, T), True = blocked
            assert torch.all(w[:, blocked] == 0)
            assert torch.all(w[:, ~blocked] > 0)
            # the figure draws the mask the model applied, not one guessed from zeros
            np.testing.assert_array_equal(ex.mask_shown, blocked.numpy())
    for window in (1, 4, 16):
        ex.mask.value = "sliding"
        ex.window.value = window
        assert_drawn(ex)
        blocked = build_mask("sliding", T, window=window)
        assert torch.all(torch.from_numpy(ex.weights)[:, blocked] == 0)


# -- the kv heads toggle: grouped-query and multi-query attention ---------------------------


def frame_colours(ex: AttentionExplorer) -> list[str | None]:
    """The frame colour of each panel on show (None: not framed)."""
    grid = ex._picture.grids[(len(ex.weights), tuple(ex._labels[0]))]
    return [_hex(frame) if frame.get_visible() else None for frame in grid.frames]


def _hex(frame) -> str:
    return to_hex(frame.get_edgecolor()).upper()


def test_the_kv_heads_toggle_offers_only_counts_that_divide_n_heads_with_a_tooltip_each():
    ex = AttentionExplorer(n_heads=8, d_model=32, diagram=False)
    assert ex.n_kv_heads.value == 8  # plain multi-head attention by default
    for n_heads in (4, 2, 1, 2, 4, 8):
        ex.n_heads.value = n_heads
        assert [v for _, v in ex.n_kv_heads.options] == list(kv_head_choices(n_heads))
        assert len(ex.n_kv_heads.tooltips) == len(ex.n_kv_heads.options)
        assert ex.n_kv_heads.value == n_heads  # MHA stays MHA
        assert_drawn(ex)
    assert ex.n_kv_heads.tooltips == (
        "8 key/value heads: plain multi-head attention, each query head its own",
        "4 key/value heads: grouped-query attention, 2 query heads share each one",
        "2 key/value heads: grouped-query attention, 4 query heads share each one",
        "1 key/value head: multi-query attention, all 8 query heads share it",
    )
    ex.n_kv_heads.value = 4  # 2 query heads per kv head ...
    ex.n_heads.value = 4
    assert ex.n_kv_heads.value == 2  # ... kept
    ex.n_heads.value = 1
    assert [v for _, v in ex.n_kv_heads.options] == [1] and ex.n_kv_heads.value == 1
    assert_drawn(ex)


def test_every_offered_kv_setting_renders_framed_by_group_with_its_cache_in_the_status():
    ex = AttentionExplorer(diagram=False)
    for n_heads in HEAD_CHOICES:
        ex.n_heads.value = n_heads
        for n_kv in kv_head_choices(n_heads):
            ex.n_kv_heads.value = n_kv
            assert_drawn(ex)
            d_head = ex.d_model.value // n_heads
            group = n_heads // n_kv
            model = ex.model_for(False, "copy", ex.d_model.value, n_heads, "causal", None, n_kv)[0]
            assert model.config.kv_heads == n_kv
            per_token, mha = kv_cache_per_token(model.config)
            assert per_token == 2 * n_kv * d_head * 4 and mha == 2 * ex.d_model.value * 4
            if n_kv == n_heads:
                assert titles(ex) == [f"head {h} · d_head = {d_head}" for h in range(n_heads)]
                assert frame_colours(ex) == [None] * n_heads
                assert "KV cache" not in ex.status.value  # as before the kv heads control
                assert "n_kv_heads" not in ex.figure.get_suptitle()
            else:
                assert titles(ex) == [
                    f"head {h} · kv {h // group} · d_head = {d_head}" for h in range(n_heads)
                ]
                assert frame_colours(ex) == [KV_COLORS[h // group] for h in range(n_heads)]
                assert f"KV cache {per_token} bytes per token" in ex.status.value
                assert f"1/{group} of MHA's {mha}" in ex.status.value
                assert f"n_kv_heads = {n_kv}" in ex.figure.get_suptitle()


def test_head_focus_with_grouped_kv_heads_names_and_frames_that_heads_kv_head():
    ex = AttentionExplorer(n_heads=8, d_model=32, n_kv_heads=2, diagram=False)
    ex.head.value = 5
    assert titles(ex) == ["head 5 · kv 1 · d_head = 4"]
    assert frame_colours(ex) == [KV_COLORS[1]]
    shot = ex.snapshot()  # the static copy says and frames the same
    assert [ax.get_title() for ax in shot.axes if ax.images] == titles(ex)
    frames = [p for ax in shot.axes for p in ax.patches if isinstance(p, Rectangle)]
    assert [_hex(frame) for frame in frames] == [KV_COLORS[1]]


def test_trained_mode_retrains_with_the_kv_heads_and_keeps_each_model():
    ex = AttentionExplorer(n_heads=8, d_model=32, trained=True, diagram=False)
    mha_model, mha_history = ex.model_for(True, "copy", 32, 8, "causal", None)
    ex.n_kv_heads.value = 2
    model, history = ex.model_for(True, "copy", 32, 8, "causal", None, 2)
    assert ex.history is history and history is not mha_history
    assert model.config.n_kv_heads == 2 and history.final_loss < 0.05
    assert "n_kv_heads = 2" in ex.figure.get_suptitle() and "trained on copy" in ex.metrics.value
    ex.n_kv_heads.value = 8  # back to MHA: the model trained first, not a new one
    assert ex.history is mha_history
    assert ex.model_for(True, "copy", 32, 8, "causal", None)[0] is mha_model
    assert len([k for k in ex._models if k[0]]) == 2


def test_the_two_layer_task_groups_the_kv_heads_of_both_layers():
    ex = AttentionExplorer(n_heads=4, d_model=32, task="induction", n_kv_heads=1, diagram=False)
    for layer in (0, 1):
        ex.layer.value = layer
        assert_drawn(ex)
        assert titles(ex) == [f"head {h} · kv 0 · d_head = 8" for h in range(4)]
        assert frame_colours(ex) == [KV_COLORS[0]] * 4
        # 2 layers x 2 (k and v) x 1 kv head x d_head 8 x 4 bytes, a quarter of MHA's
        assert "KV cache 128 bytes per token (1 kv head, MQA): 1/4 of MHA's 512" in (
            ex.status.value
        )


def test_a_kv_count_that_does_not_divide_n_heads_cannot_be_picked_and_is_explained():
    with pytest.raises(ValueError, match=r"n_kv_heads=3 is not offered with n_heads=8"):
        AttentionExplorer(n_heads=8, d_model=32, n_kv_heads=3)
    with pytest.raises(traitlets.TraitError):  # from code: not one of the options
        AttentionExplorer(n_heads=8, d_model=32).n_kv_heads.value = 3
    ex = AttentionExplorer(n_heads=8, d_model=32, diagram=False)
    ex.n_kv_heads.options = [("3", 3)]  # forced from code: the toggle never offers it
    assert "n_heads=8 is not divisible by n_kv_heads=3" in html.unescape(ex.message.value)
    assert "Traceback" not in ex.message.value and ex.image.layout.display == "none"


def test_the_window_slider_only_works_with_the_sliding_mask():
    ex = AttentionExplorer(mask="causal")
    assert ex.window.disabled
    ex.mask.value = "sliding"
    assert not ex.window.disabled


def test_head_focus_shows_that_one_head_with_the_same_weights():
    ex = AttentionExplorer(n_heads=4, d_model=32)
    all_heads = ex.weights.copy()  # (4, T, T)
    ex.head.value = 2
    assert_drawn(ex)
    assert panel_count(ex) == 1 and titles(ex) == ["head 2 · d_head = 8"]
    np.testing.assert_array_equal(ex.weights[0], all_heads[2])
    assert "1 panel" in ex.status.value
    ex.n_heads.value = 2  # head 2 no longer exists: back to all heads
    assert ex.head.value == ALL_HEADS and panel_count(ex) == 2
    assert [label for label, _ in ex.head.options] == ["all heads", "head 0", "head 1"]


def test_every_head_focus_renders(explorer):
    for n_heads in HEAD_CHOICES:
        explorer.n_heads.value = n_heads
        for head in [ALL_HEADS, *range(n_heads)]:
            explorer.head.value = head
            assert_drawn(explorer)
            assert panel_count(explorer) == (n_heads if head == ALL_HEADS else 1)
        explorer.head.value = ALL_HEADS


@pytest.mark.parametrize("task", ["copy", "previous", "repeat"])
def test_trained_mode_reaches_a_low_loss_and_shows_it(task):
    ex = AttentionExplorer(n_heads=4, d_model=32, task=task)
    assert ex.history is None and "untrained" in ex.metrics.value
    ex.trained.value = True
    assert_drawn(ex)
    assert ex.history.final_loss < 0.05
    assert ex.history.final_accuracy > 0.99
    assert f"{ex.history.final_loss:.4f}" in ex.metrics.value
    assert f"trained on {task}" in ex.figure.get_suptitle()


def test_a_trained_previous_model_has_a_head_that_looks_one_step_back():
    ex = AttentionExplorer(n_heads=4, d_model=32, task="previous", trained=True)
    w = torch.from_numpy(ex.weights)  # (H, T, T)
    one_back = torch.diagonal(w, offset=-1, dim1=-2, dim2=-1)  # (H, T - 1)
    assert one_back.mean(-1).max() > 0.5


def test_trained_results_are_cached_per_setting():
    ex = AttentionExplorer(n_heads=2, d_model=16, trained=True)
    model, history = ex.model_for(True, "copy", 16, 2, "causal", None)
    assert ex.history is history
    ex.n_heads.value = 4
    ex.n_heads.value = 2  # back to the first setting: no retraining
    assert ex.model_for(True, "copy", 16, 2, "causal", None)[0] is model
    assert ex.history is history
    assert len([k for k in ex._models if k[0]]) == 2  # one trained model per setting


def test_the_task_toggle_loads_an_example_of_that_task():
    ex = AttentionExplorer(task="copy")
    assert len(set(ex.sequence.value.split())) == 1  # the copy task repeats one token
    ex.task.value = "previous"
    assert len(set(ex.sequence.value.split())) > 1
    assert_drawn(ex)


def test_the_explorer_leaves_the_global_random_state_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    AttentionExplorer(n_heads=1, d_model=8, trained=True)
    torch.testing.assert_close(torch.rand(3), expected)


def shown_bundle(widget, monkeypatch) -> dict:
    """What Jupyter receives when a cell ends with ``widget``, on ipywidgets 8 or 7.x.

    ipywidgets 8 asks ``_repr_mimebundle_``; 7.x (the version Colab ships) has no such method
    on widgets and publishes from ``_ipython_display_`` instead: catch what it publishes.
    """
    bundle = widget._repr_mimebundle_()
    if bundle is not None:
        return bundle
    assert ipywidgets.version_info[0] < 8, "ipywidgets 8 must answer _repr_mimebundle_"
    published = []
    monkeypatch.setattr(
        ipywidgets.widgets.widget, "display", lambda data, raw: published.append(data)
    )
    widget._ipython_display_()
    (bundle,) = published
    return bundle


def test_the_text_shown_in_a_notebook_is_short_and_stable(monkeypatch):
    ex = AttentionExplorer()
    bundle = shown_bundle(ex, monkeypatch)
    assert bundle["text/plain"] == (
        "AttentionExplorer(n_heads=4, d_model=32, trained=False, task='copy', mask='causal')"
    )
    ex.n_kv_heads.value = 2
    assert shown_bundle(ex, monkeypatch)["text/plain"] == (
        "AttentionExplorer(n_heads=4, n_kv_heads=2, d_model=32, trained=False, task='copy', "
        "mask='causal')"
    )
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_one_head_is_singular_in_the_status_line():
    ex = AttentionExplorer(n_heads=1, d_model=16)
    assert "<b>1 head · d_head = 16</b> · 1 panel" in ex.status.value
    ex.n_heads.value = 2
    assert "<b>2 heads · d_head = 8</b> · 2 panels" in ex.status.value


def png_size(png: bytes) -> tuple[int, int]:
    image = Image.open(io.BytesIO(png))
    return image.width, image.height


def test_the_picture_keeps_its_shape_and_is_drawn_with_more_pixels_than_it_is_shown(explorer):
    for n_heads in HEAD_CHOICES:
        explorer.n_heads.value = n_heads
        for image, css_dpi in ((explorer.image, CSS_DPI), (explorer.diagram, DIAGRAM_CSS_DPI)):
            layout = image.layout
            # scaled down as a whole, never stretched: one width, the height follows it
            assert layout.height == "auto" and layout.max_width == "100%"
            assert layout.align_self == "flex-start"  # not stretched to the row's height
            width, _ = png_size(image.value)
            css_width = int(layout.width.removesuffix("px"))
            assert css_width == round(width * css_dpi / RENDER_DPI)
            assert width >= 1.5 * css_width - 1  # sharp at 150 % zoom (one pixel of rounding)
    assert RENDER_DPI / CSS_DPI == PIXEL_RATIO >= 1.5


def test_the_figure_text_is_large_enough_for_a_projector(explorer):
    explorer.n_heads.value = 4
    fig = explorer.figure
    panels = [ax for ax in fig.axes if ax.images and ax.get_title()]
    assert all(ax.title.get_fontsize() >= 11 for ax in panels)
    ticks = [t for ax in panels for t in ax.get_xticklabels() + ax.get_yticklabels()]
    assert ticks and all(t.get_fontsize() >= 9 for t in ticks)
    assert fig.dpi >= 100


def test_prebuild_draws_every_panel_count_so_no_first_visit_builds_a_grid():
    ex = AttentionExplorer(n_heads=4, d_model=32, prebuild=True)
    grids = dict(ex._picture.grids)
    assert sorted(n for n, _ in grids) == sorted(HEAD_CHOICES)
    for n_heads in (8, 2, 1, 4):
        ex.n_heads.value = n_heads
        assert_drawn(ex)
    assert ex._picture.grids == grids  # every panel count reused its pre-built grid


def test_the_head_split_diagram_follows_the_sliders():
    ex = AttentionExplorer(n_heads=4, d_model=32, sequence="1 2 3 4 5")
    first = ex.diagram.value
    assert first[:8] == b"\x89PNG\r\n\x1a\n" and ex.diagram.layout.display != "none"
    ex.n_heads.value = 8
    assert ex.diagram.value != first
    expected = head_split(5, 32, 8)  # the same drawing as notebook 06's, for these sizes
    expected.set_dpi(RENDER_DPI)
    expected.canvas.draw()
    np.testing.assert_array_equal(
        np.asarray(Image.open(io.BytesIO(ex.diagram.value)).convert("RGB")),
        np.asarray(expected.canvas.buffer_rgba())[..., :3],
    )
    ex.n_heads.value = 4
    assert ex.diagram.value == first  # drawn once per size, then kept


def test_the_figure_knows_the_mask_the_model_applied():
    ex = AttentionExplorer(n_heads=2, d_model=16, mask="sliding", window=3, sequence="1 2 3 4 5")
    np.testing.assert_array_equal(ex.mask_shown, build_mask("sliding", 5, window=3).numpy())
    ex.mask.value = "none"
    assert not ex.mask_shown.any()


def test_the_sliders_send_their_value_only_when_released():
    ex = AttentionExplorer()
    for control in (ex.n_heads, ex.d_model, ex.window, ex.sequence):
        assert control.continuous_update is False
    assert set(D_MODEL_CHOICES) >= set(ex.d_model.options)


# -- HeadGrid's fast redraw --------------------------------------------------------------


def full_draw_pixels(weights, titles_, suptitle, n_panels, T) -> np.ndarray:
    fresh = HeadGrid(n_panels, T)
    fresh.update(weights, titles_, suptitle)
    fresh.figure.canvas.draw()
    return np.asarray(fresh.figure.canvas.buffer_rgba()).copy()


@pytest.mark.parametrize("n_panels", [1, 3, 8])
def test_headgrid_paints_the_same_pixels_as_a_full_draw(n_panels):
    rng = np.random.default_rng(0)
    grid = HeadGrid(n_panels, 6)
    steps = [
        (None, "a"),
        ([f"h{h}" for h in range(n_panels)], "b"),  # every title changes
        ([f"h{h}" for h in range(n_panels)], "b"),  # only the numbers change
        (None, "a longer suptitle"),
        (None, "a"),  # back to texts shown before: their pixels come from the cache
        ([f"h{h}" for h in range(n_panels)], "b"),
        ([f"h{h}" for h in range(n_panels)], "a"),
    ]
    for i, (titles_, suptitle) in enumerate(steps):
        weights = rng.random((n_panels, 6, 6))
        grid.update(weights, titles_, suptitle)
        fast = grid.render().copy()
        np.testing.assert_array_equal(
            fast, full_draw_pixels(weights, titles_, suptitle, n_panels, 6)
        )
        if i == 1:
            grid.figure._repr_png_()  # someone else draws the whole figure in between


def test_headgrid_png_changes_with_the_weights_and_is_a_png():
    grid = HeadGrid(2, 4)
    grid.update(np.full((2, 4, 4), 0.25))
    first = grid.to_png()
    grid.update(np.eye(4)[None].repeat(2, 0))
    second = grid.to_png()
    assert first[:8] == second[:8] == b"\x89PNG\r\n\x1a\n"
    assert first != second


def test_headgrid_rejects_weights_of_another_shape():
    grid = HeadGrid(2, 4)
    with pytest.raises(ValueError, match="build a new HeadGrid"):
        grid.update(np.zeros((3, 4, 4)))


def test_plot_heads_still_labels_outer_panels_only():
    fig = plot_heads(np.full((8, 5, 5), 0.2), tokens=list("abcde"))
    panels = [ax for ax in fig.axes if ax.images and ax.get_title()]
    assert len(panels) == 8
    labels = [f"{i}:{t}" for i, t in enumerate("abcde")]  # position:token, never ambiguous
    assert [t.get_text() for t in panels[0].get_yticklabels()] == labels
    assert panels[1].get_yticklabels() == []  # inner panels carry no labels
    assert [t.get_text() for t in panels[4].get_xticklabels()] == labels
    assert panels[0].get_xticklabels() == []


def test_the_snapshot_is_a_static_copy_of_the_picture_on_show():
    ex = AttentionExplorer(n_heads=2, d_model=16, sequence="4 5 6")
    fig = ex.snapshot()
    panels = [ax for ax in fig.axes if ax.images and ax.get_title()]
    assert [ax.get_title() for ax in panels] == titles(ex)
    blocked = build_mask("causal", 3).numpy()  # (T, T), True = blocked
    for ax, weights in zip(panels, ex.weights):
        shown = ax.images[0].get_array()
        np.testing.assert_array_equal(np.ma.getdata(shown), weights)
        np.testing.assert_array_equal(np.ma.getmaskarray(shown), blocked)  # drawn as blocked
    assert fig.get_suptitle() == ex.figure.get_suptitle()
    assert fig is not ex.figure
