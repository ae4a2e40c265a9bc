"""The model notebook 08 trains and the bonus's tiled attention with an online softmax."""

from __future__ import annotations

import math

from ..palette import DPI, LABEL_SIZE, TEXT_COLOR, TICK_SIZE, TITLE_SIZE, head_color, text_color_on
from ..plotting import LabFigure
from ._draw import (
    NEUTRAL,
    _arrow,
    _box,
    _canvas,
    _circle,
    _heads,
    _label,
    _own_axes,
    _row_lines,
    _size,
    _suptitle,
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

    node(0.0, 1.6, "token ids", f"(B, T) = (B, {T})", gid="ids")
    ex = 3.9
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
    atx, aw = px + 1.9, 3.8
    _arrow(ax, (px + 0.35, 2.17), (atx - 0.05, 2.17))
    _label(ax, (px + 0.35 + atx) / 2, 1.95, f"(B, T, {D})", size=TICK_SIZE - 1, va="top")
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
    cols = min(len(steps), 4)  # more than 4 steps wrap to a second row: readable at 900 px
    rows = -(-len(steps) // cols)
    pw, ph = (2.3, 2.5) if step is None else (8.2, 3.0)  # inches per panel
    width, height = max(7.0, cols * pw + 0.6), 0.6 + rows * ph + 0.45
    fig = LabFigure(figsize=(width, height), dpi=DPI)
    # ONE axes for all panels (an axes costs ~15 ms to build): panel k is drawn in its
    # own (PW x PH)-unit square of the data plane, its artists labelled "step s"
    PW, PH = (4.0 if step is None else 9.0), 4.3
    ax = fig.add_axes(
        ((width - cols * pw) / 2 / width, 0.45 / height, cols * pw / width, rows * ph / height)
    )
    _canvas(0, 0, (-0.4, -0.4 + cols * PW), (3.4 - rows * PH, 3.4), ax=ax)
    unit = 3.0 / T
    for k_ax, s in enumerate(steps):
        r, c = divmod(k_ax, cols)
        ox, oy = c * PW, -r * PH  # this panel's origin
        tag = {"label": f"step {s}"}
        header = c == 0  # names over the first panel of each row only
        if header:
            _label(ax, ox + 0.35, oy + 3.2, "K, V", size=TICK_SIZE, weight="bold")
        for t in range(n):
            first, last = t * tile, min(T, (t + 1) * tile)
            y = 3.0 - last * unit
            if t == s:
                color, gid = head_color(1), "read"
            elif t < s:
                color, gid = "#D9D9D9", "done"
            else:
                color, gid = "white", "later"
            _box(
                ax, ox, oy + y, 0.7, (last - first) * unit, color, lw=0.9, gid=f"tile {gid}", **tag
            )
        y_read = 3.0 - (min(T, (s + 1) * tile) + s * tile) / 2 * unit
        _arrow(ax, (ox + 0.75, oy + y_read), (ox + 1.35, oy + 1.5), lw=1.4, **tag)
        state = []  # (x, y, w, h) of m, l, acc: one row per query
        for k, (name, w) in enumerate((("m", 0.4), ("l", 0.4), ("acc", 0.9))):
            x = ox + 1.45 + [0, 0.5, 1.0][k]
            if header:
                _label(ax, x + w / 2, oy + 3.2, name, size=TICK_SIZE, weight="bold")
            colour = "#F3DCC4" if k < 2 else "#D5EBD3"
            _box(ax, x, oy, w, 3.0, colour, lw=0.9, gid=f"state {name}", **tag)
            state.append((x, oy, w, 3.0))
        _row_lines(ax, state, T, color="#777777", lw=0.4)
        first, last = s * tile, min(T, (s + 1) * tile) - 1
        _label(ax, ox + 1.6, oy - 0.35, f"step {s}: read keys {first}-{last}", size=TICK_SIZE)
        if step is not None:
            _label(
                ax,
                ox + 3.7,
                oy + 1.5,
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
            _label(ax, ox + 1.6, oy - 0.72, "out = acc / l", size=TICK_SIZE, style="italic")
    fig.text(
        0.5,
        0.12 / height,
        f"kept per query row: m, l and acc for all {T} rows -- never the {T} x {T} scores",
        ha="center",
        fontsize=TICK_SIZE,
        color=TEXT_COLOR,
    )
    which = "every step" if step is None else f"step {step} of {n}"
    _suptitle(fig, f"Tiled attention with an online softmax: T = {T}, tile = {tile}, {which}", 0.12)
    return fig
