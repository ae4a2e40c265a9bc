"""``AttentionExplorer``: move a slider, see every head's attention (notebooks 06, 08, explorer).

The explorer wraps ``TinyLM`` in a few controls -- number of heads, model width, input
sequence, untrained or trained, mask, which head to look at -- and shows the attention
weights of every head as heatmaps, one panel per head, with d_head = d_model / n_heads in
each title, the mask that was applied drawn as blocked, and beside them the head-split
diagram of notebook 06 for the current n_heads and d_model. In trained mode it trains
``TinyLM`` on the chosen toy task for the chosen setting (about a second on a laptop CPU,
with a progress bar), keeps the result, and shows the loss and accuracy beside the heatmaps.

The tasks are those of ``tasks`` whose token ids fit the explorer's vocabulary
(``TASK_CHOICES``): copy (a plumbing check), previous and repeat (positional) and lookup
(by content). The sequence box reads token ids and each task's own tokens (``c=4``, ``c?``,
``SEP``), and every row and column of a heatmap is labelled ``position:token`` (``3:c=4``).

It runs wherever ipywidgets 7.7 or 8 run (JupyterLab, Colab, Voila: ``make explore``) and
needs no JavaScript of its own. The picture is made for the screen:

* rendered at ``PIXEL_RATIO`` times the pixels it is shown at (sharp on a projector and at
  150 % zoom), and shown at ``CSS_DPI`` CSS pixels per inch of the figure at most;
* scaled down as a whole when the page is narrower (``width: 100%; height: auto``: the
  panels stay square), with the read-outs moving below the figure when there is no room.

It redraws fast: the heatmaps are painted by a ``HeadGrid`` that is built once per panel
count (all of 1, 2, 4 and 8 when the explorer starts in a kernel) and then only updated in
place, and the PNG is encoded by ``plotting.png_bytes``, an encoder made for flat figures.
The head-split diagram is drawn once per size and kept; in a kernel it is drawn after the
heatmaps have been sent, so it never delays them.

Everything a test needs is an attribute: the controls (set their ``.value``), the last
``figure`` drawn, the text of ``status`` and ``message``, the training ``history``.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import math
import struct

import ipywidgets as widgets
import numpy as np
import torch

from ._checks import check_heads
from .config import TinyLMConfig
from .device import cpu_threads
from .headgrid import HeadGrid
from .plotting import LabFigure, plot_heads, png_bytes
from .tasks import LOOKUP_KEYS, LOOKUP_VALUES, MIN_VOCAB, SEP, TASKS, make_batch, token_labels
from .tiny_lm import TinyLM
from .training import TrainHistory, evaluate, train_tiny_lm

HEAD_CHOICES = (1, 2, 4, 8)
D_MODEL_CHOICES = (8, 12, 16, 24, 32, 48, 64)
MASK_CHOICES = ("causal", "sliding", "none")
CONTEXT_LENGTH = 16  # the longest input sequence (and the models' context_length)
VOCAB_SIZE = 64
# The tasks the toggle offers: those whose token ids fit in VOCAB_SIZE, so no choice can
# crash. That leaves out "trigram": its 64 trigram ids come after its 4 letters, so they
# need vocab_size 68 (notebook 08 trains it with its own vocabulary).
TASK_CHOICES = tuple(task for task in TASKS if MIN_VOCAB[task] <= VOCAB_SIZE)
TASK_TOOLTIPS = {
    "copy": "a plumbing check: every earlier position holds the answer, so any pattern solves it",
    "previous": "positional: the answer is the token one step back",
    "repeat": "positional: the answer sits a fixed number of steps back, after SEP",
    "lookup": "by content: find the pair with the query's key (c? -> the value of c=4)",
}
ALL_HEADS = -1  # value of the ``head`` control that shows every head
# Training in trained mode: 64 Adam steps (2 epochs of 1024 rows, batches of 32). Enough
# for the copy, "previous" and "repeat" tasks at d_model >= 16 (99.9 % or more held out at
# n_heads = 4, d_model = 32); small widths visibly learn slower.
TRAIN_SETTINGS = {"epochs": 2, "n_rows": 1024, "batch_size": 32, "lr": 1e-2}
# "lookup" learns later: at n_heads = 4, d_model = 32 it answers 92 % of held-out queries
# after 64 steps and 100 % after 128 (0.3 s instead of 0.2 s on one thread), so it trains
# 4 epochs. The other tasks keep their 64 steps.
TASK_TRAIN_SETTINGS = {"lookup": {"epochs": 4}}
SEED = 0
# The live picture: shown at up to CSS_DPI CSS pixels per inch of the figure, rendered with
# PIXEL_RATIO times as many pixels: 1.5 is one image pixel per screen pixel at 150 % zoom
# (sharp there and on a 1920 px projector), while an 8-head redraw stays inside the 300 ms
# a reader tolerates on a 2-core laptop (2.0 costs 1.8x the pixels to paint and encode).
CSS_DPI = 100
PIXEL_RATIO = 1.5
RENDER_DPI = round(CSS_DPI * PIXEL_RATIO)
DIAGRAM_CSS_DPI = 80  # the head-split diagram is shown a little smaller than the heatmaps
# Inches per heatmap panel (one head alone: 4). At 2.5 a row of a 16-token panel is 11.25 pt
# high, room for a 9 pt label on each of the 16 rows and columns (at 2.3 HeadGrid labelled
# only every other one); the 4-panel figure is 14.3 in, 1433 CSS px, inside a 1920 px screen.
PANEL_SIZE = 2.5
SINGLE_PANEL_SIZE = 4.0
# What each task's tokens look like, for the messages of parse_sequence
TOKEN_HELP = {
    "repeat": f"SEP for the separator (id {SEP})",
    "lookup": (
        f"pairs such as c=4 (keys {LOOKUP_KEYS[0]} to {LOOKUP_KEYS[-1]}, values 0 to "
        f"{LOOKUP_VALUES - 1}) and queries such as c?"
    ),
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
            f"the explorer does not offer the {task} task: its token ids need vocab_size >= "
            f"{MIN_VOCAB[task]} and the explorer's models have vocab_size={VOCAB_SIZE}; pick "
            f"one of {TASK_CHOICES}, or train it with train_tiny_lm({task!r}) (notebook 08)"
        )
    raise ValueError(f"task={task!r} is not known; use one of {TASK_CHOICES}")


def example_sequence(task: str, length: int = CONTEXT_LENGTH) -> str:
    """A fixed example input for ``task``, written in the task's tokens (``token_labels``):
    token ids for copy and previous, ``SEP`` for repeat's separator, ``c=4`` and ``c?`` for
    lookup. ``parse_sequence(text, task=task)`` reads it back into ids."""
    g = torch.Generator().manual_seed(7)
    x, _ = make_batch(task, 1, length, VOCAB_SIZE, generator=g)  # (1, T)
    return " ".join(token_labels(task, x[0]))


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
    help_ = f", or {TOKEN_HELP[task]}" if task in TOKEN_HELP else ""
    parts = text.replace(",", " ").split()
    if not parts:
        example = EXAMPLE_INPUT.get(task, "5 12 7 7")
        raise ValueError(
            f"the sequence is empty; type token ids from 0 to {vocab_size - 1}{help_}, "
            f"separated by spaces, for example {example}"
        )
    ids = []
    for part in parts:
        try:
            token = int(part)
        except ValueError:
            if part.lower() in names:
                ids.append(names[part.lower()])
                continue
            what = f"a token of the {task} task" if names else "a token id"
            raise ValueError(
                f"{part!r} is not {what}; use whole numbers from 0 to {vocab_size - 1}"
                f"{help_}, separated by spaces"
            ) from None
        if not 0 <= token < vocab_size:
            raise ValueError(
                f"token id {token} is outside the vocabulary; use ids from 0 to {vocab_size - 1}"
            )
        ids.append(token)
    if len(ids) > context_length:
        raise ValueError(
            f"{len(ids)} tokens are more than the context_length={context_length} the models "
            f"were built for; remove {len(ids) - context_length}"
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


def _in_kernel() -> bool:
    """Whether this runs inside a Jupyter kernel (JupyterLab, Voila, Colab), not a script."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _from_the_page() -> bool:
    """Whether the code runs because a reader moved a control in the page (a widget
    message), not because a notebook cell runs: only then is there a page to show a
    progress bar in (cells that train keep their stored outputs free of progress bars)."""
    try:
        from IPython import get_ipython

        parent = get_ipython().kernel.get_parent()
        return parent["header"]["msg_type"] == "comm_msg"
    except Exception:  # noqa: BLE001 -- no kernel, or an older one: no progress bar
        return False


