"""The figures' fast path: the only module that touches matplotlib's internals, guarded.

Two things make the chapter's figures fast enough for the explorer's sliders (``make bench``
prints both paths side by side):

* ``LabCanvas``: Agg with each label rasterised once per string, font, size and dpi and
  then stamped (text is most of a diagram's cost). It uses matplotlib internals:
  ``RendererAgg._prepare_font``, the C renderer's ``draw_text_image``,
  ``FontManager._find_fonts_by_props``, ``backend_agg.get_hinting_flag``, FT2Font's
  string methods, and answers matplotlib 3.11's ``_get_font_height_metrics`` hook.
* ``cells.CellImage``: an ``imshow`` image painted by numpy (public API only: it overrides
  ``AxesImage.make_image``; used only when the probe below shows it paints what matplotlib
  paints).

Nothing here is used before ``fast_path()`` has checked, once per process, that every
internal above exists and that a tiny probe figure drawn both ways agrees with plain Agg
(the same text boxes to 0.01 px, the same image pixels, the same ink in the same place,
nothing drawn anywhere else). On a missing attribute, any exception or a mismatch the
figures use plain ``FigureCanvasAgg`` and ``AxesImage`` from then on and ``status()`` says
why (also as a ``RuntimeWarning``). ``ATTENTION_LAB_PLAIN_AGG=1`` or ``use_plain_agg()``
forces the plain path.
"""

from __future__ import annotations

import math
import os
import warnings

import numpy as np
from matplotlib import rcParams
from matplotlib.backends import backend_agg
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties, fontManager
from matplotlib.image import AxesImage

from .cache import LRUDict
from .cells import CellImage

ENV_VAR = "ATTENTION_LAB_PLAIN_AGG"
_state: dict = {"fast": None, "reason": "not checked yet"}  # fast: None = not decided
_bitmaps = LRUDict(4096)  # (string, fonts, size, dpi, antialiased) -> (bitmap, x, y, descent)
_extents = LRUDict(4096)  # (string, fonts, size, dpi) -> (width, height, descent) in pixels
_font_files = LRUDict(256)  # font properties (+ the rcParams they resolve through) -> files
_GENERIC = ("serif", "sans-serif", "cursive", "fantasy", "monospace")
_FONT_METHODS = ("set_text", "draw_glyphs_to_bitmap", "get_bitmap_offset", "get_image")
_FONT_METHODS += ("get_descent", "get_sfnt_table", "units_per_EM")


def fast_path() -> bool:
    """Whether figures draw on the fast path; decided (and remembered) on the first call."""
    if _state["fast"] is None:
        if os.environ.get(ENV_VAR, "") not in ("", "0"):
            _decide(False, f"{ENV_VAR} is set")
        else:
            try:
                problem = _missing_internals() or _probe_mismatch()
            except Exception as error:  # noqa: BLE001 -- any failure means: plain Agg
                problem = f"the probe figure failed: {type(error).__name__}: {error}"
            if problem:
                warnings.warn(
                    f"figures fall back to plain Agg: {problem}", RuntimeWarning, stacklevel=3
                )
            _decide(not problem, problem or "internals found, probe figure matches plain Agg")
    return _state["fast"]


def use_plain_agg(plain: bool = True) -> None:
    """Force plain Agg (``True``) for figures made from now on, or check again (``False``)."""
    _state.update(fast=False if plain else None, reason="use_plain_agg()" if plain else "")
    for cache in (_bitmaps, _extents, _font_files):
        cache.clear()


def status() -> str:
    """``"fast"`` or ``"plain Agg: <why>"``."""
    fast = fast_path()
    return "fast" if fast else f"plain Agg: {_state['reason']}"


def canvas_class() -> type:
    return LabCanvas if fast_path() else FigureCanvasAgg


def image_class() -> type:
    return CellImage if fast_path() else AxesImage


def _decide(fast: bool, reason: str) -> None:
    _state.update(fast=fast, reason=reason)


def _give_up(error: Exception) -> None:
    """A fast draw failed after the check passed: this call is drawn by plain Agg, and
    figures made from now on use plain Agg throughout."""
    if _state["fast"]:
        warnings.warn(f"figures fall back to plain Agg: {error!r}", RuntimeWarning, stacklevel=3)
        _decide(False, f"a fast draw failed: {type(error).__name__}: {error}")


