"""The ``"induction"`` task's rows (the two-layer lesson; ``make_batch("induction")``).

Random ids in which one segment of ``INDUCTION_SEGMENT`` = 8 *distinct* ids appears twice,
the second copy starting a random distance d >= 8 after the first: every placement of the
two copies that fits (``induction_placements``) is equally likely, so no fixed offset finds
the earlier copy. The ids around the copies are drawn from the ids *not* in the segment, so
each id of the second copy occurs exactly once before it: in the first copy.

Scored are the positions p holding the 1st..7th id of the second copy. The target there,
the id at p + 1 (the copy's 2nd..8th), is the id just after the one earlier occurrence of
x[p]: found by matching on content -- a previous-token head, then a head that matches on
it (an induction head) -- never by position. Nothing else is scored: the copy's first id
follows a random placement, and the id after its last one is filler.

Notebook 10's helpers: ``copy_starts`` (where a row's two copies start),
``in_context_guess`` (the baseline: a guess among the ids already seen, computed exactly),
``phase_change_step`` (the first step a training curve reaches a level) and
``split_lookup_batch`` (a lookup with the key and the value in separate tokens, which the
trained model is tried on without training).
"""

from __future__ import annotations

import torch

from ._checks import check_positive
from .i18n import error_text

INDUCTION_SEGMENT = 8  # the length of the repeated segment of "induction"


def induction_placements(context_length: int) -> torch.Tensor:
    """(P, 2) int64: every (start of the first copy, start of the second) that fits in
    ``context_length``: the second starts at least ``INDUCTION_SEGMENT`` after the first
    and ends inside the row. A row draws one of them, each equally likely (153 at T = 32)."""
    L, T = INDUCTION_SEGMENT, context_length
    return torch.tensor([(a, b) for b in range(L, T - L + 1) for a in range(b - L + 1)])


