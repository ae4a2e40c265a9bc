"""Toy tasks to train attention on (notebook 08).

Each task says what a model must do to solve it:

* ``"copy"``: each row is one random id repeated over the whole context; the targets are
  the inputs shifted by one. Every position holds the answer, so *any* causal weights
  solve it, random ones included: it is a plumbing check (does training run, do gradients
  reach every part?), not a test of attention. Only ``vocab_size`` different rows exist.
* ``"previous"``: random ids; the target at position i is the token at i - 1. Solved by
  looking one step back, a fixed *position*: a trained head lights up the sub-diagonal.
  Position 0 has no answer and is ignored.
* ``"repeat"``: a random sequence, a separator (id ``SEP`` = 0), then the same sequence
  again. Each token of the second half sits m = ``(T + 1) // 2`` positions back, whatever
  the tokens are: a *positional* task (a trained head draws a diagonal shifted by m, and
  without position embeddings the model cannot solve it). Only the second half is scored.
* ``"lookup"``: a small dictionary, then questions about it. The first positions hold
  key-value pairs, one token each (``"c=4"``: key c stores value 4), with distinct keys in
  a random order; the rest are queries (``"c?"``) whose target is the value stored with
  that key. Where the answer sits depends on *what the tokens are*, not on where the query
  stands: solved only by matching the query's key against each pair's key, a lookup by
  content. It needs no position embeddings, and shuffling the pairs changes nothing.
* ``"trigram"``: random letters a-d; the target at position i >= 2 is the ordered triple
  of the letters at i - 2, i - 1 and i, written as one of 64 trigram ids. It needs three
  tokens from three places, *in order*: one head returns one weighted average of its
  sources, and an even average of a, b, c is the same in every order, so a single head
  can keep the order only by weighting its three sources unevenly. Heads that each take
  one source keep it for free. Positions 0 and 1 are ignored.

Token ids of ``"lookup"``: values 0..5, queries 6..11 (``a?``..``f?``), pairs 12..47;
of ``"trigram"``: letters 0..3, trigrams 4..67. ``token_labels`` names them.

``MULTI_LAYER_TASKS``, not offered by the one-layer demo: ``"induction"`` (two layers; a
segment repeated at a random distance: induction.py says what is scored). The explorer
offers it with two layers and a layer selector.

``TASK_SETTINGS`` is the one table of training settings: the chapter's setting of each task,
and what the explorer changes (each row's "explorer" entry).
"""

from __future__ import annotations

import torch

from ._checks import check_positive
from .i18n import N_, _, error_text
from .induction import INDUCTION_SEGMENT, induction_batch

TASKS = ("copy", "previous", "repeat", "lookup", "trigram")
MULTI_LAYER_TASKS = ("induction",)  # solved with two attention layers (an induction head)
ALL_TASKS = TASKS + MULTI_LAYER_TASKS
IGNORE_INDEX = -100  # targets with this value are left out of the loss and the accuracy
SEP = 0  # the separator of the "repeat" task; its random ids are drawn from 1..vocab_size-1

LOOKUP_KEYS = "abcdef"  # the dictionary's keys; values are 0..LOOKUP_VALUES-1
LOOKUP_VALUES = 6
LOOKUP_QUERY = LOOKUP_VALUES  # id of the query "a?"; "b?" is one more, ...
LOOKUP_PAIR = LOOKUP_QUERY + len(LOOKUP_KEYS)  # id of the pair "a=0"; key k, value v: + k*V + v
TRIGRAM_LETTERS = "abcd"
TRIGRAM_FIRST = len(TRIGRAM_LETTERS)  # id of the trigram "aaa"; the rest follow in order

# The smallest vocabulary each task's ids fit in.
MIN_VOCAB = {
    "copy": 1,
    "previous": 1,
    "repeat": 2,
    "lookup": LOOKUP_PAIR + len(LOOKUP_KEYS) * LOOKUP_VALUES,  # 48
    "trigram": TRIGRAM_FIRST + len(TRIGRAM_LETTERS) ** 3,  # 68
    "induction": INDUCTION_SEGMENT + 1,  # 8 distinct segment ids and one other id around them
}

