"""The explorer's picture: heatmaps painted in place, the head-split diagram, PNGs for the screen.

No ipywidgets here (matplotlib only), so the drawing is tested and timed on its own.

* The heatmaps are painted by a ``HeadGrid`` that is built once per (panel count, tokens)
  and then only updated in place; the PNG is encoded by ``plotting.png_bytes``, an encoder
  made for flat figures.
* The head-split diagram of notebook 06 is drawn once per (T, D, H) and kept.
* Rendered at ``PIXEL_RATIO`` times the pixels it is shown at (sharp on a projector and at
  150 % zoom), and shown at ``CSS_DPI`` CSS pixels per inch of the figure at most
  (``css_width``).
"""

from __future__ import annotations

import struct

import numpy as np

from .headgrid import HeadGrid
from .plotting import LabFigure, plot_heads, png_bytes

# The live picture: shown at up to CSS_DPI CSS pixels per inch of the figure, rendered with
# PIXEL_RATIO times as many pixels: 1.5 is one image pixel per screen pixel at 150 % zoom
# (sharp there and on a 1920 px projector), while an 8-head redraw stays inside the 300 ms
# a reader tolerates on a 2-core laptop (2.0 costs 1.8x the pixels to paint and encode).
CSS_DPI = 100
PIXEL_RATIO = 1.5
RENDER_DPI = round(CSS_DPI * PIXEL_RATIO)
DIAGRAM_CSS_DPI = 80  # the head-split diagram is shown a little smaller than the heatmaps
# Inches per heatmap panel (one head alone: 4). At 2.5 a row of a 16-token panel is 11.25 pt
# high, room for a 9 pt label on each of the 16 rows and columns (at 2.3 HeadGrid labelled
# only every other one); the 4-panel figure is 14.3 in, 1433 CSS px, inside a 1920 px screen.
PANEL_SIZE = 2.5
SINGLE_PANEL_SIZE = 4.0


def css_width(png: bytes, css_dpi: float, pixel_dpi: float = RENDER_DPI) -> str:
    """The CSS width (``"960px"``) at which ``png``, drawn at ``pixel_dpi``, shows at
    ``css_dpi`` CSS pixels per inch."""
    width = struct.unpack(">I", png[16:20])[0]  # from the PNG header
    return f"{round(width * css_dpi / pixel_dpi)}px"


class Picture:
    """The heatmap grids and head-split diagrams an explorer has drawn, kept for the next
    redraw. ``grids``: (panels, tokens) -> ``HeadGrid``; ``diagrams``: (T, D, H) -> PNG."""

    def __init__(self) -> None:
        self.grids: dict[tuple, HeadGrid] = {}
        self.diagrams: dict[tuple, bytes] = {}

    def grid(self, n_panels: int, tokens: list[str]) -> HeadGrid:
        """The grid for ``n_panels`` panels labelled ``tokens``, built on first use."""
        key = (n_panels, tuple(tokens))
        if key not in self.grids:
            if len(self.grids) > 32:  # many sequences typed: forget the oldest grids
                self.grids.pop(next(iter(self.grids)))
            panel_size = SINGLE_PANEL_SIZE if n_panels == 1 else PANEL_SIZE
            self.grids[key] = HeadGrid(
                n_panels, len(tokens), tokens, panel_size=panel_size, dpi=RENDER_DPI
            )
        return self.grids[key]

    def heatmaps(
        self, weights: np.ndarray, tokens: list[str], titles: list[str], suptitle: str, mask
    ) -> tuple[HeadGrid, bytes]:
        """Paint ``weights`` (panels, T, T) into their grid; return it and the PNG."""
        grid = self.grid(len(weights), tokens)
        grid.update(weights, titles, suptitle=suptitle, mask=mask)
        return grid, png_bytes(grid.render())

    def has_diagram(self, key: tuple) -> bool:
        return key in self.diagrams

    def diagram(self, key: tuple) -> bytes:
        """The head-split diagram for ``key`` = (T, D, H) as a PNG, drawn once per size."""
        if key not in self.diagrams:
            from .diagrams import head_split  # matplotlib text layout: loaded on first use

            T, D, H = key
            figure = head_split(T, D, H)
            figure.set_dpi(RENDER_DPI)
            figure.canvas.draw()
            if len(self.diagrams) > 64:
                self.diagrams.clear()
            self.diagrams[key] = png_bytes(np.asarray(figure.canvas.buffer_rgba()))
        return self.diagrams[key]

    def prebuild(self, panel_counts, tokens: list[str], skip=None) -> None:
        """Build and draw the grid of every panel count for ``tokens`` (except the one whose
        figure is ``skip``, drawn already)."""
        for n_panels in panel_counts:
            grid = self.grid(n_panels, tokens)
            if grid.figure is not skip:
                grid.render()


def snapshot(weights: np.ndarray, labels: tuple, mask: np.ndarray) -> LabFigure:
    """A static ``plot_heads`` figure of the picture on show: ``labels`` is (tokens, titles,
    suptitle, panel size) as the grid drew them."""
    tokens, titles, suptitle, panel_size = labels
    return plot_heads(
        weights, tokens=tokens, titles=titles, suptitle=suptitle, panel_size=panel_size, mask=mask
    )
