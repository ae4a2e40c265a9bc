"""The head split (notebook 06; the explorer shows it, from ``head_split_png``), every head
in ``head_color(h)``. The rows of the weights each head owns are in ``head_rows``."""

from __future__ import annotations

from matplotlib.patches import Rectangle

from ...i18n import _, get_language
from ..cache import LRUDict
from ..canvas import LabFigure
from ..palette import DPI, LABEL_SIZE, TICK_SIZE, head_color
from ._draw import _arrow, _box, _canvas, _heads, _label, _row_lines, _size, _title

# -- 06: the head split -------------------------------------------------------------------

MAX_VIEW_ROWS = 32  # the .view stage draws at most this many (token, head) rows


def draw_head_split(ax, T: int, D: int, H: int, B: int = 1) -> list:
    """Draw the head split of notebook 06 into ``ax``; return the coloured head patches.

    Four stages left to right, one sequence of the batch, each showing what it changes:

    1. x, (B, T, D): one row per token, its D features cut into H coloured slices;
    2. ``.view(B, T, H, d_head)``: the same numbers, each token's row now an (H, d_head)
       matrix -- the heads are *inside* each token (the last two axes are H, d_head: a
       matrix product here would compare heads, not tokens);
    3. ``.transpose(1, 2)`` to (B, H, T, d_head): one separate (T, d_head) matrix per
       head, in the head's colour -- the last two axes are now (T, d_head), so
       ``Q @ K.transpose(-2, -1)`` compares tokens within each head;
    4. the merge back to (B, T, D).

    Every patch that belongs to head h has ``gid == f"head {h}"`` and ``head_color(h)``;
    stage 2's pieces also carry ``label == "view"``, stage 3's blocks ``label == "transpose"``.
    """
    d_head = _heads(D, H)
    T = _size("T", T, 1, 4096, example=8)
    B = _size("B", B, 1, 4096, example=1)
    Ht = 2.4  # drawing height of the matrices (1 data unit = 1 inch)
    W1, W2, W3, W4, G = 2.0, 1.25, 3.3, 1.5, 0.6  # stage widths, arrow gap
    x1 = 0.75  # left of stage 1 (room for its row labels)
    x2 = x1 + W1 + G + 0.75  # stage 2 (its token labels sit left of it)
    x3 = x2 + W2 + G
    x4 = x3 + W3 + G
    _canvas(0, 0, (0.0, x4 + W4 + 0.05), (-1.55, Ht + 1.05), ax=ax)
    patches = []
    head_y = Ht + 0.62  # the stage headers
    show_rows = T <= 8  # token indices beside each row

    def header(x_mid, text):
        _label(ax, x_mid, head_y, text, size=LABEL_SIZE, weight="bold", va="bottom")

    def shape(x_mid, name, values, note=""):
        _label(ax, x_mid, -0.12, f"{name}\n= {values}", size=TICK_SIZE, va="top", linespacing=1.5)
        if note:
            _label(ax, x_mid, -0.78, note, size=TICK_SIZE, va="top", style="italic")

    def arrow(x_from, x_to):
        _arrow(ax, (x_from + 0.08, Ht / 2), (x_to - 0.08, Ht / 2))

    def slices(x0, w, stage: str):
        """x as a (T, D) matrix cut into H coloured column slices, d_head wide each."""
        for h in range(H):
            patches.append(
                _box(
                    ax,
                    x0 + h * w / H,
                    0.0,
                    w / H,
                    Ht,
                    head_color(h),
                    gid=f"head {h}",
                    lw=0.8,
                    label=stage,
                )
            )
        _row_lines(ax, [(x0 + h * w / H, 0.0, w / H, Ht) for h in range(H)], T)

    # 1) x: (B, T, D), one row per token
    header(x1 + W1 / 2, "x")
    slices(x1, W1, "x")
    features = _("D = {D} features").format(D=D)
    _label(ax, x1 + W1 / 2, Ht + 0.1, features, size=TICK_SIZE, va="bottom")
    rows = _("T = {T} tokens (rows)").format(T=T)
    _label(ax, x1 - 0.5, Ht / 2, rows, size=TICK_SIZE, rotation=90)
    if show_rows:
        for t in range(T):
            y = Ht - (t + 0.5) * Ht / T
            _label(ax, x1 - 0.06, y, str(t), size=TICK_SIZE, ha="right")
    shape(
        x1 + W1 / 2,
        "(B, T, D)",
        (B, T, D),
        _("head h: columns\nh·{d_head} .. h·{d_head}+{last}").format(
            d_head=d_head, last=d_head - 1
        ),
    )

    # 2) .view(B, T, H, d_head): each token's row becomes an (H, d_head) matrix
    arrow(x1 + W1, x2 - 0.7)
    header(x2 + W2 / 2 - 0.35, ".view(B, T, H, d_head)")
    n_tok = max(1, min(T, MAX_VIEW_ROWS // H))  # tokens drawn (the rest: "...")
    more = T > n_tok
    gap = min(0.1, 0.5 / n_tok)
    room = Ht - gap * (n_tok - 1) - (0.3 if more else 0.0)
    row_h = room / (n_tok * H)
    tok_h = row_h * H
    for t in range(n_tok):
        top = Ht - t * (tok_h + gap)
        for h in range(H):
            patches.append(
                _box(
                    ax,
                    x2,
                    top - (h + 1) * row_h,
                    W2,
                    row_h,
                    head_color(h),
                    gid=f"head {h}",
                    lw=0.5,
                    label="view",
                )
            )
        ax.add_artist(
            Rectangle(
                (x2, top - tok_h),
                W2,
                tok_h,
                facecolor="none",
                edgecolor="black",
                lw=1.4,
                zorder=4,
                gid="token matrix",
            )
        )
        if n_tok <= 8 or t in (0, n_tok - 1):
            _label(ax, x2 - 0.06, top - tok_h / 2, f"token {t}", size=TICK_SIZE, ha="right")
    if more:
        _label(ax, x2 + W2 / 2, 0.12, _("⋮  {n} more tokens").format(n=T - n_tok), size=TICK_SIZE)
    _label(
        ax,
        x2 + W2 / 2 - 0.35,
        Ht + 0.1,
        _("each token: (H, d_head) = ({H}, {d_head})").format(H=H, d_head=d_head),
        size=TICK_SIZE,
        va="bottom",
    )
    shape(
        x2 + W2 / 2 - 0.35,
        "(B, T, H, d_head)",
        (B, T, H, d_head),
        _("heads sit inside each token:\nthe last two axes are (H, d_head)"),
    )

    # 3) .transpose(1, 2): one (T, d_head) matrix per head, each on its own
    arrow(x2 + W2, x3)
    header(x3 + W3 / 2, ".transpose(1, 2)")
    _label(
        ax,
        x3 + W3 / 2,
        Ht + 0.36,
        _("rows: T = {T} tokens, columns: d_head = {d_head}").format(T=T, d_head=d_head),
        size=TICK_SIZE,
        va="bottom",
    )
    sp = 0.14 if H > 1 else 0.0
    bw = min(1.1, (W3 - sp * (H - 1)) / H)
    left = x3 + (W3 - (bw * H + sp * (H - 1))) / 2
    for h in range(H):
        x = left + h * (bw + sp)
        patches.append(
            _box(ax, x, 0.0, bw, Ht, head_color(h), gid=f"head {h}", lw=1.4, label="transpose")
        )
        _row_lines(ax, [(x, 0.0, bw, Ht)], T)
        _label(
            ax,
            x + bw / 2,
            Ht + 0.1,
            _("head {h}").format(h=h) if bw >= 0.6 else str(h),
            size=TICK_SIZE,
            va="bottom",
        )
    shape(
        x3 + W3 / 2,
        "(B, H, T, d_head)",
        (B, H, T, d_head),
        _("each head: its own ({T}, {d_head}) matrix,\nso Q Kᵀ is ({T}, {T}) per head").format(
            T=T, d_head=d_head
        ),
    )

    # 4) merge back: transpose(1, 2).reshape(B, T, D)
    arrow(x3 + W3, x4)
    header(x4 + W4 / 2, _("merge"))
    _label(ax, x4 + W4 / 2, Ht + 0.1, ".transpose(1, 2).reshape", size=TICK_SIZE, va="bottom")
    slices(x4, W4, "merged")
    shape(x4 + W4 / 2, "(B, T, D)", (B, T, D))
    return patches


def head_split(T: int, D: int, H: int, B: int = 1, ax=None) -> LabFigure:
    """The (B, T, D) tensor viewed as (B, T, H, d_head) (heads inside each token), moved
    to (B, H, T, d_head) (one (T, d_head) matrix per head) and merged back (notebook 06;
    the explorer redraws it when its sliders move). See ``draw_head_split``.

    Head h is drawn in ``head_color(h)`` at every stage. ``D`` must be divisible by
    ``H`` (1 <= H <= 8, D <= 128). With ``ax`` the diagram is drawn into that axes
    (cleared first) and its figure is returned.
    """
    own = ax is None
    if own:
        fig = LabFigure(figsize=(11.4, 5.0), dpi=DPI)
        ax = fig.add_axes((0.005, 0.0, 0.99, 0.92))
    fig = ax.figure
    draw_head_split(ax, T, D, H, B)
    d_head = D // H
    if H == 1:
        title = _("Splitting d_model = {D} into n_heads = {H}: one head of d_head = {d_head}")
    else:
        title = _("Splitting d_model = {D} into n_heads = {H}: {H} heads of d_head = {d_head}")
    _title(fig, ax, title.format(D=D, H=H, d_head=d_head), own)
    return fig


_PNGS = LRUDict(128)  # (T, D, H, B, dpi, language) -> the PNG bytes of head_split


def head_split_png(T: int, D: int, H: int, B: int = 1, dpi: int = DPI) -> bytes:
    """``head_split`` as PNG bytes at ``dpi``, cached per size, dpi and language (an
    ``LRUDict``: the 128 used last). The explorer shows its head-split diagram from here
    (``explorer.picture.Picture.diagram``, at its render dpi): a setting visited before costs
    nothing the second time (drawing the text is the slow part). ``cached(T, D, H, B, dpi)``
    says whether a call would be answered from the cache; ``cache_info`` and ``cache_clear``
    are the cache's."""
    return _PNGS.remember(_png_key(T, D, H, B, dpi), lambda: _draw_png(T, D, H, B, dpi))


def _png_key(T: int, D: int, H: int, B: int, dpi: int) -> tuple:
    return (T, D, H, B, dpi, get_language())  # drawn in the language in use


def _draw_png(T: int, D: int, H: int, B: int, dpi: int) -> bytes:
    figure = head_split(T, D, H, B)
    if dpi != figure.dpi:
        figure.set_dpi(dpi)
    return figure._repr_png_()


head_split_png.cached = lambda T, D, H, B=1, dpi=DPI: _png_key(T, D, H, B, dpi) in _PNGS
head_split_png.cache_info = _PNGS.info
head_split_png.cache_clear = _PNGS.clear
