"""The bonus notebook's tiled attention: the online softmax of one query row, worked with
numbers (``online_softmax_steps``) and drawn step by step (``tiled_softmax``)."""

from __future__ import annotations

import math

import numpy as np
from matplotlib.patches import Rectangle

from ...i18n import _, error_text
from ..canvas import LabFigure
from ..palette import DPI, LABEL_SIZE, TEXT_COLOR, TICK_SIZE, head_color
from ._draw import NEUTRAL, _box, _canvas, _label, _size, _suptitle, _weights
from ._online import example_row, online_softmax_steps

MAX_TILED_KEYS = 16  # one number per key must fit across the figure


def _num(x: float) -> str:
    if x == -math.inf:
        return "-∞"
    return f"{x:.3f}".rstrip("0").rstrip(".") if abs(x) < 1000 else f"{x:.0f}"


def tiled_softmax(
    T: int, tile: int, step: int | None = None, *, scores=None, values=None, seed: int = 0
) -> LabFigure:
    """The online softmax worked through with numbers, one query row (bonus notebook).

    A row of T scores s (``scores=``; default: a seeded row, one decimal) and one value v
    per key (``values=``, default: seeded whole numbers) are read ``tile`` keys at a time.
    After each tile the table shows what a tiled attention keeps: the running max m, the
    rescale factor exp(m_old - m) that corrects what was summed under the old max, the
    running sum l of exp(s - m) and the running weighted sum acc of exp(s - m)·v. The last
    lines show out = acc / l and the weights exp(s - m) / l: the plain softmax of s.
    The numbers come from ``online_softmax_steps``. ``step=s`` fills the table up to step
    s only (the tile read then outlined), as the walk stands after that step.
    """
    T = _size("T", T, 1, MAX_TILED_KEYS, example=8)
    tile = _size("tile", tile, 1, T, example=max(1, T // 4))
    n = math.ceil(T / tile)
    if n > 8:
        raise ValueError(
            error_text(
                "T={T} with tile={tile} makes {n} steps, too many to draw; "
                "pass a larger tile (e.g. tile={larger})"
            ).format(T=T, tile=tile, n=n, larger=math.ceil(T / 8))
        )
    if step is not None:
        step = _size("step", step, 0, n - 1, example=0)
    default_s, default_v = example_row(T, seed)
    s = default_s if scores is None else _weights(scores, "scores", 1)
    v = default_v if values is None else _weights(values, "values", 1)
    if len(s) != T or len(v) != T:
        raise ValueError(
            error_text(
                "got {n_scores} scores and {n_values} values for T={T} keys; "
                "pass one of each per key"
            ).format(n_scores=len(s), n_values=len(v), T=T)
        )
    steps = online_softmax_steps(s, tile, v)
    shown = n if step is None else step + 1  # table rows filled in

    cell = 0.62 if T <= 12 else 0.56  # inches per key in the score rows: "0.054" at 10 pt
    name_w = 1.35
    cols = (  # (header, width in inches): a name, then its formula on a second line
        (_("step"), 0.55),
        (_("keys"), 0.75),
        (_("tile max"), 0.8),
        ("m\n" + _("old → new"), 1.2),
        ("rescale\nexp(m_old − m)", 1.45),
        ("l\nl·rescale + Σ exp(s − m)", 2.3),
        ("acc\nacc·rescale + Σ exp(s − m)·v", 2.65),
    )
    table_w = sum(w for _header, w in cols)
    width = max(name_w + T * cell, table_w) + 0.5
    row_h, head_h = 0.36, 0.55
    height = 0.6 + 2 * 0.45 + 0.35 + head_h + n * row_h + 0.25 + 0.45 + 0.9
    fig = LabFigure(figsize=(width, height), dpi=DPI)
    ax = fig.add_axes((0, 0, 1, 1))
    _canvas(0, 0, (0, width), (0, height), ax=ax)
    y = height - 0.6  # the top of the next line, in inches from the bottom
    x0 = 0.25 + name_w  # the first key's cell

    def row_of_cells(y_top, name, numbers, gid, fill="white"):
        _label(ax, x0 - 0.1, y_top - 0.2, name, size=TICK_SIZE, ha="right")
        for j, value in enumerate(numbers):
            colour = fill(j) if callable(fill) else fill
            _box(ax, x0 + j * cell, y_top - 0.4, cell, 0.4, colour, lw=0.6, gid=f"{gid} {j}")
            _label(
                ax,
                x0 + (j + 0.5) * cell,
                y_top - 0.2,
                _num(value),
                size=TICK_SIZE,
                gid=f"{gid} {j}",
            )

    # 1) the row of scores and values, cut into tiles
    current = None if step is None else step
    tint = "#CFE3F1"  # the tile read at ``step``

    def fill(j):
        return tint if current is not None and j // tile == current else "white"

    for k in range(n):  # tile names over the score row
        first, last = k * tile, min(T, (k + 1) * tile) - 1
        _label(
            ax,
            x0 + (first + last + 1) / 2 * cell,
            y + 0.02,
            _("tile {k}: keys {first}-{last}").format(k=k, first=first, last=last),
            size=TICK_SIZE,
            va="bottom",
            weight="bold" if k == current else "normal",
        )
    row_of_cells(y, _("scores s"), s, "score", fill)
    row_of_cells(y - 0.45, _("values v"), v, "value", fill)
    for k in range(n):  # a thick outline around each tile of both rows
        first, last = k * tile, min(T, (k + 1) * tile)
        ax.add_artist(
            Rectangle(
                (x0 + first * cell, y - 0.85),
                (last - first) * cell,
                0.85,
                facecolor="none",
                edgecolor=head_color(1) if k == current else "black",
                lw=2.6 if k == current else 1.6,
                zorder=4,
                gid=f"tile {k}",
            )
        )
    y -= 0.9 + 0.35

    # 2) the table: what is kept after each tile
    tx = (width - table_w) / 2
    x = tx
    for header, w in cols:
        _box(ax, x, y - head_h, w, head_h, NEUTRAL, lw=0.8, gid="header")
        name, _newline, formula = header.partition("\n")
        _label(
            ax, x + w / 2, y - (0.2 if formula else head_h / 2), name, size=TICK_SIZE, weight="bold"
        )
        if formula:
            _label(ax, x + w / 2, y - 0.4, formula, size=TICK_SIZE)
        x += w
    y -= head_h
    for k, st in enumerate(steps):
        filled = k < shown
        colour = tint if k == current else "white"
        if filled:
            cells = (
                str(k),
                f"{st['first']}-{st['last']}",
                _num(st["tile_max"]),
                f"{_num(st['m_old'])} → {_num(st['m'])}",
                _num(st["rescale"]),
                _num(st["l"]),
                _num(st["acc"]),
            )
        else:
            cells = (str(k),) + ("",) * 6
        x = tx
        for (_header, w), text, gid in zip(
            cols, cells, ("step", "keys", "tile max", "m", "rescale", "l", "acc")
        ):
            _box(ax, x, y - row_h, w, row_h, colour, lw=0.6, gid=f"state {gid}", label=f"step {k}")
            if text:
                _label(ax, x + w / 2, y - row_h / 2, text, size=TICK_SIZE, gid=f"{gid} {k}")
            x += w
        y -= row_h
    y -= 0.25

    # 3) the result: out = acc / l and the weights, the plain softmax
    last = steps[shown - 1]
    if shown == n:
        weights = np.exp(s - last["m"]) / last["l"]
        row_of_cells(y, "exp(s − m) / l\n= softmax(s)", weights, "weight", "#D5EBD3")
        _label(
            ax,
            width / 2,
            y - 0.62,
            f"out = acc / l = {_num(last['acc'])} / {_num(last['l'])} = {_num(last['out'])}"
            "  = softmax(s) · v",
            size=LABEL_SIZE,
            va="top",
            gid="out",
        )
    else:
        st = steps[step]
        old = steps[step - 1] if step else {"l": 0.0, "acc": 0.0}
        p = np.exp(np.asarray(st["scores"]) - st["m"])  # exp(s - m) of this tile
        pv = float(p @ v[st["first"] : st["last"] + 1])
        _label(
            ax,
            width / 2,
            y - 0.05,
            _(
                "step {step}: l = {l_old} · {rescale} + {p_sum} = {l},   "
                "acc = {acc_old} · {rescale} + {pv} = {acc}"
            ).format(
                step=step,
                l_old=_num(old["l"]),
                rescale=_num(st["rescale"]),
                p_sum=_num(float(p.sum())),
                l=_num(st["l"]),
                acc_old=_num(old["acc"]),
                pv=_num(pv),
                acc=_num(st["acc"]),
            ),
            size=TICK_SIZE,
            va="top",
            gid="worked step",
        )
        _label(
            ax,
            width / 2,
            y - 0.45,
            _(
                "then tile {step}'s scores are dropped; after the last tile: out = acc / l, "
                "weights = exp(s − m) / l"
            ).format(step=step),
            size=TICK_SIZE,
            va="top",
            style="italic",
        )
    fig.text(
        0.5,
        0.12 / height,
        _(
            "kept per query row between tiles: only m, l and acc -- never the row of {T} scores"
        ).format(T=T),
        ha="center",
        fontsize=TICK_SIZE,
        color=TEXT_COLOR,
    )
    if step is None:
        title = _("The online softmax with numbers: T = {T} keys, tile = {tile}, every step")
    else:
        title = _(
            "The online softmax with numbers: T = {T} keys, tile = {tile}, after step {step} of {n}"
        )
    _suptitle(fig, title.format(T=T, tile=tile, step=step, n=n), 0.12)
    return fig
