"""What the roadmap (``roadmap.py``) draws where: the notebooks, the parts each builds, the
steps inside the attention layer, its colours, and the notebook tags. The notebook names
and the steps are English (``N_``): the roadmap translates them where it draws them."""

from __future__ import annotations

from matplotlib.patches import FancyBboxPatch, Rectangle

from ...i18n import N_
from ..palette import LABEL_SIZE, TEXT_COLOR, TICK_SIZE
from ._draw import ARROW, EDGE, _label

CHAPTER_FILL = "#CFE3F1"  # the chapter's layer: the attention sublayer
HIGHLIGHT = "#EE3377"  # the notebook asked for (``highlight=``): no head, weight or mask
LEFT_OUT = "#777777"  # outline and text of the parts TinyLM leaves out (dashed, not grey)

NOTEBOOKS = {
    1: N_("weighted average"),
    2: N_("queries, keys, values"),
    3: N_("scaling by 1/√d_head"),
    4: N_("causal mask"),
    5: N_("one causal head"),
    6: N_("multi-head"),
    7: N_("fused QKV"),
    8: N_("training a tiny model"),
    9: N_("lookup by content, how many heads"),
    10: N_("two layers: induction heads"),
    11: N_("real text: MLP, residuals, layer norm"),
}
# which drawn parts each notebook builds (their gids)
PARTS = {
    1: ("step 1",),
    2: ("step 2",),
    3: ("step 3",),
    4: ("step 4",),
    5: ("step 5",),
    6: ("step 6",),
    7: ("step 7",),
    8: ("embedding", "attention", "linear", "softmax"),
    9: ("attention",),
    10: ("block", "attention", "residual 1"),  # two blocks' attention on a residual stream
    11: ("ln1", "residual 1", "ln2", "mlp", "residual 2", "ln_f"),
}
STEPS = (  # inside the attention sublayer, in the order the chapter builds it
    (1, N_("a weighted average of the tokens")),
    (2, N_("queries, keys, values: scores Q Kᵀ")),
    (3, N_("scale the scores by 1/√d_head")),
    (4, N_("causal mask: no look at the future")),
    (5, N_("one causal head (+ dropout)")),
    (6, N_("multi-head: split, attend, merge")),
    (7, N_("one fused QKV projection")),
)


def _part(ax, gid, x, y, w, h, text, on=False, left_out=False, fill="white", size=TICK_SIZE):
    """A box of a stack (the roadmap's, the Llama block's) with its label: ``on`` rings it
    in ``HIGHLIGHT``; ``left_out`` dashes it and sets its label grey and italic."""
    rect = Rectangle(
        (x, y),
        w,
        h,
        facecolor=fill,
        edgecolor=HIGHLIGHT if on else (LEFT_OUT if left_out else EDGE),
        lw=3.0 if on else (1.3 if left_out else 1.2),
        ls="--" if left_out else "-",
        gid=gid,
        clip_on=False,
        zorder=3,
    )
    ax.add_artist(rect)
    _label(
        ax,
        x + w / 2,
        y + h / 2,
        text,
        size=size,
        color=LEFT_OUT if left_out else TEXT_COLOR,
        style="italic" if left_out else "normal",
        zorder=4,
    )
    return rect


def _badge(ax, x, y, n, highlight):
    """A small rounded tag "0n" with its left edge at x, centred on y."""
    on = n == highlight
    tag = FancyBboxPatch(
        (x, y - 0.16),
        0.42,
        0.32,
        boxstyle="round,pad=0.0,rounding_size=0.08",
        facecolor=HIGHLIGHT if on else "white",
        edgecolor=HIGHLIGHT if on else EDGE,
        lw=2.0 if on else 1.0,
        gid=f"notebook {n:02d}",
        clip_on=False,
        zorder=6,
    )
    ax.add_artist(tag)
    _label(
        ax,
        x + 0.21,
        y,
        f"{n:02d}",
        size=TICK_SIZE,
        weight="bold",
        color="white" if on else TEXT_COLOR,
        zorder=7,
    )


def _zoom_frame(ax, x: float, width: float, top: float, depth: float, title: str) -> Rectangle:
    """The frame of a zoom into the attention layer (the roadmap's, the Llama block's): its
    rows of steps go ``depth`` down from ``top``, its bold title sits above them. Returns the
    frame, for ``_zoom_lines``."""
    frame = Rectangle(
        (x, top - depth - 0.12),
        width,
        depth + 0.62,
        facecolor="none",
        edgecolor=EDGE,
        lw=1.0,
        gid="zoom",
        clip_on=False,
        zorder=1,
    )
    ax.add_artist(frame)
    _label(ax, x + width / 2, top + 0.3, title, size=LABEL_SIZE, weight="bold")
    return frame


def _zoom_lines(ax, x: float, tops: tuple[float, float], frame: Rectangle) -> None:
    """The two dotted lines from the zoomed box's right edge (at ``x``, heights ``tops``: its
    upper and lower corner) to the frame's upper and lower left corners."""
    corners = (frame.get_y() + frame.get_height(), frame.get_y())
    for y_from, y_to in zip(tops, corners):
        ax.plot(
            [x, frame.get_x()],
            [y_from, y_to],
            color=ARROW,
            lw=0.8,
            ls=":",
            zorder=1,
            gid="zoom line",
        )
