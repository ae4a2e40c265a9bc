"""Lesson 08 · training on toy tasks (notebooks/08_training_copy_task.ipynb): how far back each
head of a trained model looks, and a batch of the repeat task, whose answers must be fetched
from the first half of the row.
"""

from __future__ import annotations

import torch

from ..i18n import N_, _
from ..masks import causal_mask
from ..tasks import IGNORE_INDEX, SEP, repeat_offset
from .core import Wrong, answer_tensor, call, checker, close, example_scores, masked_softmax

# --- exercise 8.1: how far back does each head look? ----------------------------------------


@checker("08", N_("return a (B, H, T) tensor: one distance per query of every head"))
def check_lookback_distance(fn) -> str:
    """``fn(weights (B, H, T, T)) -> (B, H, T)``: for query i, the weighted mean distance to
    the keys it reads, sum over j of weights[..., i, j] * (i - j)."""
    for B, H, T in ((2, 4, 6), (3, 8, 12), (1, 1, 3)):
        scores = example_scores(B, H, T, T)
        weights = masked_softmax(scores, causal_mask(T))  # (B, H, T, T)
        i = torch.arange(T)
        distance = (i[:, None] - i[None, :]).float()  # (T, T): i - j
        want = (weights * distance).sum(dim=-1)  # (B, H, T)
        got = call(fn, weights.clone())
        if isinstance(got, torch.Tensor) and tuple(got.shape) == (H,):
            raise Wrong(
                _("you returned one number per head; the exercise wants one per query"),
                _("keep the batch and the query axes: sum over the keys only, dim=-1"),
            )
        what = _("the distances for weights of shape {shape}").format(shape=(B, H, T, T))
        got = answer_tensor(got, what, (B, H, T))
        if close(got, want, 1e-5):
            continue
        if close(got, -want, 1e-5) and T > 1:
            raise Wrong(
                _("your distances are negative: you computed j - i"),
                _("a key in the past has j < i, so its distance is i - j >= 0"),
            )
        nearest = (weights.argmax(dim=-1) - i).abs().float()  # (B, H, T): the top key only
        if close(got, nearest, 1e-5):
            raise Wrong(
                _("you measured the distance to the key with the largest weight only"),
                _("weigh every key: (weights * distance).sum(dim=-1)"),
            )
        if close(got, (weights * distance.T).sum(dim=-1), 1e-5) and T > 1:
            raise Wrong(
                _("the distance matrix is transposed: entry [i, j] must be i - j"),
                _("distance = i[:, None] - i[None, :] with i = torch.arange(T)"),
            )
        raise Wrong(
            _("with weights of shape {shape} your distances differ by up to {gap:.3f}").format(
                shape=(B, H, T, T), gap=(got - want).abs().max().item()
            ),
            _("distance[i, j] = i - j; then (weights * distance).sum(dim=-1)"),
        )
    return _("for every query of every head: the mean distance back to the keys it reads")


# --- exercise 8.2: a batch of the repeat task -----------------------------------------------


def _reference_repeat_batch(first: torch.Tensor, T: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Loop version: row = first half, SEP, the first half again; targets shifted by one,
    the first m targets ignored."""
    m = repeat_offset(T)
    inputs = torch.empty(len(first), T, dtype=torch.long)
    targets = torch.empty(len(first), T, dtype=torch.long)
    for b, ids in enumerate(first.tolist()):
        row = [*ids, SEP, *ids[: T - m]]  # T + 1 tokens
        for t in range(T):
            inputs[b, t] = row[t]
            targets[b, t] = IGNORE_INDEX if t < m else row[t + 1]
    return inputs, targets


@checker("08", N_("return (inputs, targets), both int64 tensors of shape (N, T)"))
def check_repeat_batch(fn) -> str:
    """``fn(first, T) -> (inputs, targets)`` for the repeat task: ``first`` is (N, m) ids
    (m = (T + 1) // 2), each row is ``first``, the separator SEP = 0, then ``first`` again,
    cut to T + 1 tokens; targets are the next tokens, IGNORE_INDEX on the first m positions."""
    for N, T in ((3, 12), (2, 7), (1, 2)):
        m = repeat_offset(T)
        first = torch.randint(1, 20, (N, m))  # (N, m), ids 1.. (0 is the separator)
        result = call(fn, first.clone(), T)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise Wrong(
                _("your function returned a {type}, not (inputs, targets)").format(
                    type=type(result).__name__
                ),
                _("return inputs, targets"),
            )
        inputs = answer_tensor(result[0], _("inputs for T={T}").format(T=T), (N, T))
        targets = answer_tensor(result[1], _("targets for T={T}").format(T=T), (N, T))
        want_x, want_y = _reference_repeat_batch(first, T)  # (N, T), (N, T)
        if torch.equal(inputs, want_x) and torch.equal(targets, want_y):
            if targets.dtype != torch.long:
                raise Wrong(
                    _("targets have dtype {dtype}").format(dtype=targets.dtype),
                    _("use torch.long (int64)"),
                )
            continue
        where = _("with T={T} (m={m})").format(T=T, m=m)
        doubled = torch.cat([first, first], dim=1)[:, :T]  # (N, T): no separator
        if torch.equal(inputs, doubled):
            raise Wrong(
                _(
                    "{where}, the separator is missing: the second half starts right after "
                    "the first"
                ).format(where=where),
                _(
                    "put SEP = {sep} between the halves: torch.cat([first, sep, first], dim=1)"
                ).format(sep=SEP),
            )
        if not torch.equal(inputs, want_x):
            raise Wrong(
                _("{where}, the inputs differ from first + [SEP] + first in {count} places").format(
                    where=where, count=int((inputs != want_x).sum())
                ),
                _("build the row of T + 1 tokens, then inputs = row[:, :-1]"),
            )
        scored = want_y.clone()  # (N, T): the targets with the first half left in
        scored[:, :m] = want_x[:, 1 : m + 1]
        if torch.equal(targets, scored):
            raise Wrong(
                _(
                    "{where}, the first {m} targets are scored, but the first half is random: "
                    "no model can predict it"
                ).format(where=where, m=m),
                _("set targets[:, :m] = IGNORE_INDEX so the loss leaves them out"),
            )
        if torch.equal(targets[:, m:], inputs[:, m:]):
            raise Wrong(
                _("{where}, each target is the token at its own position").format(where=where),
                _("the target at t is the next token, t + 1: targets = row[:, 1:]"),
            )
        ignored = want_y == IGNORE_INDEX  # (N, T)
        if torch.equal(targets[~ignored], want_y[~ignored]):
            raise Wrong(
                _(
                    "{where}, the first half is marked with {values}, "
                    "not IGNORE_INDEX = {ignore_index}"
                ).format(
                    where=where,
                    values=targets[ignored].unique().tolist(),
                    ignore_index=IGNORE_INDEX,
                ),
                _("use IGNORE_INDEX ({ignore_index}); 0 is a real token, the separator").format(
                    ignore_index=IGNORE_INDEX
                ),
            )
        raise Wrong(
            _("{where}, the targets differ from the expected ones in {count} places").format(
                where=where, count=int((targets != want_y).sum())
            ),
            _("targets = row[:, 1:], then targets[:, :m] = IGNORE_INDEX"),
        )
    return _("row = first half, SEP, first half again; only the second half is scored")