# The one table of training settings. A task's row is the setting the chapter trains it
# with (notebooks 08-10): TinyLMConfig fields and ``train`` options. ``train_tiny_lm(task)``
# trains exactly this, and ``train(model, task)`` takes every option left out from it (train
# has no defaults of its own). The row's "explorer" entry lists what the explorer's trained
# mode changes (``viz.explorer.model.explorer_settings``): longer inputs and a smaller budget,
# so a new setting trains while the reader waits; a task without one is not offered there.
_ONE_LAYER = {"vocab_size": 64, "context_length": 12, "epochs": 3, "n_rows": 2048}
_TRAIN = {"batch_size": 32, "lr": 1e-2}
# the explorer: 16 tokens, 64 Adam steps (2 epochs of 1024 rows): 99.9 % or more held out on
# copy, previous and repeat at n_heads = 4, d_model = 32; small widths visibly learn slower
_EXPLORER = {"context_length": 16, "epochs": 2, "n_rows": 1024}
TASK_SETTINGS = {
    "copy": {**_ONE_LAYER, **_TRAIN, "explorer": {**_EXPLORER}},
    "previous": {**_ONE_LAYER, **_TRAIN, "explorer": {**_EXPLORER}},
    "repeat": {**_ONE_LAYER, **_TRAIN, "explorer": {**_EXPLORER}},
    # lookup learns later: in the explorer 92 % of held-out queries after 64 steps and 100 %
    # after 128 (n_heads = 4, d_model = 32), so it trains 4 epochs there
    "lookup": {**_ONE_LAYER, **_TRAIN, "explorer": {**_EXPLORER, "epochs": 4}},
    # not in the explorer: its 64 trigram ids need vocab_size 68, the explorer's models have 64
    "trigram": {**_ONE_LAYER, "vocab_size": 68, **_TRAIN},
    # 250 steps: 2 layers jump at step 125-200, 0.96-0.99 at 250 (seeds 0-4); 1 layer <= 0.17.
    # The explorer trains 24 tokens at lr 1e-2 (still 250 steps). At T = 32 and lr 3e-3 its
    # default n_heads = 4, d_model = 32 stays at 0.08 after 250 steps (0.94 after 500, 4-5 s
    # on one thread); at T = 24 and lr 1e-2 it reaches 0.99 in 1.5 s, and every width >= 24
    # 0.87-0.99 in 0.7-3.5 s (seed 0; d_model <= 12 stays near chance, as a lesson in width)
    "induction": {
        "vocab_size": 32,
        "context_length": 32,
        "d_model": 64,
        "n_heads": 4,
        "n_layers": 2,
        "epochs": 1,
        "n_rows": 16_000,
        "batch_size": 64,
        "lr": 3e-3,
        "explorer": {"context_length": 24, "lr": 1e-2},
    },
}
TRAIN_OPTIONS = ("epochs", "n_rows", "batch_size", "lr")  # the ``train`` options of a row


def task_settings(task: str) -> dict:
    """The chapter's setting of ``task`` as one flat dict of TinyLMConfig fields and ``train``
    options: its row of ``TASK_SETTINGS`` without the "explorer" entry (the explorer applies
    that one itself: ``viz.explorer.model.explorer_settings``)."""
    row = dict(TASK_SETTINGS[check_task(task)])
    row.pop("explorer", None)
    return row


# What a task is called where it is shown (progress bars, the demo): "copy task" in English.
TASK_NAMES = {
    "copy": N_("copy task"),
    "previous": N_("previous task"),
    "repeat": N_("repeat task"),
    "lookup": N_("lookup task"),
    "trigram": N_("trigram task"),
    "induction": N_("induction task"),
}


def task_name(task: str) -> str:
    """``task`` as a reader reads it, in the reader's language: "copy task", 复制任务."""
    if task in TASK_NAMES:
        return _(TASK_NAMES[task])
    return _("{task} task").format(task=task)


def check_task(task: str, vocab_size: int | None = None) -> str:
    """``task`` if it is known (and its ids fit in ``vocab_size``), else a ValueError."""
    if task not in ALL_TASKS:
        raise ValueError(
            error_text("task={task} is not known; use one of {tasks}").format(
                task=repr(task), tasks=ALL_TASKS
            )
        )
    if vocab_size is not None and vocab_size < MIN_VOCAB[task]:
        raise ValueError(
            error_text(
                "the {task} task needs vocab_size >= {least} for its token ids, got "
                "vocab_size={vocab_size}; use vocab_size={usual}"
            ).format(
                task=task,
                least=MIN_VOCAB[task],
                vocab_size=vocab_size,
                usual=TASK_SETTINGS[task]["vocab_size"],
            )
        )
    return task


