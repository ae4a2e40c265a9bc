"""A Llama block drawn from a real model's sizes: where grouped-query attention, rotary
positions and the KV cache sit (notebook 12_attention_in_todays_llms).

``llama_block(model)`` draws the stack as the chapter's roadmap (``roadmap.py``) draws GPT-2's
-- token embedding -> [RMSNorm -> attention -> + residual] -> [RMSNorm -> MLP -> + residual]
-> more blocks -> RMSNorm -> linear -> softmax -- and, beside it, the inside of the attention
layer as it runs for one new token: the three projections with the model's own head counts
and widths, RoPE on q and k, the KV cache, ``repeat_kv`` and the output projection. The parts
this lesson builds carry a magenta tag naming its section; the parts the chapter does not
build (RMSNorm, the SwiGLU MLP) are dashed. Every number is computed from ``model`` (a
``published.PublishedModel`` or anything with its size fields), so the picture cannot
disagree with the table the lesson prints: the cache per token is ``cache_bytes``'s.
"""

from __future__ import annotations

from matplotlib.patches import Circle, FancyBboxPatch, Rectangle

from ..._checks import check_kv_heads
from ...i18n import N_, _, error_text
from ...kv_cache import cache_bytes
from ..canvas import LabFigure
from ..palette import DPI, LABEL_SIZE, TEXT_COLOR, TICK_SIZE, TITLE_SIZE
from ._draw import EDGE, _arrow, _label, _suptitle, _text
from ._roadmap_parts import CHAPTER_FILL, HIGHLIGHT, LEFT_OUT, _part, _zoom_frame, _zoom_lines

__all__ = ["LESSON_PARTS", "llama_block"]

# the lesson's sections, as the tags name them, and the steps of the zoom each one builds
LESSON_PARTS = {
    N_("GQA"): ("step k v", "step repeat"),
    N_("RoPE"): ("step rope",),
    N_("KV cache"): ("step cache",),
}
SIZE_FIELDS = ("name", "n_layers", "n_heads", "n_kv_heads", "d_head", "d_model")


def _check_model(model) -> None:
    missing = [f for f in SIZE_FIELDS if not hasattr(model, f)]
    if missing:
        raise TypeError(
            error_text(
                "llama_block takes a published model (attention_lab.published.PUBLISHED_MODELS), "
                "got {type} without {fields}"
            ).format(type=type(model).__name__, fields=", ".join(missing))
        )
    if getattr(model, "d_latent", None) is not None:
        raise ValueError(
            error_text(
                "{name} caches a latent (multi-head latent attention), which has no k_proj or "
                "v_proj to draw; pick a model with grouped-query attention, e.g. Llama 3.1 8B"
            ).format(name=model.name)
        )
    try:
        check_kv_heads(model.n_heads, model.n_kv_heads)  # the library's rule and message
    except ValueError as error:  # each line (English, and its translation) names the model
        lines = str(error).split("\n")
        raise ValueError("\n".join(f"{model.name}: {line}" for line in lines)) from None


