"""What the explorer shows, without its controls: settings, tasks, models, weights (no ipywidgets).

``widgets.AttentionExplorer`` is the page; this module is everything behind it that a test can
drive without a widget library: which settings are offered, the tasks whose token ids fit the
explorer's vocabulary (``TASK_CHOICES``: copy, a plumbing check; previous and repeat,
positional; lookup, by content), reading the sequence box (token ids and each task's own
tokens, ``c=4``, ``c?``, ``SEP``), building and training the model of one setting, and the
attention weights of every head for one input, with the mask the model applied.
The text the page shows about them is in ``explorer_text``.
"""

from __future__ import annotations

import numpy as np
import torch

from .config import TinyLMConfig
from .device import cpu_threads
from .i18n import N_, error_text, gettext, part, two_lines
from .tasks import LOOKUP_KEYS, LOOKUP_VALUES, MIN_VOCAB, SEP, TASKS, make_batch, token_labels
from .tiny_lm import TinyLM
from .training import TrainHistory, train_tiny_lm

HEAD_CHOICES = (1, 2, 4, 8)
D_MODEL_CHOICES = (8, 12, 16, 24, 32, 48, 64)
MASK_CHOICES = ("causal", "sliding", "none")
CONTEXT_LENGTH = 16  # the longest input sequence (and the models' context_length)
VOCAB_SIZE = 64
# The tasks the toggle offers: those whose token ids fit in VOCAB_SIZE, so no choice can
# crash. That leaves out "trigram": its 64 trigram ids come after its 4 letters, so they
# need vocab_size 68 (notebook 08 trains it with its own vocabulary).
TASK_CHOICES = tuple(task for task in TASKS if MIN_VOCAB[task] <= VOCAB_SIZE)
# English, marked for translation: shown as _(TASK_TOOLTIPS[task]) (explorer_controls)
TASK_TOOLTIPS = {
    "copy": N_(
        "a plumbing check: every earlier position holds the answer, so any pattern solves it"
    ),
    "previous": N_("positional: the answer is the token one step back"),
    "repeat": N_("positional: the answer sits a fixed number of steps back, after SEP"),
    "lookup": N_("by content: find the pair with the query's key (c? -> the value of c=4)"),
}
ALL_HEADS = -1  # value of the ``head`` control that shows every head
# what a setting is made of: the explorer's controls, in the order they are read
SETTING_NAMES = ("n_heads", "d_model", "sequence", "trained", "task", "mask", "window", "head")
# Training in trained mode: 64 Adam steps (2 epochs of 1024 rows, batches of 32). Enough
# for the copy, "previous" and "repeat" tasks at d_model >= 16 (99.9 % or more held out at
# n_heads = 4, d_model = 32); small widths visibly learn slower.
TRAIN_SETTINGS = {"epochs": 2, "n_rows": 1024, "batch_size": 32, "lr": 1e-2}
# "lookup" learns later: at n_heads = 4, d_model = 32 it answers 92 % of held-out queries
# after 64 steps and 100 % after 128 (0.3 s instead of 0.2 s on one thread), so it trains
# 4 epochs. The other tasks keep their 64 steps.
TASK_TRAIN_SETTINGS = {"lookup": {"epochs": 4}}
SEED = 0
# What each task's tokens look like, the end of parse_sequence's messages (English, marked
# for translation; formatted with TOKEN_HELP_FIELDS)
TOKEN_HELP = {
    "repeat": N_(", or SEP for the separator (id {sep})"),
    "lookup": N_(
        ", or pairs such as c=4 (keys {first_key} to {last_key}, values 0 to {last_value}) and "
        "queries such as c?"
    ),
}
TOKEN_HELP_FIELDS = {
    "sep": SEP,
    "first_key": LOOKUP_KEYS[0],
    "last_key": LOOKUP_KEYS[-1],
    "last_value": LOOKUP_VALUES - 1,
}
EXAMPLE_INPUT = {"repeat": "5 12 SEP 5 12", "lookup": "a=3 b=1 a?"}


def d_model_choices(n_heads: int) -> tuple[int, ...]:
    """The widths the explorer offers for ``n_heads``: only those divisible by it."""
    return tuple(d for d in D_MODEL_CHOICES if d % n_heads == 0)


