"""The picture helpers, basics only: panels, titles, one shared 0..1 scale, token labels.

Every test runs twice: on the fast drawing path and on the plain-Agg fallback (``path``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_lab import (
    LabFigure,
    TrainHistory,
    plot_heads,
    plot_lines,
    plot_loss,
    text_heatmap,
)
from attention_lab.viz import _mpl_fast
from attention_lab.viz.heatmaps import SHADES


@pytest.fixture(autouse=True, params=["fast", "plain"])
def path(request):
    """Each test on the fast drawing path and on the plain-Agg fallback."""
    _mpl_fast.use_plain_agg(request.param == "plain")
    if request.param == "fast" and not _mpl_fast.fast_path():
        pytest.skip(_mpl_fast.status())  # test_mpl_fast fails for the pinned versions
    yield request.param
    _mpl_fast.use_plain_agg(False)


def panels(fig):
    """The visible heatmap axes of a figure (not the colour bar, not hidden spares)."""
    return [ax for ax in fig.axes if ax.get_visible() and ax.images]


def random_weights(*lead, T=5):
    return torch.softmax(torch.randn(*lead, T, T), dim=-1)  # (..., T, T)


@pytest.mark.parametrize("n_heads", [1, 3, 4, 6])
def test_plot_heads_draws_one_panel_per_head(n_heads):
    fig = plot_heads(random_weights(n_heads))
    assert isinstance(fig, LabFigure)
    assert len(panels(fig)) == n_heads


@pytest.mark.parametrize(
    "weights", [random_weights(T=5), random_weights(3, T=5), random_weights(1, 3, T=5)]
)
def test_plot_heads_takes_t_t_h_t_t_and_1_h_t_t(weights):
    n = weights.shape[-3] if weights.dim() > 2 else 1
    assert len(panels(plot_heads(weights))) == n


def test_plot_heads_shows_the_weights_it_was_given():
    w = random_weights(2)
    fig = plot_heads(w)
    for ax, head in zip(panels(fig), w):
        shown = torch.as_tensor(ax.images[0].get_array().data, dtype=torch.float32)
        torch.testing.assert_close(shown, head)


def test_plot_heads_titles_each_panel_and_the_figure():
    fig = plot_heads(random_weights(3), suptitle="three heads")
    assert [ax.get_title() for ax in panels(fig)] == ["head 0", "head 1", "head 2"]
    assert fig._suptitle.get_text() == "three heads"
    fig = plot_heads(random_weights(2), titles=["previous", "self"])
    assert [ax.get_title() for ax in panels(fig)] == ["previous", "self"]


def test_every_panel_shares_one_0_to_1_colour_scale():
    w = random_weights(4) * 0.3  # weights well below 1: the scale must not stretch to them
    fig = plot_heads(w)
    limits = {ax.images[0].get_clim() for ax in panels(fig)}
    assert limits == {(0.0, 1.0)}
    cmaps = {ax.images[0].get_cmap().name for ax in panels(fig)}
    assert len(cmaps) == 1


def test_plot_heads_labels_rows_and_columns_with_position_and_token():
    tokens = ["the", "cat", "sat", "on", "it"]
    fig = plot_heads(random_weights(2), tokens=tokens)
    first = panels(fig)[0]  # bottom row and left column when there is one row
    expected = ["0:the", "1:cat", "2:sat", "3:on", "4:it"]
    assert [t.get_text() for t in first.get_xticklabels()] == expected
    assert [t.get_text() for t in first.get_yticklabels()] == expected
    assert "key" in first.get_xlabel() and "query" in first.get_ylabel()


def test_plot_heads_refuses_the_wrong_number_of_token_labels():
    with pytest.raises(ValueError, match="3 token labels for T=5"):
        plot_heads(random_weights(2), tokens=["a", "b", "c"])


def test_plot_heads_renders_a_png():
    png = plot_heads(random_weights(2))._repr_png_()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_loss_draws_one_curve_per_history_and_the_chance_line():
    a = TrainHistory(task="copy", initial_loss=4.2, step_losses=[4.0, 2.0, 1.0])
    b = [3.0, 1.5, 0.5, 0.25]
    fig = plot_loss({"copy": a, "list": b}, chance=4.16, title="two runs")
    ax = fig.axes[0]
    assert ax.get_title() == "two runs"
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels[:2] == ["copy", "list"]
    assert any(label.startswith("chance = 4.16") for label in labels)
    assert list(ax.get_lines()[0].get_ydata()) == [4.0, 2.0, 1.0]
    assert list(ax.get_lines()[1].get_xdata()) == [1, 2, 3, 4]
    assert ax.get_yscale() == "log"


def test_plot_lines_draws_one_labelled_line_per_series():
    fig = plot_lines([1, 2, 4], {"a": [1, 2, 3], "b": [3, 2, 1]}, "d_head", "variance", "t")
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["a", "b"]
    assert ax.get_xlabel() == "d_head" and ax.get_ylabel() == "variance"
    assert ax.get_title() == "t"


def test_plot_lines_gives_each_reference_line_its_own_dashes_so_the_legend_tells_them_apart():
    """Notebook 11 draws chance, the bigram and the trigram as three references: in one grey
    dash the legend could not tell them apart (issue 40)."""
    refs = {f"ref {i}": [float(i)] * 3 for i in range(5)}
    fig = plot_lines([1, 2, 3], {"a": [1, 2, 3]}, "step", "loss", reference=refs)
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    assert set(refs) <= set(lines)  # none dropped, however many
    dashes = [str(lines[label].get_linestyle()) + str(lines[label]._dash_pattern) for label in refs]
    assert len(set(dashes[:4])) == 4  # the first four: four different patterns
    assert dashes[4] == dashes[0]  # then the patterns repeat
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert all(label in legend for label in refs)


def test_plot_lines_can_put_the_legend_beside_the_axes_so_it_hides_no_curve():
    ys = {"a": [0.1, 0.9, 1.0], "b": [0.9, 0.1, 0.0]}  # curves in every corner
    inside = plot_lines([1, 2, 4], ys, "steps", "accuracy")
    outside = plot_lines([1, 2, 4], ys, "steps", "accuracy", legend_outside=True)
    for fig in (inside, outside):
        fig.canvas.draw()
    axes_box = outside.axes[0].get_window_extent()
    legend_box = outside.axes[0].get_legend().get_window_extent()
    assert legend_box.x0 >= axes_box.x1  # right of the plot, over no data
    assert (
        inside.axes[0].get_legend().get_window_extent().x1 <= inside.axes[0].get_window_extent().x1
    )
    assert outside.get_size_inches()[0] > inside.get_size_inches()[0]  # the plot keeps its width


def test_plot_lines_draws_the_runs_of_a_mean_thin_and_in_the_mean_lines_own_colour():
    """Notebook 09 draws each seed's curve under the mean of its head count: one hue per head
    count, so a reader can tell which thin line belongs to which mean (issue 40)."""
    runs = {"1 head": [[0.1, 0.5, 0.9], [0.3, 0.7, 1.0]], "2 heads": [[0.8, 1.0, 1.0]] * 3}
    ys = {label: [sum(v) / len(v) for v in zip(*curves)] for label, curves in runs.items()}
    fig = plot_lines([1, 2, 4], ys, "steps", "accuracy", runs=runs, runs_label="one seed each")
    ax = fig.axes[0]
    means = {line.get_label(): line for line in ax.get_lines() if line.get_label() in ys}
    thin = [line for line in ax.get_lines() if line.get_label() not in ys]
    assert len(thin) == 5  # every run drawn, none dropped
    for line in thin:
        owner = next(label for label, curves in runs.items() if list(line.get_ydata()) in curves)
        assert line.get_color() == means[owner].get_color()  # the colour of its own mean
        assert line.get_linewidth() < means[owner].get_linewidth()  # thinner than the mean
    assert len({m.get_color() for m in means.values()}) == 2  # one hue per mean
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["1 head", "2 heads", "one seed each"]  # one entry for all the runs


def test_plot_lines_refuses_runs_of_a_line_it_does_not_draw():
    with pytest.raises(ValueError, match="runs has the label 'mean of 3'"):
        plot_lines([1, 2], {"mean": [1, 2]}, "x", "y", runs={"mean of 3": [[1, 2]]})


def test_text_heatmap_draws_one_character_per_weight_with_token_labels():
    w = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    text = text_heatmap(w, tokens=["a", "b", "c"])
    lines = text.splitlines()
    assert lines[0] == "  |abc"
    assert lines[1] == "a |@  "
    assert lines[2][3:] == SHADES[round(0.5 * (len(SHADES) - 1))] * 2 + " "
    assert lines[3] == "c |  @"


def test_text_heatmap_refuses_more_than_one_matrix():
    with pytest.raises(ValueError, match="one \\(T, T\\) matrix"):
        text_heatmap(random_weights(2))


# -- masked cells, colour scale, readability (issue 10) ----------------------------------


def causal_weights(H=4, T=16, scale=0.01):
    from attention_lab.masks import causal_mask

    mask = causal_mask(T)  # (T, T), True = blocked
    scores = torch.randn(H, T, T) * scale  # an untrained head: weights close to uniform
    return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1), mask  # (H, T, T)


def pixel(fig, ax, row, col) -> np.ndarray:
    """The RGB colour the rendered figure shows at the centre of cell (row, col) of ax."""
    if getattr(fig, "_test_pixels", None) is None:
        fig.canvas.draw()
        fig._test_pixels = np.asarray(fig.canvas.buffer_rgba()).copy()
    rgba = fig._test_pixels
    x, y = ax.transData.transform((col, row))
    return rgba[int(round(rgba.shape[0] - y)), int(round(x)), :3].astype(float)


def test_blocked_cells_look_unlike_the_smallest_real_weight():
    w, mask = causal_weights()
    fig = plot_heads(w, mask=mask)
    T = w.shape[-1]
    for h, ax in enumerate(panels(fig)):
        real = w[h].masked_fill(mask, float("inf"))
        row, col = divmod(int(real.argmin()), T)  # the smallest weight that was computed
        assert not mask[row, col]
        for blocked in [(0, T - 1), (T // 2, T // 2 + 1), (T - 2, T - 1)]:
            assert mask[blocked]
            distance = np.linalg.norm(pixel(fig, ax, *blocked) - pixel(fig, ax, row, col))
            assert distance > 60, (h, blocked, distance)


def test_blocked_cells_are_grey_even_without_stripes():
    w, mask = causal_weights(H=2, T=6)
    fig = plot_heads(w, mask=mask, hatch=False)
    ax = panels(fig)[0]
    r, g, b = pixel(fig, ax, 0, 5)
    assert max(r, g, b) - min(r, g, b) < 8  # neutral: no hue, so no weight looks like it


def test_a_small_weight_is_visibly_not_white_and_zero_is_white():
    T = 16
    w = torch.full((1, T, T), 1.0 / T)
    w[0, 0] = 0.0  # row 0: weight exactly 0 everywhere (not blocked)
    fig = plot_heads(w)
    ax = panels(fig)[0]
    white = np.array([255.0, 255.0, 255.0])
    assert np.linalg.norm(pixel(fig, ax, 0, 3) - white) < 20  # 0 is white-ish
    assert np.linalg.norm(pixel(fig, ax, 5, 3) - white) > 60  # 1/16 is clearly tinted


def test_zeros_are_not_mistaken_for_blocked_cells():
    w = torch.zeros(1, 4, 4)
    w[0, :, 0] = 1.0  # every query looks at key 0 only; nothing was blocked
    with pytest.warns(UserWarning, match="mask=causal_mask"):  # 0 above the diagonal
        fig = plot_heads(w)
    assert not any(p.get_visible() for ax in panels(fig) for p in ax.patches if p.get_hatch())
    assert not fig.legends[0].get_visible()
    fig = plot_heads(w, mask=torch.ones(4, 4, dtype=torch.bool).triu(1))
    assert fig.legends[0].get_visible()
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["blocked"]


def test_a_mask_per_head_is_drawn_per_head():
    from attention_lab.viz.headgrid import HeadGrid

    T = 5
    masks = torch.stack([torch.ones(T, T, dtype=torch.bool).triu(1), torch.zeros(T, T).bool()])
    grid = HeadGrid(2, T)
    grid.update(torch.full((2, T, T), 0.2), mask=masks)
    assert np.ma.is_masked(grid.images[0].get_array())
    assert not np.ma.is_masked(grid.images[1].get_array())
    np.testing.assert_array_equal(grid.mask, masks.numpy())


def test_a_float_or_misshapen_mask_is_refused_with_the_fix():
    w, mask = causal_weights(H=2, T=5)
    with pytest.raises(ValueError, match="boolean mask with True where attention is blocked"):
        plot_heads(w, mask=mask.float())
    with pytest.raises(ValueError, match=r"mask has shape \(4, 4\)"):
        plot_heads(w, mask=mask[:4, :4])


def test_labels_and_titles_are_readable_from_the_back_of_the_room():
    fig = plot_heads(random_weights(3, T=6), tokens=list("abcdef"), suptitle="x")
    assert fig.dpi >= 100
    for ax in panels(fig):
        assert ax.title.get_fontsize() >= 11
        for label in ax.get_xticklabels() + ax.get_yticklabels():
            assert label.get_fontsize() >= 9
    assert fig._suptitle.get_fontsize() >= 11
    bar = [ax for ax in fig.axes if ax not in panels(fig) and ax.get_visible()][-1]
    assert all(t.get_fontsize() >= 9 for t in bar.get_yticklabels())


@pytest.mark.parametrize(("tokens", "rotation"), [(["the", "cat", "sat", "on"], 0), (None, 0)])
def test_short_token_labels_stay_horizontal(tokens, rotation):
    fig = plot_heads(random_weights(2, T=4), tokens=tokens)
    assert {t.get_rotation() for t in panels(fig)[0].get_xticklabels()} == {rotation}


def test_long_labels_on_many_columns_stand_up_instead_of_colliding():
    T = 12
    fig = plot_heads(random_weights(2, T=T), tokens=[f"word{i}" for i in range(T)])
    assert {t.get_rotation() for t in panels(fig)[0].get_xticklabels()} == {90}


def test_the_colour_scale_is_square_root_spaced_so_small_weights_show():
    fig = plot_heads(random_weights(2))
    norm = panels(fig)[0].images[0].norm
    assert norm(1 / 16) == pytest.approx(0.25)  # a quarter of the colours below 1/16
    assert norm(0.0) == 0.0 and norm(1.0) == 1.0


@pytest.mark.parametrize("hatch", [False, True])
def test_headgrid_fast_redraw_paints_the_mask_like_a_full_draw(hatch):
    from attention_lab.viz.headgrid import HeadGrid

    T, H = 6, 3
    rng = np.random.default_rng(0)
    causal = np.triu(np.ones((T, T), bool), 1)
    window = causal | np.tril(np.ones((T, T), bool), -3)
    grid = HeadGrid(H, T, hatch=hatch)
    for mask in (causal, window, None, causal, np.stack([causal, window, causal])):
        weights = rng.random((H, T, T))
        grid.update(weights, suptitle="s", mask=mask)
        fast = grid.render().copy()
        fresh = HeadGrid(H, T, hatch=hatch)
        fresh.update(weights, suptitle="s", mask=mask)
        fresh.figure.canvas.draw()
        full = np.asarray(fresh.figure.canvas.buffer_rgba())
        np.testing.assert_array_equal(fast, full)


# -- tick labels name position and token; the colour bar says its scale; causal needs a mask --


def tick_texts(fig) -> tuple[list[str], list[str]]:
    """(row labels of the first panel, column labels of the last panel)."""
    shown = panels(fig)
    return (
        [t.get_text() for t in shown[0].get_yticklabels()],
        [t.get_text() for t in shown[-1].get_xticklabels()],
    )


def test_repeated_tokens_and_the_separator_get_distinct_position_labels():
    from attention_lab import make_batch

    x, _ = make_batch("repeat", 1, 12, generator=torch.Generator().manual_seed(99))  # (1, T)
    w, mask = causal_weights(H=4, T=12)
    fig = plot_heads(w, tokens=x[0], task="repeat", mask=mask)
    ids = x[0].tolist()
    expected = [f"{i}:{'SEP' if t == 0 else t}" for i, t in enumerate(ids)]
    rows, columns = tick_texts(fig)
    assert rows == columns == expected
    assert expected[6] == "6:SEP" and len(set(expected)) == 12
    assert len(set(ids)) < 12  # the first half repeats: bare ids would be ambiguous


def test_ids_as_a_list_or_a_tensor_give_the_same_labels_and_labelled_ones_are_kept():
    w = random_weights(1, T=4)
    as_list = tick_texts(plot_heads(w, tokens=[47, 1, 47, 1]))[0]
    as_tensor = tick_texts(plot_heads(w, tokens=torch.tensor([47, 1, 47, 1])))[0]
    assert as_list == as_tensor == ["0:47", "1:1", "2:47", "3:1"]
    kept = ["0:a", "1:b", "2:c", "3:d"]  # already position:token (the explorer, notebook 11)
    assert tick_texts(plot_heads(w, tokens=kept))[0] == kept
    assert tick_texts(plot_heads(w))[0] == ["0", "1", "2", "3"]  # no tokens: positions
    named = ["a=0", "b?", "a?", "3"]  # token_labels("lookup", ids) passed with task= too
    assert tick_texts(plot_heads(w, tokens=named, task="lookup"))[0] == [
        "0:a=0",
        "1:b?",
        "2:a?",
        "3:3",
    ]


@pytest.mark.parametrize("n_heads", [1, 4, 8])
def test_sixteen_lookup_labels_are_all_shown_at_9_pt_without_overlap_on_a_laptop(n_heads):
    from attention_lab import make_batch
    from attention_lab.tasks import token_labels

    x, _ = make_batch("lookup", 1, 16, generator=torch.Generator().manual_seed(1))  # (1, 16)
    w, mask = causal_weights(H=n_heads, T=16)
    fig = plot_heads(w, tokens=x[0], task="lookup", mask=mask)
    expected = [f"{i}:{name}" for i, name in enumerate(token_labels("lookup", x[0]))]
    rows, columns = tick_texts(fig)
    assert rows == columns == expected
    width, height = fig.get_size_inches() * fig.dpi
    assert width <= 1280 and height <= 800  # a 1280 x 800 laptop (and so a 1920 projector)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    shown = panels(fig)
    for labels, along in ((shown[0].get_yticklabels(), 1), (shown[-1].get_xticklabels(), 0)):
        assert all(t.get_fontsize() >= 9 for t in labels)
        boxes = [t.get_window_extent(renderer) for t in labels]
        starts = sorted((b.extents[along], b.extents[along + 2]) for b in boxes)
        assert all(a[1] <= b[0] + 0.5 for a, b in zip(starts, starts[1:]))  # no overlap
        inside = fig.bbox
        assert all(inside.x0 <= b.x0 and b.x1 <= inside.x1 and inside.y0 <= b.y0 for b in boxes)
    # the axis labels do not run into the tick labels
    ylabel = shown[0].yaxis.label.get_window_extent(renderer)
    assert all(ylabel.x1 <= t.get_window_extent(renderer).x0 for t in shown[0].get_yticklabels())
    xlabel = shown[-1].xaxis.label.get_window_extent(renderer)
    assert all(xlabel.y1 <= t.get_window_extent(renderer).y0 for t in shown[-1].get_xticklabels())


def test_the_colour_bar_says_square_root_and_its_ticks_sit_where_the_colours_are():
    fig = plot_heads(random_weights(2))
    bar = [ax for ax in fig.axes if ax not in panels(fig) and ax.get_visible()][-1]
    assert "√ scale" in bar.get_ylabel()
    ticks = [float(t.get_text()) for t in bar.get_yticklabels()]
    assert 0.1 in ticks and 0.5 in ticks and ticks == sorted(ticks)
    # each tick sits at sqrt(weight) of the bar's height: 0.25 half-way up, 0.1 at 0.32
    to_axes = bar.transData + bar.transAxes.inverted()  # data -> 0..1 up the bar
    for t in bar.get_yticklabels():
        value = float(t.get_text())
        where = to_axes.transform(t.get_position())[1]
        assert where == pytest.approx(value**0.5, abs=1e-6)
    minor = bar.yaxis.get_minorticklocs()
    assert len(minor) >= 10  # minor ticks show the uneven steps


def test_causal_weights_without_a_mask_warn_and_causal_true_draws_them_blocked():
    from attention_lab.masks import causal_mask
    from attention_lab.viz.heatmaps import CausalWithoutMaskWarning, looks_causal

    w, mask = causal_weights(H=2, T=6)
    assert looks_causal(w) and not looks_causal(random_weights(2, T=6))
    with pytest.warns(CausalWithoutMaskWarning, match=r"mask=causal_mask\(6\)"):
        plot_heads(w)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = plot_heads(w, causal=True)  # no warning
        plot_heads(w, mask=mask)
        plot_heads(random_weights(2, T=6))  # not causal: nothing to say
    for ax in panels(fig):
        np.testing.assert_array_equal(np.ma.getmaskarray(ax.images[0].get_array()), causal_mask(6))
    with pytest.raises(ValueError, match="either mask= or causal=True"):
        plot_heads(w, mask=mask, causal=True)


def test_values_true_writes_every_weight_that_was_not_blocked_into_its_cell():
    w, mask = causal_weights(H=2, T=5, scale=1.0)
    fig = plot_heads(w, mask=mask, values=True)
    for h, ax in enumerate(panels(fig)):
        written = {
            (round(t.get_position()[1]), round(t.get_position()[0])): t.get_text()
            for t in ax.texts
            if t.get_gid() == "weight value"
        }
        expected = {
            (i, j): f"{float(w[h, i, j]):.2f}" for i in range(5) for j in range(5) if not mask[i, j]
        }
        assert written == expected
        assert all(t.get_fontsize() >= 9 for t in ax.texts)
    assert not any(ax.texts for ax in panels(plot_heads(w, mask=mask)))  # off by default
