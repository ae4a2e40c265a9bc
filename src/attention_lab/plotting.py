"""Every picture in the chapter: attention heatmaps per head, loss curves, a text heatmap.

``HeadGrid`` builds a figure once for a given number of heads and sequence length and
then only swaps the numbers in place (``update``): the interactive explorer redraws in
well under 150 ms that way. ``plot_heads`` is the one-call version the notebooks use.

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
        tokens = [str(t) for t in (tokens if tokens is not None else range(T))]
        if len(tokens) != T:
            raise ValueError(f"got {len(tokens)} token labels for T={T} positions")
        ncols = ncols or min(n_panels, 4)
        nrows = math.ceil(n_panels / ncols)
        self.figure = LabFigure(
            figsize=(panel_size * ncols + 1.2, panel_size * nrows + 0.7), dpi=dpi
        )
        axes = self.figure.subplots(nrows, ncols, squeeze=False)
        self.figure.subplots_adjust(
            left=0.08, right=0.86, bottom=0.1, top=0.86, wspace=0.25, hspace=0.45
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
            row, col = divmod(i, ncols)
            last_row = row == nrows - 1 or i + ncols >= n_panels
            ax.set_xticks(
                range(T),
                tokens if last_row else [""] * T,
                rotation=90 if max(map(len, tokens)) > 2 else 0,
                fontsize=7,
            )
            ax.set_yticks(range(T), tokens if col == 0 else [""] * T, fontsize=7)
            ax.tick_params(length=0, colors="black")
            if last_row:
                ax.set_xlabel("key (looked at)", fontsize=8, color="black")
            if col == 0:
                ax.set_ylabel("query (looking)", fontsize=8, color="black")
        cax = self.figure.add_axes((0.89, 0.1, 0.02, 0.76))
        bar = self.figure.colorbar(self.images[0], cax=cax)
        bar.set_label("attention weight", color="black")
        bar.ax.tick_params(colors="black")
        self.suptitle = self.figure.suptitle("", color="black")

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

    def to_png(self) -> bytes:
        """Render to PNG bytes (what a browser receives from the explorer)."""
        return self.figure._repr_png_()


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
) -> LabFigure:
    """One labelled line per entry of ``ys`` against ``x``: for measured curves
    (variance against d_head, time against T, ...)."""
    fig = LabFigure(figsize=(6, 3.4), dpi=100)
    ax = fig.subplots()
    ax.set_facecolor("white")
    colours = sns.color_palette("deep", len(ys))
    for (label, values), colour in zip(ys.items(), colours):
        ax.plot(
            list(x),
            list(values),
            label=label,
            color=colour,
            lw=1.5,
            marker="o" if markers else None,
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
