"""What the explorer shows, without its controls: settings, tasks, models, weights (no ipywidgets).

``widgets.AttentionExplorer`` is the page; this module is everything behind it that a test can
drive without a widget library: which settings are offered, the tasks the explorer trains
(``TASK_CHOICES``: copy, a plumbing check; previous and repeat, positional; lookup, by
content; induction, two layers), reading the sequence box (token ids and each task's own
tokens, ``c=4``, ``c?``, ``SEP``), building and training the model of one setting, and the
attention weights of every head of one layer for one input, with the mask the model applied.
The text the page shows about them is in ``text``.

Every training setting comes from the one table, ``tasks.TASK_SETTINGS``: a task is offered
when its row has an "explorer" entry, and ``explorer_settings(task)`` is that row with the
entry's changes (sequence length, budget) applied. The sliders set d_model and n_heads, the
kv heads toggle n_kv_heads (grouped-query attention, notebook 12): H, H/2, ..., 1 key/value
heads, only divisors of n_heads (``kv_head_choices``), each shared by a group of
n_heads / n_kv_heads query heads (``kv_head_of``); ``kv_cache_per_token`` is what the status
line says the cache costs when there are fewer kv heads than heads.

The kv heads control fits the explorer's time budget (README, ``make bench``: a redraw within
150 ms, a one-layer retrain within 1.5 s on 2 cores): fewer key/value heads only shrink the
fused projection, and the picture keeps one panel per query head (a group's frame is one
rectangle per panel, painted with it). Measured on this project's 2-core machine while other
work held its load near 8, so in CPU time (wall times there were 2-6x longer): the window
slider's redraw at H = 8, ``make bench``'s median, 61.5 ms with 2 kv heads and 64.2 ms with 8
(fast path; plain Agg 96.3 and 108.7 ms); ``train_setting`` at d_model = 32 for 8, 4, 2 and 1
kv heads: copy (H = 8) 0.45, 0.47, 0.42 and 0.47 s, lookup (H = 8) 0.83, 0.88, 0.78 and
0.89 s; induction (H = 4, two layers) 4.36, 4.21 and 4.00 s for 4, 2 and 1.
"""

from __future__ import annotations

import numpy as np
import torch

from ..._checks import check_kv_heads, heads_divide, kv_heads_divide
from ...config import FIELDS, TinyLMConfig
from ...device import cpu_threads
from ...i18n import N_, error_text, gettext, part, two_lines
from ...kv_cache import cache_bytes
from ...tasks import (
    ALL_TASKS,
    LOOKUP_KEYS,
    LOOKUP_VALUES,
    MIN_VOCAB,
    SEP,
    TASK_SETTINGS,
    TRAIN_OPTIONS,
    make_batch,
    task_settings,
    token_labels,
)
from ...tiny_lm import TinyLM
from ...training import TrainHistory, train_tiny_lm

HEAD_CHOICES = (1, 2, 4, 8)
D_MODEL_CHOICES = (8, 12, 16, 24, 32, 48, 64)
MASK_CHOICES = ("causal", "sliding", "none")
# The tasks the toggle offers: those with an "explorer" entry in tasks.TASK_SETTINGS. That
# leaves out "trigram": its 64 trigram ids come after its 4 letters, so they need vocab_size
# 68 (notebook 09 trains it with its own vocabulary).
TASK_CHOICES = tuple(task for task in ALL_TASKS if "explorer" in TASK_SETTINGS[task])
# The one-layer tasks' vocabulary and longest input (the table's copy row): 64 ids, 16 tokens.
# The induction task brings its own (32 ids, 24 tokens): ``task_vocab_size(task)``, ...
_COPY = {**TASK_SETTINGS["copy"], **TASK_SETTINGS["copy"]["explorer"]}
VOCAB_SIZE, CONTEXT_LENGTH = _COPY["vocab_size"], _COPY["context_length"]
# English, marked for translation: shown as _(TASK_TOOLTIPS[task]) (controls)
TASK_TOOLTIPS = {
    "copy": N_(
        "a plumbing check: every earlier position holds the answer, so any pattern solves it"
    ),
    "previous": N_("positional: the answer is the token one step back"),
    "repeat": N_("positional: the answer sits a fixed number of steps back, after SEP"),
    "lookup": N_("by content: find the pair with the query's key (c? -> the value of c=4)"),
    "induction": N_(
        "two layers: a segment comes back; the answer is the token that followed the current "
        "token's earlier copy (an induction head)"
    ),
}
ALL_HEADS = -1  # value of the ``head`` control that shows every head
# what a setting is made of: the explorer's controls, in the order they are read
SETTING_NAMES = (
    "n_heads", "d_model", "sequence", "trained", "task", "mask", "window", "head", "layer",
    "n_kv_heads",
)  # fmt: skip
# English, marked for translation: the kv heads toggle's tooltips (controls.kv_head_options)
KV_TOOLTIPS = {
    "mha": N_("{n_kv} key/value heads: plain multi-head attention, each query head its own"),
    "gqa": N_(
        "{n_kv} key/value heads: grouped-query attention, {group} query heads share each one"
    ),
    "mqa": N_("1 key/value head: multi-query attention, all {n_heads} query heads share it"),
}
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


