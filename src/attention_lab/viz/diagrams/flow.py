"""The weighted average of notebook 01 and where Q, K and V come from (02, 03)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from matplotlib.patches import FancyArrowPatch

from ...i18n import _, error_text
from ..canvas import LabFigure
from ..palette import LABEL_SIZE, TICK_SIZE, head_color, text_color_on
from ._draw import NEUTRAL, _arrow, _box, _canvas, _label, _own_axes, _size, _title, _weights

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
            error_text(
                "weights sum to {total:.4f} (min {least:.3f}); a weighted average needs "
                "non-negative weights summing to 1: pass softmax(scores)"
            ).format(total=w.sum(), least=w.min())
        )
    tokens = [str(t) for t in (tokens if tokens is not None else range(T))]
    if len(tokens) != T:
        raise ValueError(
            error_text("got {n} tokens for {T} weights; pass one token per weight").format(
                n=len(tokens), T=T
            )
        )
    q = None
    if query is not None:
        if isinstance(query, str):
            if query not in tokens:
                raise ValueError(
                    error_text("query={query} is not one of the tokens {tokens}").format(
                        query=repr(query), tokens=tokens
                    )
                )
            q = tokens.index(query)
        else:
            q = _size("query", query, 0, T - 1, example=0)
    row_h = 0.62
    height = T * row_h
    fig, ax = _own_axes(7.5, 1.0 + 0.42 * T + 0.3)
    _canvas(0, 0, (-0.2, 8.0), (-0.35, height + 0.1), ax=ax)
    cx, cy = 6.0, height / 2
    ctx = _box(ax, cx, cy - 0.45, 1.6, 0.9, head_color(4), _("context\nvector"), gid="context")
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
            _label(ax, -0.12, y, _("query"), size=TICK_SIZE, ha="right", style="italic")
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
    used = int((w > 0).sum())
    if used == T:
        terms = _("{used} terms").format(used=used)
    else:
        terms = _("{T} tokens, {used} with weight > 0").format(T=T, used=used)
    sum_text = _("= Σ weight × token vector\n({terms})").format(terms=terms)
    _label(ax, cx + 0.8, cy - 0.75, sum_text, size=TICK_SIZE, va="top")
    ax.set_xlim(-0.9, 8.4)
    if q is not None:
        title = _("The context vector for {token}: a weighted average of the tokens").format(
            token=repr(tokens[q])
        )
    else:
        title = _("The context vector: a weighted average of the tokens")
    _title(fig, ax, title, True)
    return fig


# -- 02: where Q, K and V come from -------------------------------------------------------


def qkv_flow(T: int, D: int, d_head: int, *, scaled: bool = True) -> LabFigure:
    """x -> W_q, W_k, W_v -> Q, K, V -> scores QKᵀ/√d_head -> softmax -> weights @ V
    (notebooks 02, 03), each box labelled with its shape for these sizes.

    ``scaled=False`` draws the scores as notebook 02 computes them, ``Q @ K.T`` without
    the 1/√d_head, with the note "scaling: notebook 03"::

        qkv_flow(T, D, d_head=d_out, scaled=False)  # notebook 02
    """
    T = _size("T", T, 1, 100_000, example=6)
    D = _size("D", D, 1, 100_000, example=32)
    d_head = _size("d_head", d_head, 1, 100_000, example=8)
    fig, ax = _own_axes(11.0, 4.8)
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
    node(cols[0], 2.85, "x  (T, D)", f"({T}, {D})", gid="x")
    colours = {"q": "#CFE3F1", "k": "#F3DCC4", "v": "#D5EBD3"}  # tints: Q, K, V not heads
    for name in "qkv":
        y = ys[name]
        _arrow(ax, right(cols[0], 2.85), (cols[1] - 0.05, y + bh / 2))
        node(cols[1], y, f"x @ W_{name}", f"W_{name}: ({D}, {d_head})", colours[name], f"W_{name}")
        _arrow(ax, right(cols[1], y), (cols[2] - 0.05, y + bh / 2))
        node(
            cols[2],
            y,
            f"{name.upper()}  (T, d_head)",
            f"({T}, {d_head})",
            colours[name],
            name.upper(),
        )
    sx, sy = cols[3], 4.0
    _arrow(ax, right(cols[2], ys["q"]), (sx - 0.05, sy + bh * 0.7))
    _arrow(ax, right(cols[2], ys["k"]), (sx - 0.05, sy + bh * 0.3))
    scores = _("scores ({T}, {T})").format(T=T)
    node(sx, sy, "Q Kᵀ / √d_head" if scaled else "Q Kᵀ", scores, gid="scores")
    if scaled:
        _label(
            ax,
            sx + bw / 2,
            sy + bh + 0.25,
            f"√d_head = √{d_head} = {math.sqrt(d_head):.2f}",
            size=TICK_SIZE,
            gid="scaling note",
        )
    else:  # right of the box, clear of the arrows coming in from Q and K
        _label(
            ax,
            sx + bw + 0.2,
            sy + bh / 2,
            _("Q @ K.T: not yet\ndivided by √d_head\n(scaling: notebook 03)"),
            size=TICK_SIZE,
            ha="left",
            style="italic",
            gid="scaling note",
        )
    wy = 1.8
    _arrow(ax, (sx + bw / 2, sy - 0.05), (sx + bw / 2, wy + bh + 0.05))
    _label(
        ax,
        sx + bw / 2 + 0.15,
        (sy + wy + bh) / 2,
        _("softmax over keys:\nrows sum to 1"),
        size=TICK_SIZE,
        ha="left",
    )
    node(sx, wy, _("weights  (T, T)"), f"({T}, {T})", gid="weights")
    ox = cols[4]
    _arrow(ax, right(sx, wy), (ox - 0.05, wy + bh / 2))
    _arrow(ax, right(cols[2], ys["v"]), (ox - 0.05, wy + 0.2), connectionstyle="arc3,rad=0.15")
    context = _("context ({T}, {d_head})").format(T=T, d_head=d_head)
    node(ox, wy, "weights @ V", context, head_color(4), gid="context")
    _label(
        ax, cols[1] + bw / 2, 6.45, _("three learned projections"), size=TICK_SIZE, style="italic"
    )
    title = _("Where Q, K and V come from: T = {T}, D = {D}, d_head = {d_head}")
    _title(fig, ax, title.format(T=T, D=D, d_head=d_head), True)
    fig.set_gid("qkv_flow scaled" if scaled else "qkv_flow unscaled")
    return fig