def check_explorer_task(task: str) -> str:
    """``task`` if the explorer offers it, else a ValueError that says why and what to do."""
    if task in TASK_CHOICES:
        return task
    if task in TASKS:
        raise ValueError(
            error_text(
                "the explorer does not offer the {task} task: its token ids need vocab_size >= "
                "{needed} and the explorer's models have vocab_size={vocab_size}; pick "
                "one of {choices}, or train it with train_tiny_lm({task_repr}) (notebook 08)"
            ).format(
                task=task,
                needed=MIN_VOCAB[task],
                vocab_size=VOCAB_SIZE,
                choices=TASK_CHOICES,
                task_repr=repr(task),
            )
        )
    raise ValueError(
        error_text("task={task} is not known; use one of {choices}").format(
            task=repr(task), choices=TASK_CHOICES
        )
    )


def check_sizes(n_heads: int, d_model: int) -> None:
    """A ValueError unless the controls offer this pair (``HEAD_CHOICES``, ``d_model_choices``)."""
    if n_heads not in HEAD_CHOICES:
        raise ValueError(
            error_text("n_heads={n_heads} is not offered; pick one of {choices}").format(
                n_heads=n_heads, choices=HEAD_CHOICES
            )
        )
    if d_model not in d_model_choices(n_heads):
        raise ValueError(
            error_text(
                "d_model={d_model} is not offered with n_heads={n_heads}; pick one of {choices}"
            ).format(d_model=d_model, n_heads=n_heads, choices=d_model_choices(n_heads))
        )


def example_sequence(task: str, length: int = CONTEXT_LENGTH) -> str:
    """A fixed example input for ``task``, written in the task's tokens (``token_labels``):
    token ids for copy and previous, ``SEP`` for repeat's separator, ``c=4`` and ``c?`` for
    lookup. ``parse_sequence(text, task=task)`` reads it back into ids."""
    g = torch.Generator().manual_seed(7)
    x, _ = make_batch(task, 1, length, VOCAB_SIZE, generator=g)  # (1, T)
    return " ".join(token_labels(task, x[0]))


def placeholder(task: str) -> str:
    """What the empty sequence box suggests typing for ``task``."""
    if task in EXAMPLE_INPUT:
        return gettext("e.g. {example} (or token ids 0..{last})").format(
            example=EXAMPLE_INPUT[task], last=VOCAB_SIZE - 1
        )
    return gettext("token ids 0..{last}, e.g. 5 12 7 7").format(last=VOCAB_SIZE - 1)


def position_labels(task: str, ids) -> list[str]:
    """Tick labels ``position:token`` (``"3:c=4"``, ``"8:SEP"``, ``"0:47"``): unique even
    where a token repeats, and readable for every task (``tasks.token_labels``)."""
    return [f"{i}:{name}" for i, name in enumerate(token_labels(task, ids))]


def _names(task: str | None, vocab_size: int) -> dict[str, int]:
    """``{"c=4": 28, "c?": 8, ...}``: the task's tokens that are not plain ids, lower case."""
    if task is None:
        return {}
    ids = range(min(vocab_size, MIN_VOCAB[task]))
    return {name.lower(): i for i, name in zip(ids, token_labels(task, ids)) if name != str(i)}


