"""Shared pieces of the drawn diagrams: size checks, boxes, arrows, labels, grids.

Speed (issue 10: a diagram renders in under 100 ms): drawing text is most of a diagram's
cost, so the helpers here keep to fixed axes positions (no layout passes), hand-placed
index labels instead of matplotlib's tick machinery, and a drawn key instead of a legend.
"""

from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Circle, FancyArrowPatch, Rectangle
from matplotlib.transforms import TransformedPatchPath

from ..._checks import as_size, check_heads
from ...i18n import error_text
from ..arrays import to_numpy
from ..canvas import LabFigure
from ..palette import (
    BLOCKED_COLOR,
    BLOCKED_HATCH_COLOR,
    DPI,
    LABEL_SIZE,
    TEXT_COLOR,
    TICK_SIZE,
    TITLE_SIZE,
    text_color_on,
)

EDGE = "#333333"  # box outlines
NEUTRAL = "#E8E8E8"  # a box that belongs to no head
ARROW = "#444444"
MAX_HEADS = 8
MAX_D = 128


# -- checks -------------------------------------------------------------------------------


def _size(name: str, value, low: int = 1, high: int | None = None, example: int = 8) -> int:
    """``value`` as an int in [low, high], or a ValueError naming it and the fix."""
    size = as_size(value)
    if size is None or size < low or (high is not None and size > high):
        if high is not None:
            text = error_text(
                "{name}={value} must be a whole number between {low} and {high} for this "
                "diagram; pass e.g. {name}={example}"
            )
        else:
            text = error_text(
                "{name}={value} must be a whole number >= {low} for this diagram; "
                "pass e.g. {name}={example}"
            )
        raise ValueError(
            text.format(name=name, value=repr(value), low=low, high=high, example=example)
        )
    return size


def _heads(D: int, H: int) -> int:
    """Check D and H for a head diagram (sizes it can draw); return d_head = D // H."""
    H = _size("n_heads", H, 1, MAX_HEADS, example=4)
    D = _size("d_model", D, 1, MAX_D, example=32)
    return check_heads(D, H)  # the library's own divisibility check and message


def _weights(values, name: str, ndim: int) -> np.ndarray:
    w = to_numpy(values, float)
    if w.ndim != ndim:
        if ndim > 1:
            text = error_text(
                "{name} has shape {shape}, expected {ndim} dimensions; "
                "pick one row/matrix first, e.g. {name}[0]"
            )
        else:
            text = error_text(
                "{name} has shape {shape}, expected {ndim} dimension; "
                "pick one row/matrix first, e.g. {name}[0]"
            )
        raise ValueError(text.format(name=name, shape=w.shape, ndim=ndim))
    if not np.all(np.isfinite(w)):
        raise ValueError(
            error_text("{name} holds NaN or inf values; pass finite numbers").format(name=name)
        )
    return w


# -- figures and axes ---------------------------------------------------------------------


def _canvas(width: float, height: float, xlim, ylim, ax=None):
    """A LabFigure with one frameless axes in data units (or the axes given)."""
    if ax is None:
        fig = LabFigure(figsize=(width, height), dpi=DPI)
        ax = fig.add_axes((0.01, 0.01, 0.98, 0.98))
    else:
        fig = ax.figure
        if ax.has_data() or ax.texts or ax.artists:
            ax.clear()  # a used axes; a fresh one is clean already (clearing costs ~12 ms)
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


def _own_axes(width: float, height: float, top: float = 0.86):
    fig = LabFigure(figsize=(width, height), dpi=DPI)
    ax = fig.add_axes((0.01, 0.01, 0.98, top - 0.01))
    return fig, ax


def _suptitle(fig, text: str, gap: float, **kw):
    """The figure's title, its top ``gap`` inches below the figure's top edge."""
    height = fig.get_size_inches()[1]
    return fig.suptitle(
        text, fontsize=TITLE_SIZE, color=TEXT_COLOR, y=1 - gap / height, va="top", **kw
    )


