"""Every picture in the chapter: attention heatmaps per head, loss curves, a text heatmap.

``HeadGrid`` builds a figure once for a given number of heads and sequence length and
then only swaps the numbers in place (``update``). Its ``to_png`` draws everything that
never changes (axes, token labels, colour bar) once, keeps that picture, and afterwards
repaints only the heatmaps and titles on top of it (matplotlib "blitting"): the
interactive explorer (widgets.py) redraws in well under 150 ms that way.
``plot_heads`` is the one-call version the notebooks use.

All panels share one 0..1 colour scale (seaborn's "rocket_r": light = 0, dark = 1), so
heads can be compared by eye. Figures have a white background, so they read the same
in a light and a dark Jupyter theme. They are ``LabFigure`` objects -- matplotlib figures
not registered with pyplot: a cell that ends with one shows it once as a PNG, and there
is nothing to close.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence

import numpy as np
import seaborn as sns
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

CMAP = sns.color_palette("rocket_r", as_cmap=True)
SHADES = " .:-=+*#%@"  # text heatmap, from weight 0 to weight 1


class LabFigure(Figure):
    """A matplotlib Figure that Jupyter shows as a PNG when it ends a cell.

    It is not registered with pyplot, so it is never shown twice and never needs closing.
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("facecolor", "white")
        super().__init__(*args, **kwargs)
        FigureCanvasAgg(self)

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.savefig(buffer, format="png", facecolor="white")
        return buffer.getvalue()


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


class HeadGrid:
    """A grid of attention heatmaps, built once, updated in place.

    Args:
        n_panels: how many heads to show.
        T: sequence length (each panel is T x T: row = query, column = key).
        tokens: labels for the T positions (default: 0..T-1).
        ncols: panels per row (default: up to 4).
        panel_size: inches per panel.
        dpi: resolution of ``to_png``.

    Token labels are drawn only where a reader needs them: under the bottom row and left
    of the first column. ``update`` swaps in new weights and titles; ``to_png`` renders.
    """

    def __init__(
        self,
        n_panels: int,
        T: int,
        tokens: Sequence[str] | None = None,
        ncols: int | None = None,
        panel_size: float = 2.3,
        dpi: int = 80,
    ):
        self.n_panels, self.T = n_panels, T
        ncols = ncols or min(n_panels, 4)
        nrows = math.ceil(n_panels / ncols)
        self.ncols, self.nrows = ncols, nrows
        # margins in inches, so one panel has as much room for its labels as eight
        left, right, bottom, top, gap = 0.85, 1.15, 0.85, 0.7, 0.45
        width = left + right + panel_size * ncols + 0.25 * panel_size * (ncols - 1)
        height = bottom + top + panel_size * nrows + gap * (nrows - 1)
        self.figure = LabFigure(figsize=(width, height), dpi=dpi)
        axes = self.figure.subplots(nrows, ncols, squeeze=False)
        self.figure.subplots_adjust(
            left=left / width,
            right=1 - right / width,
            bottom=bottom / height,
            top=1 - top / height,
            wspace=0.25,
            hspace=gap / panel_size,
        )
        self.axes = list(axes.flat[:n_panels])
        for ax in axes.flat[n_panels:]:
            ax.set_visible(False)
        self.images = []
        blank = np.zeros((T, T))
        for i, ax in enumerate(self.axes):
            self.images.append(
                ax.imshow(blank, vmin=0.0, vmax=1.0, cmap=CMAP, interpolation="nearest")
            )
            ax.set_facecolor("white")
            ax.tick_params(length=0, colors="black")
            if self._is_bottom(i):
                ax.set_xlabel("key (looked at)", fontsize=8, color="black")
            if self._is_left(i):
                ax.set_ylabel("query (looking)", fontsize=8, color="black")
        self.set_tokens(tokens)
        cax = self.figure.add_axes(
            (1 - (right - 0.25) / width, bottom / height, 0.15 / width, 1 - (bottom + top) / height)
        )
        bar = self.figure.colorbar(self.images[0], cax=cax)
        bar.set_label("attention weight", color="black")
        bar.ax.tick_params(colors="black")
        self.suptitle = self.figure.suptitle("", color="black")
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

    def set_tokens(self, tokens: Sequence[str] | None = None) -> None:
        """Label the T positions (bottom row and first column only; inner panels get none)."""
        T = self.T
        tokens = [str(t) for t in (tokens if tokens is not None else range(T))]
        if len(tokens) != T:
            raise ValueError(f"got {len(tokens)} token labels for T={T} positions")
        self.tokens = tokens
        longest = max(map(len, tokens))
        # side by side, labels of two characters collide beyond a dozen columns: stand them up
        rotation = 90 if longest > 2 or (longest == 2 and T > 12) else 0
        for i, ax in enumerate(self.axes):
            if self._is_bottom(i):
                ax.set_xticks(range(T), tokens, rotation=rotation, fontsize=7)
            else:
                ax.set_xticks([])
            if self._is_left(i):
                ax.set_yticks(range(T), tokens, fontsize=7)
            else:
                ax.set_yticks([])
        self._background = None  # labels changed: the static picture must be redrawn

    def update(self, weights, titles: Sequence[str] | None = None, suptitle: str = "") -> Figure:
        """Put new (H, T, T) weights into the panels; returns the figure."""
        w = _as_heads(weights)
        if w.shape != (self.n_panels, self.T, self.T):
            raise ValueError(
                f"weights have shape {w.shape}, this grid shows "
                f"{(self.n_panels, self.T, self.T)}; build a new HeadGrid"
            )
        titles = titles or [f"head {h}" for h in range(self.n_panels)]
        for image, ax, panel, title in zip(self.images, self.axes, w, titles):
            image.set_data(panel)
            ax.set_title(title, fontsize=9, color="black")
        self.suptitle.set_text(suptitle)
        return self.figure

    def _texts(self) -> list:
        return [ax.title for ax in self.axes] + [self.suptitle]

    def _changing_artists(self) -> list:
        return self.images + [spine for ax in self.axes for spine in ax.spines.values()]

    def _forget_background(self, event=None) -> None:
        if not self._drawing:
            self._background = None

    def _draw_background(self) -> None:
        """Draw the figure without the heatmaps, their frames and titles; keep the pixels."""
        texts = self._texts()
        saved = [t.get_text() for t in texts]
        for t in texts:
            t.set_text("")
        for artist in self._changing_artists():
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
        for artist in self._changing_artists():
            artist.set_visible(True)
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
        """Paint the current weights and titles; return the pixels, (height, width, 4) uint8.

        The first call (and the first after ``set_tokens`` or a change of size) draws the
        figure without heatmaps, frames and titles and keeps that picture. Every call then
        restores the kept pixels under each panel and paints heatmap and frame on top (the
        same pixels a full draw gives); a title is repainted only when its text changed,
        and a title shown before is copied from a cache of its pixels: drawing text is
        the slow part.
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
        for ax, image in zip(self.axes, self.images):  # 2) repaint every panel
            self._restore(ax.bbox.extents, pad=2)
            ax.draw_artist(image)
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


def png_bytes(rgba: np.ndarray, compress_level: int = 1) -> bytes:
    """Encode (height, width, 4) uint8 pixels on a white page as PNG (RGB, fast compression)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(rgba[..., :3])).save(
        buffer, format="png", compress_level=compress_level
    )
    return buffer.getvalue()


