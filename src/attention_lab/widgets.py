"""``AttentionExplorer``: move a slider, see every head's attention (notebooks 06, 08, explorer).

The explorer wraps ``TinyLM`` in a few controls -- number of heads, model width, input
sequence, untrained or trained, mask, which head to look at -- and shows the attention
weights of every head as heatmaps, one panel per head, with d_head = d_model / n_heads in
each title. In trained mode it trains ``TinyLM`` on the chosen toy task for the chosen
setting (about a second on a laptop CPU), keeps the result, and shows the held-out loss
and accuracy beside the heatmaps.

It runs wherever ipywidgets run (JupyterLab, Colab, Voila: ``make explore``), needs no
JavaScript of its own, and redraws fast: the picture is a PNG painted by a ``HeadGrid``
(plotting.py) that is built once per panel count and then only updated in place.
Everything a test needs is an attribute: the controls (set their ``.value``), the last
``figure`` drawn, the text of ``status`` and ``message``, the training ``history``.
"""

from __future__ import annotations

import contextlib
import html
import math
import statistics
import time

import ipywidgets as widgets
import numpy as np
import torch

from ._checks import check_heads
from .device import cpu_threads
from .plotting import HeadGrid, LabFigure, plot_heads
from .tasks import TASKS, make_batch
from .tiny_lm import TinyLM
from .training import TrainHistory, evaluate, train_tiny_lm

HEAD_CHOICES = (1, 2, 4, 8)
D_MODEL_CHOICES = (8, 12, 16, 24, 32, 48, 64)
MASK_CHOICES = ("causal", "sliding", "none")
CONTEXT_LENGTH = 16  # the longest input sequence (and the models' context_length)
VOCAB_SIZE = 64
ALL_HEADS = -1  # value of the ``head`` control that shows every head
# Training in trained mode: 64 Adam steps (2 epochs of 1024 rows, batches of 32). Enough
# for the copy and "previous" tasks at d_model >= 16; small widths visibly learn slower.
TRAIN_SETTINGS = {"epochs": 2, "n_rows": 1024, "batch_size": 32, "lr": 1e-2}
SEED = 0


def d_model_choices(n_heads: int) -> tuple[int, ...]:
    """The widths the explorer offers for ``n_heads``: only those divisible by it."""
    return tuple(d for d in D_MODEL_CHOICES if d % n_heads == 0)


def example_sequence(task: str, length: int = CONTEXT_LENGTH) -> str:
    """A fixed example input for ``task`` as space-separated token ids."""
    g = torch.Generator().manual_seed(7)
    x, _ = make_batch(task, 1, length, VOCAB_SIZE, generator=g)  # (1, T)
    return " ".join(str(int(t)) for t in x[0])


