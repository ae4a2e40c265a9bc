"""The rows of ``W_q.weight`` / ``qkv.weight`` each head owns (notebooks 06, 07), drawn to
scale, every head in ``head_color(h)``."""

from __future__ import annotations

from matplotlib.patches import Rectangle

from ...i18n import _
from ..canvas import LabFigure
from ..palette import DPI, LABEL_SIZE, TICK_SIZE, head_color
from ._draw import _box, _canvas, _heads, _label, _row_lines, _suptitle


def head_rows(D: int, H: int, fused: bool = False) -> LabFigure:
    """The rows of ``W_q.weight`` (``fused=False``, notebook 06: ``MultiHeadAttention.W_q``,
    an ``nn.Linear(D, D)`` that stores its weight as (out, in) = (D, D)) or of the fused
    ``qkv.weight`` (``fused=True``, notebook 07: ``MultiHeadSelfAttention.qkv``, (3D, D),
    Q | K | V blocks) that belong to each head: head h owns output rows
    h*d_head .. (h+1)*d_head - 1 of each block. Drawn to scale: one row is as high as one
    column is wide, so the (D, D) weight is square and the (3D, D) one three times as tall.
    The matrix patch has ``gid == "weight"``."""
    d_head = _heads(D, H)
    blocks = ("Q", "K", "V") if fused else ("Q",)
    rows = len(blocks) * D
    mh = 4.8 if fused else 3.0  # inches for all rows (1 data unit = 1 inch)
    unit = mh / rows  # inches per row = inches per column
    mw = D * unit
    left, right = 1.75, 2.05  # the row labels (out) left, the head labels right
    xlim = (-left, mw + right)
    width, height = xlim[1] - xlim[0] + 0.2, mh + 2.15
    fig = LabFigure(figsize=(width, height), dpi=DPI)
    ax = fig.add_axes((0.1 / width, 0.05 / height, 1 - 0.2 / width, (mh + 1.05) / height))
    _canvas(0, 0, xlim, (-0.55, mh + 0.5), ax=ax)
    matrix = Rectangle((0, 0), mw, mh, facecolor="none", edgecolor="black", lw=1.6, zorder=5)
    matrix.set_gid("weight")
    ax.add_artist(matrix)
    for b, block in enumerate(blocks):
        for h in range(H):
            first = b * D + h * d_head
            y = mh - (first + d_head) * unit
            _box(ax, 0.0, y, mw, d_head * unit, head_color(h), lw=0.6, gid=f"head {h} {block}")
            label = _("head {h}: rows {first}-{last}").format(
                h=h, first=first, last=first + d_head - 1
            )
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
                _("{block} rows\n{first}-{last}").format(
                    block=block, first=b * D, last=(b + 1) * D - 1
                ),
                size=LABEL_SIZE,
                ha="right",
                weight="bold",
            )
    _row_lines(ax, [(0.0, 0.0, mw, mh)], rows, lw=0.4)  # one line between rows (<= 32)
    name = "qkv.weight" if fused else "W_q.weight"
    _label(ax, mw / 2, mh + 0.2, f"{name}: ({rows}, {D})", size=LABEL_SIZE, weight="bold")
    _label(ax, mw / 2, -0.3, _("in: D = {D} columns").format(D=D), size=TICK_SIZE)
    if not fused:
        _label(
            ax,
            -0.2,
            mh / 2,
            _("out: {D} rows\n= {H} heads\n× d_head {d_head}").format(D=D, H=H, d_head=d_head),
            size=TICK_SIZE,
            ha="right",
        )
    if fused:
        title = _("Which Q, K and V rows each head owns\nD = {D}, n_heads = {H}, d_head = {d_head}")
        code = "self.qkv = nn.Linear(D, 3 * D)"
    else:
        title = _("Which rows of W_q each head owns\nD = {D}, n_heads = {H}, d_head = {d_head}")
        code = "self.W_q = nn.Linear(D, D)"
    _suptitle(fig, title.format(D=D, H=H, d_head=d_head), 0.08)
    fig.text(
        0.5,
        1 - 0.68 / height,
        f"{code}  # weight: (out, in)",
        ha="center",
        va="top",
        fontsize=TICK_SIZE,
        color="black",
        family="monospace",
    )
    return fig