def parse_sequence(
    text: str,
    vocab_size: int = VOCAB_SIZE,
    context_length: int = CONTEXT_LENGTH,
    task: str | None = None,
) -> list[int]:
    """``"5 12 7"`` -> ``[5, 12, 7]``, or a ValueError that says how to fix the text.

    With a ``task``, its own tokens are read too (any case): for lookup ``"a=3 b? 2"`` ->
    ``[15, 7, 2]``, for repeat ``"SEP"`` -> ``0``; ids always work.
    """
    names = _names(task, vocab_size)
    # ", or <what the task's tokens look like>": in each line's language (two_lines)
    help_ = part(TOKEN_HELP[task], **TOKEN_HELP_FIELDS) if task in TOKEN_HELP else ("", "")
    last = vocab_size - 1
    parts = text.replace(",", " ").split()
    if not parts:
        example = EXAMPLE_INPUT.get(task, "5 12 7 7")
        message = error_text(
            "the sequence is empty; type token ids from 0 to {last}{help}, "
            "separated by spaces, for example {example}"
        )
        raise ValueError(two_lines(message, {"help": help_}, last=last, example=example))
    ids = []
    for text_part in parts:
        try:
            token = int(text_part)
        except ValueError:
            if text_part.lower() in names:
                ids.append(names[text_part.lower()])
                continue
            what = (
                part(N_("a token of the {task} task"), task=task)
                if names
                else part(N_("a token id"))
            )
            message = error_text(
                "{part} is not {what}; use whole numbers from 0 to {last}{help}, "
                "separated by spaces"
            )
            raise ValueError(
                two_lines(message, {"what": what, "help": help_}, part=repr(text_part), last=last)
            ) from None
        if not 0 <= token < vocab_size:
            raise ValueError(
                error_text(
                    "token id {token} is outside the vocabulary; use ids from 0 to {last}"
                ).format(token=token, last=last)
            )
        ids.append(token)
    if len(ids) > context_length:
        raise ValueError(
            error_text(
                "{n} tokens are more than the context_length={context_length} the models "
                "were built for; remove {extra}"
            ).format(n=len(ids), context_length=context_length, extra=len(ids) - context_length)
        )
    return ids


def model_config(d_model: int, n_heads: int, mask_kind: str, window: int | None) -> TinyLMConfig:
    """The ``TinyLMConfig`` of one explorer setting (vocabulary and context are fixed)."""
    return TinyLMConfig(
        vocab_size=VOCAB_SIZE,
        d_model=d_model,
        n_heads=n_heads,
        context_length=CONTEXT_LENGTH,
        mask_kind=mask_kind,
        window=window,
    )


def train_setting(
    task: str,
    d_model: int,
    n_heads: int,
    mask_kind: str,
    window: int | None,
    progress: bool = False,
) -> tuple[TinyLM, TrainHistory]:
    """Train a fresh ``TinyLM`` for one explorer setting (no cache; the explorer caches).

    The global random state is left as it was, so a notebook's own seeded cells give the
    same numbers whether or not the explorer trained in between. ``progress`` shows
    training's progress bar (tqdm).
    """
    config = model_config(d_model, n_heads, mask_kind, window)
    with torch.random.fork_rng(devices=[]), cpu_threads(1):
        return train_tiny_lm(task, config, seed=SEED, progress=progress, **train_settings(task))


def train_settings(task: str) -> dict:
    """The ``train`` options trained mode uses for ``task``: ``TRAIN_SETTINGS``, with the
    task's own changes (``TASK_TRAIN_SETTINGS``: more epochs for lookup)."""
    return {**TRAIN_SETTINGS, **TASK_TRAIN_SETTINGS.get(task, {})}


def untrained_model(d_model: int, n_heads: int, mask_kind: str, window: int | None) -> TinyLM:
    """A freshly initialised ``TinyLM`` (seeded, so the same setting gives the same model)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        model = TinyLM(model_config(d_model, n_heads, mask_kind, window))
    return model.eval()


class ModelCache(dict):
    """The model of each setting, ``key -> (model, history)``: trained (``train``, by default
    ``train_setting``) or built on first use, then kept."""

    def model_for(self, trained, task, d_model, n_heads, mask, window, train=train_setting):
        key = (trained, task if trained else None, d_model, n_heads, mask, window)
        if key not in self:
            if trained:
                self[key] = train(task, d_model, n_heads, mask, window)
            else:
                self[key] = (untrained_model(d_model, n_heads, mask, window), None)
        return self[key]


def head_weights(
    model: TinyLM, ids: list[int], head: int
) -> tuple[list[int], np.ndarray, np.ndarray]:
    """``(heads, weights, blocked)`` of ``model`` on the sequence ``ids``: the heads on show
    (all of them for ``ALL_HEADS``), their weights (panels, T, T) and the (T, T) mask the model
    applied (True = blocked)."""
    T = len(ids)
    with torch.no_grad(), cpu_threads(1):
        _, weights = model(torch.tensor([ids]), return_weights=True)  # (1, H, T, T)
    blocked = model.attn.mask[:T, :T].numpy()  # (T, T), True = blocked
    heads = list(range(model.attn.n_heads)) if head == ALL_HEADS else [head]
    return heads, weights[0, heads].numpy(), blocked  # (panels, T, T)
