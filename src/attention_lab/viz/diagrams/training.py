"""The model notebook 08 trains, drawn with its shapes (the bonus's tiled attention is in
``tiled``)."""

from __future__ import annotations

from ...i18n import _
from ..canvas import LabFigure
from ..palette import LABEL_SIZE, TICK_SIZE, TITLE_SIZE, head_color, text_color_on
from ._draw import (
    NEUTRAL,
    _arrow,
    _box,
    _canvas,
    _circle,
    _heads,
    _label,
    _own_axes,
    _size,
    _title,
)

# -- 08: the training setup ---------------------------------------------------------------


def training_setup(vocab_size: int, T: int, D: int, H: int) -> LabFigure:
    """Token ids -> token embedding + position embedding -> multi-head attention ->
    LM head -> logits, trained against the next token (notebook 08), with shapes."""
    vocab_size = _size("vocab_size", vocab_size, 2, 1_000_000, example=16)
    T = _size("T", T, 1, 100_000, example=8)
    d_head = _heads(D, H)
    fig, ax = _own_axes(12.0, 4.0, top=0.87)
    _canvas(0, 0, (-0.1, 23.0), (-0.6, 5.0), ax=ax)
    bw, bh = 3.4, 1.15

    def node(x, y, name, shape, color=NEUTRAL, gid=None):
        _box(ax, x, y, bw, bh, color, gid=gid or name)
        c = text_color_on(color)
        _label(ax, x + bw / 2, y + bh * 0.68, name, size=LABEL_SIZE, weight="bold", color=c)
        _label(ax, x + bw / 2, y + bh * 0.27, shape, size=TICK_SIZE, color=c)

    table = _("({rows}, {cols}) table")
    node(0.0, 1.6, _("token ids"), f"(B, T) = (B, {T})", gid="ids")
    ex = 3.9
    node(ex, 3.3, _("token embedding"), table.format(rows=vocab_size, cols=D), gid="tok_emb")
    node(ex, -0.1, _("position embedding"), table.format(rows=T, cols=D), gid="pos_emb")
    _arrow(ax, (bw + 0.05, 2.4), (ex - 0.05, 3.8))
    _arrow(ax, (bw + 0.05, 1.95), (ex - 0.05, 0.45))
    _label(ax, 1.5, 0.8, _("positions 0..T-1"), size=TICK_SIZE)
    px = ex + bw + 0.9
    plus = _circle(px, 2.17, 0.33)
    plus.set_gid("sum")
    ax.add_artist(plus)
    _label(ax, px, 2.17, "+", size=TITLE_SIZE + 2, weight="bold")
    _arrow(ax, (ex + bw + 0.05, 3.85), (px - 0.25, 2.45))
    _arrow(ax, (ex + bw + 0.05, 0.5), (px - 0.25, 1.9))
    atx, aw = px + 1.9, 3.8
    _arrow(ax, (px + 0.35, 2.17), (atx - 0.05, 2.17))
    _label(ax, (px + 0.35 + atx) / 2, 1.95, f"(B, T, {D})", size=TICK_SIZE - 1, va="top")
    _box(ax, atx, 1.0, aw, 2.4, NEUTRAL, gid="attention")
    _label(ax, atx + aw / 2, 3.05, _("multi-head attention"), size=LABEL_SIZE, weight="bold")
    heads = _("{H} causal heads\nd_head = {d_head}").format(H=H, d_head=d_head)
    _label(ax, atx + aw / 2, 2.5, heads, size=TICK_SIZE)
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
    node(lx, 1.6, _("LM head"), f"Linear({D}, {vocab_size})", gid="lm_head")
    ox = lx + bw + 0.8
    _arrow(ax, (lx + bw + 0.05, 2.17), (ox - 0.05, 2.17))
    node(ox, 1.6, "logits", f"(B, T, {vocab_size})", head_color(4), gid="logits")
    _arrow(ax, (ox + bw / 2, 1.55), (ox + bw / 2, 0.75))
    _label(
        ax,
        ox + bw / 2,
        0.6,
        _("cross-entropy with the\nnext token ids (B, T)"),
        size=TICK_SIZE,
        va="top",
    )
    ax.set_xlim(-0.1, ox + bw + 0.1)
    title = _("The model we train: vocab = {vocab}, T = {T}, D = {D}, n_heads = {H}")
    _title(fig, ax, title.format(vocab=vocab_size, T=T, D=D, H=H), True)
    return fig
