"""``HeadGrid``: a grid of attention heatmaps, built once, then updated in place.

Used by ``plot_heads`` (every heatmap of notebooks 04-08) and by the explorer
(``explorer.widgets``), which redraws it on every slider change.

The figure is built once for a number of panels and a sequence length T; ``update``
swaps in new weights, titles and the mask that was applied. ``render`` draws everything
that never changes (axes, token labels, colour bar, legend) once, keeps that picture,
and afterwards repaints only the heatmaps, their "blocked" stripes and the titles on
top of it (matplotlib "blitting", ``blit.Blitted``), so the explorer stays within its
150 ms budget.

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
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ..i18n import N_, _, error_text
from .arrays import as_bool_mask, as_heads
from .blit import Blitted
from .canvas import BLOCKED_HATCH, LabFigure, blocked_stripes, cell_image, mask_cells, stripes_path
from .heatmap_labels import (
    ALL_LABELLED_UP_TO,
    CHAR_WIDTH,
    LINE_PITCH,
    MIN_TICK_SIZE,
    tick_labels,
)
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

COLORBAR_TICKS = (0.0, 0.1, 0.25, 0.5, 0.75, 1.0)
COLORBAR_MINOR_TICKS = tuple(
    t
    for t in [k / 100 for k in range(1, 10)] + [k / 20 for k in range(3, 20)]
    if t not in COLORBAR_TICKS
)
COLORBAR_LABEL = N_("attention weight (√ scale)")  # shown as _(COLORBAR_LABEL)


def as_mask(mask, shape: tuple[int, int, int]) -> np.ndarray | None:
    """``mask`` (True = blocked) broadcast to ``shape`` = (H, T, T); None stays None."""
    if mask is None:
        return None
    m = as_bool_mask(mask)
    if m.ndim == 4 and m.shape[0] == 1:
        m = m[0]
    try:
        return np.broadcast_to(m, shape)
    except ValueError:
        raise ValueError(
            error_text(
                "mask has shape {mask_shape}, which does not fit weights of shape {shape}; pass "
                "a (T, T) mask (the same for every head) or one (H, T, T) mask per head"
            ).format(mask_shape=m.shape, shape=shape)
        ) from None


class HeadGrid(Blitted):
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
            cost more time per redraw in the explorer. They are the diagrams' stripes
            (``canvas.blocked_stripes``): one hatched path per panel.

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
        size, _every, rotation = self._label_layout(labels)
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
        self.hatch = hatch
        cmap = CMAP.with_extremes(bad=BLOCKED_COLOR)  # a masked (blocked) cell is grey
        self.images, self.stripes = [], []
        for i, ax in enumerate(self.axes):
            self.images.append(cell_image(ax, np.zeros((T, T)), norm=weight_norm(), cmap=cmap))
            stripes = blocked_stripes(ax, [], zorder=1.5)  # over the image, under the frame
            stripes.set_visible(False)
            self.stripes.append(stripes)
            ax.set_facecolor("white")
            ax.tick_params(length=0, colors=TEXT_COLOR)
            if self._is_bottom(i):
                ax.set_xlabel(_("key (looked at)"), fontsize=LABEL_SIZE, color=TEXT_COLOR)
            if self._is_left(i):
                ax.set_ylabel(_("query (looking)"), fontsize=LABEL_SIZE, color=TEXT_COLOR)
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
        bar.set_label(_(COLORBAR_LABEL), color=TEXT_COLOR, fontsize=LABEL_SIZE)
        bar.ax.tick_params(colors=TEXT_COLOR, labelsize=TICK_SIZE)
        bar.ax.tick_params(which="minor", length=2.5, width=0.6, colors=TEXT_COLOR)
        self.colorbar = bar
        self.legend = self.figure.legend(
            handles=[
                Patch(
                    facecolor=BLOCKED_COLOR,
                    edgecolor=BLOCKED_HATCH_COLOR,
                    hatch=BLOCKED_HATCH if hatch else None,
                    label=_(BLOCKED_LABEL),
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
        self._start_blitting()

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
        w = as_heads(weights)
        shape = (self.n_panels, self.T, self.T)
        if w.shape != shape:
            raise ValueError(
                error_text(
                    "weights have shape {weights_shape}, this grid shows {shape}; build a new "
                    "HeadGrid"
                ).format(weights_shape=w.shape, shape=shape)
            )
        m = as_mask(mask, shape)
        titles = titles or [_("head {h}").format(h=h) for h in range(self.n_panels)]
        for i, (image, stripes, ax, title) in enumerate(
            zip(self.images, self.stripes, self.axes, titles)
        ):
            blocked = m is not None and bool(m[i].any())
            image.set_data(np.ma.masked_array(w[i], m[i]) if blocked else w[i])
            striped = blocked and self.hatch
            if striped:
                stripes.set_path(stripes_path(mask_cells(m[i])))
            stripes.set_visible(striped)
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

    def _panel_artists(self, ax) -> list:
        """What changes in a panel, in drawing order: heatmap, stripes, frame."""
        i = self.axes.index(ax)
        return [self.images[i], self.stripes[i], *ax.spines.values()]
