"""Drawn diagrams: every tensor operation of the chapter as a picture, from the real sizes.

Each function takes the sizes the code next to it uses (B, T, D, H, d_head, ...) and
draws boxes, arrows and labels with matplotlib, so a diagram can never disagree with
the code and can follow the explorer's sliders. Every function returns a ``LabFigure``
(shown as a PNG when it ends a notebook cell); ``draw_head_split`` draws into an
existing axes instead.

====================================  ====================================  ==========
function                              what it shows                         notebook
====================================  ====================================  ==========
``weighted_average``                  tokens -> context vector, arrow       01
                                      width ~ weight
``qkv_flow``                          x -> W_q, W_k, W_v -> scores ->       02
                                      softmax -> weights @ V, with shapes
``causal_mask_grid``                  the T x T causal mask, blocked cells  04
``mask_before_vs_after``              mask before softmax vs zero after,    04
                                      with row sums
``dropout_row``                       dropped entries and the 1/(1-p)       05
                                      rescale
``head_split`` / ``draw_head_split``  (B, T, D) -> (B, T, H, d_head) ->     06
                                      (B, H, T, d_head) -> merged
``head_rows``                         the rows of W_q / qkv.weight each     06, 07
                                      head owns
``training_setup``                    tokens -> embeddings -> attention ->  08
                                      LM head -> next token
``tiled_softmax``                     the online-softmax tile walk          bonus
====================================  ====================================  ==========

Colours, font sizes and dpi come from ``palette``: head h has one colour everywhere.
"""

from __future__ import annotations

import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.patches import FancyArrowPatch, Rectangle

from ._checks import as_size
from .palette import (
    DPI,
    LABEL_SIZE,
    TEXT_COLOR,
    TICK_SIZE,
    TITLE_SIZE,
    head_color,
    text_color_on,
)
from .plotting import LabFigure

EDGE = "#333333"  # box outlines
NEUTRAL = "#E8E8E8"  # a box that belongs to no head
ARROW = "#444444"
MAX_HEADS = 8
MAX_D = 128


# -- checks -------------------------------------------------------------------------------


def _size(name: str, value, low: int = 1, high: int | None = None, example: int = 8) -> int:
    """``value`` as an int in [low, high], or a ValueError naming it and the fix."""
    size = as_size(name, value)
    if size is None or size < low or (high is not None and size > high):
        where = f"between {low} and {high}" if high is not None else f">= {low}"
        raise ValueError(
            f"{name}={value!r} must be a whole number {where} for this diagram; "
            f"pass e.g. {name}={example}"
        )
    return size