def plot_heads(
    weights,
    tokens: Sequence[str] | None = None,
    titles: Sequence[str] | None = None,
    suptitle: str = "",
    ncols: int | None = None,
    panel_size: float = 2.3,
) -> Figure:
    """Draw attention weights, one heatmap per head, on one shared 0..1 colour scale.

    ``weights`` is (T, T), (H, T, T) or (1, H, T, T) -- a tensor or an array.
    Row i of a panel is query position i; column j is key position j.
    """
    w = _as_heads(weights)
    grid = HeadGrid(w.shape[0], w.shape[-1], tokens, ncols=ncols, panel_size=panel_size, dpi=100)
    return grid.update(w, titles, suptitle)


def plot_loss(
    histories, chance: float | None = None, title: str = "training loss", logy: bool = True
) -> Figure:
    """Loss per optimiser step. ``histories`` is a TrainHistory, a list of floats, or a
    ``{label: history}`` mapping; ``chance`` draws the loss of a uniform guess, ln(vocab)."""
    if not isinstance(histories, Mapping):
        histories = {"": histories}
    fig = LabFigure(figsize=(6, 3.2), dpi=100)
    ax = fig.subplots()
    ax.set_facecolor("white")
    colours = sns.color_palette("deep", len(histories))
    for (label, history), colour in zip(histories.items(), colours):
        losses = getattr(history, "step_losses", history)
        ax.plot(range(1, len(losses) + 1), losses, label=label or None, color=colour, lw=1.5)
    if chance is not None:
        ax.axhline(chance, ls="--", color="grey", lw=1, label=f"chance = {chance:.2f}")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel("optimiser step", color="black")
    ax.set_ylabel("cross-entropy (nats)", color="black")
    ax.set_title(title, color="black")
    ax.tick_params(colors="black")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[1]:
        ax.legend(fontsize=8)
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
    fig = LabFigure(figsize=(6, 3.4), dpi=100)
    ax = fig.subplots()
    ax.set_facecolor("white")
    for label, values in (reference or {}).items():
        ax.plot(list(x), list(values), "--", color="grey", lw=1.2, label=label)
    colours = sns.color_palette("deep", len(ys))
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
    ax.set_xlabel(xlabel, color="black")
    ax.set_ylabel(ylabel, color="black")
    ax.set_title(title, color="black")
    ax.tick_params(colors="black")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
