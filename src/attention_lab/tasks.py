"""Toy tasks to train attention on (notebook 08).

* ``"copy"``: each row is one random id repeated over the whole context; the
  targets are the inputs shifted by one, so the next token always equals the last one.
  There are only ``vocab_size`` different rows.
* ``"previous"``: random ids; the target at position i is the token at i - 1. A model
  can only solve it by looking one step back, so a trained head lights up the
  sub-diagonal of its attention map. Position 0 has no answer and is ignored.
* ``"repeat"``: a random sequence, a separator (id ``SEP`` = 0), then the same sequence
  again. The second half can only be written by fetching each token from the first half,
  m = ``(T + 1) // 2`` positions back: a trained head draws a diagonal shifted by m.
  Only the second half is scored; the first half is random and cannot be predicted.
"""

from __future__ import annotations

import torch

from ._checks import check_positive

TASKS = ("copy", "previous", "repeat")
IGNORE_INDEX = -100  # targets with this value are left out of the loss and the accuracy
SEP = 0  # the separator of the "repeat" task; its random ids are drawn from 1..vocab_size-1


def repeat_offset(context_length: int) -> int:
    """m: how far back the ``"repeat"`` task's answer lies (the first half's length)."""
    return (check_positive("context_length", context_length) + 1) // 2


def make_batch(
    task: str = "copy",
    n_rows: int = 32,
    context_length: int = 12,
    vocab_size: int = 64,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(inputs, targets)``, both int64 of shape (n_rows, context_length)."""
    if task not in TASKS:
        raise ValueError(f"task={task!r} is not known; use one of {TASKS}")
    n_rows = check_positive("n_rows", n_rows)
    T = check_positive("context_length", context_length)
    vocab_size = check_positive("vocab_size", vocab_size)
    if task == "copy":
        ids = torch.randint(vocab_size, (n_rows, 1), generator=generator)  # (N, 1)
        row = ids.expand(n_rows, T + 1)  # (N, T + 1)
        return row[:, :-1].clone(), row[:, 1:].clone()  # (N, T), (N, T)
    if task == "previous":
        x = torch.randint(vocab_size, (n_rows, T), generator=generator)  # (N, T)
        y = torch.full_like(x, IGNORE_INDEX)  # (N, T)
        y[:, 1:] = x[:, :-1]
        return x, y
    if T < 2 or vocab_size < 2:
        raise ValueError(
            f"the repeat task needs context_length >= 2 and vocab_size >= 2 (one id is the "
            f"separator), got context_length={T}, vocab_size={vocab_size}; try 12 and 64"
        )
    m = repeat_offset(T)
    first = torch.randint(1, vocab_size, (n_rows, m), generator=generator)  # (N, m)
    sep = torch.full((n_rows, 1), SEP)  # (N, 1)
    row = torch.cat([first, sep, first[:, : T - m]], dim=1)  # (N, T + 1)
    x, y = row[:, :-1].clone(), row[:, 1:].clone()  # (N, T), (N, T)
    y[:, :m] = IGNORE_INDEX  # the first half (and the separator) cannot be predicted
    return x, y


def rows_in(rows: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """(N,) bool: which rows of ``rows`` (N, T) appear anywhere in ``table`` (M, T)."""
    return (rows[:, None, :] == table[None, :, :]).all(dim=-1).any(dim=-1)  # (N,)
