"""The online softmax of one query row, worked with numbers tile by tile: what the bonus
notebook's ``tiled_softmax`` draws (``online_softmax_steps``), and its example row."""

from __future__ import annotations

import math

import numpy as np

from ...i18n import error_text
from ..arrays import to_numpy
from ._draw import _size, _weights


def online_softmax_steps(scores, tile: int, values=None) -> list[dict]:
    """The online softmax of one row of ``scores`` (T,), read ``tile`` keys at a time.

    Returns one dict per tile, the numbers a tiled attention keeps after reading it:

    * ``step``, ``first``, ``last``: the tile's number and its first and last key (inclusive);
    * ``scores``: the tile's scores; ``tile_max``: their maximum;
    * ``m_old``, ``m``: the running max before and after (``m_old`` is -inf at step 0);
    * ``rescale``: exp(m_old - m), what the old ``l`` and ``acc`` are multiplied by (0 at
      step 0);
    * ``l``: the running sum of exp(s - m) over the keys read so far;
    * ``acc`` (only with ``values``, (T,) or (T, d)): the running sum of exp(s - m) * v;
      ``out`` = acc / l;
    * ``weights``: exp(s - m) / l for the keys read so far: after the last tile, exactly
      ``torch.softmax(scores, dim=-1)``.

    Plain Python floats (lists for a (T, d) ``values``), so a notebook can print them::

        for step in online_softmax_steps(torch.tensor([1.0, 3.0, 0.5, 2.0]), tile=2):
            print(step["step"], step["m"], step["rescale"], step["l"])
    """
    s = _weights(scores, "scores", 1)
    T = len(s)
    tile = _size("tile", tile, 1, max(T, 1), example=max(1, T // 2))
    v = None
    if values is not None:
        v = to_numpy(values, float)
        if v.ndim not in (1, 2) or v.shape[0] != T:
            raise ValueError(
                error_text(
                    "values have shape {shape}; pass one value per key: ({T},) or ({T}, d)"
                ).format(shape=v.shape, T=T)
            )
    m, l, acc = -math.inf, 0.0, None if v is None else np.zeros(v.shape[1:])
    steps = []
    for k, first in enumerate(range(0, T, tile)):
        last = min(T, first + tile) - 1
        block = s[first : last + 1]
        tile_max = float(block.max())
        m_new = max(m, tile_max)
        rescale = math.exp(m - m_new)  # exp(-inf) = 0 on the first tile
        p = np.exp(block - m_new)
        l = l * rescale + float(p.sum())
        step = {
            "step": k,
            "first": first,
            "last": last,
            "scores": block.tolist(),
            "tile_max": tile_max,
            "m_old": m,
            "m": m_new,
            "rescale": rescale,
            "l": l,
        }
        if v is not None:
            acc = acc * rescale + p @ v[first : last + 1]
            step["acc"] = acc.tolist() if acc.ndim else float(acc)
            step["out"] = (acc / l).tolist() if acc.ndim else float(acc / l)
        step["weights"] = (np.exp(s[: last + 1] - m_new) / l).tolist()
        m = m_new
        steps.append(step)
    return steps


def example_row(T: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A seeded row of T scores (one decimal) and T small whole-number values."""
    rng = np.random.default_rng(seed)
    scores = np.round(rng.normal(0.0, 1.5, T), 1)
    values = rng.integers(-3, 4, T).astype(float)
    return scores, values
