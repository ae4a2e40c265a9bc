"""One look for every picture of the chapter: head colours, the heatmap scale, font sizes.

Used by the heatmaps (``heatmaps``, ``headgrid``), the drawn diagrams (``diagrams``,
introduced from notebook 01 on) and the explorer, so head 2 has the same colour in every
figure and every figure is readable from the back of a room.

* ``HEAD_COLORS`` / ``head_color(h)``: Paul Tol's "muted" qualitative scheme, safe for
  the common colour-vision deficiencies and readable as filled boxes on white.
* ``CMAP`` + ``weight_norm()``: attention weights from white (0) to dark blue (1) on a
  square-root scale (``PowerNorm(gamma=0.5)``), so weights of ~1/16 (an untrained head at
  T = 16) are a visible light blue, not blank. The heatmaps' colour bar says so:
  "attention weight (√ scale)", ticks 0, 0.1, 0.25, 0.5, 0.75, 1 (``headgrid``).
* ``BLOCKED_COLOR`` / ``BLOCKED_HATCH_COLOR``: masked positions are neutral grey with
  darker diagonal stripes, unlike any weight.
* ``DROPPED_COLOR`` / ``DROPPED_EDGE_COLOR``: a weight dropout dropped is white with an
  orange outline and an orange "×" (``diagrams.dropout_row``): not grey, not striped.
* Font sizes in points and the dpi every figure is rendered at.

Matplotlib only (no seaborn): importing this module is cheap.
"""

from __future__ import annotations

import operator

from matplotlib import colormaps
from matplotlib.colors import PowerNorm, to_rgb

from ..i18n import N_, error_text

# Paul Tol, "muted" (https://personal.sron.nl/~pault/): rose, indigo, sand, green, cyan,
# wine, teal, olive, purple. Neighbours differ in hue and lightness, so two heads never
# look alike even at H = 2.
HEAD_COLORS: tuple[str, ...] = (
    "#CC6677",
    "#332288",
    "#DDCC77",
    "#117733",
    "#88CCEE",
    "#882255",
    "#44AA99",
    "#999933",
    "#AA4499",
)

CMAP = colormaps["Blues"]  # 0 = almost white, 1 = dark blue: no grey anywhere on it
GAMMA = 0.5  # square-root scale: small weights get a visible share of the colours
BLOCKED_COLOR = "#9E9E9E"  # neutral grey: masked, never a weight
BLOCKED_HATCH_COLOR = "#5E5E5E"  # the darker diagonal stripes on a blocked cell
BLOCKED_LABEL = N_("blocked")  # shown as _(BLOCKED_LABEL)
# Dropout's dropped weights (notebook 05) are NOT blocked: white with an orange outline
# and an orange "×", never grey, never striped (one visual code means one thing).
DROPPED_COLOR = "white"
DROPPED_EDGE_COLOR = "#EE7733"  # Paul Tol's "vibrant" orange: no head colour, no weight
DROPPED_LABEL = N_("dropped (dropout)")  # shown as _(DROPPED_LABEL)
LINE_COLORS: tuple[str, ...] = HEAD_COLORS  # measured curves in plot_loss / plot_lines

TICK_SIZE = 10  # points: tick labels, token labels, box contents
LABEL_SIZE = 11  # points: axis labels, legend entries
TITLE_SIZE = 12  # points: panel titles
SUPTITLE_SIZE = 13  # points: figure titles
DPI = 100  # every figure is rendered at this resolution (or more)
TEXT_COLOR = "black"


def head_color(h: int) -> str:
    """The colour of head ``h`` (0-based) in every figure; wraps around after 9 heads."""
    try:
        h = operator.index(h)
    except TypeError:
        raise ValueError(
            error_text("head index h={h} must be a whole number such as 0, 1, 2").format(h=repr(h))
        ) from None
    if h < 0:
        raise ValueError(
            error_text("head index h={h} is negative; heads are numbered from 0").format(h=h)
        )
    return HEAD_COLORS[h % len(HEAD_COLORS)]


def text_color_on(color) -> str:
    """Black or white, whichever reads better on a box filled with ``color``."""
    r, g, b = to_rgb(color)
    luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return "black" if luminance > 0.45 else "white"


def weight_norm() -> PowerNorm:
    """The 0..1 square-root colour scale every attention heatmap shares."""
    return PowerNorm(gamma=GAMMA, vmin=0.0, vmax=1.0, clip=True)
