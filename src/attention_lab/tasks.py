"""Toy tasks to train attention on (notebook 08).

* ``"copy"``: each row is one random id repeated over the whole context; the
  targets are the inputs shifted by one, so the next token always equals the last one.
* ``"previous"``: random ids; the target at position t is the token at t - 1. A model
  can only solve it by looking one step back, so a trained head lights up the
  sub-diagonal of its attention map. Position 0 has no answer and is ignored.
"""

from __future__ import annotations

import torch

from ._checks import check_positive

TASKS = ("copy", "previous")
IGNORE_INDEX = -100  # targets with this value are left out of the loss and the accuracy


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
    for name, value in (
        ("n_rows", n_rows),
        ("context_length", context_length),
        ("vocab_size", vocab_size),
    ):
        check_positive(name, value)
    if task == "copy":
        ids = torch.randint(vocab_size, (n_rows, 1), generator=generator)  # (N, 1)
        row = ids.expand(n_rows, context_length + 1)  # (N, T + 1)
        return row[:, :-1].clone(), row[:, 1:].clone()  # (N, T), (N, T)
    x = torch.randint(vocab_size, (n_rows, context_length), generator=generator)  # (N, T)
    y = torch.full_like(x, IGNORE_INDEX)  # (N, T)
    y[:, 1:] = x[:, :-1]
    return x, y
