"""The interactive explorer, driven headlessly: set a control's ``.value``, check the state.

Also pins HeadGrid's fast redraw (plotting.py): the pixels it paints in place are the
pixels a full matplotlib draw gives.
"""

from __future__ import annotations

import io
import itertools

import ipywidgets
import numpy as np
import pytest
import torch
from PIL import Image

from attention_lab.diagrams import head_split
from attention_lab.masks import build_mask
from attention_lab.plotting import HeadGrid, plot_heads
from attention_lab.widgets import (
    ALL_HEADS,
    CSS_DPI,
    D_MODEL_CHOICES,
    DIAGRAM_CSS_DPI,
    HEAD_CHOICES,
    MASK_CHOICES,
    PIXEL_RATIO,
    RENDER_DPI,
    AttentionExplorer,
    d_model_choices,
    parse_sequence,
    png_bytes,
)


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


def test_parse_sequence_accepts_spaces_and_commas():
    assert parse_sequence(" 5, 12 7\t7 ") == [5, 12, 7, 7]


def test_the_token_labels_follow_the_sequence():
    ex = AttentionExplorer(sequence="9 8 7")
    first = ex.figure.axes[0]
    assert [t.get_text() for t in first.get_yticklabels()] == ["9", "8", "7"]


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


@pytest.mark.parametrize("task", ["copy", "previous"])
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


def test_png_bytes_is_lossless_and_a_png_any_viewer_reads():
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(37, 53, 4), dtype=np.uint8)
    pixels[10:20] = 255  # flat rows, as in a figure
    png = png_bytes(pixels)
    decoded = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    np.testing.assert_array_equal(decoded, pixels[..., :3])


def test_prebuild_draws_every_panel_count_so_no_first_visit_builds_a_grid():
    ex = AttentionExplorer(n_heads=4, d_model=32, prebuild=True)
    grids = dict(ex._grids)
    assert sorted(n for n, _ in grids) == sorted(HEAD_CHOICES)
    for n_heads in (8, 2, 1, 4):
        ex.n_heads.value = n_heads
        assert_drawn(ex)
    assert ex._grids == grids  # every panel count reused its pre-built grid


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
    assert [t.get_text() for t in panels[0].get_yticklabels()] == list("abcde")
    assert panels[1].get_yticklabels() == []  # inner panels carry no labels
    assert [t.get_text() for t in panels[4].get_xticklabels()] == list("abcde")
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