def induction_batch(
    n_rows: int,
    T: int,
    vocab_size: int,
    generator: torch.Generator | None = None,
    ignore_index: int = -100,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(inputs, targets)`` (n_rows, T) int64; use ``make_batch("induction", ...)``.

    Unscored targets hold ``ignore_index`` (``tasks.IGNORE_INDEX``, F.cross_entropy's default).
    """
    L = INDUCTION_SEGMENT
    if T < 2 * L + 1:
        raise ValueError(
            error_text(
                "the induction task needs context_length >= {least} (two copies of its "
                "{L}-token segment at more than one distance), got context_length={T}; try 32"
            ).format(least=2 * L + 1, L=L, T=T)
        )
    ids = torch.rand(n_rows, vocab_size, generator=generator).argsort(dim=1)  # (N, V): shuffled
    segment, others = ids[:, :L], ids[:, L:]  # (N, L), (N, V - L): no id in both
    pick = torch.randint(vocab_size - L, (n_rows, T + 1), generator=generator)  # (N, T + 1)
    row = others.gather(1, pick)  # (N, T + 1): filler, never an id of the segment
    places = induction_placements(T)  # (P, 2)
    first, second = places[torch.randint(len(places), (n_rows,), generator=generator)].unbind(1)
    span = torch.arange(L)  # (L,)
    rows = torch.arange(n_rows)[:, None]  # (N, 1)
    row[rows, first[:, None] + span] = segment  # the first copy
    row[rows, second[:, None] + span] = segment  # the second copy
    x, y = row[:, :-1].clone(), torch.full((n_rows, T), ignore_index)  # (N, T), (N, T)
    scored = second[:, None] + span[: L - 1]  # (N, L - 1): the copy's 1st..7th positions
    y[rows, scored] = row[rows, scored + 1]  # the copy's 2nd..8th ids
    return x, y


def copy_starts(x: torch.Tensor, y: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """(N, 2) int64: where the first and the second copy start in ``"induction"`` rows.

    ``x``, ``y``: (N, T) inputs and targets of ``induction_batch``. The second copy starts
    at the first scored position; the first copy where that position's id occurred before.
    """
    scored = _check_rows(x, y, ignore_index)  # (N, T)
    second = scored.to(torch.int8).argmax(dim=1)  # (N,): the first scored position
    same = x == x.gather(1, second[:, None])  # (N, T): where the second copy's first id sits
    first = same.to(torch.int8).argmax(dim=1)  # (N,): its first occurrence
    return torch.stack([first, second], dim=1)  # (N, 2)


def in_context_guess(
    x: torch.Tensor, y: torch.Tensor, *, once: bool = False, ignore_index: int = -100
) -> float:
    """The accuracy of a guess among the ids already seen, at the scored positions.

    ``x``, ``y``: (N, T) inputs and targets (unscored targets hold ``ignore_index``). At a
    scored position p the guess is drawn evenly from the distinct ids of ``x[:, :p + 1]``,
    or, with ``once=True``, from those that occur there exactly once; it is right with
    probability 1 / (number of candidates) if the target is one of them, else never.
    Returns the mean of that probability over every scored position: the expected
    accuracy, computed exactly (no sampling). In ``"induction"`` rows the target is always
    a candidate either way: it occurred once before, in the first copy.
    """
    scored = _check_rows(x, y, ignore_index)  # (N, T)
    V = int(max(x.max(), y.max())) + 1
    counts = torch.nn.functional.one_hot(x, V).cumsum(dim=1)  # (N, T, V): count of id up to p
    candidate = counts == 1 if once else counts > 0  # (N, T, V)
    target = y.clamp(min=0)[..., None]  # (N, T, 1): any id where unscored
    hit = candidate.gather(2, target)[..., 0].float()  # (N, T): is the target a candidate?
    chance = hit / candidate.sum(dim=2).clamp(min=1)  # (N, T)
    return chance[scored].mean().item()


def phase_change_step(accuracies, level: float = 0.5) -> int | None:
    """The first step (counted from 1) whose accuracy reaches ``level``; None if none does.

    ``accuracies``: one number per optimiser step, e.g. ``TrainHistory.step_accuracies``.
    """
    if not 0 < level <= 1:
        raise ValueError(
            error_text(
                "level={level} is not an accuracy between 0 and 1; pass e.g. level=0.5"
            ).format(level=repr(level))
        )
    for step, accuracy in enumerate(accuracies, start=1):
        if accuracy >= level:
            return step
    return None


def split_lookup_batch(
    n_rows: int,
    n_pairs: int = 8,
    vocab_size: int = 32,
    generator: torch.Generator | None = None,
    ignore_index: int = -100,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A lookup with the key and the value in separate tokens: ``(inputs, targets)``, both
    (n_rows, 4 * n_pairs) int64.

    A row is ``k1 v1 k2 v2 ... kP vP`` (P = ``n_pairs`` distinct keys from the ids
    0..vocab_size/2 - 1, distinct values from the rest), then the P pairs again as queries
    ``k v``, in a new random order. Scored are the queries' keys: the target at a query's
    key is its value. Elsewhere the targets hold ``ignore_index`` (the next pair or query
    is random). Notebook 09's ``"lookup"`` packs a key and its value into one token; here
    the value is the token *after* the key, which is what an induction head finds.
    """
    n_rows, P = check_positive("n_rows", n_rows), check_positive("n_pairs", n_pairs)
    vocab_size = check_positive("vocab_size", vocab_size)
    half = vocab_size // 2
    if P > half:
        raise ValueError(
            error_text(
                "n_pairs={n_pairs} needs {n_pairs} distinct keys and values, but "
                "vocab_size={vocab_size} has {half} of each; pass n_pairs <= {half}"
            ).format(n_pairs=P, vocab_size=vocab_size, half=half)
        )
    keys = torch.rand(n_rows, half, generator=generator).argsort(dim=1)[:, :P]  # (N, P)
    values = half + torch.rand(n_rows, vocab_size - half, generator=generator).argsort(dim=1)
    values = values[:, :P]  # (N, P): ids half..vocab_size-1
    order = torch.rand(n_rows, P, generator=generator).argsort(dim=1)  # (N, P): query order
    pairs = torch.stack([keys, values], dim=2).flatten(1)  # (N, 2P): k1 v1 k2 v2 ...
    asked_keys, asked_values = keys.gather(1, order), values.gather(1, order)  # (N, P) each
    queries = torch.stack([asked_keys, asked_values], dim=2).flatten(1)  # (N, 2P)
    x = torch.cat([pairs, queries], dim=1)  # (N, 4P)
    y = torch.full_like(x, ignore_index)  # (N, 4P)
    y[:, 2 * P :: 2] = asked_values  # at each query's key: its value
    return x, y


def _check_rows(x: torch.Tensor, y: torch.Tensor, ignore_index: int) -> torch.Tensor:
    """The (N, T) bool of scored positions, after checking that x and y are rows of ids."""
    ok = isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)
    ok = ok and x.dim() == 2 and x.shape == y.shape and not x.is_floating_point()
    if not ok:
        raise ValueError(
            error_text(
                "x and y must be (N, T) tensors of token ids of the same shape, got {x} and "
                "{y}; pass the inputs and targets of make_batch"
            ).format(
                x=tuple(getattr(x, "shape", ())) or type(x).__name__,
                y=tuple(getattr(y, "shape", ())) or type(y).__name__,
            )
        )
    scored = y != ignore_index  # (N, T)
    if not scored.any():
        raise ValueError(
            error_text(
                "no target is scored: every target is ignore_index={ignore_index}; pass the "
                "targets of make_batch"
            ).format(ignore_index=ignore_index)
        )
    return scored
