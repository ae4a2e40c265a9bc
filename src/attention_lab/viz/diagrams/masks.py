"""The causal mask (notebook 04), masking before vs zeroing after softmax (04) and
dropout on a row of weights (05). Blocked cells are grey and striped, never a weight;
weights dropout dropped are white with an orange outline and "×" (not blocked: a fresh
draw every forward pass)."""

from __future__ import annotations

import numpy as np
from matplotlib.patches import Rectangle

from ..._checks import check_dropout
from ...i18n import _, error_text
from ..canvas import BLOCKED_HATCH, LabFigure, blocked_stripes, cell_image
from ..palette import (
    BLOCKED_COLOR,
    BLOCKED_LABEL,
    CMAP,
    DPI,
    DROPPED_COLOR,
    DROPPED_EDGE_COLOR,
    DROPPED_LABEL,
    LABEL_SIZE,
    TICK_SIZE,
    TITLE_SIZE,
    text_color_on,
    weight_norm,
)
from ._draw import (
    ARROW,
    EDGE,
    _arrow,
    _blocked_cell,
    _box,
    _canvas,
    _grid_axes,
    _key,
    _label,
    _own_axes,
    _size,
    _suptitle,
    _text,
    _title,
    _weights,
)

# -- 04: the causal mask ------------------------------------------------------------------


def causal_mask_grid(T: int) -> LabFigure:
    """The T x T causal mask (notebook 04): query i may look at keys j <= i; the
    T(T-1)/2 cells above the diagonal are blocked (grey, striped)."""
    T = _size("T", T, 1, 32, example=6)
    g = min(4.6, 0.6 + 0.42 * T)  # inches for the grid
    width, height = g + 3.35, g + 1.5
    fig = LabFigure(figsize=(width, height), dpi=DPI)
    ax = fig.add_axes((1.1 / width, 0.75 / height, g / width, g / height))
    blocked = []
    for i in range(T):
        for j in range(T):
            if j > i:
                blocked.append(_blocked_cell(ax, i, j))
            else:
                ax.add_artist(
                    Rectangle(
                        (j - 0.5, i - 0.5),
                        1,
                        1,
                        facecolor="white",
                        edgecolor=EDGE,
                        lw=0.6,
                        gid="allowed",
                        clip_on=False,
                    )
                )
    if blocked:  # one hatched path over all of them
        blocked_stripes(ax, blocked)
    _grid_axes(ax, T, g / T, _("key position j (looked at)"), _("query position i (looking)"))
    _key(
        fig,
        (1.1 + g + 0.25) / width,
        1 - 0.75 / height,
        [(_(BLOCKED_LABEL), BLOCKED_COLOR, BLOCKED_HATCH), (_("allowed (j ≤ i)"), "white", None)],
    )
    n = T * (T - 1) // 2
    _suptitle(
        fig,
        _("Causal mask, T = {T}: {n} of {cells} cells blocked").format(T=T, n=n, cells=T * T),
        0.15,
        x=(1.1 + g / 2) / width,
    )
    return fig


def mask_before_vs_after(scores) -> LabFigure:
    """ "Mask before softmax" (set future scores to -inf, then softmax: rows sum to 1)
    beside "zero after softmax" (softmax, then zero the future: rows sum to less than 1),
    with every weight and each row's sum written in (notebook 04). ``scores``: (T, T)."""
    s = _weights(scores, "scores", 2)
    T = s.shape[0]
    if s.shape != (T, T):
        raise ValueError(
            error_text("scores have shape {shape}; pass one square (T, T) matrix").format(
                shape=s.shape
            )
        )
    _size("T", T, 1, 8, example=5)
    blocked = np.triu(np.ones((T, T), bool), 1)
    before = np.exp(np.where(blocked, -np.inf, s) - s.max(axis=1, keepdims=True))
    before /= before.sum(axis=1, keepdims=True)
    after = np.exp(s - s.max(axis=1, keepdims=True))
    after /= after.sum(axis=1, keepdims=True)
    after = np.where(blocked, 0.0, after)
    c = 0.55  # inches per cell: room for "0.00" at 10 pt
    g = c * T
    left, right = 0.8, 1.0  # inches: index labels and axis label; the row sums
    panel = left + g + right
    width, height = max(2 * panel + 0.3, 9.6), g + 2.25
    x0 = (width - 2 * panel) / 2  # centre the pair
    fig = LabFigure(figsize=(width, height), dpi=DPI)
    titles = (
        _("mask before softmax\n(-inf, then softmax)"),
        _("zero after softmax\n(softmax, then 0)"),
    )
    norm = weight_norm()
    cmap = CMAP.with_extremes(bad=BLOCKED_COLOR)  # the image paints blocked cells grey
    # ONE axes for both grids (an axes costs ~15 ms to build); the right grid starts
    # ``shift`` cells right of the left one, and each panel's artists carry its name
    shift = panel / c
    ax = fig.add_axes(((x0 + left) / width, 0.95 / height, (panel + g) / width, g / height))
    for k, (w, title, name) in enumerate(zip((before, after), titles, ("before", "after"))):
        dx = k * shift
        colours = CMAP(norm(w))  # (T, T, 4), one call for the whole grid
        cell_image(  # the heatmaps' image (numpy-painted on the fast path)
            ax,
            np.ma.masked_array(w, blocked),
            cmap=cmap,
            norm=norm,
            extent=(dx - 0.5, dx + T - 0.5, T - 0.5, -0.5),
            label=name,
        )
        cells = []
        for i in range(T):
            for j in range(T):
                if blocked[i, j]:
                    cells.append((dx + j - 0.5, i - 0.5, 1.0, 1.0))
                    continue
                _text(
                    ax,
                    dx + j,
                    i,
                    f"{w[i, j]:.2f}",
                    ha="center",
                    va="center",
                    fontsize=TICK_SIZE,
                    color=text_color_on(colours[i, j]),
                    label=name,
                )
            total = w[i].sum()
            ok = abs(total - 1) < 5e-3
            _text(
                ax,
                dx + T - 0.35,
                i,
                _("sum {total:.2f}").format(total=total),
                ha="left",
                va="center",
                fontsize=TICK_SIZE,
                color="#117733" if ok else "#AA3377",
                weight="bold",
                gid="row sum",
                label=name,
                clip_on=False,
            )
        # their outlines and stripes: one path for the whole panel, not a patch per cell
        if cells:
            blocked_stripes(ax, cells, gid="blocked", lw=0.5, label=name)
        # the right panel's rows line up with the left one's: its query indices would repeat
        _grid_axes(ax, T, c, _("key j"), _("query i") if k == 0 else None, dx=dx, width=shift + T)
        _label(ax, dx + (T - 1) / 2, -0.6, title, size=TITLE_SIZE, va="bottom", clip_on=False)
    _key(fig, (x0 + 0.1) / width, 0.4 / height, [(_(BLOCKED_LABEL), BLOCKED_COLOR, BLOCKED_HATCH)])
    _suptitle(
        fig,
        _(
            "The same scores, two ways to hide the future: only masking first keeps "
            "every row summing to 1"
        ),
        0.1,
    )
    return fig


