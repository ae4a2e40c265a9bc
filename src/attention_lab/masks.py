"""Attention masks (notebook 04; the sliding window is an exercise).

One convention everywhere in this library: a mask is a ``torch.bool`` tensor and
**True means blocked** -- that score is replaced by -inf before the softmax, so its
weight is exactly 0. Row i is the query position, column j the key position.

``torch.nn.MultiheadAttention`` uses the same convention for a boolean ``attn_mask``.
``torch.nn.functional.scaled_dot_product_attention`` uses the opposite one (True = may
attend): pass it ``to_sdpa_mask(mask)``.
"""

from __future__ import annotations

import torch

from ._checks import check_positive
from .i18n import error_text


def causal_mask(T: int, device: torch.device | str | None = None) -> torch.Tensor:
    """(T, T) bool, True above the diagonal: position i may not look at any j > i."""
    check_positive("T", T)
    return torch.triu(torch.ones(T, T, dtype=torch.bool, device=device), diagonal=1)


def sliding_window_mask(
    T: int, window: int, device: torch.device | str | None = None
) -> torch.Tensor:
    """(T, T) bool: position i sees itself and the ``window - 1`` positions before it.

    Everything in the future is blocked (as in ``causal_mask``), and so is everything
    ``window`` or more steps in the past. ``window >= T`` gives back the causal mask.
    """
    check_positive("T", T)
    check_positive("window", window)
    ones = torch.ones(T, T, dtype=torch.bool, device=device)
    future = torch.triu(ones, diagonal=1)  # j > i
    too_old = torch.tril(ones, diagonal=-window)  # j <= i - window
    return future | too_old


def no_mask(T: int, device: torch.device | str | None = None) -> torch.Tensor:
    """(T, T) bool, all False: every position may look everywhere (an encoder)."""
    check_positive("T", T)
    return torch.zeros(T, T, dtype=torch.bool, device=device)


def to_sdpa_mask(mask: torch.Tensor) -> torch.Tensor:
    """Flip our convention (True = blocked) into SDPA's boolean ``attn_mask`` (True = attend)."""
    return ~mask


def build_mask(kind: str, T: int, window: int | None = None, device=None) -> torch.Tensor:
    """``kind`` is "causal", "sliding" (needs ``window``) or "none"."""
    if window is not None and kind != "sliding":
        raise ValueError(
            error_text(
                "window={window} only applies to mask_kind='sliding', not mask_kind={kind}; "
                "pass mask_kind='sliding' or leave window out"
            ).format(window=window, kind=repr(kind))
        )
    if kind == "causal":
        return causal_mask(T, device)
    if kind == "sliding":
        if window is None:
            raise ValueError(error_text("mask_kind='sliding' needs a window, e.g. window=8"))
        return sliding_window_mask(T, window, device)
    if kind == "none":
        return no_mask(T, device)
    raise ValueError(
        error_text("mask_kind={kind} is not known; use 'causal', 'sliding' or 'none'").format(
            kind=repr(kind)
        )
    )


def offset_mask(
    kind: str, start: int, T: int, T_k: int, window: int | None = None, device=None
) -> torch.Tensor:
    """(T, T_k) bool, True = blocked: the mask of T queries at absolute positions
    start .. start + T - 1 over the T_k keys that end with them (a KV cache's keys, then the
    new ones; notebook 12_attention_in_todays_llms). ``kind`` is "causal" or "sliding".

    Built from absolute positions, so it is ``build_mask(kind, T, window)`` when start = 0
    and T_k = T, and its bottom-right corner otherwise.
    """
    q = torch.arange(start, start + T, device=device)[:, None]  # (T, 1) query positions
    k = torch.arange(start + T - T_k, start + T, device=device)[None, :]  # (1, T_k) key positions
    blocked = k > q  # (T, T_k): the future
    if kind == "sliding":
        blocked = blocked | (k <= q - window)  # (T, T_k): older than the window
    return blocked
