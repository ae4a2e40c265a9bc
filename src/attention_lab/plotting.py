"""Every picture in the chapter: attention heatmaps per head, loss curves, a text heatmap.

``plot_heads`` (notebooks 04-08) draws one heatmap per head with a ``HeadGrid``
(headgrid.py: built once, updated in place, fast enough for the explorer). All panels
share one 0..1 colour scale, white (0) to dark blue (1) on a square-root scale so small
weights stay visible; positions the mask blocked are grey and striped, with a legend
entry "blocked" (pass ``mask=`` or ``causal=True``; it is never guessed from zeros, but
causal-looking weights drawn without a mask warn). Rows and columns are labelled
``position:token``. Colours, font sizes
and dpi come from ``palette``. The drawn diagrams are in ``diagrams``.

Heatmap cells are painted by numpy (``_CellImage``, an ``AxesImage`` without matplotlib's
resampling) and labels are rasterised once and reused (``LabCanvas``): the figures draw fast
enough for the explorer's sliders.

Figures have a white background, so they read the same in a light and a dark Jupyter
theme. They are ``LabFigure`` objects -- matplotlib figures not registered with pyplot:
a cell that ends with one shows it once as a PNG, and there is nothing to close.
"""

from __future__ import annotations

import math
import struct
import warnings
import zlib
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib import rcParams
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg, get_hinting_flag
from matplotlib.figure import Figure
from matplotlib.font_manager import fontManager
from matplotlib.image import AxesImage
from matplotlib.transforms import IdentityTransform

from .palette import DPI, LABEL_SIZE, LINE_COLORS, TEXT_COLOR, TICK_SIZE, TITLE_SIZE

SHADES = " .:-=+*#%@"  # text heatmap, from weight 0 to weight 1


# -- fast text ------------------------------------------------------------------------------
#
# Text is most of what a figure of this chapter costs to draw: matplotlib lays out and
# rasterises every label again on every draw, about 1-3 ms per label on these machines,
# and a diagram has 30-80 labels. The chapter draws the same few hundred strings over and
# over (indices, shapes, titles), so the renderer below rasterises a string once per font,
# size and dpi and afterwards stamps the kept bitmap. The bitmap is made the way
# matplotlib's own Agg renderer made it up to version 3.10 (one FreeType pass over the
# string, placed on whole pixels), so a cached and an uncached label look the same.
# Mathtext ($...$) and anything unusual go through matplotlib's normal path.

_TEXT_CACHE_LIMIT = 4096
_text_bitmaps: dict = {}  # key -> (bitmap, x offset, y offset, descent), in pixels
_text_extents: dict = {}  # key -> (width, height, descent), in pixels


_GENERIC_FAMILIES = ("serif", "sans-serif", "cursive", "fantasy", "monospace")
_font_files: dict = {}  # font properties (+ the rcParams they resolve through) -> files


def _text_key(s: str, prop, dpi: float, *extra):
    families = tuple(prop.get_family())
    props = (
        families,
        prop.get_style(),
        prop.get_variant(),
        prop.get_weight(),
        prop.get_stretch(),
        prop.get_file(),
        tuple(tuple(rcParams[f"font.{f}"]) for f in families if f in _GENERIC_FAMILIES),
    )
    fonts = _font_files.get(props)
    if fonts is None:  # matplotlib's own lookup costs ~0.1 ms a call: once per font
        fonts = _remember(_font_files, props, tuple(fontManager._find_fonts_by_props(prop)))
    return (s, fonts, prop.get_size_in_points(), dpi, *extra)


def _remember(cache: dict, key, value):
    if len(cache) >= _TEXT_CACHE_LIMIT:
        cache.clear()
    cache[key] = value
    return value


