"""``CellImage``: heatmap cells painted by numpy, the fast path's image (``_mpl_fast``).

Public matplotlib API only (it overrides ``AxesImage.make_image``, whose contract is
documented); ``_mpl_fast.image_class()`` hands it out only after its probe showed that it
paints the pixels matplotlib's own resampling paints, else plain ``AxesImage``.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.image import AxesImage
from matplotlib.transforms import IdentityTransform


class CellImage(AxesImage):
    """An ``imshow`` image (nearest neighbour, axis-aligned) painted by numpy: each screen
    pixel takes the colour of the cell its centre falls in -- what matplotlib's resampling
    gives, for a fraction of the work. Anything else is left to ``AxesImage``."""

    def make_image(self, renderer, magnification=1.0, unsampled=False):
        try:
            return self._paint(renderer, magnification, unsampled)
        except Exception:  # noqa: BLE001 -- whatever matplotlib changed: its own resampling
            return super().make_image(renderer, magnification, unsampled)

    def _paint(self, renderer, magnification, unsampled):
        trans = self.get_transform()
        if unsampled or magnification != 1.0 or not trans.is_affine or self.origin != "upper":
            return super().make_image(renderer, magnification, unsampled)
        data = self.get_array()
        n_rows, n_cols = data.shape[:2]
        left, right, bottom, top = self.get_extent()
        (x_left, y_top), (x_right, y_bottom) = trans.transform([(left, top), (right, bottom)])
        if abs(trans.transform((left, bottom))[0] - x_left) > 1e-6:  # rotated: not ours
            return super().make_image(renderer, magnification, unsampled)
        clip = self.get_clip_box() or self.axes.bbox
        width, height = renderer.get_canvas_width_height()
        lo_x = max(min(x_left, x_right), clip.x0, 0.0)
        hi_x = min(max(x_left, x_right), clip.x1, width)
        lo_y = max(min(y_top, y_bottom), clip.y0, 0.0)
        hi_y = min(max(y_top, y_bottom), clip.y1, height)
        px = np.arange(math.ceil(lo_x - 0.5), math.floor(hi_x - 0.5) + 1)  # pixel columns
        py = np.arange(math.ceil(lo_y - 0.5), math.floor(hi_y - 0.5) + 1)  # rows, bottom first
        if px.size == 0 or py.size == 0:
            return None, 0, 0, None
        # a pixel centre exactly on a cell edge goes to the earlier cell (matplotlib 3.11)
        cols = np.floor((px + 0.5 - x_left) / (x_right - x_left) * n_cols - 1e-6).astype(int)
        rows = np.floor((py + 0.5 - y_top) / (y_bottom - y_top) * n_rows - 1e-6).astype(int)
        rgba = self.to_rgba(data, bytes=True, norm=True)  # (n_rows, n_cols, 4) uint8
        image = _repeat(
            _repeat(rgba, np.clip(rows, 0, n_rows - 1), 0), np.clip(cols, 0, n_cols - 1), 1
        )
        return image, int(px[0]), int(py[0]), IdentityTransform()  # Agg: row 0 at the bottom


def _repeat(a: np.ndarray, index: np.ndarray, axis: int) -> np.ndarray:
    """``a.take(index, axis)`` for a monotonic ``index`` (runs of one cell), by ``np.repeat``:
    about 15 times faster than fancy indexing on a panel."""
    lo, hi = int(index.min()), int(index.max())
    part = a.take(np.arange(lo, hi + 1), axis=axis)
    counts = np.bincount(index - lo, minlength=hi - lo + 1)
    if index[0] > index[-1]:  # decreasing: the cells in reverse order
        part, counts = np.flip(part, axis), counts[::-1]
    return np.repeat(part, counts, axis=axis)