def explorer_settings(task: str) -> dict:
    """What the explorer trains ``task`` with: TinyLMConfig fields and ``train`` options,
    from the one table: the task's row of ``tasks.TASK_SETTINGS`` with the changes of its
    "explorer" entry (a task without one is not offered: ``check_explorer_task``)."""
    task = check_explorer_task(task)
    return {**task_settings(task), **TASK_SETTINGS[task]["explorer"]}


def task_vocab_size(task: str) -> int:
    """How many token ids the explorer's models of ``task`` have (64; induction: 32)."""
    return explorer_settings(task)["vocab_size"]


def task_context_length(task: str) -> int:
    """The longest input of ``task`` in the explorer (16 tokens; induction: 24)."""
    return explorer_settings(task)["context_length"]


def task_n_layers(task: str) -> int:
    """How many attention layers the explorer's models of ``task`` have (induction: 2)."""
    return explorer_settings(task).get("n_layers", 1)


def check_layer(layer, n: int) -> int:
    """``layer`` if it is one of a model's ``n`` attention layers (0 .. n - 1), else a
    ValueError that lists the layers there are."""
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not 0 <= layer < n:
        raise ValueError(
            error_text(
                "layer={layer} is not offered: pick one of {choices} (the model's attention "
                "layers, counted from 0)"
            ).format(layer=repr(layer), choices=tuple(range(n)))
        )
    return int(layer)


def d_model_choices(n_heads: int) -> tuple[int, ...]:
    """The widths the explorer offers for ``n_heads``: only those divisible by it (the
    library's rule, ``heads_divide``)."""
    return tuple(d for d in D_MODEL_CHOICES if heads_divide(d, n_heads))


def kv_head_choices(n_heads: int) -> tuple[int, ...]:
    """The key/value head counts offered with ``n_heads``: H, H/2, ..., 1, the divisors of H
    (with H = 1, 2, 4 or 8 every halving divides it; the library's rule, ``kv_heads_divide``),
    so no choice can fail."""
    return tuple(k for k in range(n_heads, 0, -1) if kv_heads_divide(n_heads, k))


def kv_head_of(head: int, n_heads: int, n_kv_heads: int) -> int:
    """The key/value head query head ``head`` reads: heads 0 .. g-1 share kv head 0, the next
    g kv head 1, ... (g = n_heads // n_kv_heads; the library's ``repeat_kv``, as in Llama)."""
    return head // (n_heads // check_kv_heads(n_heads, n_kv_heads))