def llama_block(model) -> LabFigure:
    """A Llama block with ``model``'s sizes, and inside its attention the lesson's parts.

    ``model``: a ``published.PublishedModel`` with grouped-query attention (not MLA), e.g.
    Llama 3.1 8B. Patches carry gids: ``"attention"``, ``"ln1"``, ``"mlp"``, ``"step q"``,
    ``"step k v"``, ``"step rope"``, ``"step cache"``, ``"step repeat"``, ``"step attend"``,
    ``"step o"``, and the tags ``"tag GQA"``, ``"tag RoPE"``, ``"tag KV cache"`` (edge colour
    ``HIGHLIGHT``); the steps a tag points at are ``LESSON_PARTS[tag]``.
    """
    _check_model(model)
    L, H, n_kv, d_head, D = (
        int(model.n_layers),
        int(model.n_heads),
        int(model.n_kv_heads),
        int(model.d_head),
        int(model.d_model),
    )
    group = H // n_kv
    per_token = cache_bytes(model, 1, bytes_per_element=2)  # all layers, bf16
    width, height = 11.6, 7.4
    fig = LabFigure(figsize=(width, height), dpi=DPI)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_aspect("equal")
    ax.axis("off")

    def part(gid, x, y, w, h, text, left_out=False, fill="white", size=TICK_SIZE, lesson=False):
        return _part(ax, gid, x, y, w, h, text, lesson, left_out, fill, size)

    def tag(name, x, y, w=0.95):
        """A magenta tag naming the lesson's section, its left edge at x, centred on y."""
        ax.add_artist(
            FancyBboxPatch(
                (x, y - 0.16),
                w,
                0.32,
                boxstyle="round,pad=0.0,rounding_size=0.08",
                facecolor=HIGHLIGHT,
                edgecolor=HIGHLIGHT,
                lw=1.5,
                gid=f"tag {name}",
                clip_on=False,
                zorder=6,
            )
        )
        _label(ax, x + w / 2, y, _(name), size=TICK_SIZE, weight="bold", color="white", zorder=7)

    def plus(gid, x, y):
        ax.add_artist(
            Circle((x, y), 0.17, facecolor="white", edgecolor=EDGE, lw=1.2, gid=gid, zorder=3)
        )
        _label(ax, x, y, "+", size=TITLE_SIZE, color=TEXT_COLOR, weight="bold", zorder=4)

    # -- the stack, top (input) to bottom (output) ---------------------------------------
    sx, sw, bh = 0.75, 3.7, 0.42
    cx = sx + sw / 2
    _label(ax, cx, 6.72, _("token ids (B, T)"), size=TICK_SIZE)
    _arrow(ax, (cx, 6.58), (cx, 6.37), lw=1.2)
    part("embedding", sx, 5.95, sw, bh, _("token embedding (no position table)"))
    ax.add_artist(
        Rectangle(
            (sx - 0.45, 1.98),
            sw + 0.9,
            3.72,
            facecolor="none",
            edgecolor=EDGE,
            lw=1.0,
            gid="block",
            clip_on=False,
            zorder=1,
        )
    )
    _label(
        ax, sx - 0.28, 3.84, _("one block  (× {L} layers)").format(L=L), size=TICK_SIZE, rotation=90
    )
    _arrow(ax, (cx, 5.93), (cx, 5.57), lw=1.2)
    part("ln1", sx + 0.5, 5.15, sw - 1.0, 0.38, "RMSNorm", left_out=True)
    _arrow(ax, (cx, 5.13), (cx, 5.0), lw=1.2)
    attention = part(
        "attention",
        sx,
        4.3,
        sw,
        0.68,
        _("grouped-query causal self-attention"),
        fill=CHAPTER_FILL,
        size=LABEL_SIZE,
    )
    attention.set_linewidth(2.2)
    _label(
        ax,
        cx,
        4.43,
        _("{H} query heads, {n_kv} key/value heads").format(H=H, n_kv=n_kv),
        size=TICK_SIZE,
        style="italic",
        zorder=4,
    )
    for y, top in ((3.84, 5.6), (2.2, 3.62)):  # the residual connections, round the right side
        plus(f"residual {y}", cx, y)
        ax.plot(
            [cx, sx + sw + 0.05, sx + sw + 0.05, cx + 0.17],
            [top, top, y, y],
            color=EDGE,
            lw=1.2,
            zorder=2,
            gid="residual path",
        )
    _arrow(ax, (cx, 4.28), (cx, 4.01), lw=1.2)
    _arrow(ax, (cx, 3.67), (cx, 3.45), lw=1.2)
    part("ln2", sx + 0.5, 3.05, sw - 1.0, 0.38, "RMSNorm", left_out=True)
    _arrow(ax, (cx, 3.03), (cx, 2.88), lw=1.2)
    part("mlp", sx + 0.5, 2.45, sw - 1.0, 0.41, _("MLP: SwiGLU"), left_out=True)
    _arrow(ax, (cx, 2.43), (cx, 2.37), lw=1.0)
    _arrow(ax, (cx, 2.03), (cx, 1.86), lw=1.2)
    _label(ax, cx, 1.72, _("⋮  more blocks"), size=TICK_SIZE)
    _arrow(ax, (cx, 1.6), (cx, 1.5), lw=1.2)
    part("ln_f", sx + 0.5, 1.12, sw - 1.0, 0.36, _("RMSNorm (final)"), left_out=True)
    _arrow(ax, (cx, 1.1), (cx, 0.95), lw=1.2)
    part("linear", sx, 0.55, sw, 0.38, _("linear: d_model → vocab (LM head)"))
    _arrow(ax, (cx, 0.53), (cx, 0.4), lw=1.2)
    part("softmax", sx, 0.02, sw, 0.36, _("softmax → next-token probabilities"))

    # -- inside the attention layer, for one new token -----------------------------------
    ix, iw = 6.55, 4.75  # the steps' left edge and width
    tag_x = ix - 1.12
    top, row = 6.3, 0.6
    steps = (
        ("step q", _("q_proj: {D} → {H} query heads × {d_head}").format(D=D, H=H, d_head=d_head)),
        (
            "step k v",
            _("k_proj, v_proj: {D} → {n_kv} heads × {d_head} each").format(
                D=D, n_kv=n_kv, d_head=d_head
            ),
        ),
        ("step rope", _("RoPE: turn q and k by the position (not v)")),
        ("step cache", _("KV cache: append this token's k and v")),
        ("step repeat", _("repeat_kv: each k/v head serves {g} query heads").format(g=group)),
        ("step attend", _("causal attention over every cached token")),
        ("step o", _("o_proj: {H} heads × {d_head} → {D}").format(H=H, d_head=d_head, D=D)),
    )
    lesson = {gid: name for name, gids in LESSON_PARTS.items() for gid in gids}
    title = _("inside the attention layer, for one new token")
    frame = _zoom_frame(ax, tag_x - 0.15, ix + iw - tag_x + 0.3, top, len(steps) * row, title)
    for k, (gid, text) in enumerate(steps):
        y = top - (k + 1) * row + 0.08
        on = gid in lesson
        part(gid, ix, y, iw, row - 0.16, text, fill=CHAPTER_FILL, lesson=on)
        if on:
            tag(lesson[gid], tag_x, y + (row - 0.16) / 2)
        if k:
            _arrow(ax, (ix + iw / 2, y + row - 0.08), (ix + iw / 2, y + row - 0.16), lw=1.0)
    _zoom_lines(ax, sx + sw + 0.1, (4.98, 4.3), frame)

    # -- what the cache holds, and the key -----------------------------------------------
    _text(
        ax,
        frame.get_x(),
        1.78,
        _(
            "KV cache per token: {L} layers × 2 (k and v) × {n_kv} heads × {d_head}\n"
            "× 2 bytes (bf16) = {per_token:,} bytes; {H} key/value heads would need {mha:,}"
        ).format(
            L=L,
            n_kv=n_kv,
            d_head=d_head,
            per_token=per_token,
            H=H,
            mha=per_token * group,
        ),
        fontsize=TICK_SIZE,
        va="top",
        ha="left",
        color=TEXT_COLOR,
        linespacing=1.45,
    )
    key = (
        ("key lesson", _("magenta: a section of this lesson"), "white", HIGHLIGHT, "-"),
        ("key left out", _("dashed: not built in this chapter"), "white", LEFT_OUT, "--"),
        ("key chapter", _("blue: the attention the chapter builds"), CHAPTER_FILL, EDGE, "-"),
    )
    for k, (gid, text, face, edge, ls) in enumerate(key):
        y = 0.78 - k * 0.33
        ax.add_artist(
            Rectangle(
                (frame.get_x(), y),
                0.32,
                0.22,
                facecolor=face,
                edgecolor=edge,
                ls=ls,
                lw=2.0 if edge == HIGHLIGHT else 1.3,
                gid=gid,
            )
        )
        _label(ax, frame.get_x() + 0.42, y + 0.11, text, size=TICK_SIZE, ha="left")
    _suptitle(
        fig,
        _("A Llama block with {name}'s sizes: where this lesson's parts sit").format(
            name=model.name
        ),
        0.1,
    )
    fig.set_gid(f"llama block {model.name}")
    return fig