class _CachedTextRenderer(RendererAgg):
    """Matplotlib's Agg renderer, with each string's bitmap and size kept for reuse."""

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if ismath or (mtext is not None and _has_font_features(mtext)):
            return super().draw_text(gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)
        antialiased = bool(gc.get_antialiased())
        key = _text_key(s, prop, self.dpi, antialiased)
        entry = _text_bitmaps.get(key)
        if entry is None:
            font = self._prepare_font(prop)
            font.set_text(s, 0, flags=get_hinting_flag())
            font.draw_glyphs_to_bitmap(antialiased=antialiased)
            xo, yo = font.get_bitmap_offset()
            bitmap = np.array(font.get_image(), dtype=np.uint8)
            entry = _remember(
                _text_bitmaps, key, (bitmap, xo / 64.0, yo / 64.0, font.get_descent() / 64.0)
            )
        bitmap, xo, yo, d = entry
        radians = math.radians(angle)
        x = round(x + xo + d * math.sin(radians))
        y = round(y + yo + d * math.cos(radians))
        self._renderer.draw_text_image(bitmap, x, y + 1, angle, gc)

    def _get_font_height_metrics(self, prop):
        """(ascent, descent, line gap) of a font in pixels: matplotlib >= 3.11 asks the
        renderer for these once per label and otherwise reads the font's tables again."""
        key = _text_key("", prop, self.dpi, "height metrics")
        metrics = _text_extents.get(key)
        if metrics is None:
            metrics = (None, None, None)
            font = self._prepare_font(prop)
            scale = prop.get_size_in_points() * self.dpi / 72 / font.units_per_EM
            for table_name, gap, ascent, descent in (
                ("OS/2", "sTypoLineGap", "sTypoAscender", "sTypoDescender"),
                ("hhea", "lineGap", "ascent", "descent"),
            ):
                table = font.get_sfnt_table(table_name)
                if table is not None:
                    metrics = (table[ascent] * scale, -table[descent] * scale, table[gap] * scale)
                    break
            _remember(_text_extents, key, metrics)
        return metrics

    def get_text_width_height_descent(self, s, prop, ismath):
        if ismath:
            return super().get_text_width_height_descent(s, prop, ismath)
        key = _text_key(s, prop, self.dpi)
        extents = _text_extents.get(key)
        if extents is None:
            extents = _remember(
                _text_extents, key, super().get_text_width_height_descent(s, prop, ismath)
            )
        return extents


def _has_font_features(mtext) -> bool:
    """True for a Text that asks for OpenType features or a language (matplotlib >= 3.11)."""
    features = getattr(mtext, "get_fontfeatures", None)
    language = getattr(mtext, "get_language", None)
    return bool((features and features()) or (language and language()))


class LabCanvas(FigureCanvasAgg):
    """The Agg canvas with the string-caching renderer above."""

    def get_renderer(self, *args, **kwargs):
        w, h = self.get_width_height(physical=True)
        key = w, h, self.figure.dpi
        if self._lastKey != key:
            self.renderer = _CachedTextRenderer(w, h, self.figure.dpi)
            self._lastKey = key
        return self.renderer