def parse_sequence(
    text: str, vocab_size: int = VOCAB_SIZE, context_length: int = CONTEXT_LENGTH
) -> list[int]:
    """``"5 12 7"`` -> ``[5, 12, 7]``, or a ValueError that says how to fix the text."""
    parts = text.replace(",", " ").split()
    if not parts:
        raise ValueError(
            f"the sequence is empty; type token ids from 0 to {vocab_size - 1} separated by "
            "spaces, for example 5 12 7 7"
        )
    ids = []
    for part in parts:
        try:
            token = int(part)
        except ValueError:
            raise ValueError(
                f"{part!r} is not a token id; use whole numbers from 0 to {vocab_size - 1} "
                "separated by spaces"
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


def train_setting(
    task: str, d_model: int, n_heads: int, mask_kind: str, window: int | None
) -> tuple[TinyLM, TrainHistory]:
    """Train a fresh ``TinyLM`` for one explorer setting (no cache; the explorer caches).

    The global random state is left as it was, so a notebook's own seeded cells give the
    same numbers whether or not the explorer trained in between.
    """
    with torch.random.fork_rng(devices=[]), cpu_threads(1):
        return train_tiny_lm(
            task,
            vocab_size=VOCAB_SIZE,
            d_model=d_model,
            n_heads=n_heads,
            context_length=CONTEXT_LENGTH,
            mask_kind=mask_kind,
            window=window,
            seed=SEED,
            progress=False,
            **TRAIN_SETTINGS,
        )


def untrained_model(d_model: int, n_heads: int, mask_kind: str, window: int | None) -> TinyLM:
    """A freshly initialised ``TinyLM`` (seeded, so the same setting gives the same model)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        model = TinyLM(
            VOCAB_SIZE, d_model, n_heads, CONTEXT_LENGTH, mask_kind=mask_kind, window=window
        )
    return model.eval()


class AttentionExplorer(widgets.VBox):
    """Interactive per-head attention heatmaps for ``TinyLM``; show it by ending a cell with it.

    Controls (each an ipywidget; set ``.value`` to drive it from code):
        n_heads: 1, 2, 4 or 8 heads.
        d_model: the model width; only values divisible by n_heads are offered.
        sequence: the input, token ids 0..63 separated by spaces (up to 16 tokens).
        trained: False = freshly initialised model, True = trained on ``task``.
        task: "copy" or "previous", the toy task trained mode learns.
        mask: "causal", "sliding" (each position sees itself and window - 1 before it)
            or "none" (every position sees every other).
        window: the sliding window's width.
        head: ``ALL_HEADS`` (-1) for every head, or one head's number.

    Read-outs: ``status`` ("4 heads · d_head = 8 · 4 panels"), ``message`` (a friendly
    error, empty when all is well), ``metrics`` (loss and accuracy), ``image`` (the PNG),
    ``figure`` (the last matplotlib figure drawn), ``weights`` ((panels, T, T) numpy array),
    ``history`` (the ``TrainHistory`` in trained mode, else None).
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
    ):
        if task not in TASKS:
            raise ValueError(f"task={task!r} is not known; use one of {TASKS}")
        if n_heads not in HEAD_CHOICES:
            raise ValueError(f"n_heads={n_heads} is not offered; pick one of {HEAD_CHOICES}")
        if d_model not in d_model_choices(n_heads):
            raise ValueError(
                f"d_model={d_model} is not offered with n_heads={n_heads}; "
                f"pick one of {d_model_choices(n_heads)}"
            )
        slider = {"continuous_update": False, "style": {"description_width": "70px"}}
        self.n_heads = widgets.SelectionSlider(
            options=HEAD_CHOICES, value=n_heads, description="n_heads", **slider
        )
        self.d_model = widgets.SelectionSlider(
            options=d_model_choices(n_heads), value=d_model, description="d_model", **slider
        )
        self.sequence = widgets.Text(
            value=sequence if sequence is not None else example_sequence(task),
            description="sequence",
            placeholder="token ids 0..63, e.g. 5 12 7 7",
            continuous_update=False,
            layout=widgets.Layout(width="520px"),
            style={"description_width": "70px"},
        )
        self.trained = widgets.ToggleButtons(
            options=[("untrained", False), ("trained", True)], value=trained, description="model"
        )
        self.task = widgets.ToggleButtons(options=TASKS, value=task, description="task")
        self.mask = widgets.ToggleButtons(options=MASK_CHOICES, value=mask, description="mask")
        self.window = widgets.IntSlider(
            value=window, min=1, max=CONTEXT_LENGTH, description="window", **slider
        )
        self.head = widgets.Dropdown(
            options=self._head_options(n_heads),
            value=head,
            description="show",
            layout=widgets.Layout(width="180px"),
        )
        for style_me in (self.trained, self.task, self.mask):
            style_me.style.button_width = "86px"
        self.status = widgets.HTML()
        self.message = widgets.HTML()
        self.metrics = widgets.HTML(layout=widgets.Layout(width="260px", padding="0 0 0 12px"))
        self.image = widgets.Image(format="png")
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
            (self.metrics, "metrics"),
            (self.image, "heatmap"),
        ):
            widget.add_class(f"attention-lab-{name}")

        self.figure = None  # the last matplotlib figure drawn
        self.weights: np.ndarray | None = None  # (panels, T, T), the weights on show
        self.history: TrainHistory | None = None  # trained mode: how training went
        self._grids: dict[tuple, HeadGrid] = {}  # one HeadGrid per (panels, tokens)
        self._models: dict[tuple, tuple[TinyLM, TrainHistory | None]] = {}
        self._metrics_cache: dict[tuple, str] = {}
        self._labels: tuple = ()  # tokens, titles, suptitle of the picture on show
        self._holding = False
        super().__init__(
            [
                widgets.HBox([self.n_heads, self.d_model, self.head]),
                widgets.HBox([self.trained, self.task]),
                widgets.HBox([self.mask, self.window]),
                self.sequence,
                self.status,
                self.message,
                widgets.HBox([self.image, self.metrics]),
            ]
        )
        self.n_heads.observe(self._on_n_heads, names="value")
        self.task.observe(self._on_task, names="value")
        for control in (self.d_model, self.sequence, self.trained, self.mask, self.window):
            control.observe(self._on_change, names="value")
        self.head.observe(self._on_change, names="value")
        self.mask.observe(self._sync_window, names="value")
        self._sync_window()
        self.redraw()

    # -- what the page shows -------------------------------------------------------------

    def __repr__(self) -> str:
        return (
            f"AttentionExplorer(n_heads={self.n_heads.value}, d_model={self.d_model.value}, "
            f"trained={self.trained.value}, task={self.task.value!r}, mask={self.mask.value!r})"
        )

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
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
                self._models[key] = train_setting(task, d_model, n_heads, mask, window)
            else:
                self._models[key] = (untrained_model(d_model, n_heads, mask, window), None)
        return self._models[key]

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
            self.image.layout.display = "none"
            self.metrics.value = ""
            self.status.value = ""

    def _redraw(self) -> None:
        s = self.setting()
        d_head = check_heads(s["d_model"], s["n_heads"])
        ids = parse_sequence(s["sequence"])
        window = s["window"] if s["mask"] == "sliding" else None
        if s["trained"]:
            self.message.value = (
                f"<i>training TinyLM on the {s['task']} task (n_heads={s['n_heads']}, "
                f"d_model={s['d_model']}) ...</i>"
            )
        model, history = self.model_for(
            s["trained"], s["task"], s["d_model"], s["n_heads"], s["mask"], window
        )
        x = torch.tensor([ids])  # (1, T)
        with torch.no_grad(), cpu_threads(1):
            _, weights = model(x, return_weights=True)  # (1, H, T, T)
        heads = list(range(s["n_heads"])) if s["head"] == ALL_HEADS else [s["head"]]
        w = weights[0, heads].numpy()  # (panels, T, T)
        tokens = [str(t) for t in ids]
        grid = self._grid(len(heads), tokens)
        titles = [f"head {h} · d_head = {d_head}" for h in heads]
        grid.update(w, titles, suptitle=self._suptitle(s))
        self.image.value = grid.to_png()
        self.image.layout.display = None
        self.figure, self.weights, self.history = grid.figure, w, history
        self._labels = (tokens, titles, grid.suptitle.get_text())
        self.status.value = (
            f"<b>{s['n_heads']} heads · d_head = {d_head}</b> · {len(heads)} "
            f"panel{'s' if len(heads) > 1 else ''}"
        )
        key = (id(model), s["task"])
        if key not in self._metrics_cache:
            self._metrics_cache[key] = self._metrics_html(model, history, s["task"])
        self.metrics.value = self._metrics_cache[key]
        self.message.value = ""

    def snapshot(self) -> LabFigure:
        """The picture on show as a static ``plot_heads`` figure: end a cell with it so
        readers without a live kernel (GitHub, a PDF) see what the explorer shows."""
        if self.weights is None:
            raise ValueError("the explorer has not drawn anything yet; fix the message first")
        tokens, titles, suptitle = self._labels
        return plot_heads(self.weights, tokens=tokens, titles=titles, suptitle=suptitle)

    def _grid(self, n_panels: int, tokens: list[str]) -> HeadGrid:
        key = (n_panels, tuple(tokens))
        if key not in self._grids:
            if len(self._grids) > 32:  # many sequences typed: forget the oldest grids
                self._grids.pop(next(iter(self._grids)))
            panel_size = 4.0 if n_panels == 1 else 2.3
            self._grids[key] = HeadGrid(n_panels, len(tokens), tokens, panel_size=panel_size)
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
                f"<b>untrained</b><br>held-out loss on {task}: {loss:.3f}<br>"
                f"accuracy: {accuracy:.1%}<br>chance: ln {VOCAB_SIZE} = {chance:.2f}<br>"
                "<small>the weights are random: switch to <i>trained</i></small>"
            )
        steps = len(history.step_losses)
        return (
            f"<b>trained on {task}</b> ({steps} steps, {history.seconds:.1f} s)<br>"
            f"held-out loss: {history.final_loss:.4f}<br>"
            f"accuracy: {history.final_accuracy:.1%}<br>"
            f"before training: {history.initial_loss:.2f} (chance {chance:.2f})"
        )