# -- 05: dropout on a row of weights ------------------------------------------------------


def dropout_row(weights_row, p: float, seed: int = 0) -> LabFigure:
    """Dropout on one row of attention weights (notebook 05): which entries are dropped
    (a fresh random draw each forward pass; here seeded by ``seed``) and how the
    survivors are scaled by 1/(1-p), so the row keeps its expected sum."""
    w = _weights(weights_row, "weights_row", 1)
    T = len(w)
    _size("T", T, 1, 16, example=6)
    try:
        check_dropout(p)  # the library's rule; its message, worded for this diagram's p
    except ValueError:
        raise ValueError(
            error_text("p={p} must be in [0, 1): the probability of dropping a weight").format(
                p=repr(p)
            )
        ) from None
    rng = np.random.default_rng(seed)
    keep = rng.random(T) >= p
    scale = 1.0 / (1.0 - p)
    out = np.where(keep, w * scale, 0.0)
    cw = 1.05
    fig, ax = _own_axes(max(7.0, 2.6 + 0.75 * T), 3.5, top=0.86)
    _canvas(0, 0, (-2.3, T * cw + 1.9), (-0.6, 3.2), ax=ax)
    norm = weight_norm()
    for row_y, values, name in ((2.2, w, _("weights")), (0.2, out, _("after dropout"))):
        _label(ax, -0.15, row_y + 0.4, name, size=LABEL_SIZE, ha="right")
        for j, v in enumerate(values):
            x = j * cw
            if row_y < 1 and not keep[j]:
                cell = Rectangle(
                    (x, row_y),
                    cw * 0.92,
                    0.8,
                    facecolor=DROPPED_COLOR,
                    edgecolor=DROPPED_EDGE_COLOR,
                    lw=2.4,
                    gid="dropped",
                )
                ax.add_artist(cell)
                _label(
                    ax,
                    x + cw * 0.46,
                    row_y + 0.4,
                    "× 0",
                    size=LABEL_SIZE,
                    weight="bold",
                    color=DROPPED_EDGE_COLOR,
                    gid="dropped mark",
                )
                continue
            colour = CMAP(norm(min(v, 1.0)))
            _box(
                ax,
                x,
                row_y,
                cw * 0.92,
                0.8,
                colour,
                f"{v:.2f}",
                lw=0.8,
                gid="kept" if row_y < 1 else "weight",
            )
        _label(
            ax,
            T * cw + 0.1,
            row_y + 0.4,
            _("sum {total:.2f}").format(total=values.sum()),
            size=TICK_SIZE,
            ha="left",
            weight="bold",
        )
    for j in range(T):
        x = j * cw + cw * 0.46
        if keep[j]:
            _arrow(ax, (x, 2.15), (x, 1.05), lw=1.0, color=ARROW)
        else:
            _arrow(ax, (x, 2.15), (x, 1.05), lw=1.4, color=DROPPED_EDGE_COLOR, ls="--")
    _label(  # below the rows, clear of the arrows
        ax,
        T * cw / 2,
        0.05,
        _(
            "keep each with probability 1 - p = {keep:.2f}, "
            "scale survivors by 1/(1-p) = {scale:.2f}"
        ).format(keep=1 - p, scale=scale),
        size=TICK_SIZE,
        va="top",
    )
    dropped_key = _("{dropped}: set to 0 this pass").format(dropped=_(DROPPED_LABEL))
    _key(  # bottom left, under the sentence
        fig,
        0.015,
        0.1,
        [(dropped_key, DROPPED_COLOR, None, DROPPED_EDGE_COLOR)],
        size=TICK_SIZE,
    )
    _title(
        fig,
        ax,
        _("Dropout on one row of attention weights, p = {p:g} ({dropped} of {T} dropped)").format(
            p=p, dropped=int((~keep).sum()), T=T
        ),
        True,
    )
    return fig