def kv_heads_after(n_heads: int, old_n_heads: int, old_n_kv_heads: int) -> int:
    """The kv heads to show once n_heads moves from ``old_n_heads`` to ``n_heads``: the same
    number of query heads per kv head where that still fits (so MHA stays MHA), else 1."""
    group = old_n_heads // old_n_kv_heads
    return max(1, n_heads // group)


def kv_cache_per_token(config: TinyLMConfig) -> tuple[int, int]:
    """(bytes, bytes with one kv head per head) the KV cache of ``config``'s model grows by per
    token: layers x 2 (k and v) x n_kv_heads x d_head x 4 bytes (float32), by the library's
    ``cache_bytes``; the second is the same model with plain multi-head attention."""
    mha = config.replace(n_kv_heads=None)
    return cache_bytes(config, 1), cache_bytes(mha, 1)


def check_explorer_task(task: str) -> str:
    """``task`` if the explorer offers it, else a ValueError that says why and what to do."""
    if task in TASK_CHOICES:
        return task
    if task in ALL_TASKS:
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


def check_sizes(n_heads: int, d_model: int, n_kv_heads: int | None = None) -> None:
    """A ValueError unless the controls offer these sizes (``HEAD_CHOICES``,
    ``d_model_choices``, ``kv_head_choices``; ``n_kv_heads`` None means n_heads)."""
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
    if n_kv_heads is not None and n_kv_heads not in kv_head_choices(n_heads):
        raise ValueError(
            error_text(
                "n_kv_heads={n_kv_heads} is not offered with n_heads={n_heads}; pick one of "
                "{choices}: each key/value head serves n_heads / n_kv_heads query heads"
            ).format(n_kv_heads=repr(n_kv_heads), n_heads=n_heads, choices=kv_head_choices(n_heads))
        )


def example_sequence(task: str, length: int | None = None) -> str:
    """A fixed example input for ``task``, as long as the task's input may be (or
    ``length``), written in the task's tokens (``token_labels``): token ids for copy,
    previous and induction, ``SEP`` for repeat's separator, ``c=4`` and ``c?`` for lookup.
    ``parse_sequence(text, task=task)`` reads it back into ids."""
    length = task_context_length(task) if length is None else length
    g = torch.Generator().manual_seed(7)
    x, _ = make_batch(task, 1, length, task_vocab_size(task), generator=g)  # (1, T)
    return " ".join(token_labels(task, x[0]))


def placeholder(task: str) -> str:
    """What the empty sequence box suggests typing for ``task``."""
    last = task_vocab_size(task) - 1
    if task in EXAMPLE_INPUT:
        return gettext("e.g. {example} (or token ids 0..{last})").format(
            example=EXAMPLE_INPUT[task], last=last
        )
    return gettext("token ids 0..{last}, e.g. 5 12 7 7").format(last=last)


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
    vocab_size: int | None = None,
    context_length: int | None = None,
    task: str | None = None,
) -> list[int]:
    """``"5 12 7"`` -> ``[5, 12, 7]``, or a ValueError that says how to fix the text.

    With a ``task``, its own tokens are read too (any case): for lookup ``"a=3 b? 2"`` ->
    ``[15, 7, 2]``, for repeat ``"SEP"`` -> ``0``; ids always work. ``vocab_size`` and
    ``context_length`` default to the task's in the explorer (without a task: 64 and 16).
    """
    if vocab_size is None:
        vocab_size = VOCAB_SIZE if task is None else task_vocab_size(task)
    if context_length is None:
        context_length = CONTEXT_LENGTH if task is None else task_context_length(task)
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


def model_config(
    d_model: int,
    n_heads: int,
    mask_kind: str,
    window: int | None,
    task: str = "copy",
    n_kv_heads: int | None = None,
) -> TinyLMConfig:
    """The ``TinyLMConfig`` of one explorer setting: the task's model fields from the table
    (vocabulary, context, layers; ``explorer_settings``), the sliders' sizes, the mask and
    the kv heads (n_kv_heads = n_heads is stored as None: the same config, and model, as
    before the kv heads control)."""
    fields = {k: v for k, v in explorer_settings(task).items() if k in FIELDS}
    return TinyLMConfig(
        **{
            **fields,
            "d_model": d_model,
            "n_heads": n_heads,
            "mask_kind": mask_kind,
            "window": window,
            "n_kv_heads": kv_field(n_heads, n_kv_heads),
        }
    )


def kv_field(n_heads: int, n_kv_heads: int | None) -> int | None:
    """``n_kv_heads`` as the config stores it: None for plain multi-head attention."""
    if n_kv_heads is None or n_kv_heads == n_heads:
        return None
    return n_kv_heads


