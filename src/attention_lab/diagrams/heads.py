"""The head split (notebook 06; the explorer redraws it) and the rows of ``W_q`` /
``qkv.weight`` each head owns (06, 07), every head in ``head_color(h)``."""

from __future__ import annotations

import functools

from matplotlib.patches import Rectangle

from ..palette import DPI, LABEL_SIZE, TICK_SIZE, head_color
from ..plotting import LabFigure
from ._draw import _arrow, _box, _canvas, _heads, _label, _row_lines, _size, _suptitle, _title

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
    W, Ht, G = 2.4, 1.9, 2.0  # drawing width of D features, height of T positions, arrow gap
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
        xs = [x0 + h * (w + spread) for h in range(H)]
        for h, x in enumerate(xs):
            patches.append(_box(ax, x, y0, w, Ht, head_color(h), gid=f"head {h}", lw=0.8))
            if spread:
                _label(ax, x + w / 2, y0 + Ht + 0.05, str(h), size=TICK_SIZE, va="bottom")
        _row_lines(ax, [(x, y0, w, Ht) for x in xs], T)
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
        _row_lines(ax, [(x, y, card_w, card_h)], T, zorder=z + 0.5)  # under the next card
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


# -- 06, 07: which rows of the weight belong to which head -------------------------------


def head_rows(D: int, H: int, fused: bool = False) -> LabFigure:
    """The rows of W_q (``fused=False``: (D, D) as nn.Linear stores it, (out, in)) or of
    the fused qkv.weight (``fused=True``: (3D, D), Q | K | V blocks) that belong to each
    head: head h owns output rows h*d_head .. (h+1)*d_head - 1 of each block (06, 07)."""
    d_head = _heads(D, H)
    blocks = ("Q", "K", "V") if fused else ("Q",)
    rows = len(blocks) * D
    height = 5.6 if fused else 4.2
    mh = height - 1.6  # drawing height of all rows, in inches (1 data unit = 1 inch)
    mw = 1.6
    xlim = (-1.45, 3.55)  # labels left and right of the matrix, and no more
    width = xlim[1] - xlim[0] + 0.2
    fig = LabFigure(figsize=(width, height), dpi=DPI)
    ax = fig.add_axes((0.1 / width, 0.05 / height, 1 - 0.2 / width, (mh + 0.9) / height))
    _canvas(0, 0, xlim, (-0.5, mh + 0.4), ax=ax)
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
    _suptitle(fig, f"Which {what} each head owns\nD = {D}, n_heads = {H}, d_head = {d_head}", 0.08)
    return fig