def repeat_offset(context_length: int) -> int:
    """m: how far back the ``"repeat"`` task's answer lies (the first half's length)."""
    return (check_positive("context_length", context_length) + 1) // 2


def lookup_pairs(context_length: int) -> int:
    """How many key-value pairs a ``"lookup"`` row starts with (the rest are queries)."""
    return min(len(LOOKUP_KEYS), check_positive("context_length", context_length) // 2)


def make_batch(
    task: str = "copy",
    n_rows: int = 32,
    context_length: int | None = None,
    vocab_size: int | None = None,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(inputs, targets)``, both int64 of shape (n_rows, context_length).

    ``context_length`` and ``vocab_size`` default to the task's own (``TASK_SETTINGS``:
    T = 12 and 64 ids, 68 for trigram; T = 32 and 32 ids for induction).
    """
    n_rows = check_positive("n_rows", n_rows)
    if context_length is None:
        context_length = TASK_SETTINGS[check_task(task)]["context_length"]
    T = check_positive("context_length", context_length)
    if vocab_size is None:
        vocab_size = TASK_SETTINGS[check_task(task)]["vocab_size"]
    vocab_size = check_positive("vocab_size", vocab_size)
    check_task(task, vocab_size)
    if task == "copy":
        ids = torch.randint(vocab_size, (n_rows, 1), generator=generator)  # (N, 1)
        row = ids.expand(n_rows, T + 1)  # (N, T + 1)
        return row[:, :-1].clone(), row[:, 1:].clone()  # (N, T), (N, T)
    if task == "previous":
        x = torch.randint(vocab_size, (n_rows, T), generator=generator)  # (N, T)
        y = torch.full_like(x, IGNORE_INDEX)  # (N, T)
        y[:, 1:] = x[:, :-1]
        return x, y
    if task == "lookup":
        return _lookup_batch(n_rows, T, generator)
    if task == "trigram":
        return _trigram_batch(n_rows, T, generator)
    if task == "induction":
        return induction_batch(n_rows, T, vocab_size, generator, ignore_index=IGNORE_INDEX)
    if T < 2:
        raise ValueError(
            error_text(
                "the repeat task needs context_length >= 2 (one position is the separator), "
                "got context_length={T}; try 12"
            ).format(T=T)
        )
    m = repeat_offset(T)
    first = torch.randint(1, vocab_size, (n_rows, m), generator=generator)  # (N, m)
    sep = torch.full((n_rows, 1), SEP)  # (N, 1)
    row = torch.cat([first, sep, first[:, : T - m]], dim=1)  # (N, T + 1)
    x, y = row[:, :-1].clone(), row[:, 1:].clone()  # (N, T), (N, T)
    y[:, :m] = IGNORE_INDEX  # the first half (and the separator) cannot be predicted
    return x, y


def _lookup_batch(n_rows: int, T: int, generator) -> tuple[torch.Tensor, torch.Tensor]:
    if T < 2:
        raise ValueError(
            error_text(
                "the lookup task needs context_length >= 2 (a pair and a query), got "
                "context_length={T}; try 12"
            ).format(T=T)
        )
    n_pairs, n_keys = lookup_pairs(T), len(LOOKUP_KEYS)
    keys = torch.rand(n_rows, n_keys, generator=generator).argsort(dim=1)[:, :n_pairs]  # (N, P)
    values = torch.randint(LOOKUP_VALUES, (n_rows, n_pairs), generator=generator)  # (N, P)
    asked = torch.randint(n_pairs, (n_rows, T - n_pairs), generator=generator)  # (N, T - P)
    pairs = LOOKUP_PAIR + keys * LOOKUP_VALUES + values  # (N, P)
    queries = LOOKUP_QUERY + keys.gather(1, asked)  # (N, T - P)
    x = torch.cat([pairs, queries], dim=1)  # (N, T)
    y = torch.full_like(x, IGNORE_INDEX)  # (N, T): the pairs are not scored
    y[:, n_pairs:] = values.gather(1, asked)
    return x, y


def _trigram_batch(n_rows: int, T: int, generator) -> tuple[torch.Tensor, torch.Tensor]:
    A = len(TRIGRAM_LETTERS)
    x = torch.randint(A, (n_rows, T), generator=generator)  # (N, T)
    y = torch.full_like(x, IGNORE_INDEX)  # (N, T): positions 0 and 1 have no trigram
    y[:, 2:] = TRIGRAM_FIRST + (x[:, :-2] * A + x[:, 1:-1]) * A + x[:, 2:]
    return x, y


def trigram_even_average_ceiling() -> float:
    """The best accuracy on ``"trigram"`` from an *even* average of the three sources.

    An even average (a + b + c) / 3 is the same for every order of the same letters, so
    the best a reader of it can do is guess one ordering of the letters it sees: right
    1 time in 6 when all three differ, 1 in 3 when two are equal, always when all are.
    Averaged over the 64 equally likely trigrams: 20 / 64 = 31.25 %.
    """
    from collections import Counter
    from itertools import product

    words = list(product(range(len(TRIGRAM_LETTERS)), repeat=3))
    orderings = Counter(tuple(sorted(w)) for w in words)  # multiset -> how many words
    return sum(1 / orderings[tuple(sorted(w))] for w in words) / len(words)


def lookup_sources(x: torch.Tensor) -> torch.Tensor:
    """(N, T - P) int64: for each query of ``"lookup"`` rows x (N, T), the position of the
    pair that holds its key (P = ``lookup_pairs(T)``): where a lookup by content must look."""
    n_pairs = lookup_pairs(x.shape[1])
    keys = (x[:, :n_pairs] - LOOKUP_PAIR) // LOOKUP_VALUES  # (N, P): the key of each pair
    asked = x[:, n_pairs:] - LOOKUP_QUERY  # (N, T - P): the key each query asks for
    return (asked[:, :, None] == keys[:, None, :]).float().argmax(-1)  # (N, T - P)


def shuffle_pairs(x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """``"lookup"`` rows (N, T) with the pairs in a new random order (queries unchanged).

    The targets stay the same: a lookup by content does not care where a pair stands.
    """
    n_pairs = lookup_pairs(x.shape[1])
    order = torch.rand(x.shape[0], n_pairs, generator=generator).argsort(dim=1)  # (N, P)
    out = x.clone()
    out[:, :n_pairs] = x[:, :n_pairs].gather(1, order)
    return out


def sort_pairs(x: torch.Tensor) -> torch.Tensor:
    """``"lookup"`` rows (N, T) with the pairs in one fixed order, by key (a first; queries
    unchanged, so the targets stay the same). With all six keys, the pair of key k then
    always stands at position k: a model trained on such rows may learn the lookup by
    position (notebook 09's control), which rows in a random order rule out.
    """
    n_pairs = lookup_pairs(x.shape[1])
    keys = (x[:, :n_pairs] - LOOKUP_PAIR) // LOOKUP_VALUES  # (N, P): the key of each pair
    out = x.clone()
    out[:, :n_pairs] = x[:, :n_pairs].gather(1, keys.argsort(dim=1))
    return out


def token_labels(task: str, ids) -> list[str]:
    """Readable names of a row's token ids: ``"c=4"``, ``"c?"``, ``"abd"``, ``"SEP"``."""
    check_task(task)
    return [_token_label(task, int(i)) for i in ids]


def _token_label(task: str, i: int) -> str:
    if not 0 <= i < MIN_VOCAB[task] or task in ("copy", "previous"):
        return str(i)
    if task == "repeat" and i == SEP:
        return "SEP"
    if task == "lookup":
        if i < LOOKUP_QUERY:
            return str(i)
        if i < LOOKUP_PAIR:
            return f"{LOOKUP_KEYS[i - LOOKUP_QUERY]}?"
        key, value = divmod(i - LOOKUP_PAIR, LOOKUP_VALUES)
        return f"{LOOKUP_KEYS[key]}={value}"
    if task == "trigram":
        A = len(TRIGRAM_LETTERS)
        if i < TRIGRAM_FIRST:
            return TRIGRAM_LETTERS[i]
        a, rest = divmod(i - TRIGRAM_FIRST, A * A)
        return "".join(TRIGRAM_LETTERS[j] for j in (a, *divmod(rest, A)))
    return str(i)


def rows_in(rows: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """(N,) bool: which rows of ``rows`` (N, T) appear anywhere in ``table`` (M, T). (A set of
    the table's rows: an (N, M, T) comparison would be 0.5 GB for 32,000 rows of induction.)"""
    seen = set(map(tuple, table.tolist()))
    found = [tuple(row) in seen for row in rows.tolist()]
    return torch.tensor(found, dtype=torch.bool, device=rows.device)  # (N,)