def train_setting(
    task: str,
    d_model: int,
    n_heads: int,
    mask_kind: str,
    window: int | None,
    progress: bool = False,
    *,
    n_kv_heads: int | None = None,
) -> tuple[TinyLM, TrainHistory]:
    """Train a fresh ``TinyLM`` for one explorer setting (no cache; the explorer caches).

    The global random state is left as it was, so a notebook's own seeded cells give the
    same numbers whether or not the explorer trained in between. ``progress`` shows
    training's progress bar (tqdm). ``n_kv_heads``: None (or n_heads) for plain multi-head
    attention.
    """
    config = model_config(d_model, n_heads, mask_kind, window, task, n_kv_heads)
    with torch.random.fork_rng(devices=[]), cpu_threads(1):
        return train_tiny_lm(task, config, seed=SEED, progress=progress, **train_settings(task))


def train_settings(task: str) -> dict:
    """The ``train`` options trained mode uses for ``task``, from the table
    (``explorer_settings``): 64 steps for copy, previous and repeat, 128 for lookup, 250 for
    induction."""
    settings = explorer_settings(task)
    return {k: settings[k] for k in TRAIN_OPTIONS}


def train_steps(task: str) -> int:
    """How many optimiser steps trained mode takes for ``task``."""
    o = train_settings(task)
    return o["epochs"] * -(-o["n_rows"] // o["batch_size"])


def untrained_model(
    d_model: int,
    n_heads: int,
    mask_kind: str,
    window: int | None,
    task: str = "copy",
    n_kv_heads: int | None = None,
) -> TinyLM:
    """A freshly initialised ``TinyLM`` (seeded, so the same setting gives the same model),
    of the task's shape: one layer, or two for induction."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        model = TinyLM(model_config(d_model, n_heads, mask_kind, window, task, n_kv_heads))
    return model.eval()


class ModelCache(dict):
    """The model of each setting, ``key -> (model, history)``: trained (``train``, by default
    ``train_setting``) or built on first use, then kept. Untrained models are shared by the
    tasks whose models have the same shape (copy, previous, repeat and lookup). ``train`` is
    called as ``train(task, d_model, n_heads, mask, window, n_kv_heads=...)``."""

    def model_for(
        self, trained, task, d_model, n_heads, mask, window, train=train_setting, n_kv_heads=None
    ):
        shape = task if trained else _model_shape(task)
        kv = kv_field(n_heads, n_kv_heads)
        key = (trained, shape, d_model, n_heads, mask, window, kv)
        if key not in self:
            if trained:
                self[key] = train(task, d_model, n_heads, mask, window, n_kv_heads=kv)
            else:
                self[key] = (untrained_model(d_model, n_heads, mask, window, task, kv), None)
        return self[key]


def _model_shape(task: str) -> tuple:
    """What the task's model fields are, as a key: (("context_length", 16), ...)."""
    settings = explorer_settings(task)
    return tuple(sorted((k, v) for k, v in settings.items() if k in FIELDS))


def head_weights(
    model: TinyLM, ids: list[int], head: int, layer: int = 0
) -> tuple[list[int], np.ndarray, np.ndarray]:
    """``(heads, weights, blocked)`` of ``model``'s attention layer ``layer`` on the
    sequence ``ids``: the heads on show (all of them for ``ALL_HEADS``), their weights
    (panels, T, T) and the (T, T) mask that layer applied (True = blocked)."""
    attention = model.attention_layers()
    layer = check_layer(layer, len(attention))
    T = len(ids)
    with torch.no_grad(), cpu_threads(1):
        _, weights = model(torch.tensor([ids]), return_weights=True)  # (1, [L,] H, T, T)
    if weights.dim() == 5:
        weights = weights[:, layer]  # (1, H, T, T): that layer's heads
    blocked = attention[layer].mask[:T, :T].numpy()  # (T, T), True = blocked
    heads = list(range(attention[layer].n_heads)) if head == ALL_HEADS else [head]
    return heads, weights[0, heads].numpy(), blocked  # (panels, T, T)
