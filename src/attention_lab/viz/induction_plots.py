"""Two pictures of notebook 10 (induction heads) that the other helpers do not draw.

* ``plot_runs``: training curves of several seeds per model, one colour per model, one
  thin line per seed, with levels to compare against (a baseline, chance) and marked steps
  (each seed's phase change).
* ``plot_run_panels``: several such panels stacked on one step axis (the accuracy, the
  heads' scores recorded every few steps, the in-context learning score), one colour per
  label in every panel, the same steps marked on each.
* ``outline_block``: a box around the same block of cells on the panels of a
  ``plot_heads`` figure (the queries of the repeat and the keys of the first copy), with a
  legend entry in the figure's top right corner.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from ..i18n import _, error_text
from .canvas import LabFigure
from .lines import _label_axes, _line_colors
from .palette import DPI, LABEL_SIZE, TICK_SIZE

OUTLINE_COLOR = "#EE3377"  # Paul Tol's "vibrant" magenta: no head colour, no weight's blue
LEVEL_STYLES = ("--", ":", "-.")  # the levels, grey, told apart by their dashes


def plot_runs(
    runs: Mapping[str, Sequence[Sequence[float]]],
    ylabel: str,
    *,
    levels: Mapping[str, float] | None = None,
    marks: Mapping[str, Sequence[int | None]] | None = None,
    title: str = "",
    xlabel: str | None = None,
    logx: bool = False,
    logy: bool = False,
) -> LabFigure:
    """Curves of several seeds per group against the optimiser step (1, 2, ...).

    ``runs``: ``{label: [curve of seed 0, curve of seed 1, ...]}``, one value per step
    (e.g. ``TrainHistory.step_accuracies``); curves may differ in length. Each group has
    one colour and one legend entry; each seed is a thin line. ``levels``: ``{label: y}``
    drawn as grey horizontal lines (dashed, dotted, ...). ``marks``: ``{label: [step or
    None per seed]}``, a thin black vertical line at each step (None: the seed has none).
    ``xlabel`` defaults to "optimiser step" (in the reader's language). The legend sits
    right of the axes.
    """
    _check_runs(runs)
    fig = LabFigure(figsize=(10, 4.0), dpi=DPI)
    ax = fig.subplots()
    colours = dict(zip(runs, _line_colors(len(runs))))
    handles = _draw_runs(ax, runs, colours, None, levels, marks)
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    _label_axes(ax, _("optimiser step") if xlabel is None else xlabel, ylabel, title)
    ax.legend(handles=handles, fontsize=TICK_SIZE, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    return fig


def _check_runs(runs) -> None:
    if not runs or any(not curves for curves in runs.values()):
        raise ValueError(
            error_text(
                "runs must map each label to a list of curves, one per seed, got {runs}; "
                "pass e.g. {{'2 layers': [history.step_accuracies]}}"
            ).format(runs=repr(dict(runs))[:80])
        )


def _draw_runs(ax, runs, colours, steps, levels, marks) -> list[Line2D]:
    """Draw ``runs`` (one thin line per curve, one colour per label) on ``ax``, with its
    levels and marks; return the legend handles. ``steps``: ``{label: x values}`` for the
    labels whose curves were recorded at other steps than 1, 2, 3, ..."""
    ax.set_facecolor("white")
    handles = []
    for label, curves in runs.items():
        for curve in curves:
            values = [float(v) for v in curve]
            x = list((steps or {}).get(label, range(1, len(values) + 1)))
            if len(x) != len(values):
                raise ValueError(
                    error_text(
                        "the curves of {label} have {n} values but steps gives {m}; pass one "
                        "step per recorded value"
                    ).format(label=repr(label), n=len(values), m=len(x))
                )
            ax.plot(x, values, color=colours[label], lw=1.0, alpha=0.85)
        handles.append(Line2D([], [], color=colours[label], lw=2.0, label=label))
    for (label, level), style in zip((levels or {}).items(), LEVEL_STYLES * 4):
        ax.axhline(level, ls=style, color="dimgrey", lw=1.4)
        handles.append(Line2D([], [], ls=style, color="dimgrey", lw=1.4, label=label))
    for label, marked in (marks or {}).items():
        for step in marked:
            if step is not None:
                ax.axvline(step, color="black", lw=0.8, alpha=0.6)
        handles.append(Line2D([], [], color="black", lw=0.8, alpha=0.6, label=label))
    return handles


def plot_run_panels(
    panels: Sequence[Mapping],
    *,
    marks: Mapping[str, Sequence[int | None]] | None = None,
    title: str = "",
    xlabel: str | None = None,
) -> LabFigure:
    """Panels of ``plot_runs`` curves, one above the other, on one shared step axis.

    ``panels``: one mapping per panel, with ``"runs"`` ({label: [curve per seed]}, as in
    ``plot_runs``), ``"ylabel"``, and optionally ``"steps"`` ({label: the step of each value},
    for curves recorded every few steps, e.g. ``InductionRecorder.steps``) and ``"levels"``
    ({label: y}, grey lines). A label has one colour in every panel. ``marks`` ({label: [step
    or None per seed]}) are drawn on every panel, listed in the first panel's legend. Each
    panel's legend sits right of it.
    """
    if not panels:
        raise ValueError(
            error_text(
                "panels is empty; pass one mapping per panel, e.g. [{{'runs': {{'2 layers': "
                "[curve]}}, 'ylabel': 'accuracy'}}]"
            )
        )
    labels = list(dict.fromkeys(label for panel in panels for label in panel["runs"]))
    colours = dict(zip(labels, _line_colors(len(labels))))
    # 2.35 in a panel, at most 8 in in all: four panels still fit a 1280 x 800 laptop screen
    fig = LabFigure(figsize=(10, min(8.0, 0.5 + 2.35 * len(panels))), dpi=DPI)
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for i, (ax, panel) in enumerate(zip(axes, panels)):
        _check_runs(panel["runs"])
        handles = _draw_runs(
            ax, panel["runs"], colours, panel.get("steps"), panel.get("levels"), marks
        )
        if i:  # the marks' legend entry once, in the first panel
            handles = handles[: len(handles) - len(marks or {})]
        last = i == len(panels) - 1
        xlab = (_("optimiser step") if xlabel is None else xlabel) if last else ""
        _label_axes(ax, xlab, panel["ylabel"], title if i == 0 else "")
        ax.legend(
            handles=handles, fontsize=TICK_SIZE, loc="center left", bbox_to_anchor=(1.01, 0.5)
        )
    fig.tight_layout()
    return fig


def outline_block(fig, rows: range, cols: range, label: str, panels: Sequence[int] | None = None):
    """Outline the cells ``rows`` x ``cols`` (query positions x key positions) on the
    heatmap panels of ``fig`` (a ``plot_heads`` figure) and add ``label`` to its legend.
    ``panels``: which panels, counted from 0 (None: every one). Returns ``fig``."""
    rows, cols = range(rows.start, rows.stop), range(cols.start, cols.stop)
    heatmaps = [ax for ax in fig.axes if ax.images and ax.get_visible()]
    chosen = range(len(heatmaps)) if panels is None else list(panels)
    if any(not 0 <= i < len(heatmaps) for i in chosen):
        raise ValueError(
            error_text(
                "panels={panels} names a panel this figure lacks: it has {n} heatmap panel(s), "
                "numbered from 0"
            ).format(panels=list(chosen), n=len(heatmaps))
        )
    panels = [heatmaps[i] for i in chosen]
    if not panels or not len(rows) or not len(cols):
        raise ValueError(
            error_text(
                "outline_block needs a plot_heads figure and non-empty ranges of rows and "
                "columns, got {n} heatmap panel(s), rows={rows}, cols={cols}"
            ).format(n=len(panels), rows=rows, cols=cols)
        )
    for ax in panels:
        ax.add_patch(
            Rectangle(
                (cols.start - 0.5, rows.start - 0.5),
                len(cols),
                len(rows),
                facecolor="none",
                edgecolor=OUTLINE_COLOR,
                lw=2.0,
                zorder=3,
                gid="outlined block",
            )
        )
    width, height = fig.get_size_inches()
    fig.legend(  # top right, above the colour bar: the right margin is too narrow for it
        handles=[Patch(facecolor="none", edgecolor=OUTLINE_COLOR, lw=2.0, label=label)],
        loc="upper right",
        bbox_to_anchor=(1 - 0.1 / width, 1 - 0.08 / height),
        fontsize=LABEL_SIZE,
        frameon=False,
        handlelength=1.4,
        handleheight=1.4,
        borderaxespad=0.0,
    )
    return fig
