"""Tensors and arrays to numpy, once for every picture (``viz``: heatmaps, ``HeadGrid``, diagrams).

``to_numpy`` takes a tensor (on any device, with or without grad) or anything numpy reads
and returns a numpy array; ``as_heads`` and ``as_bool_mask`` add the shape and dtype checks
the heatmaps need, with messages that say what to pass instead.
"""

from __future__ import annotations

import numpy as np


def to_numpy(values, dtype=None) -> np.ndarray:
    """``values`` (a tensor, an array, a list) as a numpy array of ``dtype`` (None: its own).

    A tensor is detached and moved to the CPU first; half and bfloat16 tensors, which numpy
    cannot hold or hold poorly, are widened to float32. Nothing else loses precision.
    """
    if hasattr(values, "detach"):  # a torch tensor
        values = values.detach().cpu()
        if values.is_floating_point() and values.element_size() < 4:
            values = values.float()
        values = values.numpy()
    return np.asarray(values, dtype=dtype)


def as_heads(weights) -> np.ndarray:
    """Attention weights (T, T), (H, T, T) or (1, H, T, T) as a float (H, T, T) array."""
    w = to_numpy(weights, float)
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


def as_bool_mask(mask) -> np.ndarray:
    """A boolean mask (True = blocked) as a numpy bool array; a float mask is refused."""
    dtype = getattr(mask, "dtype", None)
    m = to_numpy(mask)
    if m.dtype != bool:
        raise ValueError(
            f"mask has dtype {dtype or m.dtype}; pass a boolean mask with True where attention "
            "is blocked (e.g. causal_mask(T)), not an additive float mask"
        )
    return m
