"""Where the heads look: per-head source shares and key rules (``attention_lab.interventions``)."""

from __future__ import annotations

import math

import torch

from .._checks import as_size
from ..i18n import error_text


def source_shares(
    weights: torch.Tensor,
    *,
    offsets=None,
    keys: torch.Tensor | None = None,
    per_query: bool = False,
):
    """Mean weight each head puts on chosen keys, over the queries where those keys exist.

    ``weights``: (T, T), (H, T, T), (B, H, T, T) or (B, L, H, T, T); the mean runs over the
    batch and the queries, so the result is (), (H,), (H,) or (L, H).
    ``offsets=k``: key i - k for query i (queries i >= k); a list of k's gives {k: shares}.
    ``keys``: a bool rule (T, T) or (B, T, T), True where a key counts for a query (for
    example ``last_match_keys(is_space)``); the weights on a query's True keys are summed,
    and queries with no True key are left out.
    ``per_query=True`` skips the mean: each query's share, ``weights.shape[:-1]``, NaN where
    the query has no such key.
    """
    if (offsets is None) == (keys is None):
        raise ValueError(
            error_text("pass exactly one of offsets=k (e.g. offsets=1) or keys=rule (B, T, T)")
        )
    if offsets is not None and as_size(offsets) is None:
        return {k: source_shares(weights, offsets=k, per_query=per_query) for k in offsets}
    w = weights.reshape((1,) * max(0, 4 - weights.dim()) + tuple(weights.shape))  # (B, .., T, T)
    T = w.shape[-1]
    if offsets is not None:
        i = torch.arange(T, device=w.device)
        keys = (i[None, :] - i[:, None]) == -as_size(offsets)  # (T, T): key j = i - k
    rule = keys if getattr(keys, "ndim", 0) != 2 else keys[None]  # (B or 1, T, T)
    fits = isinstance(rule, torch.Tensor) and rule.dtype == torch.bool and rule.dim() == 3
    if not (fits and rule.shape[-2:] == (T, T) and rule.shape[0] in (1, w.shape[0])):
        raise ValueError(
            error_text(
                "keys has shape {shape} and dtype {dtype}, but these weights need a bool rule "
                "({T}, {T}) or ({B}, {T}, {T}); build it with last_match_keys or "
                "after_previous_occurrence"
            ).format(
                shape=tuple(getattr(keys, "shape", ())),
                dtype=getattr(keys, "dtype", type(keys).__name__),
                T=T,
                B=w.shape[0],
            )
        )
    rule = rule.view(rule.shape[0], *([1] * (w.dim() - 3)), T, T).to(w.device)  # (B, .., T, T)
    on_keys = (w * rule).sum(dim=-1)  # (B, ..., T): weight each query puts on its keys
    counted = rule.any(dim=-1).expand_as(on_keys)  # (B, ..., T)
    if per_query:
        return on_keys.masked_fill(~counted, math.nan).reshape(weights.shape[:-1])
    dims = (0, on_keys.dim() - 1)
    n = counted.to(w.dtype)
    shares = (on_keys * n).sum(dim=dims) / n.sum(dim=dims)  # (...,): NaN where no query counts
    return shares.reshape(weights.shape[-3:-2] if weights.dim() <= 4 else weights.shape[1:-2])


def last_match_keys(is_target: torch.Tensor) -> torch.Tensor:
    """(B, T) or (T,) bool -> (B, T, T) rule: for query i, the last key j < i with is_target."""
    t = is_target if is_target.dim() == 2 else is_target[None]  # (B, T)
    B, T = t.shape
    pos = torch.arange(T, device=t.device).expand(B, T)  # (B, T)
    last = torch.where(t, pos, -1).cummax(dim=1).values  # (B, T): last target at or before j
    before = torch.cat([torch.full((B, 1), -1, device=t.device), last[:, :-1]], dim=1)  # j < i
    return (pos[:, None, :] == before[:, :, None]) & (before[:, :, None] >= 0)  # (B, T, T)


def after_previous_occurrence(ids: torch.Tensor) -> torch.Tensor:
    """(B, T) or (T,) ids -> (B, T, T) rule: for query i, every key j <= i whose previous token
    ids[j - 1] equals ids[i] (the induction rule: look just after an earlier occurrence)."""
    x = ids if ids.dim() == 2 else ids[None]  # (B, T)
    B, T = x.shape
    same = x[:, None, :-1] == x[:, :, None]  # (B, T, T - 1): ids[j - 1] == ids[i], j = 1..T-1
    rule = torch.cat([torch.zeros(B, T, 1, dtype=torch.bool, device=x.device), same], dim=2)
    i = torch.arange(T, device=x.device)
    return rule & (i[None, :] <= i[:, None])  # (B, T, T): only keys j <= i
