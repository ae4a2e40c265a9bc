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
trained model is tried on without training). For the heads forming while the model trains
and for what the circuit does beyond the task:

* ``InductionRecorder``: ``train(..., on_step=recorder)`` measures, every few steps, each
  head's previous-token and prefix-matching scores and the loss along repeated rows,
  without changing the training;
* ``repeated_rows``, ``loss_per_position`` and ``icl_score``: Olsson et al.'s in-context
  learning score, the loss late in a context minus the loss early, on rows that are a
  random string twice;
* ``repeat_batch`` and ``after_previous_guess``: a segment of any length repeated in rows of
  uniformly random ids (so ids also recur outside the copy), and the ideal rule to measure
  a model against there: the token after the most recent earlier occurrence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from ._checks import as_size, check_positive
from .i18n import error_text

INDUCTION_SEGMENT = 8  # the length of the repeated segment of "induction"


def induction_placements(context_length: int, segment: int = INDUCTION_SEGMENT) -> torch.Tensor:
    """(P, 2) int64: every (start of the first copy, start of the second) that fits in
    ``context_length``: the second starts at least ``segment`` after the first and ends
    inside the row. A row draws one of them, each equally likely (153 at T = 32, segment 8)."""
    L, T = segment, context_length
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
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    once: bool = False,
    loss: bool = False,
    ignore_index: int = -100,
) -> float:
    """The accuracy of a guess among the ids already seen, at the scored positions.

    ``x``, ``y``: (N, T) inputs and targets (unscored targets hold ``ignore_index``). At a
    scored position p the guess is drawn evenly from the distinct ids of ``x[:, :p + 1]``,
    or, with ``once=True``, from those that occur there exactly once; it is right with
    probability 1 / (number of candidates) if the target is one of them, else never.
    Returns the mean of that probability over every scored position: the expected
    accuracy, computed exactly (no sampling). In ``"induction"`` rows the target is always
    a candidate either way: it occurred once before, in the first copy.

    ``loss=True`` returns the guess's cross-entropy instead, in nats: the mean over the
    scored positions of -ln(1 / number of candidates), the loss of a model that spreads its
    probability evenly over the candidates (infinite if a target is not among them).
    """
    scored = _check_rows(x, y, ignore_index)  # (N, T)
    V = int(max(x.max(), y.max())) + 1
    counts = torch.nn.functional.one_hot(x, V).cumsum(dim=1)  # (N, T, V): count of id up to p
    candidate = counts == 1 if once else counts > 0  # (N, T, V)
    target = y.clamp(min=0)[..., None]  # (N, T, 1): any id where unscored
    hit = candidate.gather(2, target)[..., 0].float()  # (N, T): is the target a candidate?
    chance = hit / candidate.sum(dim=2).clamp(min=1)  # (N, T)
    if loss:
        return (-chance[scored].double().log()).mean().item()
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


