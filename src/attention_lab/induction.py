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
"""

from __future__ import annotations

import torch

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