def _later(callback) -> bool:
    """Run ``callback`` once the kernel has sent what it is doing now; False outside a kernel
    (there is no event loop to wait for: the caller runs it at once)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    loop.call_later(0.05, callback)
    return True


def _image_layout(css_width: int) -> dict:
    """CSS for a picture that is ``css_width`` px wide at most, scaled down as a whole."""
    return {
        "width": f"{css_width}px",
        "max_width": "100%",
        "height": "auto",
        "flex": "0 1 auto",
        "align_self": "flex-start",
        "margin": "0 24px 12px 0",
    }


class AttentionExplorer(widgets.VBox):
    """Interactive per-head attention heatmaps for ``TinyLM``; show it by ending a cell with it.

    Controls (each an ipywidget; set ``.value`` to drive it from code):
        n_heads: 1, 2, 4 or 8 heads.
        d_model: the model width; only values divisible by n_heads are offered.
        sequence: the input, up to 16 tokens separated by spaces: ids 0..63 or the task's
            own tokens ("c=4", "c?", "SEP"; see ``parse_sequence``).
        trained: False = freshly initialised model, True = trained on ``task``.
        task: the toy task trained mode learns, one of ``TASK_CHOICES``: "copy" (a plumbing
            check), "previous" and "repeat" (positional), "lookup" (by content). It also
            names the tokens in the sequence box and in the tick labels.
        mask: "causal", "sliding" (each position sees itself and window - 1 before it)
            or "none" (every position sees every other).
        window: the sliding window's width.
        head: ``ALL_HEADS`` (-1) for every head, or one head's number.

    Read-outs: ``status`` ("4 heads · d_head = 8 · 4 panels", and the sequence in the task's
    tokens when it was typed otherwise, e.g. as ids), ``message`` (a friendly
    error, empty when all is well), ``metrics`` (loss and accuracy), ``image`` (the PNG),
    ``diagram`` (the head-split diagram as a PNG), ``progress`` (training's progress bar),
    ``figure`` (the last matplotlib figure drawn), ``weights`` ((panels, T, T) numpy array),
    ``mask`` ((T, T) bool, True = blocked, the mask the model applied), ``history`` (the
    ``TrainHistory`` in trained mode, else None).

    ``prebuild``: build the heatmap grids of every panel count now, so the first visit to
    each is as fast as the next (about a second at start). The default does it inside a
    Jupyter kernel, where a reader moves the sliders, and not in scripts and tests.
    ``diagram``: show the head-split diagram (False leaves it out, and its drawing time).
    """

    def __init__(
        self,
        n_heads: int = 4,
        d_model: int = 32,
        sequence: str | None = None,
        trained: bool = False,
        task: str = "copy",
        mask: str = "causal",
        window: int = 4,
        head: int = ALL_HEADS,
        prebuild: bool | None = None,
        diagram: bool = True,
    ):
        check_explorer_task(task)
        if n_heads not in HEAD_CHOICES:
            raise ValueError(f"n_heads={n_heads} is not offered; pick one of {HEAD_CHOICES}")
        if d_model not in d_model_choices(n_heads):
            raise ValueError(
                f"d_model={d_model} is not offered with n_heads={n_heads}; "
                f"pick one of {d_model_choices(n_heads)}"
            )
        label = {"description_width": "64px"}
        slider = {"continuous_update": False, "style": label}
        self.n_heads = widgets.SelectionSlider(
            options=HEAD_CHOICES, value=n_heads, description="n_heads", **slider
        )
        self.d_model = widgets.SelectionSlider(
            options=d_model_choices(n_heads), value=d_model, description="d_model", **slider
        )
        self.sequence = widgets.Text(
            value=sequence if sequence is not None else example_sequence(task),
            description="sequence",
            placeholder=_placeholder(task),
            continuous_update=False,
            layout=widgets.Layout(width="520px", max_width="100%"),
            style=label,
        )
        self.trained = widgets.ToggleButtons(
            options=[("untrained", False), ("trained", True)],
            value=trained,
        )
        self.task = widgets.ToggleButtons(
            options=TASK_CHOICES,
            value=task,
            tooltips=[TASK_TOOLTIPS[t] for t in TASK_CHOICES],
        )
        self.mask = widgets.ToggleButtons(options=MASK_CHOICES, value=mask)
        self.window = widgets.IntSlider(
            value=window, min=1, max=CONTEXT_LENGTH, description="window", **slider
        )
        self.head = widgets.Dropdown(
            options=self._head_options(n_heads),
            value=head,
            description="show",
            layout=widgets.Layout(width="170px"),
            style={"description_width": "40px"},
        )
        for style_me in (self.trained, self.task, self.mask):
            style_me.style.button_width = "80px"
        self.status = widgets.HTML()
        self.message = widgets.HTML()
        self.progress = widgets.Output(layout=widgets.Layout(display="none"))
        self.metrics = widgets.HTML(
            layout=widgets.Layout(flex="1 1 220px", min_width="200px", max_width="320px")
        )
        self.image = widgets.Image(format="png", layout=widgets.Layout(**_image_layout(800)))
        self.diagram = widgets.Image(format="png", layout=widgets.Layout(**_image_layout(840)))
        for widget, name in (
            (self.n_heads, "n-heads"),
            (self.d_model, "d-model"),
            (self.sequence, "sequence"),
            (self.trained, "trained"),
            (self.task, "task"),
            (self.mask, "mask"),
            (self.window, "window"),
            (self.head, "head"),
            (self.status, "status"),
            (self.message, "message"),
            (self.progress, "progress"),
            (self.metrics, "metrics"),
            (self.image, "heatmap"),
            (self.diagram, "diagram"),
        ):
            widget.add_class(f"attention-lab-{name}")

        self.figure = None  # the last matplotlib figure drawn
        self.weights: np.ndarray | None = None  # (panels, T, T), the weights on show
        self.mask_shown: np.ndarray | None = None  # (T, T) bool, True = blocked
        self.history: TrainHistory | None = None  # trained mode: how training went
        self._grids: dict[tuple, HeadGrid] = {}  # one HeadGrid per (panels, tokens)
        self._models: dict[tuple, tuple[TinyLM, TrainHistory | None]] = {}
        self._metrics_cache: dict[tuple, str] = {}
        self._diagrams: dict[tuple, bytes] = {}  # (T, D, H) -> the PNG
        self._diagram_key: tuple | None = None  # the size the diagram should show
        self._metrics_key: tuple | None = None  # (model, history, task) on show
        self._with_diagram = diagram
        if not diagram:
            self.diagram.layout.display = "none"
        self._labels: tuple = ()  # tokens, titles, suptitle, panel size of the picture on show
        self._holding = False

        def wrap():
            return widgets.Layout(flex_flow="row wrap", align_items="center", margin="0 16px 0 0")

        controls = widgets.HBox(
            [
                widgets.HBox([self.n_heads, self.d_model, self.head], layout=wrap()),
                widgets.HBox(
                    [_labelled("model", self.trained), _labelled("task", self.task)],
                    layout=wrap(),
                ),
                widgets.HBox([_labelled("mask", self.mask), self.window], layout=wrap()),
                self.sequence,
            ],
            layout=widgets.Layout(flex_flow="row wrap", align_items="center"),
        )
        picture = widgets.HBox(
            [self.image, self.metrics, self.diagram],
            layout=widgets.Layout(flex_flow="row wrap", align_items="flex-start", width="100%"),
        )
        super().__init__(
            [controls, self.status, self.message, self.progress, picture],
            layout=widgets.Layout(width="100%", max_width="100%", overflow="hidden"),
        )
        self.add_class("attention-lab-explorer")
        self.n_heads.observe(self._on_n_heads, names="value")
        self.task.observe(self._on_task, names="value")
        for control in (self.d_model, self.sequence, self.trained, self.mask, self.window):
            control.observe(self._on_change, names="value")
        self.head.observe(self._on_change, names="value")
        self.mask.observe(self._sync_window, names="value")
        self._sync_window()
        self.redraw()
        if prebuild if prebuild is not None else _in_kernel():
            self.prebuild()

    # -- what the page shows -------------------------------------------------------------

    def __repr__(self) -> str:
        return (
            f"AttentionExplorer(n_heads={self.n_heads.value}, d_model={self.d_model.value}, "
            f"trained={self.trained.value}, task={self.task.value!r}, mask={self.mask.value!r})"
        )

    def _repr_mimebundle_(self, **kwargs):
        # ipywidgets 8 shows a widget through _repr_mimebundle_; 7.x (Colab's) has none and
        # shows it through _ipython_display_, whose text/plain is repr(self) already.
        parent = getattr(super(), "_repr_mimebundle_", None)
        if parent is None:
            return None
        bundle = parent(**kwargs)
        if bundle is not None:  # a short, stable text instead of the whole widget tree
            bundle["text/plain"] = repr(self)
        return bundle

    @staticmethod
    def _head_options(n_heads: int) -> list[tuple[str, int]]:
        return [("all heads", ALL_HEADS)] + [(f"head {h}", h) for h in range(n_heads)]

    # -- observers -----------------------------------------------------------------------

    @contextlib.contextmanager
    def hold(self):
        """Change several controls without a redraw per change; redraws once at the end."""
        was, self._holding = self._holding, True
        try:
            yield self
        finally:
            self._holding = was
        if not was:
            self.redraw()

    def _on_n_heads(self, change) -> None:
        n_heads = change["new"]
        with self.hold():
            choices = d_model_choices(n_heads)
            keep = self.d_model.value
            if keep not in choices:  # the nearest width that works with this many heads
                keep = min(choices, key=lambda d: (abs(d - keep), d))
            self.d_model.options = choices
            self.d_model.value = keep
            head = self.head.value
            self.head.options = self._head_options(n_heads)
            self.head.value = head if head < n_heads else ALL_HEADS

    def _on_task(self, change) -> None:
        with self.hold():
            self.sequence.placeholder = _placeholder(change["new"])
            self.sequence.value = example_sequence(change["new"])

    def _on_change(self, change=None) -> None:
        if not self._holding:
            self.redraw()

    def _sync_window(self, change=None) -> None:
        self.window.disabled = self.mask.value != "sliding"

    # -- the work ------------------------------------------------------------------------

    def setting(self) -> dict:
        """The current choice of every control, as plain values."""
        return {
            "n_heads": self.n_heads.value,
            "d_model": self.d_model.value,
            "sequence": self.sequence.value,
            "trained": self.trained.value,
            "task": self.task.value,
            "mask": self.mask.value,
            "window": self.window.value,
            "head": self.head.value,
        }

    def model_for(
        self, trained: bool, task: str, d_model: int, n_heads: int, mask: str, window: int | None
    ) -> tuple[TinyLM, TrainHistory | None]:
        """The model for one setting, trained or built on first use, then cached."""
        key = (trained, task if trained else None, d_model, n_heads, mask, window)
        if key not in self._models:
            if trained:
                self._models[key] = self._train(task, d_model, n_heads, mask, window)
            else:
                self._models[key] = (untrained_model(d_model, n_heads, mask, window), None)
        return self._models[key]

    def _train(self, task, d_model, n_heads, mask, window) -> tuple[TinyLM, TrainHistory]:
        """Train one setting; asked from the page, its progress bar shows in ``progress``."""
        if not _from_the_page():
            return train_setting(task, d_model, n_heads, mask, window)
        self.progress.layout.display = None
        try:
            with self.progress:
                return train_setting(task, d_model, n_heads, mask, window, progress=True)
        finally:
            self.progress.clear_output()
            self.progress.layout.display = "none"

    def redraw(self) -> None:
        """Draw the heatmaps for the current controls; a problem becomes a message, never a
        traceback."""
        try:
            self._redraw()
        except Exception as error:  # noqa: BLE001 -- show any problem in the page
            self.message.value = (
                '<div style="color:#a40000;border:1px solid #a40000;padding:6px;'
                f'max-width:640px"><b>Cannot draw this setting.</b> {html.escape(str(error))}'
                "</div>"
            )
            for hide in (self.image, self.diagram, self.metrics):  # no stale picture
                hide.layout.display = "none"
            self.status.value = ""

    def _redraw(self) -> None:
        s = self.setting()
        d_head = check_heads(s["d_model"], s["n_heads"])
        ids = parse_sequence(s["sequence"], task=s["task"])
        window = s["window"] if s["mask"] == "sliding" else None
        if s["trained"]:
            self.message.value = (
                f"<i>training TinyLM on the {s['task']} task (n_heads={s['n_heads']}, "
                f"d_model={s['d_model']}) ...</i>"
            )
        model, history = self.model_for(
            s["trained"], s["task"], s["d_model"], s["n_heads"], s["mask"], window
        )
        T = len(ids)
        x = torch.tensor([ids])  # (1, T)
        with torch.no_grad(), cpu_threads(1):
            _, weights = model(x, return_weights=True)  # (1, H, T, T)
        blocked = model.attn.mask[:T, :T].numpy()  # (T, T), True = blocked
        heads = list(range(s["n_heads"])) if s["head"] == ALL_HEADS else [s["head"]]
        w = weights[0, heads].numpy()  # (panels, T, T)
        tokens = position_labels(s["task"], ids)  # "3:c=4": position and token
        grid = self._grid(len(heads), tokens)
        titles = [f"head {h} · d_head = {d_head}" for h in heads]
        grid.update(w, titles, suptitle=self._suptitle(s), mask=blocked)
        self._show(self.image, png_bytes(grid.render()), RENDER_DPI, CSS_DPI)
        self.figure, self.weights, self.mask_shown, self.history = grid.figure, w, blocked, history
        self._labels = (tokens, titles, grid.suptitle.get_text(), grid.panel_size)
        readable = " ".join(token_labels(s["task"], ids))
        typed = " ".join(s["sequence"].replace(",", " ").split())
        reads_as = f" · reads as <code>{html.escape(readable)}</code>" if typed != readable else ""
        self.status.value = (
            f"<b>{_count(s['n_heads'], 'head')} · d_head = {d_head}</b> · "
            f"{_count(len(heads), 'panel')}{reads_as}"
        )
        self.message.value = ""
        # the read-outs beside the picture: at once when known, else once the picture is out
        self._metrics_key = (model, history, s["task"])
        self._diagram_key = (T, s["d_model"], s["n_heads"])
        known = (id(model), s["task"]) in self._metrics_cache and (
            self._diagram_key in self._diagrams or not self._with_diagram
        )
        if known or not _later(self._draw_readouts):
            self._draw_readouts()

    def _draw_readouts(self) -> None:
        """Show the loss and accuracy, and the head-split diagram, for the setting on show."""
        if self.message.value != "" or self._metrics_key is None:
            return  # a problem is on show instead
        model, history, task = self._metrics_key
        key = (id(model), task)
        if key not in self._metrics_cache:
            self._metrics_cache[key] = self._metrics_html(model, history, task)
        self.metrics.value = self._metrics_cache[key]
        self.metrics.layout.display = None
        self._draw_diagram()

    @staticmethod
    def _show(image: widgets.Image, png: bytes, pixel_dpi: float, css_dpi: float) -> None:
        """Put ``png`` into ``image``, at most as wide as the figure is at ``css_dpi``."""
        width = struct.unpack(">I", png[16:20])[0]  # from the PNG header
        css_width = f"{round(width * css_dpi / pixel_dpi)}px"
        if image.layout.width != css_width:
            image.layout.width = css_width
        image.value = png
        image.layout.display = None

    def _draw_diagram(self) -> None:
        """Show the head-split diagram for the current size (drawn once per size)."""
        key = self._diagram_key
        if key is None or not self._with_diagram:
            return
        if key not in self._diagrams:
            from .diagrams import head_split  # matplotlib text layout: loaded on first use

            T, D, H = key
            figure = head_split(T, D, H)
            figure.set_dpi(RENDER_DPI)
            figure.canvas.draw()
            if len(self._diagrams) > 64:
                self._diagrams.clear()
            self._diagrams[key] = png_bytes(np.asarray(figure.canvas.buffer_rgba()))
        if key == self._diagram_key and self.message.value == "":  # still the setting on show
            self._show(self.diagram, self._diagrams[key], RENDER_DPI, DIAGRAM_CSS_DPI)

    def prebuild(self) -> None:
        """Build and draw the heatmap grid of every panel count for the current sequence, so
        the first visit to 1, 2, 4 or 8 heads costs no more than any other redraw."""
        task = self.task.value
        try:
            tokens = position_labels(task, parse_sequence(self.sequence.value, task=task))
        except ValueError:
            return
        for n_panels in HEAD_CHOICES:
            grid = self._grid(n_panels, tokens)
            if grid.figure is not self.figure:  # the grid on show is drawn already
                grid.render()

    def snapshot(self) -> LabFigure:
        """The picture on show as a static ``plot_heads`` figure: end a cell with it so
        readers without a live kernel (GitHub, a PDF) see what the explorer shows."""
        if self.weights is None:
            raise ValueError("the explorer has not drawn anything yet; fix the message first")
        tokens, titles, suptitle, panel_size = self._labels
        return plot_heads(
            self.weights,
            tokens=tokens,
            titles=titles,
            suptitle=suptitle,
            panel_size=panel_size,
            mask=self.mask_shown,
        )

    def _grid(self, n_panels: int, tokens: list[str]) -> HeadGrid:
        key = (n_panels, tuple(tokens))
        if key not in self._grids:
            if len(self._grids) > 32:  # many sequences typed: forget the oldest grids
                self._grids.pop(next(iter(self._grids)))
            panel_size = SINGLE_PANEL_SIZE if n_panels == 1 else PANEL_SIZE
            self._grids[key] = HeadGrid(
                n_panels, len(tokens), tokens, panel_size=panel_size, dpi=RENDER_DPI
            )
        return self._grids[key]

    @staticmethod
    def _suptitle(s: dict) -> str:
        mask = {"causal": "causal mask", "none": "no mask"}.get(
            s["mask"], f"sliding window of {s['window']}"
        )
        model = f"trained on {s['task']}" if s["trained"] else "untrained"
        return f"TinyLM, {model}: n_heads = {s['n_heads']}, d_model = {s['d_model']}, {mask}"

    @staticmethod
    def _metrics_html(model: TinyLM, history: TrainHistory | None, task: str) -> str:
        chance = math.log(VOCAB_SIZE)
        if history is None:
            loss, accuracy = evaluate(model, task, n_rows=128)
            return (
                f"<b>untrained</b><br>loss on {task}: {loss:.3f}<br>"
                f"accuracy: {accuracy:.1%}<br>chance: ln {VOCAB_SIZE} = {chance:.2f}<br>"
                "<small>the weights are random: switch to <i>trained</i></small>"
            )
        steps = len(history.step_losses)
        held_out = "held-out " if getattr(history, "held_out", True) else ""
        return (
            f"<b>trained on {task}</b> ({steps} steps, {history.seconds:.1f} s)<br>"
            f"{held_out}loss: {history.final_loss:.4f}<br>"
            f"accuracy: {history.final_accuracy:.1%}<br>"
            f"before training: {history.initial_loss:.2f} (chance {chance:.2f})"
        )


def _placeholder(task: str) -> str:
    """What the empty sequence box suggests typing for ``task``."""
    if task in EXAMPLE_INPUT:
        return f"e.g. {EXAMPLE_INPUT[task]} (or token ids 0..{VOCAB_SIZE - 1})"
    return f"token ids 0..{VOCAB_SIZE - 1}, e.g. 5 12 7 7"


def _labelled(text: str, control: widgets.Widget) -> widgets.HBox:
    """``control`` with a label in front, in line with the sliders' descriptions. (Toggle
    buttons' own description goes above the buttons when the row is narrow.)"""
    label = widgets.Label(text, layout=widgets.Layout(width="64px", flex="0 0 auto"))
    return widgets.HBox([label, control], layout=widgets.Layout(align_items="center"))


def _count(n: int, noun: str) -> str:
    """``1 head``, ``4 heads``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
