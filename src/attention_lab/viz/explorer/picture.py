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
* With fewer key/value heads than heads (grouped-query attention), the panels of the query
  heads that share one kv head get a thick frame of that kv head's colour (``KV_COLORS``),
  drawn inside the panel, so a redraw repaints it with the heatmap (``ExplorerGrid``).
"""

from __future__ import annotations

import struct

import numpy as np
from matplotlib.patches import Rectangle

from ..cache import LRUDict
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
# The frame of the panels that read kv head g: KV_COLORS[g] (H = 8 has at most 4 kv heads
# when it groups). Paul Tol's "vibrant" black-free subset plus black, chosen to be none of the
# chapter's other codes on this page: no head colour (the head-split diagram beside the
# heatmaps colours the query heads), no weight's blue, not the mask's grey, not the magenta
# of a highlight. FRAME_WIDTH points of it show inside the panel.
KV_COLORS = ("#000000", "#CC3311", "#009988", "#EE7733")
FRAME_WIDTH = 2.5


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

    def grid(self, n_panels: int, tokens: list[str]) -> ExplorerGrid:
        """The grid for ``n_panels`` panels labelled ``tokens``, built on first use."""
        panel_size = SINGLE_PANEL_SIZE if n_panels == 1 else PANEL_SIZE
        return self.grids.remember(
            (n_panels, tuple(tokens)),
            lambda: ExplorerGrid(
                n_panels, len(tokens), tokens, panel_size=panel_size, dpi=RENDER_DPI
            ),
        )

    def heatmaps(
        self,
        weights: np.ndarray,
        tokens: list[str],
        titles: list[str],
        suptitle: str,
        mask,
        groups: list[int] | None = None,
    ) -> tuple[ExplorerGrid, bytes]:
        """Paint ``weights`` (panels, T, T) into their grid; return it and the PNG.
        ``groups``: the kv head each panel's query head reads (framed in its colour), or
        None for plain multi-head attention (no frames)."""
        grid = self.grid(len(weights), tokens)
        grid.update(weights, titles, suptitle=suptitle, mask=mask)
        grid.set_groups(groups)
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


class ExplorerGrid(HeadGrid):
    """A ``HeadGrid`` whose panels can be framed by key/value group (``set_groups``): one
    ``Rectangle`` per panel, drawn inside it over the heatmap and repainted with it on every
    redraw (a frame outside the panel would leave pixels the blitting never restores). Its
    figure title never runs past the figure's edges: one that does (a single panel with a
    long setting: two layers, a sliding window, n_kv_heads) is broken after the model, into
    two lines (``fit_suptitle``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.frames = [_frame(ax) for ax in self.axes]
        self.groups: list[int] | None = None

    def update(self, weights, titles=None, suptitle: str = "", mask=None):
        figure = super().update(weights, titles, suptitle=suptitle, mask=mask)
        fit_suptitle(self.suptitle)
        return figure

    def set_groups(self, groups: list[int] | None) -> None:
        """Frame panel i in ``KV_COLORS[groups[i]]``; None: no frames (plain multi-head)."""
        self.groups = None if groups is None else list(groups)
        paint_frames(self.frames, self.groups)

    def _panel_artists(self, ax) -> list:
        """Heatmap, stripes, the group's frame, then the panel's own outline."""
        i = self.axes.index(ax)
        return [self.images[i], self.stripes[i], self.frames[i], *ax.spines.values()]


def fit_suptitle(text) -> None:
    """Break the figure title ``text`` (a matplotlib Text) after its first colon, ": " or
    the Chinese "：" (``TinyLM, trained on copy: n_heads = ...``), when one line would run
    past the figure's edges; the grid's top margin has room for two lines."""
    title = text.get_text()
    if "\n" in title:
        return
    figure = text.get_figure()
    margin = 4 * figure.dpi / 72  # 4 points on each side
    renderer = figure.canvas.get_renderer()
    if text.get_window_extent(renderer).width <= figure.bbox.width - 2 * margin:
        return
    cut = min((title.find(sep) + len(sep) for sep in (": ", "：") if sep in title), default=0)
    if cut:
        text.set_text(title[:cut].rstrip() + "\n" + title[cut:].lstrip())


def _frame(ax) -> Rectangle:
    """A rectangle on the panel's edge, clipped to it: only its inner half shows."""
    frame = Rectangle(
        (0, 0), 1, 1, transform=ax.transAxes, fill=False, linewidth=2 * FRAME_WIDTH, zorder=2
    )
    ax.add_patch(frame)  # clipped to the panel, like its heatmap
    frame.set_visible(False)
    return frame


def paint_frames(frames: list[Rectangle], groups: list[int] | None) -> None:
    """Show ``frames[i]`` in kv head ``groups[i]``'s colour, or hide them all (None)."""
    for i, frame in enumerate(frames):
        if groups is None:
            frame.set_visible(False)
        else:
            frame.set_edgecolor(KV_COLORS[groups[i] % len(KV_COLORS)])
            frame.set_visible(True)


def snapshot(
    weights: np.ndarray, labels: tuple, mask: np.ndarray, groups: list[int] | None = None
) -> LabFigure:
    """A static ``plot_heads`` figure of the picture on show: ``labels`` is (tokens, titles,
    suptitle, panel size) as the grid drew them, ``groups`` the kv head of each panel (framed
    as in the explorer) or None."""
    tokens, titles, suptitle, panel_size = labels
    figure = plot_heads(
        weights, tokens=tokens, titles=titles, suptitle=suptitle, panel_size=panel_size, mask=mask
    )
    if groups is not None:
        panels = [ax for ax in figure.axes if ax.images][: len(weights)]
        paint_frames([_frame(ax) for ax in panels], groups)
    return figure
