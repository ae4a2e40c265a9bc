"""The picture helpers, basics only: panels, titles, one shared 0..1 scale, token labels."""

from __future__ import annotations

import pytest
import torch

from attention_lab import LabFigure, TrainHistory, plot_heads, plot_lines, plot_loss, text_heatmap
from attention_lab.plotting import SHADES


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


def test_plot_heads_labels_rows_and_columns_with_the_tokens():
    tokens = ["the", "cat", "sat", "on", "it"]
    fig = plot_heads(random_weights(2), tokens=tokens)
    first = panels(fig)[0]  # bottom row and left column when there is one row
    assert [t.get_text() for t in first.get_xticklabels()] == tokens
    assert [t.get_text() for t in first.get_yticklabels()] == tokens
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
