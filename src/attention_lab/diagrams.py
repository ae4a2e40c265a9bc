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
/ ``head_split_png`` (cached PNG)
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

import functools
import math
from collections.abc import Sequence

import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.patches import Circle, FancyArrowPatch, Patch, Rectangle

from ._checks import as_size
from .palette import (
    BLOCKED_COLOR,
    BLOCKED_HATCH_COLOR,
    BLOCKED_LABEL,
    CMAP,
    DPI,
    LABEL_SIZE,
    TEXT_COLOR,
    TICK_SIZE,
    TITLE_SIZE,
    head_color,
    text_color_on,
    weight_norm,
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
    size = as_size(value)
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
    ax.add_artist(rect)
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
    ax.add_artist(arrow)
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
    kw.setdefault("color", TEXT_COLOR)
    return ax.text(x, y, text, fontsize=size, **kw)


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
        _label(
            ax, x_mid, y0 - 0.22, f"{name}\n= {values}", size=TICK_SIZE, va="top", linespacing=1.6
        )

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


@functools.lru_cache(maxsize=256)
def head_split_png(T: int, D: int, H: int, B: int = 1) -> bytes:
    """``head_split`` as PNG bytes, cached per size: the explorer's redraw after the first
    visit of a (T, D, H) setting costs nothing (drawing the text is the slow part)."""
    return head_split(T, D, H, B)._repr_png_()


def _own_axes(width: float, height: float, top: float = 0.86):
    fig = LabFigure(figsize=(width, height), dpi=DPI)
    ax = fig.add_axes((0.01, 0.01, 0.98, top - 0.01))
    return fig, ax


# -- 01: the weighted average -------------------------------------------------------------


def weighted_average(weights, tokens: Sequence[str] | None = None, query=None) -> LabFigure:
    """The context vector as a weighted average: one arrow per token (notebook 01).

    ``weights`` is one row of attention weights, shape (T,), summing to 1; arrow width
    and opacity grow with the weight, and each arrow carries its number. ``query`` (a
    token or a position) marks the token whose context vector this is.
    """
    w = _weights(weights, "weights", 1)
    T = len(w)
    _size("T", T, 1, 24, example=6)
    if np.any(w < 0) or abs(w.sum() - 1) > 1e-3:
        raise ValueError(
            f"weights sum to {w.sum():.4f} (min {w.min():.3f}); a weighted average needs "
            "non-negative weights summing to 1: pass softmax(scores)"
        )
    tokens = [str(t) for t in (tokens if tokens is not None else range(T))]
    if len(tokens) != T:
        raise ValueError(f"got {len(tokens)} tokens for {T} weights; pass one token per weight")
    q = None
    if query is not None:
        if isinstance(query, str):
            if query not in tokens:
                raise ValueError(f"query={query!r} is not one of the tokens {tokens}")
            q = tokens.index(query)
        else:
            q = _size("query", query, 0, T - 1, example=0)
    row_h = 0.62
    height = T * row_h
    fig, ax = _own_axes(7.5, 1.0 + 0.42 * T + 0.3)
    _canvas(0, 0, (-0.2, 8.0), (-0.35, height + 0.1), ax=ax)
    cx, cy = 6.0, height / 2
    ctx = _box(ax, cx, cy - 0.45, 1.6, 0.9, head_color(4), "context\nvector", gid="context")
    ctx.set_zorder(3)
    top = w.max()
    for i, (token, weight) in enumerate(zip(tokens, w)):
        y = height - (i + 0.5) * row_h
        is_query = i == q
        _box(
            ax,
            0.0,
            y - 0.24,
            1.5,
            0.48,
            NEUTRAL,
            token,
            gid=f"token {i}",
            lw=2.6 if is_query else 1.0,
        )
        if is_query:
            _label(ax, -0.12, y, "query", size=TICK_SIZE, ha="right", style="italic")
        arrow = FancyArrowPatch(
            (2.25, y),
            (cx - 0.05, cy),
            arrowstyle="-|>",
            mutation_scale=10 + 10 * weight / top,
            lw=0.6 + 7.0 * weight / top,
            color=head_color(1),
            alpha=0.25 + 0.75 * weight / top,
            shrinkB=4,
        )
        arrow.set_gid(f"arrow {i}")
        ax.add_artist(arrow)
        _label(
            ax,
            1.62,
            y,
            f"{weight:.2f}",
            size=TICK_SIZE,
            ha="left",
            zorder=5,
            bbox=dict(facecolor="white", edgecolor="none", pad=1.0),
        )
    _label(
        ax, cx + 0.8, cy - 0.75, f"= Σ weight × token vector ({T} terms)", size=TICK_SIZE, va="top"
    )
    ax.set_xlim(-0.9, 8.4)
    who = f" for {tokens[q]!r}" if q is not None else ""
    _title(fig, ax, f"The context vector{who}: a weighted average of the tokens", True)
    return fig


# -- 02: where Q, K and V come from -------------------------------------------------------


def qkv_flow(T: int, D: int, d_head: int) -> LabFigure:
    """x -> W_q, W_k, W_v -> Q, K, V -> scores QKᵀ/√d_head -> softmax -> weights @ V
    (notebook 02), each box labelled with its shape for these sizes."""
    T = _size("T", T, 1, 100_000, example=6)
    D = _size("D", D, 1, 100_000, example=32)
    d_head = _size("d_head", d_head, 1, 100_000, example=8)
    fig, ax = _own_axes(11.0, 4.4)
    bw, bh = 2.75, 1.05
    cols = (0.0, 3.55, 7.1, 10.75, 14.55)  # x, projections, Q/K/V, scores, context
    _canvas(0, 0, (-0.1, cols[4] + bw + 0.1), (-0.2, 6.6), ax=ax)

    def node(x, y, name, shape, color=NEUTRAL, gid=None):
        _box(ax, x, y, bw, bh, color, gid=gid or name)
        text = text_color_on(color)
        _label(ax, x + bw / 2, y + bh * 0.68, name, size=LABEL_SIZE, weight="bold", color=text)
        _label(ax, x + bw / 2, y + bh * 0.28, shape, size=TICK_SIZE, color=text)

    def right(x, y):
        return (x + bw + 0.05, y + bh / 2)

    ys = {"q": 5.2, "k": 2.85, "v": 0.5}
    node(cols[0], 2.85, "x", f"(T, D) = ({T}, {D})")
    colours = {"q": "#CFE3F1", "k": "#F3DCC4", "v": "#D5EBD3"}  # tints: Q, K, V not heads
    for name in "qkv":
        y = ys[name]
        _arrow(ax, right(cols[0], 2.85), (cols[1] - 0.05, y + bh / 2))
        node(cols[1], y, f"x @ W_{name}", f"W_{name}: ({D}, {d_head})", colours[name], f"W_{name}")
        _arrow(ax, right(cols[1], y), (cols[2] - 0.05, y + bh / 2))
        node(
            cols[2], y, name.upper(), f"(T, d_head) = ({T}, {d_head})", colours[name], name.upper()
        )
    sx, sy = cols[3], 4.0
    _arrow(ax, right(cols[2], ys["q"]), (sx - 0.05, sy + bh * 0.7))
    _arrow(ax, right(cols[2], ys["k"]), (sx - 0.05, sy + bh * 0.3))
    node(sx, sy, "Q Kᵀ / √d_head", f"scores ({T}, {T})", gid="scores")
    _label(
        ax,
        sx + bw / 2,
        sy + bh + 0.25,
        f"√d_head = √{d_head} = {math.sqrt(d_head):.2f}",
        size=TICK_SIZE,
    )
    wy = 1.8
    _arrow(ax, (sx + bw / 2, sy - 0.05), (sx + bw / 2, wy + bh + 0.05))
    _label(
        ax, sx + bw / 2 + 0.15, (sy + wy + bh) / 2, "softmax over keys", size=TICK_SIZE, ha="left"
    )
    node(sx, wy, "weights", f"({T}, {T}), rows sum to 1", gid="weights")
    ox = cols[4]
    _arrow(ax, right(sx, wy), (ox - 0.05, wy + bh / 2))
    _arrow(ax, right(cols[2], ys["v"]), (ox - 0.05, wy + 0.2), connectionstyle="arc3,rad=0.15")
    node(ox, wy, "weights @ V", f"context ({T}, {d_head})", head_color(4), gid="context")
    _label(ax, cols[1] + bw / 2, 6.45, "three learned projections", size=TICK_SIZE, style="italic")
    _title(fig, ax, f"Where Q, K and V come from: T = {T}, D = {D}, d_head = {d_head}", True)
    return fig


# -- 04: the causal mask ------------------------------------------------------------------


def _grid_axes(ax, T: int, labels: bool = True) -> None:
    ax.set_xlim(-0.5, T - 0.5)
    ax.set_ylim(T - 0.5, -0.5)
    ax.set_aspect("equal")
    every = max(1, math.ceil(T / 12))
    ax.set_xticks(range(0, T, every))
    ax.set_yticks(range(0, T, every))
    ax.tick_params(labelsize=TICK_SIZE, length=0, colors=TEXT_COLOR)
    if labels:
        ax.set_xlabel("key position j (looked at)", fontsize=LABEL_SIZE, color=TEXT_COLOR)
        ax.set_ylabel("query position i (looking)", fontsize=LABEL_SIZE, color=TEXT_COLOR)
    for spine in ax.spines.values():
        spine.set_visible(False)


def _blocked_cell(ax, i, j):
    cell = Rectangle(
        (j - 0.5, i - 0.5),
        1,
        1,
        facecolor=BLOCKED_COLOR,
        edgecolor=BLOCKED_HATCH_COLOR,
        hatch="///",
        lw=0.5,
        gid="blocked",
        clip_on=False,
    )
    ax.add_artist(cell)
    return cell


def _blocked_legend(ax, extra=()):
    handles = [
        Patch(
            facecolor=BLOCKED_COLOR, edgecolor=BLOCKED_HATCH_COLOR, hatch="///", label=BLOCKED_LABEL
        ),
        *extra,
    ]
    ax.legend(
        handles=handles,
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        frameon=False,
        fontsize=LABEL_SIZE,
        handlelength=1.5,
        handleheight=1.5,
        borderaxespad=0,
    )


def causal_mask_grid(T: int) -> LabFigure:
    """The T x T causal mask (notebook 04): query i may look at keys j <= i; the
    T(T-1)/2 cells above the diagonal are blocked (grey, striped)."""
    T = _size("T", T, 1, 32, example=6)
    g = min(4.6, 0.6 + 0.42 * T)  # inches for the grid
    width, height = g + 3.5, g + 1.5
    fig = LabFigure(figsize=(width, height), dpi=DPI)
    ax = fig.add_axes((1.0 / width, 0.85 / height, g / width, g / height))
    for i in range(T):
        for j in range(T):
            if j > i:
                _blocked_cell(ax, i, j)
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
    _grid_axes(ax, T)
    _blocked_legend(ax, [Patch(facecolor="white", edgecolor=EDGE, label="allowed (j ≤ i)")])
    n = T * (T - 1) // 2
    fig.suptitle(
        f"Causal mask, T = {T}: {n} of {T * T} cells blocked",
        fontsize=TITLE_SIZE,
        color=TEXT_COLOR,
        x=(1.0 + g / 2) / width,
        y=1 - 0.15 / height,
        va="top",
    )
    return fig


def mask_before_vs_after(scores) -> LabFigure:
    """ "Mask before softmax" (set future scores to -inf, then softmax: rows sum to 1)
    beside "zero after softmax" (softmax, then zero the future: rows sum to less than 1),
    with every weight and each row's sum written in (notebook 04). ``scores``: (T, T)."""
    s = _weights(scores, "scores", 2)
    T = s.shape[0]
    if s.shape != (T, T):
        raise ValueError(f"scores have shape {s.shape}; pass one square (T, T) matrix")
    _size("T", T, 1, 8, example=5)
    blocked = np.triu(np.ones((T, T), bool), 1)
    before = np.exp(np.where(blocked, -np.inf, s) - s.max(axis=1, keepdims=True))
    before /= before.sum(axis=1, keepdims=True)
    after = np.exp(s - s.max(axis=1, keepdims=True))
    after /= after.sum(axis=1, keepdims=True)
    after = np.where(blocked, 0.0, after)
    height = 2.6 + 0.55 * T
    fig = LabFigure(figsize=(11.0, height), dpi=DPI)
    axes = fig.subplots(1, 2)
    fig.subplots_adjust(left=0.07, right=0.9, bottom=1.0 / height, top=1 - 1.0 / height, wspace=0.4)
    titles = ("mask before softmax\n(-inf, then softmax)", "zero after softmax\n(softmax, then 0)")
    norm = weight_norm()
    for ax, w, title in zip(axes, (before, after), titles):
        ax.imshow(
            np.ma.masked_array(w, blocked),
            cmap=CMAP.with_extremes(bad="none"),
            norm=norm,
            interpolation="nearest",
        )
        for i in range(T):
            for j in range(T):
                if blocked[i, j]:
                    _blocked_cell(ax, i, j)
                    continue
                colour = CMAP(norm(w[i, j]))
                ax.text(
                    j,
                    i,
                    f"{w[i, j]:.2f}",
                    ha="center",
                    va="center",
                    fontsize=TICK_SIZE,
                    color=text_color_on(colour),
                )
            total = w[i].sum()
            ok = abs(total - 1) < 5e-3
            ax.text(
                T - 0.2,
                i,
                f"sum {total:.2f}",
                ha="left",
                va="center",
                fontsize=TICK_SIZE,
                color="#117733" if ok else "#AA3377",
                weight="bold",
                gid="row sum",
                clip_on=False,
            )
        _grid_axes(ax, T, labels=False)
        ax.set_xlabel("key j", fontsize=LABEL_SIZE)
        ax.set_ylabel("query i", fontsize=LABEL_SIZE)
        ax.set_title(title, fontsize=TITLE_SIZE, color=TEXT_COLOR)
    handles = [
        Patch(
            facecolor=BLOCKED_COLOR, edgecolor=BLOCKED_HATCH_COLOR, hatch="///", label=BLOCKED_LABEL
        )
    ]
    fig.legend(
        handles=handles,
        loc="lower center",
        ncols=1,
        frameon=False,
        fontsize=LABEL_SIZE,
        handlelength=1.5,
        handleheight=1.5,
    )
    fig.suptitle(
        "The same scores, two ways to hide the future: only masking first keeps "
        "every row summing to 1",
        fontsize=TITLE_SIZE,
        color=TEXT_COLOR,
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
    if not isinstance(p, (int, float)) or not 0.0 <= float(p) < 1.0:
        raise ValueError(f"p={p!r} must be in [0, 1): the probability of dropping a weight")
    rng = np.random.default_rng(seed)
    keep = rng.random(T) >= p
    scale = 1.0 / (1.0 - p)
    out = np.where(keep, w * scale, 0.0)
    cw = 1.05
    fig, ax = _own_axes(max(7.0, 2.6 + 0.75 * T), 3.4, top=0.84)
    _canvas(0, 0, (-2.3, T * cw + 1.9), (-0.45, 3.2), ax=ax)
    norm = weight_norm()
    for row_y, values, name in ((2.2, w, "weights"), (0.2, out, "after dropout")):
        _label(ax, -0.15, row_y + 0.4, name, size=LABEL_SIZE, ha="right")
        for j, v in enumerate(values):
            x = j * cw
            if row_y < 1 and not keep[j]:
                cell = Rectangle(
                    (x, row_y),
                    cw * 0.92,
                    0.8,
                    facecolor=BLOCKED_COLOR,
                    edgecolor=BLOCKED_HATCH_COLOR,
                    hatch="xx",
                    lw=0.8,
                    gid="dropped",
                )
                ax.add_artist(cell)
                _label(ax, x + cw * 0.46, row_y + 0.4, "0", size=TICK_SIZE, weight="bold")
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
            f"sum {values.sum():.2f}",
            size=TICK_SIZE,
            ha="left",
            weight="bold",
        )
    for j in range(T):
        x = j * cw + cw * 0.46
        _arrow(ax, (x, 2.15), (x, 1.05), lw=1.0, color=ARROW if keep[j] else BLOCKED_COLOR)
    _label(
        ax,
        T * cw / 2,
        1.6,
        f"keep each with probability 1 - p = {1 - p:.2f}, scale survivors by 1/(1-p) = {scale:.2f}",
        size=TICK_SIZE,
        bbox=dict(facecolor="white", edgecolor="none", pad=1.5),
    )
    _title(
        fig,
        ax,
        f"Dropout on one row of attention weights, p = {p:g} ({int((~keep).sum())} of {T} dropped)",
        True,
    )
    return fig


# -- 06, 07: which rows of the weight belong to which head -------------------------------


def head_rows(D: int, H: int, fused: bool = False) -> LabFigure:
    """The rows of W_q (``fused=False``: (D, D) as nn.Linear stores it, (out, in)) or of
    the fused qkv.weight (``fused=True``: (3D, D), Q | K | V blocks) that belong to each
    head: head h owns output rows h*d_head .. (h+1)*d_head - 1 of each block (06, 07)."""
    d_head = _heads(D, H)
    blocks = ("Q", "K", "V") if fused else ("Q",)
    rows = len(blocks) * D
    height = 5.6 if fused else 4.2
    fig, ax = _own_axes(8.5, height, top=0.88)
    mh = height - 1.3  # drawing height of all rows
    mw = 1.6
    _canvas(0, 0, (-3.2, 6.4), (-0.55, mh + 0.35), ax=ax)
    unit = mh / rows
    for b, block in enumerate(blocks):
        for h in range(H):
            first = b * D + h * d_head
            y = mh - (first + d_head) * unit
            _box(ax, 0.0, y, mw, d_head * unit, head_color(h), lw=0.6, gid=f"head {h} {block}")
            label = f"head {h}: rows {first}-{first + d_head - 1}"
            if H * len(blocks) <= 12 or h in (0, H - 1):
                _label(ax, mw + 0.15, y + d_head * unit / 2, label, size=TICK_SIZE, ha="left")
        if fused:
            y0 = mh - (b + 1) * D * unit
            ax.add_artist(
                Rectangle(
                    (0, y0), mw, D * unit, facecolor="none", edgecolor="black", lw=2.2, zorder=4
                )
            )
            _label(
                ax,
                -0.2,
                y0 + D * unit / 2,
                f"{block} rows\n{b * D}-{(b + 1) * D - 1}",
                size=LABEL_SIZE,
                ha="right",
                weight="bold",
            )
    name = "qkv.weight" if fused else "W_q = q_proj.weight"
    _label(ax, mw / 2, mh + 0.18, f"{name}: ({rows}, {D})", size=LABEL_SIZE, weight="bold")
    _label(ax, mw / 2, -0.3, f"in: D = {D} columns", size=TICK_SIZE)
    if not fused:
        _label(
            ax,
            -0.2,
            mh / 2,
            f"out: {D} rows\n= {H} heads\nx d_head {d_head}",
            size=TICK_SIZE,
            ha="right",
        )
    what = "Q, K and V rows" if fused else "rows of W_q"
    _title(fig, ax, f"Which {what} each head owns: D = {D}, n_heads = {H}, d_head = {d_head}", True)
    return fig


# -- 08: the training setup ---------------------------------------------------------------


def training_setup(vocab_size: int, T: int, D: int, H: int) -> LabFigure:
    """Token ids -> token embedding + position embedding -> multi-head attention ->
    LM head -> logits, trained against the next token (notebook 08), with shapes."""
    vocab_size = _size("vocab_size", vocab_size, 2, 1_000_000, example=16)
    T = _size("T", T, 1, 100_000, example=8)
    d_head = _heads(D, H)
    fig, ax = _own_axes(12.0, 4.0, top=0.87)
    _canvas(0, 0, (-0.1, 21.6), (-0.6, 5.0), ax=ax)
    bw, bh = 3.2, 1.15

    def node(x, y, name, shape, color=NEUTRAL, gid=None):
        _box(ax, x, y, bw, bh, color, gid=gid or name)
        c = text_color_on(color)
        _label(ax, x + bw / 2, y + bh * 0.68, name, size=LABEL_SIZE, weight="bold", color=c)
        _label(ax, x + bw / 2, y + bh * 0.27, shape, size=TICK_SIZE, color=c)

    node(0.0, 1.6, "token ids", f"(B, T) = (B, {T})", gid="ids")
    ex = 3.7
    node(ex, 3.3, "token embedding", f"({vocab_size}, {D}) table", gid="tok_emb")
    node(ex, -0.1, "position embedding", f"({T}, {D}) table", gid="pos_emb")
    _arrow(ax, (bw + 0.05, 2.4), (ex - 0.05, 3.8))
    _arrow(ax, (bw + 0.05, 1.95), (ex - 0.05, 0.45))
    _label(ax, 1.5, 0.8, "positions 0..T-1", size=TICK_SIZE)
    px = ex + bw + 0.9
    plus = _circle(px, 2.17, 0.33)
    plus.set_gid("sum")
    ax.add_artist(plus)
    _label(ax, px, 2.17, "+", size=TITLE_SIZE + 2, weight="bold")
    _arrow(ax, (ex + bw + 0.05, 3.85), (px - 0.25, 2.45))
    _arrow(ax, (ex + bw + 0.05, 0.5), (px - 0.25, 1.9))
    atx, aw = px + 1.3, 3.8
    _arrow(ax, (px + 0.35, 2.17), (atx - 0.05, 2.17))
    _label(ax, (px + atx) / 2, 1.95, f"(B, T, {D})", size=TICK_SIZE - 1, va="top")
    _box(ax, atx, 1.0, aw, 2.4, NEUTRAL, gid="attention")
    _label(ax, atx + aw / 2, 3.05, "multi-head attention", size=LABEL_SIZE, weight="bold")
    _label(ax, atx + aw / 2, 2.5, f"{H} causal heads\nd_head = {d_head}", size=TICK_SIZE)
    for h in range(H):
        _box(
            ax,
            atx + 0.2 + h * (aw - 0.4) / H,
            1.15,
            (aw - 0.4) / H,
            0.7,
            head_color(h),
            lw=0.5,
            gid=f"head {h}",
        )
    lx = atx + aw + 0.8
    _arrow(ax, (atx + aw + 0.05, 2.17), (lx - 0.05, 2.17))
    node(lx, 1.6, "LM head", f"Linear({D}, {vocab_size})", gid="lm_head")
    ox = lx + bw + 0.8
    _arrow(ax, (lx + bw + 0.05, 2.17), (ox - 0.05, 2.17))
    node(ox, 1.6, "logits", f"(B, T, {vocab_size})", head_color(4), gid="logits")
    _arrow(ax, (ox + bw / 2, 1.55), (ox + bw / 2, 0.75))
    _label(
        ax,
        ox + bw / 2,
        0.6,
        "cross-entropy with the\nnext token ids (B, T)",
        size=TICK_SIZE,
        va="top",
    )
    ax.set_xlim(-0.1, ox + bw + 0.1)
    _title(
        fig, ax, f"The model we train: vocab = {vocab_size}, T = {T}, D = {D}, n_heads = {H}", True
    )
    return fig


def _circle(x, y, r):
    return Circle((x, y), r, facecolor="white", edgecolor=EDGE, lw=1.2)


# -- bonus: tiled attention with an online softmax ----------------------------------------


def tiled_softmax(T: int, tile: int, step: int | None = None) -> LabFigure:
    """The online-softmax tile walk (bonus): at step s the keys and values of tile s are
    read, and each query row keeps only a running max m, a running sum l and an
    accumulator acc; the T x T score matrix never exists. ``step=None`` draws every step
    side by side (at most 8 tiles); ``step=s`` draws step s alone, larger."""
    T = _size("T", T, 1, 64, example=8)
    tile = _size("tile", tile, 1, T, example=max(1, T // 4))
    n = math.ceil(T / tile)
    if step is None and n > 8:
        raise ValueError(
            f"T={T} with tile={tile} makes {n} steps, too many to draw side by side; "
            f"pass a larger tile (e.g. tile={math.ceil(T / 8)}) or one step=0..{n - 1}"
        )
    if step is not None:
        step = _size("step", step, 0, n - 1, example=0)
    steps = range(n) if step is None else [step]
    fig = LabFigure(
        figsize=(max(7.0, 2.3 * len(steps) + 1.2) if step is None else 8.5, 4.4), dpi=DPI
    )
    axes = fig.subplots(1, len(steps), squeeze=False)[0]
    fig.subplots_adjust(left=0.03, right=0.98, bottom=0.16, top=0.78, wspace=0.08)
    unit = 3.0 / T
    for ax, s in zip(axes, steps):
        _canvas(0, 0, (-0.4, 3.6 if step is None else 8.6), (-0.9, 3.4), ax=ax)
        _label(ax, 0.35, 3.2, "K, V", size=TICK_SIZE, weight="bold")
        for t in range(n):
            first, last = t * tile, min(T, (t + 1) * tile)
            y = 3.0 - last * unit
            if t == s:
                color, gid = head_color(1), "read"
            elif t < s:
                color, gid = "#D9D9D9", "done"
            else:
                color, gid = "white", "later"
            _box(ax, 0.0, y, 0.7, (last - first) * unit, color, lw=0.9, gid=f"tile {gid}")
        y_read = 3.0 - (min(T, (s + 1) * tile) + s * tile) / 2 * unit
        _arrow(ax, (0.75, y_read), (1.35, 1.5), lw=1.4)
        for k, (name, w) in enumerate((("m", 0.4), ("l", 0.4), ("acc", 0.9))):
            x = 1.45 + [0, 0.5, 1.0][k]
            _label(ax, x + w / 2, 3.2, name, size=TICK_SIZE, weight="bold")
            _box(ax, x, 0.0, w, 3.0, "#F3DCC4" if k < 2 else "#D5EBD3", lw=0.9, gid=f"state {name}")
            _row_lines(ax, x, 0.0, w, 3.0, T, color="#777777", lw=0.4)
        first, last = s * tile, min(T, (s + 1) * tile) - 1
        _label(ax, 1.6, -0.35, f"step {s}: read keys {first}-{last}", size=TICK_SIZE)
        if step is not None:
            _label(
                ax,
                3.7,
                1.5,
                "for every query row:\n"
                "m ← max(m, row max of S)\n"
                "l ← l·exp(m_old - m) + Σ exp(S - m)\n"
                "acc ← acc·exp(m_old - m) + exp(S - m) V\n\n"
                f"S = Q K[{first}:{last + 1}]ᵀ / √d_head\n"
                f"is ({T}, {last - first + 1}), dropped after this step",
                size=TICK_SIZE,
                ha="left",
            )
        if s == n - 1:
            _label(ax, 1.6, -0.72, "out = acc / l", size=TICK_SIZE, style="italic")
    fig.text(
        0.5,
        0.05,
        f"kept per query row: m, l and acc for all {T} rows -- never the {T} x {T} scores",
        ha="center",
        fontsize=TICK_SIZE,
        color=TEXT_COLOR,
    )
    which = "every step" if step is None else f"step {step} of {n}"
    fig.suptitle(
        f"Tiled attention with an online softmax: T = {T}, tile = {tile}, {which}",
        fontsize=TITLE_SIZE,
        color=TEXT_COLOR,
    )
    return fig
