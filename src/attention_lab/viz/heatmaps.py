"""``plot_heads``: attention weights as heatmaps, one panel per head (notebooks 04-08).

The panels are drawn by a ``HeadGrid`` (headgrid.py: built once, updated in place, fast
enough for the explorer). All panels share one 0..1 colour scale, white (0) to dark blue
(1) on a square-root scale so small weights stay visible; positions the mask blocked are
grey and striped, with a legend entry "blocked" (pass ``mask=`` or ``causal=True``; it is
never guessed from zeros, but causal-looking weights drawn without a mask warn). Rows and
columns are labelled ``position:token``. Colours, font sizes and dpi come from ``palette``.

``text_heatmap``: the same weights as text, one character per weight (the demo, a terminal).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from ..i18n import error_text
from .arrays import as_heads, to_numpy
from .headgrid import HeadGrid
from .palette import CMAP, DPI, text_color_on, weight_norm

SHADES = " .:-=+*#%@"  # text heatmap, from weight 0 to weight 1


class CausalWithoutMaskWarning(UserWarning):
    """Causal-looking weights were drawn without the mask that blocked them."""


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
    w = as_heads(weights)
    T = w.shape[-1]
    if causal:
        if mask is not None:
            raise ValueError(error_text("pass either mask= or causal=True, not both"))
        from ..masks import causal_mask

        mask = causal_mask(T)
    elif mask is None and looks_causal(w):
        warnings.warn(
            error_text(
                "these weights are exactly 0 everywhere above the diagonal, like a causal "
                "head's, but no mask was given, so the blocked cells are drawn as weights of 0; "
                "pass mask=causal_mask({T}) (or causal=True) to draw them as blocked"
            ).format(T=T),
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


def looks_causal(weights) -> bool:
    """True when every panel of ``weights`` ((T, T) or (H, T, T)) is exactly 0 above the
    diagonal and T > 1: the weights of a causal head, drawn best with ``mask=``."""
    w = as_heads(weights)
    T = w.shape[-1]
    if T < 2:
        return False
    upper = np.triu(np.ones((T, T), bool), 1)
    return bool(np.all(w[:, upper] == 0))


def text_heatmap(weights, tokens: Sequence[str] | None = None) -> str:
    """A (T, T) weight matrix as text: one character per weight, ' ' = 0 up to '@' = 1."""
    w = to_numpy(weights, float)
    if w.ndim != 2:
        raise ValueError(
            error_text("text_heatmap takes one (T, T) matrix, got shape {shape}").format(
                shape=w.shape
            )
        )
    T = w.shape[0]
    tokens = [str(t) for t in (tokens if tokens is not None else range(T))]
    width = max(map(len, tokens))
    levels = np.clip(np.rint(w * (len(SHADES) - 1)), 0, len(SHADES) - 1).astype(int)
    lines = [" " * width + " |" + "".join(t[-1] for t in tokens)]
    for token, row in zip(tokens, levels):
        lines.append(token.rjust(width) + " |" + "".join(SHADES[i] for i in row))
    return "\n".join(lines)
