"""The induction circuit of notebook 10, drawn on one row of the trained model's input.

The residual stream at a position is ONE vector of D numbers: the token's embedding (and its
position's) plus what layer 0's heads add to it. It is drawn as one box per position, fed by
a sum (a circled +) of the residual arrow and layer 0's arrow, never as two boxes side by
side, which would read as a concatenation of 2 D numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.patches import Ellipse

from ...i18n import _, error_text
from ..canvas import LabFigure
from ..palette import LABEL_SIZE, TEXT_COLOR, TICK_SIZE
from ._draw import (
    EDGE,
    NEUTRAL,
    _arrow,
    _box,
    _canvas,
    _heads,
    _label,
    _own_axes,
    _size,
    _title,
    _unclipped,
)

LAYER1_COLOR = "#99DDFF"  # what layer 1 reads and writes (Tol's "light" cyan)
LAYER0_TEXT = "#6B5E12"  # what layer 0 writes, as text and arrow: a dark olive, readable on grey


def induction_circuit(tokens: Sequence, p: int, D: int, H: int) -> LabFigure:
    """How two layers predict the token at ``p + 1`` of a row with a repeat (notebook 10).

    ``tokens``: the row (T ids or names); ``p``: a query position whose token A occurred
    before, at j - 1, with j < p. Layer 0's previous-token heads add A, the token before j,
    to the residual stream at j, which already holds j's own token B: one vector of D
    numbers, the sum of the two (drawn as one box fed by a circled +). At p, a layer-1 head's
    query (made from A) matches the key made from that sum, and its value brings B to p: the
    prediction for p + 1. Drawn with the model's sizes D (d_model) and H (n_heads).
    """
    names = [str(t) for t in tokens]
    T = _size("T", len(names), 3, 4096, example=32)
    d_head = _heads(D, H)
    p = _size("p", p, 2, T - 1, example=T - 2)
    earlier = [q for q in range(p - 1) if names[q] == names[p]]
    if not earlier:
        raise ValueError(
            error_text(
                "position p={p} holds {token}, which does not occur earlier with a token after "
                "it before p; pass a position of the second copy"
            ).format(p=p, token=repr(names[p]))
        )
    j = earlier[-1] + 1
    A, B, before_p = names[p], names[j], names[p - 1]
    fig, ax = _own_axes(12.8, 7.0, top=0.9)
    _canvas(0, 0, (-0.2, 17.2), (-1.0, 9.3), ax=ax)
    cols = {j - 1: 4.6, j: 8.0, p: 14.2}  # x of each position's column (left edge)
    bw = 2.8

    # rows, bottom to top: tokens, the stream after layer 0, layer 1 at p, the prediction
    rows = (
        (0.4, _("token + position\nembedding ({D} numbers)").format(D=D)),
        (2.9, _("residual stream\nafter layer 0: x + attn(x)")),
        (5.5, _("layer 1")),
        (7.9, _("LM head")),
    )
    for y, text in rows:
        _label(ax, 0.0, y + 0.45, text, size=LABEL_SIZE, ha="left")
    for q, x in cols.items():
        _box(ax, x, 0.4, bw, 0.9, NEUTRAL, f"{q}:{names[q]}", size=LABEL_SIZE, gid=f"token {q}")
    _label(ax, 11.6, 0.85, "…", size=LABEL_SIZE + 4)
    _label(ax, 11.6, 3.35, "…", size=LABEL_SIZE + 4)

    # after layer 0: ONE vector per position, its own token plus what layer 0 adds (a sum)
    half = bw / 2
    r = 0.2  # the circled + (data units across; drawn round on the page, see _plus)
    for q, own, prev in ((j, B, A), (p, A, before_p)):
        x = cols[q]
        c = x + half  # the column's middle
        _arrow(ax, (c, 1.35), (c, 2.2 - r))  # the residual: the embedding, kept
        _plus(ax, c, 2.2, r, gid=f"sum {q}")
        _arrow(ax, (c, 2.2 + r), (c, 2.85))
        _box(ax, x, 2.9, bw, 0.9, NEUTRAL, "", gid=f"stream {q}")
        _label(ax, c, 3.35, f"{own} + ", size=LABEL_SIZE, ha="right")
        _label(
            ax,
            c,
            3.35,
            _("prev {token}").format(token=prev),
            size=LABEL_SIZE,
            ha="left",
            color=LAYER0_TEXT,
            gid=f"previous {q}",
        )
    _label(ax, cols[p] + half + 0.15, 1.75, _("residual"), size=TICK_SIZE, ha="left")
    _arrow(ax, (cols[p] - 0.9, 1.6), (cols[p] + half - r, 2.2), color=LAYER0_TEXT)  # from p - 1
    _arrow(ax, (cols[j - 1] + bw - 0.3, 1.35), (cols[j] + half - r, 2.2), color=LAYER0_TEXT)
    _label(
        ax,
        cols[j - 1] + 0.1,
        2.35,
        _("layer 0: previous-token\nheads add {token} at {j}").format(token=A, j=j),
        size=TICK_SIZE,
        ha="right",
    )

    # layer 1 at p: the query from A matches the key from "prev A" at j; the value brings B
    qx = cols[p]
    _arrow(ax, (qx + half / 2, 3.85), (qx + half / 2, 5.45))
    _box(
        ax,
        qx,
        5.5,
        bw,
        0.9,
        LAYER1_COLOR,
        _("query from {token}").format(token=A),
        size=TICK_SIZE,
        gid="query",
    )
    kx = cols[j]
    _box(
        ax,
        kx,
        5.5,
        bw,
        0.9,
        LAYER1_COLOR,
        _("key from prev {token}\nvalue from {own}").format(token=A, own=B),
        size=TICK_SIZE,
        gid="key",
    )
    _arrow(ax, (kx + half * 1.5, 3.85), (kx + half * 1.5, 5.45))  # W_K reads the sum
    _arrow(ax, (kx + half / 2, 3.85), (kx + half / 2, 5.45))  # W_V reads the same sum
    _arrow(ax, (qx - 0.05, 6.15), (kx + bw + 0.05, 6.15))
    _label(
        ax,
        (qx + kx + bw) / 2,
        6.3,
        _("query {token} matches key {token}").format(token=A),
        size=TICK_SIZE,
        va="bottom",
    )
    _arrow(ax, (kx + bw + 0.05, 5.75), (qx - 0.05, 5.75))
    _label(
        ax,
        (qx + kx + bw) / 2,
        5.6,
        _("value {own} copied to {p}").format(own=B, p=p),
        size=TICK_SIZE,
        va="top",
    )
    _arrow(ax, (qx + half, 6.45), (qx + half, 7.85))
    _box(
        ax,
        qx,
        7.9,
        bw,
        0.9,
        LAYER1_COLOR,
        _("predicts {own}, the\ntoken at {next}").format(own=B, next=p + 1),
        size=TICK_SIZE,
        gid="prediction",
    )
    sizes = _(
        "sizes: a box of the stream is one vector of D = {D} numbers, the sum of its token's "
        "embedding and layer 0's write (not two vectors side by side);\neach layer has {H} "
        "heads, each with a query, key and value of d_head = {d_head}; T = {T} positions"
    ).format(D=D, H=H, d_head=d_head, T=T)
    _label(ax, 8.5, -0.2, sizes, size=TICK_SIZE, va="top")
    title = _("An induction head: {A} was followed by {B} at {j}, so after {A} at {p} comes {B}")
    _title(fig, ax, title.format(A=A, B=B, j=j, p=p), True)
    return fig


def _plus(ax, x, y, r, gid=None):
    """A circled + centred at (x, y), ``r`` wide in data units and as tall on the page."""
    width, height = ax.figure.get_size_inches() * ax.get_position().size  # the axes, inches
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    tall = r * (width / (x1 - x0)) / (height / (y1 - y0))  # r on x in inches, in y units
    ring = Ellipse(
        (x, y), 2 * r, 2 * tall, facecolor="white", edgecolor=EDGE, lw=1.2, **_unclipped(ax, {})
    )
    if gid:
        ring.set_gid(gid)
    ax.add_artist(ring)
    _label(ax, x, y, "+", size=LABEL_SIZE + 2, color=TEXT_COLOR, fontweight="bold")
