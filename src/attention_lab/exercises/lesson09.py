"""Lesson 09 · a lookup by content, and how many heads (notebooks/09_lookup_and_heads.ipynb):
the weight each head puts on a key a fixed distance back, measured by hand; attention
weights that take one fixed offset, built to be frozen into a model; and the best accuracy a
readout can reach from heads frozen to even averages, predicted before it is measured.
"""

from __future__ import annotations

import math

import torch

from ..i18n import N_, _
from ..interventions import source_shares
from ..masks import causal_mask
from .core import (
    Wrong,
    answer_number,
    answer_tensor,
    call,
    checker,
    close,
    example_scores,
    masked_softmax,
)

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


# --- exercise 9.3: what a readout can learn from frozen heads --------------------------------

_SOURCES = (0, 1, 2)  # the trigram's sources: the letters at i, i - 1 and i - 2


def _views_ceiling(n_letters: int, heads) -> float:
    """The best accuracy of a reader that sees, from each head, the letters of its sources
    without their order, written as an enumeration: every word (l_0, l_1, l_2) of n_letters
    letters, what the reader sees of it, and one right guess per distinct view (all words are
    equally likely, so the best reader is right on one word of each view)."""
    from itertools import product

    groups = sorted({tuple(sorted(set(head))) for head in heads})
    views = {
        tuple(tuple(sorted(word[k] for k in group)) for group in groups)
        for word in product(range(n_letters), repeat=len(_SOURCES))
    }
    return len(views) / n_letters ** len(_SOURCES)


def _bags(n: int, k: int, *, distinct: bool = False) -> int:
    """How many bags of k letters (sorted tuples) n letters make; ``distinct``: no letter twice."""
    return math.comb(n, k) if distinct else math.comb(n + k - 1, k)


def _heads_mistakes(n: int, heads) -> list[tuple[float, str, str]]:
    """``[(value, message, hint)]``: what each typical mistake gives for ``heads``."""
    groups = sorted({tuple(sorted(set(head))) for head in heads})
    kept = {k for group in groups for k in group}
    missing = len(_SOURCES) - len(kept)

    def product_of(per_group, per_missing=1.0 / n, groups=groups) -> float:
        value = per_missing**missing
        for group in groups:
            value *= per_group(len(group))
        return value

    def unweighted(k: int) -> float:
        from itertools import combinations_with_replacement

        orders = [
            math.factorial(k) / math.prod(math.factorial(bag.count(a)) for a in set(bag))
            for bag in combinations_with_replacement(range(n), k)
        ]
        return sum(1 / o for o in orders) / len(orders)

    mistakes = [
        (
            product_of(lambda k: 1 / math.factorial(k)),
            _(
                "you counted k! orders for a head over k sources, as if its letters always "
                "differed; a bag with a letter twice has fewer orders, and 'aaa' only one"
            ),
            _(
                "count the words of each bag of letters: the reader guesses one of them, so it "
                "is right on one word per bag"
            ),
        ),
        (
            product_of(unweighted),
            _(
                "you averaged 1 / (its orders) over the bags of letters, as if every bag were "
                "equally likely; a bag with more orders holds more words and comes more often"
            ),
            _(
                "average over the n ** k equally likely words, not over the bags: one right "
                "guess per bag, so (number of bags) / n ** k"
            ),
        ),
        (
            product_of(lambda k: _bags(n, k, distinct=True) / n**k),
            _(
                "you counted only the bags of different letters (itertools.combinations); "
                "'aab' and 'aaa' are bags too"
            ),
            _("bags may repeat a letter: itertools.combinations_with_replacement"),
        ),
    ]
    if missing:
        mistakes += [
            (
                product_of(lambda k: _bags(n, k) / n**k, per_missing=1.0),
                _(
                    "you left out the {missing} source(s) that no head takes: the readout never "
                    "sees that letter and can only guess it, right 1 time in {n}"
                ).format(missing=missing, n=n),
                _("multiply by 1 / n_letters for every distance from 0, 1, 2 that no head takes"),
            ),
            (
                0.0,
                _(
                    "you answered 0 because a source is missing; the readout can still guess "
                    "that letter, right 1 time in {n}"
                ).format(n=n),
                _("a source no head brings costs a factor 1 / n_letters, not everything"),
            ),
        ]
    every = [tuple(sorted(set(head))) for head in heads]
    if len(every) > len(groups):
        mistakes.append(
            (
                product_of(lambda k: _bags(n, k) / n**k, groups=every),
                _(
                    "you counted two heads that average the same sources twice; they bring the "
                    "same average, so the second adds nothing"
                ),
                _("count each distinct set of distances once: a set of sorted tuples"),
            )
        )
    if len(groups) > 1:
        mistakes.append(
            (
                sum(_bags(n, len(g)) / n ** len(g) for g in groups) / len(groups) / n**missing,
                _(
                    "you averaged the heads' ceilings; the readout must get every head's "
                    "letters right at once, so their chances multiply"
                ),
                _(
                    "multiply the ceilings of the distinct heads (and 1 / n_letters per "
                    "missing source)"
                ),
            )
        )
    mistakes.append(
        (
            1.0 / n ** len(_SOURCES),
            _("that is chance over all {words} words, a reader that sees nothing").format(
                words=n ** len(_SOURCES)
            ),
            _("each head's average tells the reader which letters its sources hold"),
        )
    )
    return mistakes


@checker("09", N_("return one float: the best accuracy a readout can reach"))
def check_frozen_ceiling(fn) -> str:
    """``fn(n_letters, heads) -> float``: the best accuracy on the trigram task of a readout
    that reads heads frozen to even averages, head h over the distances ``heads[h]`` (a tuple
    from 0, 1, 2); two heads either take the same distances or share none."""
    cases = (
        (4, [(0, 1, 2)]),
        (4, [(0,), (1,), (2,), (2,)]),
        (4, [(0,), (1,), (1,), (1,)]),
        (4, [(0, 1), (0, 1), (2,), (2,)]),
        (3, [(1, 2), (1, 2)]),
        (2, [(0, 1, 2), (0, 1, 2)]),
        (5, [(2,)]),
    )
    for n, heads in cases:
        want = _views_ceiling(n, heads)
        where = _("with n_letters={n} and heads={heads}").format(n=n, heads=heads)
        answer = call(fn, n, [tuple(h) for h in heads])
        got = answer_number(answer, where, _("return one float between 0 and 1"))
        if math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12):
            continue
        if math.isclose(got, 100 * want, rel_tol=1e-9):
            raise Wrong(
                _("{where}, you returned a percentage, {got:g}").format(where=where, got=got),
                _("return the accuracy as a fraction between 0 and 1"),
            )
        for value, message, hint in _heads_mistakes(n, heads):
            if math.isclose(got, value, rel_tol=1e-9, abs_tol=1e-12):
                raise Wrong(_("{where}: {message}").format(where=where, message=message), hint)
        raise Wrong(
            _("{where}, you predict {got:.4f}; the best readout reaches {want:.4f}").format(
                where=where, got=got, want=want
            ),
            _(
                "per distinct head over k sources: (bags of k letters) / n ** k; per source no "
                "head takes: 1 / n; multiply them"
            ),
        )
    return _(
        "the ceiling of every frozen set of heads: one right guess per bag of letters each head "
        "sees, 1 in n_letters for a letter no head brings"
    )