def _missing_internals() -> str:
    """The first internal the fast path needs that this matplotlib lacks, or ''."""
    renderer = RendererAgg(4, 4, 72)
    wanted = [
        (backend_agg, "backend_agg", "get_hinting_flag"),
        (renderer, "RendererAgg", "_prepare_font"),
        (getattr(renderer, "_renderer", None), "RendererAgg._renderer", "draw_text_image"),
        (fontManager, "FontManager", "_find_fonts_by_props"),
    ]
    for owner, where, name in wanted:
        if not callable(getattr(owner, name, None)):
            return f"{where}.{name} is missing"
    font = renderer._prepare_font(FontProperties(size=10))
    for name in _FONT_METHODS:
        if not hasattr(font, name):
            return f"FT2Font.{name} is missing"
    return ""


# -- the string-caching renderer ------------------------------------------------------------


def _key(s: str, prop, dpi: float, *extra):
    families = tuple(prop.get_family())
    props = (families, prop.get_style(), prop.get_variant(), prop.get_weight())
    props += (prop.get_stretch(), prop.get_file())
    props += tuple(tuple(rcParams[f"font.{f}"]) for f in families if f in _GENERIC)
    fonts = _font_files.remember(  # matplotlib's own lookup: ~0.1 ms a call, once per font
        props, lambda: tuple(fontManager._find_fonts_by_props(prop))
    )
    return (s, fonts, prop.get_size_in_points(), dpi, *extra)


class _CachedTextRenderer(RendererAgg):
    """Agg, with each string's bitmap (one FreeType pass, placed on whole pixels, as
    matplotlib up to 3.10 drew it) and size kept for reuse. Mathtext and texts asking for
    OpenType features or a language go through matplotlib's own path."""

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if ismath or (mtext is not None and _has_font_features(mtext)):
            return super().draw_text(gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)
        antialiased = bool(gc.get_antialiased())
        try:
            bitmap, xo, yo, d = _bitmaps.remember(
                _key(s, prop, self.dpi, antialiased), lambda: self._rasterise(s, prop, antialiased)
            )
            radians = math.radians(angle)
            x_px = round(x + xo + d * math.sin(radians))
            y_px = round(y + yo + d * math.cos(radians))
            self._renderer.draw_text_image(bitmap, x_px, y_px + 1, angle, gc)
        except Exception as error:  # noqa: BLE001 -- matplotlib's own path draws it instead
            _give_up(error)
            super().draw_text(gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)

    def _rasterise(self, s, prop, antialiased):
        font = self._prepare_font(prop)
        font.set_text(s, 0, flags=backend_agg.get_hinting_flag())
        font.draw_glyphs_to_bitmap(antialiased=antialiased)
        xo, yo = font.get_bitmap_offset()
        bitmap = np.array(font.get_image(), dtype=np.uint8)
        return bitmap, xo / 64.0, yo / 64.0, font.get_descent() / 64.0

    def _get_font_height_metrics(self, prop):
        """(ascent, descent, line gap) in pixels: matplotlib >= 3.11 asks the renderer for
        these once per label (older versions never call this)."""
        try:
            key = _key("", prop, self.dpi, "height")
            return _extents.remember(key, lambda: self._metrics(prop))
        except Exception as error:  # noqa: BLE001 -- (None, ...): matplotlib measures itself
            _give_up(error)
            return None, None, None

    def _metrics(self, prop):
        font = self._prepare_font(prop)
        scale = prop.get_size_in_points() * self.dpi / 72 / font.units_per_EM
        for name, gap, ascent, descent in (
            ("OS/2", "sTypoLineGap", "sTypoAscender", "sTypoDescender"),
            ("hhea", "lineGap", "ascent", "descent"),
        ):
            table = font.get_sfnt_table(name)
            if table is not None:
                return table[ascent] * scale, -table[descent] * scale, table[gap] * scale
        return None, None, None

    def get_text_width_height_descent(self, s, prop, ismath):
        if ismath:
            return super().get_text_width_height_descent(s, prop, ismath)
        measure = super().get_text_width_height_descent
        try:
            return _extents.remember(_key(s, prop, self.dpi), lambda: measure(s, prop, ismath))
        except Exception as error:  # noqa: BLE001 -- matplotlib's own measure instead
            _give_up(error)
            return measure(s, prop, ismath)


def _has_font_features(mtext) -> bool:
    """True for a Text that asks for OpenType features or a language (matplotlib >= 3.11)."""
    features = getattr(mtext, "get_fontfeatures", None)
    language = getattr(mtext, "get_language", None)
    return bool((features and features()) or (language and language()))


