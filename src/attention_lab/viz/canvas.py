"""The figure canvas and its PNG: ``LabFigure``, ``png_bytes``/``to_png``, and the two drawing
pieces every heatmap and mask diagram shares, ``cell_image`` and ``blocked_stripes``.

* ``LabFigure``: a matplotlib Figure with a white background that is not registered with
  pyplot: a cell that ends with one shows it once as a PNG, and there is nothing to close.
  It draws on the Agg canvas ``_mpl_fast.canvas_class()`` picks: the fast one (labels
  rasterised once, then reused) when this matplotlib passes its check, else plain
  ``FigureCanvasAgg`` (``ATTENTION_LAB_PLAIN_AGG=1`` forces that).
* ``png_bytes``: RGBA or RGB pixels as a PNG, encoded for flat figures (``to_png(figure)``).
* ``cell_image``: ``imshow(data, interpolation="nearest")`` painted by numpy (fast path).
* ``blocked_stripes``: the dark diagonal stripes over the cells a mask blocked, as ONE
  hatched path -- the same stripes in the heatmaps, in the diagrams and on their keys.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import PathPatch, Rectangle
from matplotlib.path import Path

from . import _mpl_fast
from .palette import BLOCKED_HATCH_COLOR

BLOCKED_HATCH = "///"  # the stripes of a blocked cell, wherever it is drawn


class LabFigure(Figure):
    """A matplotlib Figure that Jupyter shows as a PNG when it ends a cell.

    It is not registered with pyplot, so it is never shown twice and never needs closing.
    It draws on the Agg canvas ``_mpl_fast`` picks and encodes its PNG with ``png_bytes``.
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("facecolor", "white")
        super().__init__(*args, **kwargs)
        _mpl_fast.canvas_class()(self)

    def _repr_png_(self) -> bytes:
        return to_png(self)


def to_png(figure: Figure) -> bytes:
    """Draw ``figure`` on its Agg canvas and return the PNG bytes (``png_bytes``)."""
    figure.canvas.draw()
    return png_bytes(np.asarray(figure.canvas.buffer_rgba()))


def png_bytes(pixels: np.ndarray) -> bytes:
    """Encode (height, width, 4) RGBA or (height, width, 3) RGB uint8 pixels as a PNG, fast.

    Made for figures: every row is stored as its difference to the row above (PNG's "Up"
    filter), which turns the many repeated rows of flat colour into zeros that zlib's
    fastest level packs small. A canvas's RGBA buffer is encoded as it is (no copy into
    RGB, which costs more than the alpha bytes, all 255 and all-zero differences, cost
    zlib). About three times as fast as Pillow's fastest setting here, at a similar size;
    the pixels are exact (it is lossless).
    """
    pixels = np.ascontiguousarray(pixels, dtype=np.uint8)  # no copy for a canvas buffer
    h, w, channels = pixels.shape
    if channels not in (3, 4):
        raise ValueError(f"pixels have shape {pixels.shape}; expected (height, width, 3 or 4)")
    rows = pixels.reshape(h, w * channels)
    raw = np.empty((h, w * channels + 1), dtype=np.uint8)  # filter byte, then the row
    raw[:, 0] = 2  # "Up"
    raw[0, 1:] = rows[0]
    np.subtract(rows[1:], rows[:-1], out=raw[1:, 1:])  # wraps modulo 256, as PNG wants

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    colour_type = 6 if channels == 4 else 2  # 8-bit RGBA or RGB, no interlace
    header = struct.pack(">IIBBBBB", w, h, 8, colour_type, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 1))
        + chunk(b"IEND", b"")
    )


def cell_image(ax, data, **kwargs):
    """``ax.imshow(data, interpolation="nearest", **kwargs)`` (row 0 on top, square cells):
    painted by numpy on the fast path (``_mpl_fast.CellImage``), by matplotlib otherwise."""
    image = _mpl_fast.image_class()(ax, interpolation="nearest", **kwargs)
    image.set_data(data)
    ax.add_image(image)
    image.set_extent(kwargs.get("extent") or image.get_extent())
    ax.set_aspect("equal")
    return image


def mask_cells(mask, dx: float = 0.0) -> list[tuple[float, float, float, float]]:
    """The blocked cells of a (T, T) ``mask`` (True = blocked; row i, column j centred on
    (dx + j, i)) as (x, y, w, h) rectangles, the cells of a row next to each other joined."""
    cells = []
    for i, row in enumerate(np.asarray(mask, bool)):
        j, T = 0, len(row)
        while j < T:
            if row[j]:
                start = j
                while j < T and row[j]:
                    j += 1
                cells.append((dx + start - 0.5, i - 0.5, float(j - start), 1.0))
            j += 1
    return cells


def stripes_path(cells) -> Path:
    """One path of the rectangles ``cells`` (Rectangles or (x, y, w, h) tuples)."""
    vertices, codes = [], []
    for cell in cells:
        if isinstance(cell, Rectangle):
            (x, y), w, h = cell.get_xy(), cell.get_width(), cell.get_height()
        else:
            x, y, w, h = cell
        vertices += [(x, y), (x + w, y), (x + w, y + h), (x, y + h), (x, y)]
        codes += [Path.MOVETO, Path.LINETO, Path.LINETO, Path.LINETO, Path.CLOSEPOLY]
    if not vertices:
        return Path(np.zeros((1, 2)), [Path.MOVETO])
    return Path(vertices, codes)


def blocked_stripes(ax, cells, gid="blocked stripes", lw=0.0, **kw) -> PathPatch:
    """Dark diagonal stripes (``BLOCKED_HATCH``) over the rectangles ``cells`` as ONE hatched
    path: Agg renders a hatch pattern per patch (about 1 ms each), so one path of 28 squares
    costs one pattern, not 28. ``lw`` > 0 also outlines every square. Update the cells of
    the returned patch with ``patch.set_path(stripes_path(cells))``."""
    cells = list(cells)
    first = cells[0] if cells else None
    kw.setdefault("zorder", first.get_zorder() if isinstance(first, Rectangle) else 1.0)
    kw.setdefault("clip_on", False)
    stripes = PathPatch(
        stripes_path(cells),
        facecolor="none",
        edgecolor=BLOCKED_HATCH_COLOR,
        lw=lw,
        hatch=BLOCKED_HATCH,
        gid=gid,
        **kw,
    )
    ax.add_artist(stripes)
    return stripes
