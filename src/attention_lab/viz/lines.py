"""Curves: ``plot_loss`` (training loss per step, notebooks 08, 10) and ``plot_lines``
(measured curves against a size: variance against d_head, time against T, ...)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import cycle

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ..i18n import _, error_text
from .canvas import LabFigure
from .palette import DPI, LABEL_SIZE, LINE_COLORS, TEXT_COLOR, TICK_SIZE, TITLE_SIZE

# The reference lines, grey, told apart by their dashes: dashed, dotted, dash-dotted, ...
REFERENCE_STYLES = ("--", ":", "-.", (0, (6, 2, 1, 2, 1, 2)))
# The runs a line summarises (plot_lines(runs=...)): thin and faint, in the line's colour.
RUN_WIDTH, RUN_ALPHA = 0.9, 0.6


def _line_colors(n: int) -> list[str]:
    return [LINE_COLORS[i % len(LINE_COLORS)] for i in range(n)]


def _label_axes(ax, xlabel: str, ylabel: str, title: str) -> None:
    ax.set_xlabel(xlabel, color=TEXT_COLOR, fontsize=LABEL_SIZE)
    ax.set_ylabel(ylabel, color=TEXT_COLOR, fontsize=LABEL_SIZE)
    ax.set_title(title, color=TEXT_COLOR, fontsize=TITLE_SIZE)
    ax.tick_params(colors=TEXT_COLOR, labelsize=TICK_SIZE)
    ax.grid(alpha=0.3)


def plot_loss(
    histories, chance: float | None = None, title: str | None = None, logy: bool = True
) -> Figure:
    """Loss per optimiser step. ``histories`` is a TrainHistory, a list of floats, or a
    ``{label: history}`` mapping; ``chance`` draws the loss of a uniform guess, ln(vocab).
    ``title`` defaults to "training loss" (in the reader's language)."""
    if title is None:
        title = _("training loss")
    if not isinstance(histories, Mapping):
        histories = {"": histories}
    fig = LabFigure(figsize=(7, 3.8), dpi=DPI)
    ax = fig.subplots()
    ax.set_facecolor("white")
    colours = _line_colors(len(histories))
    for (label, history), colour in zip(histories.items(), colours):
        losses = getattr(history, "step_losses", history)
        ax.plot(range(1, len(losses) + 1), losses, label=label or None, color=colour, lw=1.5)
    if chance is not None:
        ax.axhline(
            chance,
            ls="--",
            color="grey",
            lw=1,
            label=_("chance = {chance:.2f}").format(chance=chance),
        )
    if logy:
        ax.set_yscale("log")
    _label_axes(ax, _("optimiser step"), _("cross-entropy (nats)"), title)
    if ax.get_legend_handles_labels()[1]:
        ax.legend(fontsize=TICK_SIZE)
    fig.tight_layout()
    return fig


def plot_lines(
    x,
    ys: Mapping[str, Sequence[float]],
    xlabel: str,
    ylabel: str,
    title: str = "",
    logx: bool = False,
    logy: bool = False,
    markers: bool = True,
    reference: Mapping[str, Sequence[float]] | None = None,
    connect: bool = True,
    legend_outside: bool = False,
    runs: Mapping[str, Sequence[Sequence[float]]] | None = None,
    runs_label: str | None = None,
) -> LabFigure:
    """One labelled line per entry of ``ys`` against ``x``: for measured curves
    (variance against d_head, time against T, ...). ``reference`` curves (a prediction,
    a fitted slope, a baseline) are drawn grey, under the measurements, each in its own
    dash pattern (``REFERENCE_STYLES``: dashed, dotted, dash-dotted, ...) so that the legend
    tells them apart; ``connect=False`` draws the measurements as dots only, so a
    reference line under them stays visible.
    ``legend_outside=True`` puts the legend right of the axes (a wider figure), for curves
    that fill every corner of the plot.
    ``runs`` maps a label of ``ys`` to the curves that line summarises (say one per seed, when
    ``ys[label]`` is their mean): each is drawn thin, in that line's colour, under it, which
    is then drawn thicker; ``runs_label`` names the thin lines in the legend (one entry)."""
    runs = runs or {}
    unknown = [label for label in runs if label not in ys]
    if unknown:
        raise ValueError(
            error_text(
                "runs has the label {label}, which ys does not have; key runs by the labels "
                "of ys, e.g. ys={{'mean': mean}}, runs={{'mean': [run_1, run_2]}}"
            ).format(label=repr(unknown[0]))
        )
    fig = LabFigure(figsize=(10, 4.0) if legend_outside else (7, 4.0), dpi=DPI)
    ax = fig.subplots()
    ax.set_facecolor("white")
    for (label, values), style in zip((reference or {}).items(), cycle(REFERENCE_STYLES)):
        ax.plot(list(x), list(values), ls=style, color="dimgrey", lw=1.4, label=label)
    colours = _line_colors(len(ys))
    for (label, values), colour in zip(ys.items(), colours):
        for run in runs.get(label, ()):
            ax.plot(list(x), list(run), color=colour, lw=RUN_WIDTH, alpha=RUN_ALPHA)
        ax.plot(
            list(x),
            list(values),
            label=label,
            color=colour,
            lw=(2.4 if label in runs else 1.5) if connect else 0,
            marker="o" if markers or not connect else None,
            ms=4,
        )
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    _label_axes(ax, xlabel, ylabel, title)
    handles, labels = ax.get_legend_handles_labels()
    if runs and runs_label:
        handles.append(Line2D([], [], color=TEXT_COLOR, lw=RUN_WIDTH, alpha=RUN_ALPHA))
        labels.append(runs_label)
    if legend_outside:
        ax.legend(
            handles, labels, fontsize=TICK_SIZE, loc="center left", bbox_to_anchor=(1.01, 0.5)
        )
    else:
        ax.legend(handles, labels, fontsize=TICK_SIZE)
    fig.tight_layout()
    return fig