class LabCanvas(FigureCanvasAgg):
    """The Agg canvas with the string-caching renderer (one renderer per size and dpi)."""

    _lab_key = None

    def get_renderer(self, *args, **kwargs):
        w, h = self.get_width_height(physical=True)
        key = w, h, self.figure.dpi
        if self._lab_key != key:
            self.renderer = _CachedTextRenderer(w, h, self.figure.dpi)
            self._lab_key = key
        return self.renderer


# -- the probe: a tiny figure drawn on both paths must agree ------------------------------


def _probe_figure(fast: bool):
    fig = Figure(figsize=(1.6, 0.8), dpi=100, facecolor="white")
    canvas = (LabCanvas if fast else FigureCanvasAgg)(fig)
    ax = fig.add_axes((0.05, 0.1, 0.25, 0.5))  # 40 x 40 pixels from (8, 8): no cell edge
    ax.set_axis_off()  # falls on a pixel centre, so both images must agree exactly
    image = (CellImage if fast else AxesImage)(ax, interpolation="nearest", cmap="Blues")
    image.set_data(np.arange(16.0).reshape(4, 4) / 15)
    ax.add_image(image)
    image.set_extent((-0.5, 3.5, 3.5, -0.5))
    texts = [
        fig.text(0.38, 0.72, "scores 3:40", fontsize=10),
        fig.text(0.38, 0.12, "two\nlines", fontsize=9, color="#CC6677", weight="bold"),
        fig.text(0.9, 0.1, "query", fontsize=8, rotation=90),
    ]
    canvas.draw()
    pixels = np.asarray(canvas.buffer_rgba()).copy()
    renderer = canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in texts]
    if fast:  # drawn again from the cache: the same pixels
        canvas.draw()
        if not np.array_equal(pixels, np.asarray(canvas.buffer_rgba())):
            raise AssertionError("a second draw from the text cache gave other pixels")
    return pixels, boxes, ax.bbox


def _probe_mismatch() -> str:
    """How the probe figure drawn on the fast path differs from plain Agg, or ''."""
    ours, our_boxes, cells = _probe_figure(fast=True)
    theirs, boxes, _ = _probe_figure(fast=False)
    if ours.shape != theirs.shape:
        return f"the probe is {ours.shape} pixels, plain Agg's {theirs.shape}"
    height = ours.shape[0]
    free = np.ones(ours.shape[:2], bool)  # pixels outside every label: must be equal
    for ours_box, box in zip(our_boxes, boxes):
        if not np.allclose(ours_box.extents, box.extents, atol=0.01):
            return f"a label's box is {ours_box.extents}, plain Agg's {box.extents}"
        x0, y0, x1, y1 = box.extents
        rows = slice(max(0, int(height - y1) - 3), int(height - y0) + 4)
        cols = slice(max(0, int(x0) - 3), int(x1) + 4)
        free[rows, cols] = False
        problem = _ink_mismatch(ours[rows, cols, :3], theirs[rows, cols, :3])
        if problem:
            return problem
    top = int(height - cells.y1)
    inside = (slice(top, top + int(cells.height)), slice(int(cells.x0), int(cells.x1)))
    if not np.array_equal(ours[inside], theirs[inside]):
        return "the numpy-painted cells differ from matplotlib's image"
    if not np.array_equal(ours[free], theirs[free]):
        return f"{int((ours[free] != theirs[free]).any(-1).sum())} pixels differ outside labels"
    return ""


def _ink_mismatch(ours: np.ndarray, theirs: np.ndarray) -> str:
    """'' when two renderings of one label put about the same ink (the sum of how dark each
    pixel is: antialiasing may spread it differently), in the same place, in the same colour."""
    found = []
    for rgb in (ours, theirs):
        darkness = 255 - rgb.astype(int).min(-1)  # (h, w): 0 on the white background
        ink = darkness > 60
        if not ink.any():
            return "a label drew no ink"
        rows, cols = np.nonzero(ink)
        box = np.array([rows.min(), rows.max(), cols.min(), cols.max()])
        shade = (255 - rgb[ink].astype(float)).mean(0)  # the colour's hue, not how bold
        found.append((darkness.sum(), box, shade / shade.max()))
    (mass_ours, box_ours, colour_ours), (mass, box, colour) = found
    if abs(mass_ours - mass) > 0.05 * mass or np.abs(box_ours - box).max() > 2:
        return f"a label's ink differs: {mass_ours} in {box_ours}, plain Agg {mass} in {box}"
    if np.abs(colour_ours - colour).max() > 0.15:
        return f"a label's colour differs: {colour_ours.round(2)} against {colour.round(2)}"
    return ""