def _heads(D: int, H: int) -> int:
    """Check D and H for a head diagram; return d_head = D // H."""
    H = _size("n_heads", H, 1, MAX_HEADS, example=4)
    D = _size("d_model", D, 1, MAX_D, example=32)
    if D % H:
        lower = (D // H) * H
        hint = f"{lower} or {lower + H}" if lower else f"{H}"
        raise ValueError(
            f"d_model={D} is not divisible by n_heads={H}; pick d_model as a multiple of "
            f"n_heads (for example d_model={hint})"
        )
    return D // H


def _weights(values, name: str, ndim: int) -> np.ndarray:
    if hasattr(values, "detach"):
        values = values.detach().float().cpu().numpy()
    w = np.asarray(values, dtype=float)
    if w.ndim != ndim:
        raise ValueError(
            f"{name} has shape {w.shape}, expected {ndim} dimension{'s' * (ndim > 1)}; "
            f"pick one row/matrix first, e.g. {name}[0]"
        )
    if not np.all(np.isfinite(w)):
        raise ValueError(f"{name} holds NaN or inf values; pass finite numbers")
    return w


# -- drawing helpers ----------------------------------------------------------------------


def _canvas(width: float, height: float, xlim, ylim, ax=None):
    """A LabFigure with one frameless axes in data units (or the axes given)."""
    if ax is None:
        fig = LabFigure(figsize=(width, height), dpi=DPI)
        ax = fig.add_axes((0.01, 0.01, 0.98, 0.98))
    else:
        fig = ax.figure
        ax.clear()
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


def _box(ax, x, y, w, h, color=NEUTRAL, text="", size=TICK_SIZE, lw=1.2, gid=None, **kw):
    """A filled rectangle with its lower left corner at (x, y) and centred text."""
    rect = Rectangle((x, y), w, h, facecolor=color, edgecolor=EDGE, lw=lw, **kw)
    if gid:
        rect.set_gid(gid)
    ax.add_patch(rect)
    if text:
        ax.text(
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
    arrow = FancyArrowPatch(
        start, end, arrowstyle="-|>", mutation_scale=14, lw=lw, color=color, **kw
    )
    ax.add_patch(arrow)
    if text:
        mx, my = (start[0] + end[0]) / 2, (start[1] + end[1]) / 2
        offset = 0.12 if side == "above" else -0.12
        ax.text(
            mx,
            my + offset,
            text,
            ha="center",
            va="bottom" if side == "above" else "top",
            fontsize=size,
            color=TEXT_COLOR,
        )
    return arrow


def _label(ax, x, y, text, size=LABEL_SIZE, **kw):
    kw.setdefault("ha", "center")
    kw.setdefault("va", "center")
    return ax.text(x, y, text, fontsize=size, color=TEXT_COLOR, **kw)


def _title(fig, ax, text: str, own_figure: bool) -> None:
    if own_figure:
        fig.suptitle(text, fontsize=TITLE_SIZE, color=TEXT_COLOR, y=0.98)
    else:
        ax.set_title(text, fontsize=TITLE_SIZE, color=TEXT_COLOR)


def _row_lines(ax, x, y, w, h, n_rows, color="white", lw=0.6, zorder=2.0) -> None:
    """Thin lines between the rows of a matrix drawn at (x, y, w, h) (skipped when dense)."""
    if n_rows < 2 or n_rows > 32:
        return
    ys = y + h * np.arange(1, n_rows) / n_rows
    segments = [((x, yy), (x + w, yy)) for yy in ys]
    ax.add_collection(
        LineCollection(segments, colors=color, linewidths=lw, alpha=0.8, zorder=zorder)
    )


# -- 06: the head split -------------------------------------------------------------------


def draw_head_split(ax, T: int, D: int, H: int, B: int = 1) -> list:
    """Draw the head split of notebook 06 into ``ax``; return the coloured head patches.

    Four stages left to right: x as (B, T, D) cut into H coloured column slices;
    ``.view(B, T, H, d_head)`` (the same numbers, now indexed by head); ``.transpose(1, 2)``
    to (B, H, T, d_head), one T x d_head matrix per head; and the merge back to (B, T, D).
    Every patch that belongs to head h has ``gid == f"head {h}"`` and ``head_color(h)``.
    """
    d_head = _heads(D, H)
    T = _size("T", T, 1, 4096, example=8)
    B = _size("B", B, 1, 4096, example=1)
    W, Ht, G = 2.4, 1.9, 1.8  # drawing width of D features, height of T positions, arrow gap
    y0 = 0.0
    _canvas(0, 0, (-0.45, 4 * W + 3 * G + 0.05), (-1.35, Ht + 0.75), ax=ax)
    patches = []

    def shape(x_mid, name, values):
        _label(ax, x_mid, y0 - 0.22, name, size=TICK_SIZE, va="top")
        _label(ax, x_mid, y0 - 0.6, "= " + str(values), size=TICK_SIZE, va="top")

    def step_arrow(x_from, text):
        _arrow(ax, (x_from + 0.12, y0 + Ht / 2), (x_from + G - 0.12, y0 + Ht / 2))
        _label(ax, x_from + G / 2, y0 + Ht / 2 + 0.16, text, size=TICK_SIZE, va="bottom")

    def slices(x0, spread: float, title: str):
        """x as H coloured column slices, each d_head wide (pulled apart by ``spread``)."""
        w = (W - spread * (H - 1)) / H
        for h in range(H):
            x = x0 + h * (w + spread)
            patches.append(_box(ax, x, y0, w, Ht, head_color(h), gid=f"head {h}", lw=0.8))
            _row_lines(ax, x, y0, w, Ht, T)
            if spread:
                _label(ax, x + w / 2, y0 + Ht + 0.05, str(h), size=TICK_SIZE, va="bottom")
        _label(ax, x0 + W / 2, y0 + Ht + (0.45 if spread else 0.2), title, weight="bold")

    # 1) x: (B, T, D)
    slices(0.0, 0.0, "x")
    _label(ax, -0.2, y0 + Ht / 2, f"T = {T}", size=TICK_SIZE, rotation=90)
    shape(W / 2, "(B, T, D)", (B, T, D))
    # 2) .view(B, T, H, d_head): the same numbers, cut into heads
    x1 = W + G
    step_arrow(W, ".view")
    slices(x1, 0.08 if H > 1 else 0.0, "heads 0.." + str(H - 1) if H > 1 else "one head")
    shape(x1 + W / 2, "(B, T, H, d_head)", (B, T, H, d_head))
    # 3) .transpose(1, 2): one (T, d_head) matrix per head, a deck of H cards
    x2 = x1 + W + G
    step_arrow(x1 + W, ".transpose(1, 2)")
    card_w = max(W / H, 0.7) if H > 1 else W
    dx = (W - card_w) / (H - 1) if H > 1 else 0.0
    dy = min(0.12, 0.8 / max(H - 1, 1)) if H > 1 else 0.0
    card_h = Ht - dy * (H - 1)
    for h in reversed(range(H)):  # head 0 in front
        x, y = x2 + h * dx, y0 + (H - 1 - h) * dy
        z = 1.0 + 2 * (H - h)  # each card, with its row lines, above the one behind it
        patches.append(
            _box(ax, x, y, card_w, card_h, head_color(h), gid=f"head {h}", lw=0.8, zorder=z)
        )
        _row_lines(ax, x, y, card_w, card_h, T, zorder=z + 0.5)
    _label(ax, x2 + W / 2, y0 + Ht + 0.2, "a (T, d_head) matrix per head", weight="bold")
    shape(x2 + W / 2, "(B, H, T, d_head)", (B, H, T, d_head))
    _label(
        ax,
        x2 + W / 2,
        y0 - 1.0,
        "each head attends on its own",
        size=TICK_SIZE,
        style="italic",
        va="top",
    )
    # 4) merge back: transpose(1, 2).reshape(B, T, D)
    x3 = x2 + W + G
    step_arrow(x2 + W, "merge")
    _label(
        ax,
        x2 + W + G / 2,
        y0 + Ht / 2 - 0.16,
        ".transpose(1, 2)\n.reshape",
        size=TICK_SIZE - 1,
        va="top",
    )
    slices(x3, 0.0, "heads merged")
    shape(x3 + W / 2, "(B, T, D)", (B, T, D))
    return patches


def head_split(T: int, D: int, H: int, B: int = 1, ax=None) -> LabFigure:
    """The (B, T, D) tensor cut into H head slices, moved to (B, H, T, d_head) and merged
    back (notebook 06; the explorer redraws it when its sliders move).

    Head h is drawn in ``head_color(h)`` at every stage. ``D`` must be divisible by
    ``H`` (1 <= H <= 8, D <= 128). With ``ax`` the diagram is drawn into that axes
    (cleared first) and its figure is returned.
    """
    own = ax is None
    if own:
        fig = LabFigure(figsize=(10.5, 3.3), dpi=DPI)
        ax = fig.add_axes((0.01, 0.0, 0.98, 0.88))
    fig = ax.figure
    draw_head_split(ax, T, D, H, B)
    d_head = D // H
    _title(fig, ax, f"Splitting d_model = {D} into n_heads = {H} heads of d_head = {d_head}", own)
    return fig
