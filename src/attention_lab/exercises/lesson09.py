"""Lesson 09 · a lookup by content, and how many heads (notebooks/09_lookup_and_heads.ipynb):
the weight each head puts on a key a fixed distance back, measured by hand, and attention
weights that take one fixed offset, built to be frozen into a model.
"""

from __future__ import annotations

import torch

from ..i18n import N_, _
from ..interventions import source_shares
from ..masks import causal_mask
from .core import Wrong, answer_tensor, call, checker, close, example_scores, masked_softmax

# --- exercise 9.1: the weight on key i - k, per head -----------------------------------------


def _offset_share(weights: torch.Tensor, k: int, *, counted_from: int | None = None):
    """Mean over batch and queries of weights[..., i, i - k] (k < 0: the key |k| ahead), over
    the queries from ``counted_from`` (default: those that have the key) divided by the count
    of queries that have it: the variants of the checker's mistakes."""
    T = weights.shape[-1]
    diagonal = torch.diagonal(weights, offset=-k, dim1=-2, dim2=-1)  # (B, H, T - |k|)
    total = diagonal.sum(dim=(0, -1))  # (H,)
    n = weights.shape[0] * (T - abs(k) if counted_from is None else T - counted_from)
    return total / n


@checker("09", N_("return a (H,) tensor: one share per head"))
def check_offset_share(fn) -> str:
    """``fn(weights (B, H, T, T), k) -> (H,)``: the mean, over the batch and the queries
    i >= k, of the weight each head puts on key i - k."""
    for B, H, T, k in ((4, 4, 12, 1), (3, 2, 8, 2), (2, 3, 10, 3), (2, 4, 6, 0)):
        weights = masked_softmax(example_scores(B, H, T, T), causal_mask(T))  # (B, H, T, T)
        want = source_shares(weights, offsets=k)  # (H,)
        got = call(fn, weights.clone(), k)
        where = _("with k={k} and weights of shape {shape}").format(k=k, shape=(B, H, T, T))
        if isinstance(got, torch.Tensor) and got.dim() == 0:
            raise Wrong(
                _("{where}, you returned one number: the heads were averaged together").format(
                    where=where
                ),
                _("keep the head axis: average over the batch and the queries only"),
            )
        if isinstance(got, torch.Tensor) and tuple(got.shape) == (B, H):
            raise Wrong(
                _("{where}, you returned one share per row and head, shape (B, H)").format(
                    where=where
                ),
                _("average over the batch too: one share per head, shape (H,)"),
            )
        got = answer_tensor(got, _("the shares {where}").format(where=where), (H,))
        if close(got, want):
            continue
        if k > 0 and close(got, torch.zeros(H)):
            raise Wrong(
                _(
                    "{where}, every share is 0: you read key i + k, above the diagonal, "
                    "where the causal mask leaves no weight"
                ).format(where=where),
                _(
                    "key i - k of query i is weights[..., i, i - k]: "
                    "torch.diagonal(weights, offset=-k, dim1=-2, dim2=-1)"
                ),
            )
        for wrong in (k - 1, k + 1):
            if 0 <= wrong < T and close(got, _offset_share(weights, wrong)):
                raise Wrong(
                    _("{where}, you measured the key {wrong} back, not {k} back").format(
                        where=where, wrong=wrong, k=k
                    ),
                    _("query i's key k back is j = i - k; check the offset's sign and size"),
                )
        if k > 0 and close(got, _offset_share(weights, k, counted_from=0)):
            raise Wrong(
                _(
                    "{where}, you divided by all {T} queries, but the first {k} have no key "
                    "{k} back: their zeros pull the mean down"
                ).format(where=where, T=T, k=k),
                _("average over the queries i >= k only (T - k of them per row)"),
            )
        if close(got, _offset_share(weights, k) * B * (T - k)):
            raise Wrong(
                _("{where}, your shares are sums, not means").format(where=where),
                _("divide by the number of weights you added: B * (T - k)"),
            )
        raise Wrong(
            _("{where}, your shares differ by up to {gap:.3f}").format(
                where=where, gap=(got - want).abs().max().item()
            ),
            _("take weights[b, h, i, i - k] for every b and every i >= k, and average them"),
        )
    return _("for every head: the mean weight on the key k back, over the queries that have it")


# --- exercise 9.2: weights that take one fixed offset ----------------------------------------


def _offset_weights(T: int, k: int) -> torch.Tensor:
    """(T, T): query i puts all its weight on key max(i - k, 0), written as a loop."""
    weights = torch.zeros(T, T)
    for i in range(T):
        weights[i, max(i - k, 0)] = 1.0
    return weights


@checker("09", N_("return a float (T, T) tensor of attention weights"))
def check_offset_weights(fn) -> str:
    """``fn(T, k) -> (T, T)``: query i puts all its weight on key i - k; the first k queries,
    which have no such key, on key 0."""
    for T, k in ((12, 1), (12, 2), (8, 0), (6, 3), (5, 4)):
        want = _offset_weights(T, k)  # (T, T)
        where = _("for T={T}, k={k}").format(T=T, k=k)
        got = answer_tensor(call(fn, T, k), _("the weights {where}").format(where=where), (T, T))
        if not torch.is_floating_point(got):
            raise Wrong(
                _("{where}, the weights have dtype {dtype}").format(where=where, dtype=got.dtype),
                _("weights are numbers between 0 and 1: build them with torch.zeros(T, T)"),
            )
        if close(got, want):
            continue
        if k > 0 and (got[k:].detach() * causal_mask(T)[k:]).abs().sum() > 0:
            raise Wrong(
                _("{where}, the weight sits on key i + k: the future, above the diagonal").format(
                    where=where
                ),
                _("row i is the query: weights[i, i - k] = 1, with i - k <= i"),
            )
        for wrong in (k - 1, k + 1):
            if wrong >= 0 and close(got, _offset_weights(T, wrong)):
                raise Wrong(
                    _("{where}, the weight sits {wrong} back, not {k} back").format(
                        where=where, wrong=wrong, k=k
                    ),
                    _("query i's key k back is j = i - k"),
                )
        rows = got.detach().double().sum(dim=-1)  # (T,)
        if k > 0 and close(got[k:], want[k:]) and not close(rows[:k], torch.ones(k)):
            raise Wrong(
                _(
                    "{where}, the first {k} rows sum to {sums}, not 1: those queries have no "
                    "key {k} back, and freeze_attention refuses rows that do not sum to 1"
                ).format(where=where, k=k, sums=[round(s, 3) for s in rows[:k].tolist()]),
                _("give the first k queries their weight on key 0: key max(i - k, 0)"),
            )
        if k > 0 and close(got[k:], want[k:]):
            if (got[:k].detach() * causal_mask(T)[:k]).abs().sum() > 0:
                message = _(
                    "{where}, the queries from {k} on are right, but the first {k} put weight "
                    "on a key in the future (torch.roll wraps around)"
                )
            else:
                message = _(
                    "{where}, the queries from {k} on are right, but the first {k} put their "
                    "weight elsewhere than on key 0"
                )
            raise Wrong(
                message.format(where=where, k=k),
                _("give the first k queries their weight on key 0: key max(i - k, 0)"),
            )
        raise Wrong(
            _("{where}, your weights differ from the expected ones in {count} places").format(
                where=where, count=int((~torch.isclose(got.detach().float(), want)).sum())
            ),
            _("start from torch.zeros(T, T) and set weights[i, max(i - k, 0)] = 1 in every row"),
        )
    return _("each query puts all its weight on key i - k (the first k queries on key 0)")
