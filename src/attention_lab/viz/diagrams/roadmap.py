"""The chapter's roadmap: a GPT block as a stack, with each notebook at the part it builds.

``roadmap(highlight=None)`` draws token + position embedding -> [LayerNorm -> multi-head
causal self-attention -> + residual] -> [LayerNorm -> MLP -> + residual] -> more blocks ->
LayerNorm -> linear -> softmax. The attention sublayer (the chapter's layer) is filled
and framed; the parts the tiny model of notebooks 01-09 leaves out (layer norms, MLP,
residual connections) are drawn dashed and say so: notebook 10 stacks two attention layers
on a residual stream (the block frame, the attention and its residual), notebook 11's
``CharLM`` adds the rest.
Beside the stack, the inside of the attention sublayer step by step: notebooks 01-07.
"""

from __future__ import annotations

from matplotlib.patches import Circle, Rectangle

from ...i18n import _, error_text
from ..canvas import LabFigure
from ..palette import DPI, LABEL_SIZE, TEXT_COLOR, TICK_SIZE, TITLE_SIZE
from ._draw import EDGE, _arrow, _label, _suptitle, _text
from ._roadmap_parts import (
    CHAPTER_FILL,
    HIGHLIGHT,
    LEFT_OUT,
    NOTEBOOKS,
    PARTS,
    STEPS,
    _badge,
    _part,
    _zoom_frame,
    _zoom_lines,
)

__all__ = ["CHAPTER_FILL", "HIGHLIGHT", "LEFT_OUT", "NOTEBOOKS", "PARTS", "STEPS", "roadmap"]


