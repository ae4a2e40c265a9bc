"""Repainting a figure in place (matplotlib "blitting"), for ``HeadGrid`` and the explorer.

``Blitted.render`` draws everything that never changes (axes, token labels, colour bar,
legend) once, keeps that picture, and afterwards repaints only the panels' changing artists
and the titles on top of it. Public canvas API only (``copy_from_bbox``, ``restore_region``,
``draw_artist``), so it works on the fast canvas and on plain ``FigureCanvasAgg`` alike.
"""

from __future__ import annotations

import numpy as np
from matplotlib.transforms import Bbox

from .cache import LRUDict
from .canvas import png_bytes


class Blitted:
    """Mixin: ``self.figure`` and ``self.axes`` (the panels), plus ``_texts()`` (the titles
    that change) and ``_panel_artists(ax)`` (what changes in a panel, drawn in this order)."""

    figure = None
    axes: list = []

    def _start_blitting(self) -> None:
        self._background = None  # the static part of the picture, once drawn
        self._renderer = None  # the renderer the background belongs to
        self._painted = None  # the title texts the pixels show now
        self._drawing = False  # True while _draw_background draws
        self._title_pixels = LRUDict(256)  # (title number, text) -> its pixels and box
        # a full draw by anyone else (savefig, a notebook showing the figure) repaints the
        # pixels the background bookkeeping relies on: start again from a fresh background
        self.figure.canvas.mpl_connect("draw_event", self._forget_background)

    def _texts(self) -> list:
        raise NotImplementedError

    def _panel_artists(self, ax) -> list:
        raise NotImplementedError

    def _changing_artists(self) -> list:
        return [artist for ax in self.axes for artist in self._panel_artists(ax)]

    def _forget_background(self, event=None) -> None:
        if not self._drawing:
            self._background = None

    def _draw_background(self) -> None:
        """Draw the figure without the changing artists and titles; keep the pixels."""
        texts = self._texts()
        saved = [t.get_text() for t in texts]
        for t in texts:
            t.set_text("")
        changing = self._changing_artists()
        visible = [artist.get_visible() for artist in changing]
        for artist in changing:
            artist.set_visible(False)
        canvas = self.figure.canvas
        self._drawing = True
        try:
            canvas.draw()
        finally:
            self._drawing = False
        self._background = canvas.copy_from_bbox(self.figure.bbox)
        self._renderer = canvas.get_renderer()
        self._painted = [None] * len(texts)  # (text, pixel box) of each title on show
        self._title_pixels.clear()
        for artist, shown in zip(changing, visible):
            artist.set_visible(shown)
        for t, text in zip(texts, saved):
            t.set_text(text)

    def _restore(self, extents, pad: int = 3) -> None:
        """Copy the kept background back over a box given in display pixels (origin
        bottom left), ``pad`` pixels wider on each side."""
        x0, y0, x1, y1 = extents
        height = self.figure.bbox.height  # the buffer counts rows from the top
        box = (int(x0) - pad, int(height - y1) - pad, int(x1) + pad + 1, int(height - y0) + pad + 1)
        self.figure.canvas.restore_region(self._background, bbox=box, xy=(0, 0))

    def render(self) -> np.ndarray:
        """Paint the current state; return the pixels, (height, width, 4) uint8.

        The first call (and the first after the static picture changed) draws the figure
        without the changing artists and titles and keeps that picture. Every call then
        restores the kept pixels under each panel and paints its artists on top (the same
        pixels a full draw gives); a title is repainted only when its text changed, and a
        title shown before is copied from a cache of its pixels: drawing text is the slow part.
        """
        canvas = self.figure.canvas
        if self._background is None or canvas.get_renderer() is not self._renderer:
            self._draw_background()
        texts = self._texts()
        painted = self._painted
        changed = {
            i for i, t in enumerate(texts) if painted[i] is None or painted[i][0] != t.get_text()
        }
        for i in list(changed):  # a title whose old box touches another's: repaint both
            if painted[i] is not None:
                changed |= {j for j, p in enumerate(painted) if p and _touch(p[1], painted[i][1])}
        for i in changed:  # 1) wipe the titles that change
            if painted[i] is not None:
                self._restore(painted[i][1])
        for ax in self.axes:  # 2) the panels
            self._restore(ax.bbox.extents, pad=2)
            for artist in self._panel_artists(ax):
                if artist.get_visible():
                    ax.draw_artist(artist)
        for i in changed:  # 3) paint the new titles, from the cache when shown before
            t = texts[i]
            key = (i, t.get_text())
            kept = self._title_pixels.get(key)
            if kept is not None:
                region, extents = kept
                canvas.restore_region(region)
            else:
                if t.axes is not None:
                    t.axes.draw_artist(t)
                else:
                    self.figure.draw_artist(t)
                extents = t.get_window_extent().extents
                # keep the pixels only of a title that touches no other title
                if not any(p and j != i and _touch(p[1], extents) for j, p in enumerate(painted)):
                    x0, y0, x1, y1 = extents
                    box = Bbox.from_extents(x0 - 2, y0 - 2, x1 + 2, y1 + 2)
                    self._title_pixels[key] = (canvas.copy_from_bbox(box), extents)
            painted[i] = (t.get_text(), extents)
        return np.asarray(canvas.buffer_rgba())

    def to_png(self) -> bytes:
        """Render to PNG bytes (what a browser receives from the explorer)."""
        return png_bytes(self.render())


def _touch(a, b, pad: float = 4) -> bool:
    """Whether two (x0, y0, x1, y1) pixel boxes overlap once widened by ``pad``."""
    return a[0] - pad < b[2] and b[0] - pad < a[2] and a[1] - pad < b[3] and b[1] - pad < a[3]