def repeat_batch(
    n_rows: int,
    segment: int,
    context_length: int = 32,
    vocab_size: int = 32,
    generator: torch.Generator | None = None,
    ignore_index: int = -100,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of uniformly random ids with one segment repeated: ``(inputs, targets)``, both
    (n_rows, context_length) int64.

    Unlike ``"induction"`` rows, every id (the segment's too) is drawn uniformly from all
    ``vocab_size`` ids, with repeats: an id may recur outside the copy, inside the segment,
    or between the copies. The segment, ``segment`` ids long (2 .. context_length // 2),
    appears twice, placed as in ``induction_placements``. Scored, as in the task, are the
    second copy's 1st .. (segment - 1)th positions, with the copy's next id as target.
    """
    n_rows, T = check_positive("n_rows", n_rows), check_positive("context_length", context_length)
    V, L = check_positive("vocab_size", vocab_size), as_size(segment)
    if L is None or not 2 <= L <= T // 2:
        raise ValueError(
            error_text(
                "segment={segment} does not fit twice in context_length={T} with a scored "
                "position; pass a segment length from 2 to {most}"
            ).format(segment=repr(segment), T=T, most=T // 2)
        )
    row = torch.randint(V, (n_rows, T), generator=generator)  # (N, T): random ids, repeats allowed
    ids = torch.randint(V, (n_rows, L), generator=generator)  # (N, L): the segment
    places = induction_placements(T, L)  # (P, 2)
    first, second = places[torch.randint(len(places), (n_rows,), generator=generator)].unbind(1)
    span, rows = torch.arange(L), torch.arange(n_rows)[:, None]  # (L,), (N, 1)
    row[rows, first[:, None] + span] = ids  # the first copy
    row[rows, second[:, None] + span] = ids  # the second copy
    y = torch.full((n_rows, T), ignore_index)  # (N, T)
    scored = second[:, None] + span[: L - 1]  # (N, L - 1): the copy's 1st .. (L-1)th positions
    y[rows, scored] = row[rows, scored + 1]  # the copy's next ids
    return row, y


def after_previous_guess(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The ideal induction rule on rows ``x`` (N, T): at each position i, the id just after
    the most recent earlier occurrence of x[i] (the key j <= i with x[j - 1] == x[i] that is
    latest, ``interventions.after_previous_occurrence``).

    Returns ``(guess, found)``, both (N, T): the guessed id (0 where there is none) and
    whether x[i] occurred before, so that the rule has a guess at all.
    """
    from .interventions.sources import after_previous_occurrence  # lazily: no import cycle

    rule = after_previous_occurrence(x)  # (N, T, T)
    positions = torch.arange(x.shape[1], device=x.device)  # (T,)
    latest = torch.where(rule, positions, -1).amax(dim=-1)  # (N, T): -1 where none
    found = latest >= 0  # (N, T)
    return x.gather(1, latest.clamp(min=0)).masked_fill(~found, 0), found


def repeated_rows(
    n_rows: int, half: int, vocab_size: int = 32, generator: torch.Generator | None = None
) -> torch.Tensor:
    """(n_rows, 2 * half) int64: ``half`` different ids drawn at random, then the same again.

    The only way to predict an id of the second copy is to find it in the first: Olsson et
    al.'s test rows (random tokens, repeated). The ids of a row are distinct, so nothing
    else in the row recurs.
    """
    n_rows, half = check_positive("n_rows", n_rows), check_positive("half", half)
    if half > vocab_size:
        raise ValueError(
            error_text(
                "half={half} different ids do not exist among vocab_size={vocab_size} ids; "
                "pass half <= {vocab_size}"
            ).format(half=half, vocab_size=vocab_size)
        )
    ids = torch.rand(n_rows, vocab_size, generator=generator).argsort(dim=1)[:, :half]  # (N, half)
    return torch.cat([ids, ids], dim=1)  # (N, 2 * half)


@torch.no_grad()
def loss_per_position(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """(N, T) ids -> (N, T - 1): the cross-entropy (nats) of each next id, x[:, 1:].

    Column t is the loss of predicting x[:, t + 1] from x[:, :t + 1]. The model runs in
    eval mode (its modes are restored afterwards) and without gradients.
    """
    with _evaluating(model):
        logits = model(x)  # (N, T, vocab)
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), x[:, 1:], reduction="none")  # (N, T-1)


def icl_score(losses: torch.Tensor) -> torch.Tensor:
    """Olsson et al.'s in-context learning score on rows that are a string twice: the loss
    late in the context minus the loss early, here the mean loss on the second copy minus
    the mean loss on the first.

    ``losses`` (..., 2 * half - 1), from ``loss_per_position`` on ``repeated_rows``: columns
    0 .. half - 2 predict the first copy's ids 1 .. half - 1, columns half .. 2 half - 2 the
    second copy's; column half - 1 (the second copy's first id) is left out, as each copy's
    first id is. Returns (...): negative when the second copy is easier.
    """
    n = losses.shape[-1]
    if n % 2 == 0 or n < 3:
        raise ValueError(
            error_text(
                "losses has {n} positions, but rows that are a string twice give an odd "
                "number, 2 * half - 1 >= 3; pass loss_per_position(model, repeated_rows(...))"
            ).format(n=n)
        )
    half = (n + 1) // 2
    return losses[..., half:].mean(dim=-1) - losses[..., : half - 1].mean(dim=-1)


class _evaluating:
    """Eval mode for every submodule inside the block, each one's own mode restored after."""

    def __init__(self, model: torch.nn.Module):
        self.model = model

    def __enter__(self):
        self.modes = [(m, m.training) for m in self.model.modules()]
        self.model.eval()
        return self.model

    def __exit__(self, *exc):
        for module, training in self.modes:
            module.training = training
        return False


@dataclass
class InductionRecorder:
    """Measure a model every ``every`` optimiser steps while it trains:
    ``train(model, "induction", on_step=recorder)`` or ``train_tiny_lm(..., on_step=recorder)``.

    At each recorded step (0, before the first step, then every ``every``-th) it runs the
    model in eval mode, without gradients, on ``rows`` (N, T) and stores, for every layer
    and head:

    * the **previous-token score**: the mean weight on key i - 1 (``previous_keys``: a bool
      rule (T, T) or (N, T, T), by default key i - 1 for every query i >= 1; notebook 10
      passes the queries of the first copy);
    * the **prefix-matching score**: the mean weight on the keys just after an earlier
      occurrence of the query's token (``after_previous_occurrence(rows)``), over the queries
      that have one;

    and, given ``repeated`` rows (a string twice, ``repeated_rows``), the mean loss at each
    of their positions, from which ``icl`` gives Olsson's in-context learning score.

    It draws no random number and changes no weight, and it puts every module back in its
    own mode: a run with it is bitwise the run without it (tests/library/test_induction.py).
    """

    rows: torch.Tensor
    repeated: torch.Tensor | None = None
    every: int = 10
    previous_keys: torch.Tensor | None = None
    steps: list[int] = field(default_factory=list)
    _previous: list[torch.Tensor] = field(default_factory=list, repr=False)
    _prefix: list[torch.Tensor] = field(default_factory=list, repr=False)
    _losses: list[torch.Tensor] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        from .interventions.sources import after_previous_occurrence  # lazily: no cycle

        self.every = check_positive("every", self.every)
        ok = isinstance(self.rows, torch.Tensor) and self.rows.dim() == 2
        if not ok or self.rows.is_floating_point():
            raise ValueError(
                error_text(
                    "rows must be (N, T) token ids, got {rows}; pass e.g. the inputs of "
                    "make_batch('induction', 128)"
                ).format(rows=tuple(getattr(self.rows, "shape", ())) or type(self.rows).__name__)
            )
        T = self.rows.shape[1]
        if self.previous_keys is None:
            i = torch.arange(T)
            self.previous_keys = i[None, :] == i[:, None] - 1  # (T, T): key i - 1
        self.prefix_keys = after_previous_occurrence(self.rows)  # (N, T, T)

    def __call__(self, step: int, model: torch.nn.Module) -> None:
        if step % self.every:
            return
        from .interventions.sources import source_shares  # lazily: no import cycle

        device = next(model.parameters()).device
        N, rows = len(self.rows), self.rows
        together = self.repeated is not None and self.repeated.shape[1] == rows.shape[1]
        if together:  # one forward for both batches: the rows the model runs are independent
            rows = torch.cat([rows, self.repeated])  # (N + N_r, T)
        with torch.no_grad(), _evaluating(model):
            logits, w = model(rows.to(device), return_weights=True)  # (.., T, V), (.., L, H, T, T)
            w = (w if w.dim() == 5 else w[:, None])[:N].cpu()  # (N, L, H, T, T)
            self._previous.append(source_shares(w, keys=self.previous_keys))  # (L, H)
            self._prefix.append(source_shares(w, keys=self.prefix_keys))  # (L, H)
            if together:
                x, logits = rows[N:].to(device), logits[N:]  # (N_r, T), (N_r, T, V)
                losses = F.cross_entropy(
                    logits[:, :-1].transpose(1, 2), x[:, 1:], reduction="none"
                )  # (N_r, T - 1)
                self._losses.append(losses.mean(dim=0).cpu())  # (T - 1,)
            elif self.repeated is not None:
                losses = loss_per_position(model, self.repeated.to(device))  # (N_r, T' - 1)
                self._losses.append(losses.mean(dim=0).cpu())  # (T' - 1,)
        self.steps.append(step)

    def state_dict(self) -> dict:
        """What it measures on (rows, every, ...) and what it has recorded: tensors and lists
        of them, as a module's ``state_dict`` (a test run keeps it beside the trained
        weights: ``train_once.py``)."""
        return {
            "rows": self.rows,
            "repeated": self.repeated,
            "every": self.every,
            "previous_keys": self.previous_keys,
            "steps": list(self.steps),
            "previous": list(self._previous),
            "prefix": list(self._prefix),
            "losses": list(self._losses),
        }

    def load_state_dict(self, state: dict) -> None:
        """Take the records of ``state_dict()``, from a recorder that measured the same rows."""
        self.steps = list(state["steps"])
        self._previous = list(state["previous"])
        self._prefix = list(state["prefix"])
        self._losses = list(state["losses"])

    @property
    def previous(self) -> torch.Tensor:
        """(R, L, H): each recorded step's previous-token score per layer and head."""
        return torch.stack(self._previous)

    @property
    def prefix(self) -> torch.Tensor:
        """(R, L, H): each recorded step's prefix-matching score per layer and head."""
        return torch.stack(self._prefix)

    @property
    def losses(self) -> torch.Tensor:
        """(R, T - 1): each recorded step's mean loss per position on ``repeated``."""
        return torch.stack(self._losses)

    @property
    def icl(self) -> torch.Tensor:
        """(R,): each recorded step's in-context learning score (``icl_score``)."""
        return icl_score(self.losses)


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