def _title(fig, ax, text: str, own_figure: bool) -> None:
    if own_figure:
        fig.suptitle(text, fontsize=TITLE_SIZE, color=TEXT_COLOR, y=0.98)
    else:
        ax.set_title(text, fontsize=TITLE_SIZE, color=TEXT_COLOR)


# -- boxes, arrows, labels ----------------------------------------------------------------


def _box(ax, x, y, w, h, color=NEUTRAL, text="", size=TICK_SIZE, lw=1.2, gid=None, **kw):
    """A filled rectangle with its lower left corner at (x, y) and centred text."""
    rect = Rectangle((x, y), w, h, facecolor=color, edgecolor=EDGE, lw=lw, **_unclipped(ax, kw))
    if gid:
        rect.set_gid(gid)
    ax.add_artist(rect)
    if text:
        _text(
            ax,
            x + w / 2,
            y + h / 2,
            text,
            ha="center",
            va="center",
            fontsize=size,
            color=text_color_on(color) if color not in ("none", None) else TEXT_COLOR,
        )
    return rect


def _arrow(ax, start, end, text="", lw=1.6, color=ARROW, side="above", size=TICK_SIZE, **kw):
    # shrinkA/B = 0: the ends are placed by hand, and shrinking costs a bezier search per draw
    kw.setdefault("shrinkA", 0)
    kw.setdefault("shrinkB", 0)
    arrow = FancyArrowPatch(
        start, end, arrowstyle="-|>", mutation_scale=14, lw=lw, color=color, **_unclipped(ax, kw)
    )
    ax.add_artist(arrow)
    if text:
        mx, my = (start[0] + end[0]) / 2, (start[1] + end[1]) / 2
        offset = 0.12 if side == "above" else -0.12
        _text(
            ax,
            mx,
            my + offset,
            text,
            ha="center",
            va="bottom" if side == "above" else "top",
            fontsize=size,
            color=TEXT_COLOR,
        )
    return arrow


def _unclipped(ax, kw: dict) -> dict:
    """``kw`` for an artist drawn unclipped (diagrams keep inside their axes), with the
    axes' clip path ready-made: otherwise adding the artist builds a new transform for
    the clip path it never uses (~0.2 ms an artist)."""
    patch, clip = getattr(ax, "_lab_clip_path", (None, None))
    if patch is not ax.patch:  # (a cleared axes has a new patch)
        patch, clip = ax._lab_clip_path = (ax.patch, TransformedPatchPath(ax.patch))
    kw.setdefault("clip_path", clip)
    kw.setdefault("clip_on", False)
    return kw


def _text(ax, x, y, text, **kw):
    """``ax.text`` without the per-label clip-path cost (see ``_unclipped``)."""
    return ax.text(x, y, text, **_unclipped(ax, kw))


def _label(ax, x, y, text, size=LABEL_SIZE, **kw):
    if kw.get("style") == "italic" and _has_cjk(text):
        kw["style"] = "normal"  # Chinese has no italic: slanted Latin beside it would clash
    kw.setdefault("ha", "center")
    kw.setdefault("va", "center")
    kw.setdefault("color", TEXT_COLOR)
    return _text(ax, x, y, text, fontsize=size, **kw)


def _has_cjk(text) -> bool:
    return any("\u3000" <= ch <= "\u9fff" or "\uff00" <= ch <= "\uffef" for ch in str(text))


def _circle(x, y, r):
    return Circle((x, y), r, facecolor="white", edgecolor=EDGE, lw=1.2)


