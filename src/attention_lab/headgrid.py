"""``HeadGrid``: a grid of attention heatmaps, built once, then updated in place.

Used by ``plot_heads`` (every heatmap of notebooks 04-08) and by the explorer
(widgets.py), which redraws it on every slider change.

The figure is built once for a number of panels and a sequence length T; ``update``
swaps in new weights, titles and the mask that was applied. ``render`` draws everything
that never changes (axes, token labels, colour bar, legend) once, keeps that picture,
and afterwards repaints only the heatmaps, their "blocked" overlays and the titles on
top of it (matplotlib "blitting"), so the explorer stays within its 150 ms budget.

What a reader sees:

* weights on one shared 0..1 scale from white (0) to dark blue (1), square-root spaced
  (``palette.weight_norm``): a weight of 1/16 is a visible light blue, not blank;
* positions the mask blocked drawn grey with dark diagonal stripes (legend "blocked"):
  the mask is passed in (``mask=``, True = blocked), never guessed from exact zeros;
* every row and column labelled ``position:token`` (``3:40``, ``6:SEP``, ``2:c?``), so a
  token that repeats is never ambiguous (``tick_labels``; pass ``task=`` to name a task's
  ids as ``tasks.token_labels`` does); up to T = 16 every position is labelled, at 9 pt or
  more (panels grow a little when 16 labels would not fit), x labels stood up when they
  would not fit under their column; the margins are sized from the labels;
* a colour bar that says its scale is not linear ("attention weight (√ scale)") with
  ticks 0, 0.1, 0.25, 0.5, 0.75, 1 and minor ticks every 0.01 up to 0.1 and every 0.05
  after, so the uneven spacing shows and a weight can be read off.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.transforms import Bbox

from .palette import (
    BLOCKED_COLOR,
    BLOCKED_HATCH_COLOR,
    BLOCKED_LABEL,
    CMAP,
    DPI,
    LABEL_SIZE,
    SUPTITLE_SIZE,
    TEXT_COLOR,
    TICK_SIZE,
    TITLE_SIZE,
    weight_norm,
)
from .plotting import LabFigure, _as_heads, _cell_image, png_bytes

MIN_TICK_SIZE = 9  # points: the smallest token label a back row can still read
ALL_LABELLED_UP_TO = 16  # up to this T every row and column is labelled (panels grow)
LINE_PITCH = 1.12  # a label needs this many times its font size per row (no overlap)
CHAR_WIDTH = 0.62  # a character of a label is about this many times its font size wide
COLORBAR_TICKS = (0.0, 0.1, 0.25, 0.5, 0.75, 1.0)
COLORBAR_MINOR_TICKS = tuple(
    t
    for t in [k / 100 for k in range(1, 10)] + [k / 20 for k in range(3, 20)]
    if t not in COLORBAR_TICKS
)
COLORBAR_LABEL = "attention weight (√ scale)"


def tick_labels(tokens, T: int, task: str | None = None) -> list[str]:
    """The T tick labels of a heatmap: ``position:token`` (``"3:40"``, ``"6:SEP"``).

    ``tokens`` are the T tokens (strings, ids, or a 1-D tensor of ids); ``None`` labels by
    position only. With ``task`` (one of ``tasks.TASKS``) ids are named as
    ``tasks.token_labels`` names them (``"SEP"``, ``"c=4"``, ``"c?"``, ``"abd"``; names
    passed already, such as ``token_labels(task, ids)``, are kept). Labels
    that already start with their position (``"3:c=4"``, as the explorer and notebook 09
    make them) are kept as they are.
    """
    if tokens is None:
        return [str(i) for i in range(T)]
    if hasattr(tokens, "tolist"):  # a tensor or an array of ids
        tokens = tokens.tolist()
    tokens = list(tokens)
    if len(tokens) != T:
        raise ValueError(f"got {len(tokens)} token labels for T={T} positions")
    if task is not None and all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
        from .tasks import token_labels

        names = token_labels(task, tokens)  # ids -> "SEP", "c=4", ...
    else:
        names = [str(t) for t in tokens]
    if all(name.startswith(f"{i}:") for i, name in enumerate(names)):
        return names
    return [f"{i}:{name}" for i, name in enumerate(names)]


def as_mask(mask, shape: tuple[int, int, int]) -> np.ndarray | None:
    """``mask`` (True = blocked) broadcast to ``shape`` = (H, T, T); None stays None."""
    if mask is None:
        return None
    m = _as_numpy_bool(mask)
    if m.ndim == 4 and m.shape[0] == 1:
        m = m[0]
    try:
        return np.broadcast_to(m, shape)
    except ValueError:
        raise ValueError(
            f"mask has shape {m.shape}, which does not fit weights of shape {shape}; pass a "
            "(T, T) mask (the same for every head) or one (H, T, T) mask per head"
        ) from None


def _as_numpy_bool(mask) -> np.ndarray:
    dtype = getattr(mask, "dtype", None)
    if hasattr(mask, "detach"):
        mask = mask.detach().cpu().numpy()
    m = np.asarray(mask)
    if m.dtype != bool:
        raise ValueError(
            f"mask has dtype {dtype or m.dtype}; pass a boolean mask with True where attention "
            "is blocked (e.g. causal_mask(T)), not an additive float mask"
        )
    return m


def _stripes(rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """Dark diagonal stripes every 4 pixels: RGBA (rows, cols, 4) and where they are."""
    i, j = np.indices((rows, cols))
    on = (i + j) % 4 == 0
    rgba = np.zeros((rows, cols, 4))
    rgba[:] = to_rgba(BLOCKED_HATCH_COLOR)
    return rgba, on


class HeadGrid:
    """A grid of attention heatmaps, built once, updated in place.

    Args:
        n_panels: how many heads to show.
        T: sequence length (each panel is T x T: row = query, column = key).
        tokens: the T tokens (strings or ids); labelled ``position:token`` (default:
            positions only). ``task`` names a task's ids (``tasks.token_labels``).
        ncols: panels per row (default: up to 4).
        panel_size: inches per panel (grown, up to T = 16, to fit a label on every row).
        dpi: resolution of ``render``/``to_png`` (at least 100 reads on a projector).
        hatch: draw dark stripes over blocked cells (they are grey either way); stripes
            keep "blocked" apart from mid-blue weights on a washed-out projector or in
            greyscale (``plot_heads`` draws them); off by default here because they
            cost about a third more time per redraw in the explorer.

    Token labels are drawn only where a reader needs them: under the bottom row and left
    of the first column. ``update`` swaps in new weights, titles and mask; ``to_png``
    renders.
    """

    def __init__(
        self,
        n_panels: int,
        T: int,
        tokens: Sequence[str] | None = None,
        ncols: int | None = None,
        panel_size: float = 2.3,
        dpi: int = DPI,
        hatch: bool = False,
        task: str | None = None,
    ):
        self.n_panels, self.T = n_panels, T
        if T <= ALL_LABELLED_UP_TO:  # room for a 9 pt label on every row and column
            panel_size = max(panel_size, math.ceil(T * LINE_PITCH * MIN_TICK_SIZE / 0.72) / 100)
        self.panel_size = panel_size
        ncols = ncols or min(n_panels, 4)
        nrows = math.ceil(n_panels / ncols)
        self.ncols, self.nrows = ncols, nrows
        labels = tick_labels(tokens, T, task)
        size, _, rotation = self._label_layout(labels)
        # margins in inches, sized from the labels: one panel has as much room as eight
        label_w = CHAR_WIDTH * size * max(map(len, labels)) / 72
        label_h = label_w if rotation else 1.2 * size / 72
        left = max(0.75, 0.5 + label_w)  # axis label (0.38) + tick labels + padding
        bottom = max(0.75, 0.5 + label_h)
        right, top, gap, wgap = 1.25, 0.85, 0.55, 0.2
        width = left + right + panel_size * ncols + wgap * (ncols - 1)
        height = bottom + top + panel_size * nrows + gap * (nrows - 1)
        self.figure = LabFigure(figsize=(width, height), dpi=dpi)
        axes = self.figure.subplots(nrows, ncols, squeeze=False)
        self.figure.subplots_adjust(
            left=left / width,
            right=1 - right / width,
            bottom=bottom / height,
            top=1 - top / height,
            wspace=wgap / panel_size,
            hspace=gap / panel_size,
        )
        self.axes = list(axes.flat[:n_panels])
        for ax in axes.flat[n_panels:]:
            ax.set_visible(False)
        # the blocked overlay: a few source pixels per cell, so the stripes stay fine
        self._k = max(2, math.ceil(panel_size * dpi / (3 * T)))
        self.hatch = hatch
        self._stripes, self._stripe_on = _stripes(T * self._k, T * self._k)
        cmap = CMAP.with_extremes(bad=BLOCKED_COLOR)  # a masked (blocked) cell is grey
        self.images, self.overlays = [], []
        blank = np.zeros((T, T))
        extent = (-0.5, T - 0.5, T - 0.5, -0.5)
        for i, ax in enumerate(self.axes):
            self.images.append(_cell_image(ax, blank, norm=weight_norm(), cmap=cmap))
            overlay = _cell_image(ax, np.zeros((T * self._k, T * self._k, 4)), extent=extent)
            overlay.set_visible(False)
            self.overlays.append(overlay)
            ax.set_facecolor("white")
            ax.tick_params(length=0, colors=TEXT_COLOR)
            if self._is_bottom(i):
                ax.set_xlabel("key (looked at)", fontsize=LABEL_SIZE, color=TEXT_COLOR)
            if self._is_left(i):
                ax.set_ylabel("query (looking)", fontsize=LABEL_SIZE, color=TEXT_COLOR)
        self.set_tokens(tokens, task=task)
        bar_bottom = bottom + min(0.9, 0.35 * panel_size * nrows)  # room for the legend
        cax = self.figure.add_axes(
            (
                1 - (right - 0.25) / width,
                bar_bottom / height,
                0.15 / width,
                1 - (bar_bottom + top) / height,
            )
        )
        bar = self.figure.colorbar(self.images[0], cax=cax)
        bar.set_ticks(COLORBAR_TICKS, labels=[f"{t:g}" for t in COLORBAR_TICKS])
        bar.ax.set_yticks(COLORBAR_MINOR_TICKS, minor=True)  # uneven steps: not linear
        bar.set_label(COLORBAR_LABEL, color=TEXT_COLOR, fontsize=LABEL_SIZE)
        bar.ax.tick_params(colors=TEXT_COLOR, labelsize=TICK_SIZE)
        bar.ax.tick_params(which="minor", length=2.5, width=0.6, colors=TEXT_COLOR)
        self.colorbar = bar
        self.legend = self.figure.legend(
            handles=[
                Patch(
                    facecolor=BLOCKED_COLOR,
                    edgecolor=BLOCKED_HATCH_COLOR,
                    hatch="///" if hatch else None,
                    label=BLOCKED_LABEL,
                )
            ],
            loc="lower left",
            bbox_to_anchor=(1 - (right - 0.1) / width, bottom / height),
            fontsize=LABEL_SIZE,
            frameon=False,
            handlelength=1.4,
            handleheight=1.4,
            borderaxespad=0.0,
        )
        self.legend.set_visible(False)  # shown once a mask is given
        self.mask: np.ndarray | None = None  # (n_panels, T, T), True = blocked
        self.suptitle = self.figure.suptitle("", color=TEXT_COLOR, fontsize=SUPTITLE_SIZE)
        self._background = None  # the static part of the picture, once drawn
        self._renderer = None  # the renderer the background belongs to
        self._painted = None  # the title texts the pixels show now
        self._drawing = False  # True while _draw_background draws
        # a full draw by anyone else (savefig, a notebook showing the figure) repaints the
        # pixels the background bookkeeping relies on: start again from a fresh background
        self.figure.canvas.mpl_connect("draw_event", self._forget_background)

    def _is_bottom(self, i: int) -> bool:
        return i // self.ncols == self.nrows - 1 or i + self.ncols >= self.n_panels

    def _is_left(self, i: int) -> bool:
        return i % self.ncols == 0

    def _label_layout(self, labels: list[str]) -> tuple[float, int, int]:
        """(font size, label every n-th position, x rotation) for these tick labels."""
        cell = self.panel_size * 72 / self.T  # points per row or column
        size = TICK_SIZE if LINE_PITCH * TICK_SIZE <= cell else MIN_TICK_SIZE
        every = max(1, math.ceil(LINE_PITCH * size / cell - 1e-9))  # label every n-th
        if self.T <= ALL_LABELLED_UP_TO:
            every = 1  # the panel was sized for it
        longest = max(map(len, labels))
        rotation = 0 if CHAR_WIDTH * size * longest + 2 <= cell * every else 90
        return size, every, rotation

    def set_tokens(self, tokens=None, task: str | None = None) -> None:
        """Label the T positions ``position:token`` (``tick_labels``), on the bottom row
        and the first column only (inner panels get none).

        Up to T = 16 every position is labelled (at 9 pt or more); x labels stay
        horizontal when the longest fits under its column, otherwise they stand up.
        Beyond T = 16, where even 9 pt labels would overlap, every n-th is labelled.
        """
        T = self.T
        labels = tick_labels(tokens, T, task)
        self.tokens = labels
        size, every, rotation = self._label_layout(labels)
        ticks = list(range(0, T, every))
        shown = [labels[t] for t in ticks]
        for i, ax in enumerate(self.axes):
            if self._is_bottom(i):
                ax.set_xticks(ticks, shown, rotation=rotation, fontsize=size)
            else:
                ax.set_xticks([])
            if self._is_left(i):
                ax.set_yticks(ticks, shown, fontsize=size)
            else:
                ax.set_yticks([])
        self._background = None  # labels changed: the static picture must be redrawn

    def update(
        self,
        weights,
        titles: Sequence[str] | None = None,
        suptitle: str = "",
        mask=None,
    ) -> Figure:
        """Put new (H, T, T) weights into the panels; returns the figure.

        ``mask`` is the boolean mask the weights were computed with (True = blocked),
        (T, T) or one per head, (H, T, T); its blocked cells are drawn grey and striped.
        ``None`` means nothing was blocked. It may change from one update to the next.
        """
        w = _as_heads(weights)
        shape = (self.n_panels, self.T, self.T)
        if w.shape != shape:
            raise ValueError(
                f"weights have shape {w.shape}, this grid shows {shape}; build a new HeadGrid"
            )
        m = as_mask(mask, shape)
        titles = titles or [f"head {h}" for h in range(self.n_panels)]
        k = self._k
        for i, (image, overlay, ax, title) in enumerate(
            zip(self.images, self.overlays, self.axes, titles)
        ):
            blocked = m is not None and bool(m[i].any())
            image.set_data(np.ma.masked_array(w[i], m[i]) if blocked else w[i])
            striped = blocked and self.hatch
            if striped:
                cells = np.repeat(np.repeat(m[i], k, axis=0), k, axis=1)
                self._stripes[..., 3] = cells & self._stripe_on
                overlay.set_data(self._stripes.copy())
            overlay.set_visible(striped)
            ax.set_title(title, fontsize=TITLE_SIZE, color=TEXT_COLOR)
        show_legend = m is not None and bool(m.any())
        if show_legend != self.legend.get_visible():
            self.legend.set_visible(show_legend)
            self._background = None  # the legend is part of the static picture
        self.mask = None if m is None else np.array(m)
        self.suptitle.set_text(suptitle)
        return self.figure

    def _texts(self) -> list:
        return [ax.title for ax in self.axes] + [self.suptitle]

    def _changing_artists(self) -> list:
        spines = [spine for ax in self.axes for spine in ax.spines.values()]
        return self.images + self.overlays + spines

    def _forget_background(self, event=None) -> None:
        if not self._drawing:
            self._background = None

    def _draw_background(self) -> None:
        """Draw the figure without the heatmaps, their frames and titles; keep the pixels."""
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
        self._title_pixels = {}  # (title number, text) -> its painted pixels and box
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
        """Paint the current weights, mask and titles; return the pixels, (height, width, 4) uint8.

        The first call (and the first after ``set_tokens``, a change of size or the
        legend appearing) draws the figure without heatmaps, overlays, frames and titles
        and keeps that picture. Every call then restores the kept pixels under each panel
        and paints heatmap, blocked overlay and frame on top (the same pixels a full draw
        gives); a title is repainted only when its text changed, and a title shown before
        is copied from a cache of its pixels: drawing text is the slow part.
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
        for ax, image, overlay in zip(self.axes, self.images, self.overlays):  # 2) panels
            self._restore(ax.bbox.extents, pad=2)
            ax.draw_artist(image)
            if overlay.get_visible():
                ax.draw_artist(overlay)
            for spine in ax.spines.values():
                ax.draw_artist(spine)
        for i in changed:  # 3) paint the new titles, from the cache when shown before
            t = texts[i]
            key = (i, t.get_text())
            if key in self._title_pixels:
                region, extents = self._title_pixels[key]
                canvas.restore_region(region)
            else:
                if t.axes is not None:
                    t.axes.draw_artist(t)
                else:
                    self.figure.draw_artist(t)
                extents = t.get_window_extent().extents
                if len(self._title_pixels) > 256:  # many different titles: start afresh
                    self._title_pixels.clear()
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