def benchmark_explorer(repeats: int = 20) -> dict[str, float]:
    """Time the explorer's redraw and retrain (for ``make bench``; never used in tests).

    Returns:
        redraw_median_ms: median time of one slider change at H=8, T=16 (the window slider,
            sliding mask): forward pass, update the 8 heatmaps in place, render the PNG the
            browser receives. Budget: 150 ms.
        redraw_cpu_median_ms: the same, CPU time of this process (less sensitive to a busy
            machine).
        redraw_new_titles_median_ms: a d_model change at H=8 (the titles change, so they
            are repainted too).
        first_draw_ms: the first picture for a new panel count or a new input sequence
            (the whole figure is drawn once).
        retrain_s: training a fresh TinyLM for a new setting (copy task, H=8, d_model=32,
            64 Adam steps on one thread). Budget: 1.5 s on 2 cores.
        retrain_cpu_s: the same, CPU time of this process.
        first_train_s: the first training of a Python session, measured before: it also
            pays once for PyTorch importing its compiler package (torch._dynamo) at the
            optimiser's first step, several seconds on a slow machine.
    """
    sequence = example_sequence("previous")
    start = time.perf_counter()
    explorer = AttentionExplorer(n_heads=8, d_model=32, sequence=sequence, mask="sliding")
    first_draw_ms = 1000 * (time.perf_counter() - start)
    walls, cpus = [], []
    for i in range(repeats + 2):  # two warm-up changes (first visit of each window)
        wall, cpu = time.perf_counter(), time.process_time()
        explorer.window.value = 4 + i % 2
        if i >= 2:
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
    titles = []
    for i in range(repeats + 2):
        wall = time.perf_counter()
        explorer.d_model.value = (32, 64)[i % 2]
        if i >= 2:
            titles.append(time.perf_counter() - wall)
    start = time.perf_counter()
    train_setting("copy", 32, 4, "causal", None)  # the first training of a session
    first_train_s = time.perf_counter() - start
    start, cpu = time.perf_counter(), time.process_time()
    train_setting("copy", 32, 8, "causal", None)
    retrain_s = time.perf_counter() - start
    retrain_cpu_s = time.process_time() - cpu
    return {
        "redraw_median_ms": 1000 * statistics.median(walls),
        "redraw_cpu_median_ms": 1000 * statistics.median(cpus),
        "redraw_new_titles_median_ms": 1000 * statistics.median(titles),
        "first_draw_ms": first_draw_ms,
        "retrain_s": retrain_s,
        "retrain_cpu_s": retrain_cpu_s,
        "first_train_s": first_train_s,
    }
