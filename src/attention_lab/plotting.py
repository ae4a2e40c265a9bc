"""Every picture in the chapter, in one place to import from: heatmaps per head, loss and
measured curves, a text heatmap.

One module per role; this one gathers their names (and holds the text heatmap):

* ``heatmaps``: ``plot_heads`` (notebooks 04-08), one heatmap per head on one shared 0..1
  square-root colour scale, blocked positions grey and striped, ``position:token`` labels;
  ``looks_causal`` and ``CausalWithoutMaskWarning``.
* ``headgrid``: ``HeadGrid``, the grid ``plot_heads`` and the explorer draw on, built once
  and updated in place.
* ``lines``: ``plot_loss`` and ``plot_lines``.
* ``canvas``: ``LabFigure`` and ``png_bytes`` -- figures with a white background, so they
  read the same in a light and a dark Jupyter theme, shown once as a PNG when a cell ends
  with one, not registered with pyplot (nothing to close).
* ``_mpl_fast``: the fast Agg path (labels rasterised once, heatmap cells painted by
  numpy), checked once against plain Agg, which it falls back to.

The drawn diagrams are in ``diagrams``; colours, font sizes and dpi in ``palette``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .arrays import to_numpy
from .canvas import LabFigure, png_bytes, to_png
from .headgrid import HeadGrid
from .heatmaps import CausalWithoutMaskWarning, looks_causal, plot_heads
from .i18n import error_text
from .lines import plot_lines, plot_loss

SHADES = " .:-=+*#%@"  # text heatmap, from weight 0 to weight 1

__all__ = [
    "SHADES",
    "CausalWithoutMaskWarning",
    "HeadGrid",
    "LabFigure",
    "looks_causal",
    "plot_heads",
    "plot_lines",
    "plot_loss",
    "png_bytes",
    "text_heatmap",
    "to_png",
]


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