class LabFigure(Figure):
    """A matplotlib Figure that Jupyter shows as a PNG when it ends a cell.

    It is not registered with pyplot, so it is never shown twice and never needs closing.
    It draws with ``LabCanvas`` (labels rasterised once, then reused) and encodes its PNG
    with ``png_bytes``.
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("facecolor", "white")
        super().__init__(*args, **kwargs)
        LabCanvas(self)

    def _repr_png_(self) -> bytes:
        self.canvas.draw()
        return png_bytes(np.asarray(self.canvas.buffer_rgba()))


def _as_numpy(weights) -> np.ndarray:
    if hasattr(weights, "detach"):
        weights = weights.detach().float().cpu().numpy()
    return np.asarray(weights, dtype=float)


def _as_heads(weights) -> np.ndarray:
    """Accept (T, T), (H, T, T) or (1, H, T, T); return (H, T, T)."""
    w = _as_numpy(weights)
    if w.ndim == 4:
        if w.shape[0] != 1:
            raise ValueError(
                f"weights have shape {w.shape}: pick one sequence first, e.g. weights[0]"
            )
        w = w[0]
    if w.ndim == 2:
        w = w[None]
    if w.ndim != 3 or w.shape[-1] != w.shape[-2]:
        raise ValueError(
            f"weights have shape {w.shape}; expected (T, T), (H, T, T) or (1, H, T, T)"
        )
    return w


def png_bytes(pixels: np.ndarray) -> bytes:
    """Encode (height, width, 4) RGBA or (height, width, 3) RGB uint8 pixels as a PNG, fast.

    Made for figures: every row is stored as its difference to the row above (PNG's "Up"
    filter), which turns the many repeated rows of flat colour into zeros that zlib's
    fastest level packs small. A canvas's RGBA buffer is encoded as it is (no copy into
    RGB, which costs more than the alpha bytes, all 255 and all-zero differences, cost
    zlib). About three times as fast as Pillow's fastest setting here, at a similar size;
    the pixels are exact (it is lossless).
    """
    pixels = np.ascontiguousarray(pixels, dtype=np.uint8)  # no copy for a canvas buffer
    h, w, channels = pixels.shape
    if channels not in (3, 4):
        raise ValueError(f"pixels have shape {pixels.shape}; expected (height, width, 3 or 4)")
    rows = pixels.reshape(h, w * channels)
    raw = np.empty((h, w * channels + 1), dtype=np.uint8)  # filter byte, then the row
    raw[:, 0] = 2  # "Up"
    raw[0, 1:] = rows[0]
    np.subtract(rows[1:], rows[:-1], out=raw[1:, 1:])  # wraps modulo 256, as PNG wants

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    colour_type = 6 if channels == 4 else 2  # 8-bit RGBA or RGB, no interlace
    header = struct.pack(">IIBBBBB", w, h, 8, colour_type, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 1))
        + chunk(b"IEND", b"")
    )


# -- heatmap cells painted by numpy -------------------------------------------------------


class _CellImage(AxesImage):
    """An ``imshow`` image (nearest neighbour, axis-aligned) painted by numpy: each screen
    pixel takes the colour of the cell its centre falls in -- what matplotlib's own
    resampling gives, for a fraction of the work. A full draw and the explorer's fast
    redraw both paint through here, so they give the same pixels."""

    def make_image(self, renderer, magnification=1.0, unsampled=False):
        trans = self.get_transform()
        if unsampled or magnification != 1.0 or not trans.is_affine or self.origin != "upper":
            return super().make_image(renderer, magnification, unsampled)
        data = self.get_array()
        n_rows, n_cols = data.shape[:2]
        left, right, bottom, top = self.get_extent()
        (x_left, y_top), (x_right, y_bottom) = trans.transform([(left, top), (right, bottom)])
        if abs(trans.transform((left, bottom))[0] - x_left) > 1e-6:  # rotated: not ours
            return super().make_image(renderer, magnification, unsampled)
        clip = self.get_clip_box() or self.axes.bbox
        lo_x = max(min(x_left, x_right), clip.x0, 0.0)
        hi_x = min(max(x_left, x_right), clip.x1, renderer.width)
        lo_y = max(min(y_top, y_bottom), clip.y0, 0.0)
        hi_y = min(max(y_top, y_bottom), clip.y1, renderer.height)
        px = np.arange(math.ceil(lo_x - 0.5), math.floor(hi_x - 0.5) + 1)  # pixel columns
        py = np.arange(math.ceil(lo_y - 0.5), math.floor(hi_y - 0.5) + 1)  # rows, bottom first
        if px.size == 0 or py.size == 0:
            return None, 0, 0, None
        # a pixel whose centre lies exactly on a cell edge goes to the earlier cell, as in
        # matplotlib's resampler (hence the -1e-6)
        cols = np.floor((px + 0.5 - x_left) / (x_right - x_left) * n_cols - 1e-6).astype(int)
        rows = np.floor((py + 0.5 - y_top) / (y_bottom - y_top) * n_rows - 1e-6).astype(int)
        rgba = self.to_rgba(data, bytes=True, norm=True)  # (n_rows, n_cols, 4) uint8
        image = _repeat(
            _repeat(rgba, np.clip(rows, 0, n_rows - 1), 0), np.clip(cols, 0, n_cols - 1), 1
        )
        return image, int(px[0]), int(py[0]), IdentityTransform()  # Agg: row 0 at the bottom


def _repeat(a: np.ndarray, index: np.ndarray, axis: int) -> np.ndarray:
    """``a.take(index, axis)`` for a monotonic ``index`` (runs of one cell), done with
    ``np.repeat``: about 15 times faster than fancy indexing on a panel."""
    lo, hi = int(index.min()), int(index.max())
    part = a.take(np.arange(lo, hi + 1), axis=axis)
    counts = np.bincount(index - lo, minlength=hi - lo + 1)
    if index[0] > index[-1]:  # decreasing: the cells in reverse order
        part, counts = np.flip(part, axis), counts[::-1]
    return np.repeat(part, counts, axis=axis)


def _cell_image(ax, data, **kwargs) -> _CellImage:
    """``ax.imshow(data, interpolation="nearest", **kwargs)``, as a ``_CellImage``."""
    image = _CellImage(ax, interpolation="nearest", **kwargs)
    image.set_data(data)
    ax.add_image(image)
    image.set_extent(kwargs.get("extent") or image.get_extent())
    ax.set_aspect("equal")
    return image


def plot_heads(
    weights,
    tokens: Sequence[str] | None = None,
    titles: Sequence[str] | None = None,
    suptitle: str = "",
    ncols: int | None = None,
    panel_size: float = 2.3,
    mask=None,
    hatch: bool = True,
    *,
    causal: bool = False,
    task: str | None = None,
    values: bool = False,
) -> Figure:
    """Draw attention weights, one heatmap per head, on one shared 0..1 colour scale.

    ``weights`` is (T, T), (H, T, T) or (1, H, T, T) -- a tensor or an array.
    Row i of a panel is query position i; column j is key position j.

    ``tokens``: the T tokens (strings, ids or a 1-D tensor); every row and column is
    labelled ``position:token`` (``3:40``), so a repeated token is never ambiguous.
    ``task="repeat"`` (or any of ``tasks.TASKS``) names the ids as that task does
    (``6:SEP``, ``2:c=4``); labels that already start with their position are kept.

    ``mask`` is the boolean mask the weights were computed with, True = blocked
    ((T, T) or one per head); blocked cells are drawn grey and striped, unlike any
    weight (``hatch=False``: grey only). ``None`` (the default) means nothing was blocked.
    ``causal=True`` is short for ``mask=causal_mask(T)``. Weights that are exactly 0
    everywhere above the diagonal (a causal head's) with no mask draw a
    ``CausalWithoutMaskWarning``: their blocked cells would look like weights of 0.

    ``values=True`` also writes each weight in its cell (two decimals, 9 pt; panels grow
    to fit, so keep it for T <= 8): the exact numbers beside the colour scale.

    Example (notebook 08): ``plot_heads(w_rep, tokens=x_rep[0], task="repeat", causal=True)``
    """
    from .headgrid import HeadGrid

    w = _as_heads(weights)
    T = w.shape[-1]
    if causal:
        if mask is not None:
            raise ValueError("pass either mask= or causal=True, not both")
        from .masks import causal_mask

        mask = causal_mask(T)
    elif mask is None and looks_causal(w):
        warnings.warn(
            f"these weights are exactly 0 everywhere above the diagonal, like a causal "
            f"head's, but no mask was given, so the blocked cells are drawn as weights of 0; "
            f"pass mask=causal_mask({T}) (or causal=True) to draw them as blocked",
            CausalWithoutMaskWarning,
            stacklevel=2,
        )
    if values:  # room for "0.25" at 9 pt in every cell
        panel_size = max(panel_size, T * 0.36)
    grid = HeadGrid(w.shape[0], T, tokens, ncols, panel_size, dpi=DPI, hatch=hatch, task=task)
    fig = grid.update(w, titles, suptitle, mask=mask)
    if values:
        _write_values(grid, w)
    return fig


def _write_values(grid, w: np.ndarray) -> None:
    """Write each weight that was not blocked into its cell, black or white on its colour."""
    from .palette import CMAP, text_color_on, weight_norm

    norm = weight_norm()
    for i, ax in enumerate(grid.axes):
        blocked = grid.mask[i] if grid.mask is not None else np.zeros(w[i].shape, bool)
        for (row, col), value in np.ndenumerate(w[i]):
            if blocked[row, col]:
                continue
            ax.text(
                col,
                row,
                f"{value:.2f}",
                ha="center",
                va="center",
                fontsize=9,
                color=text_color_on(CMAP(norm(value))),
                gid="weight value",
            )


class CausalWithoutMaskWarning(UserWarning):
    """Causal-looking weights were drawn without the mask that blocked them."""


def looks_causal(weights) -> bool:
    """True when every panel of ``weights`` ((T, T) or (H, T, T)) is exactly 0 above the
    diagonal and T > 1: the weights of a causal head, drawn best with ``mask=``."""
    w = _as_heads(weights)
    T = w.shape[-1]
    if T < 2:
        return False
    upper = np.triu(np.ones((T, T), bool), 1)
    return bool(np.all(w[:, upper] == 0))


def __getattr__(name: str):
    # ``from attention_lab.plotting import HeadGrid`` keeps working; it lives in headgrid.py
    if name == "HeadGrid":
        from .headgrid import HeadGrid

        return HeadGrid
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _line_colors(n: int) -> list[str]:
    return [LINE_COLORS[i % len(LINE_COLORS)] for i in range(n)]


def _label_axes(ax, xlabel: str, ylabel: str, title: str) -> None:
    ax.set_xlabel(xlabel, color=TEXT_COLOR, fontsize=LABEL_SIZE)
    ax.set_ylabel(ylabel, color=TEXT_COLOR, fontsize=LABEL_SIZE)
    ax.set_title(title, color=TEXT_COLOR, fontsize=TITLE_SIZE)
    ax.tick_params(colors=TEXT_COLOR, labelsize=TICK_SIZE)
    ax.grid(alpha=0.3)


def plot_loss(
    histories, chance: float | None = None, title: str = "training loss", logy: bool = True
) -> Figure:
    """Loss per optimiser step. ``histories`` is a TrainHistory, a list of floats, or a
    ``{label: history}`` mapping; ``chance`` draws the loss of a uniform guess, ln(vocab)."""
    if not isinstance(histories, Mapping):
        histories = {"": histories}
    fig = LabFigure(figsize=(7, 3.8), dpi=DPI)
    ax = fig.subplots()
    ax.set_facecolor("white")
    colours = _line_colors(len(histories))
    for (label, history), colour in zip(histories.items(), colours):
        losses = getattr(history, "step_losses", history)
        ax.plot(range(1, len(losses) + 1), losses, label=label or None, color=colour, lw=1.5)
    if chance is not None:
        ax.axhline(chance, ls="--", color="grey", lw=1, label=f"chance = {chance:.2f}")
    if logy:
        ax.set_yscale("log")
    _label_axes(ax, "optimiser step", "cross-entropy (nats)", title)
    if ax.get_legend_handles_labels()[1]:
        ax.legend(fontsize=TICK_SIZE)
    fig.tight_layout()
    return fig


def text_heatmap(weights, tokens: Sequence[str] | None = None) -> str:
    """A (T, T) weight matrix as text: one character per weight, ' ' = 0 up to '@' = 1."""
    w = _as_numpy(weights)
    if w.ndim != 2:
        raise ValueError(f"text_heatmap takes one (T, T) matrix, got shape {w.shape}")
    T = w.shape[0]
    tokens = [str(t) for t in (tokens if tokens is not None else range(T))]
    width = max(map(len, tokens))
    levels = np.clip(np.rint(w * (len(SHADES) - 1)), 0, len(SHADES) - 1).astype(int)
    lines = [" " * width + " |" + "".join(t[-1] for t in tokens)]
    for token, row in zip(tokens, levels):
        lines.append(token.rjust(width) + " |" + "".join(SHADES[i] for i in row))
    return "\n".join(lines)


def plot_lines(
    x,
    ys: Mapping[str, Sequence[float]],
    xlabel: str,
    ylabel: str,
    title: str = "",
    logx: bool = False,
    logy: bool = False,
    markers: bool = True,
    reference: Mapping[str, Sequence[float]] | None = None,
    connect: bool = True,
) -> LabFigure:
    """One labelled line per entry of ``ys`` against ``x``: for measured curves
    (variance against d_head, time against T, ...). ``reference`` curves (a prediction,
    a fitted slope) are drawn dashed and grey, under the measurements; ``connect=False``
    draws the measurements as dots only, so a reference line under them stays visible."""
    fig = LabFigure(figsize=(7, 4.0), dpi=DPI)
    ax = fig.subplots()
    ax.set_facecolor("white")
    for label, values in (reference or {}).items():
        ax.plot(list(x), list(values), "--", color="grey", lw=1.2, label=label)
    colours = _line_colors(len(ys))
    for (label, values), colour in zip(ys.items(), colours):
        ax.plot(
            list(x),
            list(values),
            label=label,
            color=colour,
            lw=1.5 if connect else 0,
            marker="o" if markers or not connect else None,
            ms=4,
        )
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    _label_axes(ax, xlabel, ylabel, title)
    ax.legend(fontsize=TICK_SIZE)
    fig.tight_layout()
    return fig