def roadmap(highlight: int | None = None) -> LabFigure:
    """The chapter on one page: a GPT block drawn as a stack, each notebook 01-11 placed at
    the part it builds, the attention sublayer (the chapter's layer) filled in blue, the
    parts the tiny model of 01-09 leaves out (layer norm, MLP, residuals: notebooks 10 and
    11) dashed. ``highlight=n`` (a key of ``NOTEBOOKS``) rings notebook n's tag and parts in
    magenta and says "you are here". Patches carry gids: ``"attention"``, ``"mlp"``,
    ``"step 4"``, ..., and the tags ``"notebook 04"``; highlighted parts have ``HIGHLIGHT`` as
    edge colour.

    Example, at the top of notebook 04: ``roadmap(highlight=4)``
    """
    if highlight is not None:
        if isinstance(highlight, bool) or not isinstance(highlight, int):
            raise ValueError(
                error_text(
                    "highlight={highlight} must be a notebook number (one of {numbers}) or None"
                ).format(highlight=repr(highlight), numbers=", ".join(map(str, sorted(NOTEBOOKS))))
            )
        if highlight not in NOTEBOOKS:
            raise ValueError(
                error_text(
                    "highlight={highlight} is not a notebook of the chapter; pass one of {numbers}"
                ).format(highlight=highlight, numbers=", ".join(map(str, sorted(NOTEBOOKS))))
            )
    lit = set(PARTS.get(highlight, ()))
    width, height = 11.0, 7.2
    fig = LabFigure(figsize=(width, height), dpi=DPI)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_aspect("equal")
    ax.axis("off")

    def residual(n, top, y):
        """The + of residual ``n`` at height ``y``, and its path: from ``top`` (above the
        LayerNorm), round the right side of the block, into the +."""
        on = f"residual {n}" in lit
        plus(f"residual {n}", cx, y)
        ax.plot(
            [cx, sx + sw + 0.05, sx + sw + 0.05, cx + 0.17],
            [top, top, y, y],
            color=HIGHLIGHT if on else LEFT_OUT,
            lw=2.4 if on else 1.2,
            ls="--",
            zorder=2,
            gid=f"residual path {n}",
        )

    def part(gid, x, y, w, h, text, left_out=False, fill="white", size=TICK_SIZE):
        return _part(ax, gid, x, y, w, h, text, gid in lit, left_out, fill, size)

    def plus(gid, x, y, left_out=True):
        on = gid in lit
        ax.add_artist(
            Circle(
                (x, y),
                0.17,
                facecolor="white",
                edgecolor=HIGHLIGHT if on else LEFT_OUT,
                lw=3.0 if on else 1.3,
                ls="--" if left_out else "-",
                gid=gid,
                clip_on=False,
                zorder=3,
            )
        )
        _label(ax, x, y, "+", size=TITLE_SIZE, color=LEFT_OUT, weight="bold", zorder=4)

    # -- the stack, top (input) to bottom (output) ---------------------------------------
    sx, sw, bh = 0.9, 3.6, 0.42  # left edge, width, box height
    cx = sx + sw / 2
    tag_x = sx + sw + 0.12
    _label(ax, cx, 6.62, _("token ids (B, T)"), size=TICK_SIZE)
    _arrow(ax, (cx, 6.48), (cx, 6.27), lw=1.2)
    part("embedding", sx, 5.85, sw, bh, _("token embedding + position embedding"))
    _badge(ax, tag_x, 5.85 + bh / 2, 8, highlight)
    # one block: a frame around its two sublayers
    block = Rectangle(
        (sx - 0.45, 1.98),
        sw + 0.9,
        3.62,
        facecolor="none",
        edgecolor=HIGHLIGHT if "block" in lit else EDGE,
        lw=2.4 if "block" in lit else 1.0,
        gid="block",
        clip_on=False,
        zorder=1,
    )
    ax.add_artist(block)
    _label(ax, sx - 0.3, 3.79, _("one block  (× n_layers)"), size=TICK_SIZE, rotation=90)
    _arrow(ax, (cx, 5.83), (cx, 5.47), lw=1.2)
    part("ln1", sx + 0.5, 5.05, sw - 1.0, 0.38, "LayerNorm", left_out=True)
    _arrow(ax, (cx, 5.03), (cx, 4.9), lw=1.2)
    attention = part(
        "attention",
        sx,
        4.25,
        sw,
        0.63,
        _("multi-head causal self-attention"),
        fill=CHAPTER_FILL,
        size=LABEL_SIZE,
    )
    attention.set_linewidth(3.0 if "attention" in lit else 2.2)
    _badge(ax, tag_x, 4.25 + 0.63 / 2, 9, highlight)  # 09: what the tiny model's heads learn
    _label(ax, cx, 4.39, _("this chapter's layer"), size=TICK_SIZE, style="italic", zorder=4)
    _arrow(ax, (cx, 4.23), (cx, 4.0), lw=1.2)
    residual(1, 5.6, 3.82)
    _badge(ax, cx - 0.72, 3.82, 10, highlight)  # 10: attention on a residual stream
    _arrow(ax, (cx, 3.64), (cx, 3.43), lw=1.2)
    part("ln2", sx + 0.5, 3.03, sw - 1.0, 0.38, "LayerNorm", left_out=True)
    _arrow(ax, (cx, 3.01), (cx, 2.86), lw=1.2)
    part("mlp", sx + 0.5, 2.45, sw - 1.0, 0.4, "MLP: Linear → GELU → Linear", left_out=True)
    for y in (5.05 + 0.19, 3.03 + 0.19, 2.45 + 0.2, 1.12 + 0.18):  # 11 adds these parts
        _badge(ax, sx + sw - 0.45, y, 11, highlight)
    residual(2, 3.58, 2.2)
    _arrow(ax, (cx, 2.43), (cx, 2.37), lw=1.0)
    _arrow(ax, (cx, 2.03), (cx, 1.86), lw=1.2)
    _label(ax, cx, 1.72, _("⋮  more blocks"), size=TICK_SIZE)
    _badge(ax, tag_x, 1.72, 10, highlight)  # 10: a second layer
    _arrow(ax, (cx, 1.6), (cx, 1.5), lw=1.2)
    part("ln_f", sx + 0.5, 1.12, sw - 1.0, 0.36, _("LayerNorm (final)"), left_out=True)
    _arrow(ax, (cx, 1.1), (cx, 0.95), lw=1.2)
    part("linear", sx, 0.55, sw, 0.38, _("linear: d_model → vocab (LM head)"))
    _badge(ax, tag_x, 0.74, 8, highlight)
    _arrow(ax, (cx, 0.53), (cx, 0.4), lw=1.2)
    part("softmax", sx, 0.02, sw, 0.36, _("softmax → next-token probabilities"))
    _badge(ax, tag_x, 0.2, 8, highlight)
    # the badges of the attention sublayer: 01-07, each on its step in the zoom on the right

    # -- inside the attention sublayer: notebooks 01-07 ----------------------------------
    ix, iw = 6.55, 3.9  # the zoom's left edge and width
    top, row = 6.05, 0.56
    title = _("inside the attention layer, step by step")
    frame = _zoom_frame(ax, ix - 0.7, iw + 0.85, top, len(STEPS) * row, title)
    for k, (n, text) in enumerate(STEPS):
        y = top - (k + 1) * row + 0.08
        part(f"step {n}", ix, y, iw, row - 0.16, _(text), fill=CHAPTER_FILL)
        _badge(ax, ix - 0.58, y + (row - 0.16) / 2, n, highlight)
        if k:
            _arrow(ax, (ix + iw / 2, y + row - 0.08), (ix + iw / 2, y + row - 0.16), lw=1.0)
    _zoom_lines(ax, sx + sw + 0.1, (4.88, 4.25), frame)  # from the attention box to the inset

    # -- the key and the notebooks outside the attention layer ---------------------------
    ky = 1.8
    _text(
        ax,
        ix - 0.7,
        ky,
        _(
            "08  trains the tiny model (TinyLM): embeddings, one attention layer,\n"
            "      linear, softmax -- no layer norm, no MLP, no residual\n"
            "09  the tiny model again: lookup by content, how many heads\n"
            "10  two attention layers on a residual stream: induction heads\n"
            "11  real text (CharLM): adds layer norm, the MLP and the residuals"
        ),
        fontsize=TICK_SIZE,
        va="top",
        ha="left",
        color=TEXT_COLOR,
        linespacing=1.45,
    )
    ax.add_artist(
        Rectangle(
            (ix - 0.7, 0.45),
            0.32,
            0.22,
            facecolor="white",
            edgecolor=LEFT_OUT,
            ls="--",
            lw=1.3,
            gid="key left out",
        )
    )
    _label(
        ax,
        ix - 0.28,
        0.56,
        _("dashed: left out of the tiny model of 01-09"),
        size=TICK_SIZE,
        ha="left",
    )
    ax.add_artist(
        Rectangle(
            (ix - 0.7, 0.12),
            0.32,
            0.22,
            facecolor=CHAPTER_FILL,
            edgecolor=EDGE,
            lw=1.2,
            gid="key chapter",
        )
    )
    _label(ax, ix - 0.28, 0.23, _("blue: the layer this chapter builds"), size=TICK_SIZE, ha="left")
    if highlight is None:
        title = _("Where the chapter's notebooks sit in a GPT-style model")
    else:
        title = _(
            "Where the chapter's notebooks sit in a GPT-style model -- you are here: {n:02d} {name}"
        ).format(n=highlight, name=_(NOTEBOOKS[highlight]))
    heading = _suptitle(fig, title, 0.1)
    if highlight is not None:
        heading.set_color(HIGHLIGHT)
    fig.set_gid(f"roadmap {highlight}")
    return fig