def _row_lines(ax, boxes, n_rows, color="white", lw=0.6, zorder=2.0) -> None:
    """Thin lines between the rows of the matrices drawn at ``boxes`` [(x, y, w, h), ...]
    (skipped when dense), as ONE line broken by NaNs: a LineCollection builds a Path per
    segment (hundreds here), which costs more than drawing them all."""
    if n_rows < 2 or n_rows > 32:
        return
    fractions = np.arange(1, n_rows) / n_rows
    xs, ys = [], []
    for x, y, w, h in boxes:
        for f in fractions:
            xs += [x, x + w, np.nan]
            ys += [y + h * f] * 2 + [np.nan]
    ax.add_line(Line2D(xs, ys, color=color, lw=lw, alpha=0.8, zorder=zorder, gid="row lines"))


# -- T x T grids (04) ---------------------------------------------------------------------


def _grid_axes(
    ax, T: int, cell: float, xlabel: str, ylabel: str | None, dx: float = 0.0, width=None
) -> None:
    """A T x T grid axes (``cell`` inches a cell), row 0 on top, indices every few cells,
    the key index below the grid and (unless ``ylabel`` is None) the query index left of it.
    ``dx``: the grid starts ``dx`` cells right of the axes' left edge (several grids in one
    axes, ``width`` cells wide in all).

    The indices are plain texts rather than ticks: matplotlib's tick objects cost more
    to build than the whole grid they label."""
    ax.set_xlim(-0.5, (T if width is None else width) - 0.5)
    ax.set_ylim(T - 0.5, -0.5)
    ax.set_aspect("equal")
    ax.axis("off")
    gap = 0.06 / cell  # 0.06 inch between the grid and its indices, in cells
    every = -(-T // 12)
    for k in range(0, T, every):
        _label(ax, dx + k, T - 0.5 + gap, str(k), size=TICK_SIZE, va="top", clip_on=False)
        if ylabel is not None:
            _label(ax, dx - 0.5 - gap, k, str(k), size=TICK_SIZE, ha="right", clip_on=False)
    _label(ax, dx + (T - 1) / 2, T - 0.5 + 0.26 / cell, xlabel, va="top", clip_on=False)
    if ylabel is not None:
        digits = len(str(T - 1))
        _label(
            ax,
            dx - 0.5 - (0.14 + 0.08 * digits) / cell,
            (T - 1) / 2,
            ylabel,
            rotation=90,
            ha="right",
            clip_on=False,
        )


def _blocked_cell(ax, i, j, dx=0.0, **kw):
    """The grey cell (row i, column j) of a blocked position; its stripes come from
    ``canvas.blocked_stripes``, drawn once over all blocked cells of a grid."""
    kw.setdefault("lw", 0.5)
    cell = Rectangle(
        (dx + j - 0.5, i - 0.5),
        1,
        1,
        facecolor=BLOCKED_COLOR,
        edgecolor=BLOCKED_HATCH_COLOR,
        gid="blocked",
        **_unclipped(ax, kw),
    )
    ax.add_artist(cell)
    return cell


def _key(fig, x, y, entries, size=LABEL_SIZE) -> None:
    """A legend drawn by hand at figure fraction (x, y) (top left), one entry a line:
    ``(label, facecolor, hatch)`` or ``(label, facecolor, hatch, edgecolor)``. Cheaper than
    ``legend()``, which lays out on every draw."""
    w, h = fig.get_size_inches()
    sw, sh = 0.22 / w, 0.22 / h  # a 0.22 inch swatch
    for k, (label, face, hatch, *edge) in enumerate(entries):
        top = y - k * 0.34 / h
        fig.add_artist(
            Rectangle(
                (x, top - sh),
                sw,
                sh,
                transform=fig.transFigure,
                facecolor=face,
                edgecolor=edge[0] if edge else BLOCKED_HATCH_COLOR if hatch else EDGE,
                hatch=hatch,
                lw=2.0 if edge else 0.8,
                gid=f"key {label}",
            )
        )
        fig.text(
            x + sw + 0.08 / w,
            top - sh / 2,
            label,
            ha="left",
            va="center",
            fontsize=size,
            color=TEXT_COLOR,
            gid="key",
        )
