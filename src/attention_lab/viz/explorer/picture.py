"""The explorer's picture: heatmaps painted in place, the head-split diagram, PNGs for the screen.

No ipywidgets here (matplotlib only), so the drawing is tested and timed on its own.

* The heatmaps are painted by a ``HeadGrid`` that is built once per (panel count, tokens)
  and then only updated in place (the 32 grids used last are kept, ``cache.LRUDict``); the
  PNG is encoded by ``canvas.png_bytes``, an encoder made for flat figures.
* The head-split diagram of notebook 06 comes from ``diagrams.head_split_png`` at
  ``RENDER_DPI``: drawn once per (T, D, H) and kept in that function's cache.
* Rendered at ``PIXEL_RATIO`` times the pixels it is shown at (sharp on a projector and at
  150 % zoom), and shown at ``CSS_DPI`` CSS pixels per inch of the figure at most
  (``css_width``).
"""

from __future__ import annotations

import struct

import numpy as np

from ...cache import LRUDict
from ..canvas import LabFigure, png_bytes
from ..headgrid import HeadGrid
from ..heatmaps import plot_heads

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
    """The heatmap grids an explorer has drawn, kept for the next redraw, and its head-split
    diagrams. ``grids``: (panels, tokens) -> ``HeadGrid``, the 32 used last; the diagrams
    are kept by ``diagrams.head_split_png``'s own cache (one for every explorer)."""

    def __init__(self) -> None:
        self.grids: LRUDict = LRUDict(32)

    def grid(self, n_panels: int, tokens: list[str]) -> HeadGrid:
        """The grid for ``n_panels`` panels labelled ``tokens``, built on first use."""
        panel_size = SINGLE_PANEL_SIZE if n_panels == 1 else PANEL_SIZE
        return self.grids.remember(
            (n_panels, tuple(tokens)),
            lambda: HeadGrid(n_panels, len(tokens), tokens, panel_size=panel_size, dpi=RENDER_DPI),
        )

    def heatmaps(
        self, weights: np.ndarray, tokens: list[str], titles: list[str], suptitle: str, mask
    ) -> tuple[HeadGrid, bytes]:
        """Paint ``weights`` (panels, T, T) into their grid; return it and the PNG."""
        grid = self.grid(len(weights), tokens)
        grid.update(weights, titles, suptitle=suptitle, mask=mask)
        return grid, png_bytes(grid.render())

    def has_diagram(self, key: tuple) -> bool:
        """Whether the head-split diagram for ``key`` = (T, D, H) is drawn already."""
        from ..diagrams import head_split_png

        return head_split_png.cached(*key, dpi=RENDER_DPI)

    def diagram(self, key: tuple) -> bytes:
        """The head-split diagram for ``key`` = (T, D, H) as a PNG at ``RENDER_DPI``."""
        from ..diagrams import head_split_png  # matplotlib text layout: loaded on first use

        return head_split_png(*key, dpi=RENDER_DPI)

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
