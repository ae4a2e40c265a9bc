"""``AttentionExplorer``: move a slider, see every head's attention (notebooks 06, 08, explorer).

The explorer wraps ``TinyLM`` in a few controls -- number of heads, number of key/value
heads, model width, input sequence, untrained or trained, mask, which head to look at, and
for the two-layer induction task which layer -- and shows the attention weights of every head
as heatmaps, one panel per head, with d_head = d_model / n_heads in each title (and, with
fewer kv heads than heads, the kv head each one reads, its panel framed in that kv head's
colour), the mask that was applied drawn as blocked, and beside them the head-split diagram
of notebook 06 for the current n_heads and d_model. With fewer kv heads than heads, the
status line says what the KV cache costs per token against plain multi-head attention. In
trained mode it trains ``TinyLM`` on the chosen toy task for the chosen setting (a fraction
of a second on a laptop CPU; induction, 250 steps of a two-layer model, a few seconds; with a
progress bar), keeps the result, and shows the loss and accuracy beside the heatmaps.

This module is the page (ipywidgets): it wires the controls to the work, which lives in
rooms of its own, all but the controls testable without ipywidgets:
``model`` (the settings and tasks offered, the sequence box, the models and their
weights), ``text`` (what the read-outs say), ``picture`` (heatmaps painted in place by a
``HeadGrid`` per panel count, the head-split diagram drawn once per size, PNGs sized for the
screen), ``controls`` (the widgets and their layout) and ``kernel`` (whether it runs in a
kernel, and whether a reader moved a control), all in ``attention_lab.viz.explorer``.

It runs wherever ipywidgets 7.7 or 8 run (JupyterLab, Colab, Voila: ``make explore``) and
needs no JavaScript of its own. Everything a test needs is an attribute: the controls (set
their ``.value``), the last ``figure`` drawn, the text of ``status`` and ``message``, the
training ``history``.
"""

from __future__ import annotations

import contextlib

import ipywidgets as widgets
import numpy as np

from ...i18n import error_text
from ...tiny_lm import TinyLM
from ...training import TrainHistory
from ..canvas import LabFigure
from . import controls, kernel
from .model import (
    ALL_HEADS,
    HEAD_CHOICES,
    SETTING_NAMES,
    ModelCache,
    check_explorer_task,
    check_layer,
    check_sizes,
    d_model_choices,
    example_sequence,
    head_weights,
    kv_cache_per_token,
    kv_head_of,
    kv_heads_after,
    parse_sequence,
    placeholder,
    position_labels,
    task_context_length,
    task_n_layers,
    train_setting,
)
from .picture import CSS_DPI, DIAGRAM_CSS_DPI, Picture, snapshot
from .text import (
    cache_html,
    error_html,
    metrics_html,
    panel_titles,
    status_html,
    suptitle,
    training_html,
)


class AttentionExplorer(widgets.VBox):
    """Interactive per-head attention heatmaps for ``TinyLM``; show it by ending a cell with it.

    Controls (each an ipywidget; set ``.value`` to drive it from code):
        n_heads: 1, 2, 4 or 8 heads.
        n_kv_heads: key/value heads, H, H/2, ..., 1 (only divisors of n_heads are offered):
            each group of n_heads / n_kv_heads query heads shares one (grouped-query
            attention; 1 is multi-query attention, n_heads plain multi-head). Moving n_heads
            keeps the query heads per kv head where it can (so MHA stays MHA).
        d_model: the model width; only values divisible by n_heads are offered.
        sequence: the input, up to 16 tokens separated by spaces: ids 0..63 or the task's
            own tokens ("c=4", "c?", "SEP"; see ``parse_sequence``); for induction up to
            24 ids 0..31.
        trained: False = freshly initialised model, True = trained on ``task``.
        task: the toy task trained mode learns, one of ``TASK_CHOICES``: "copy" (a plumbing
            check), "previous" and "repeat" (positional), "lookup" (by content),
            "induction" (two layers: a segment comes back, an induction head continues
            it). It also sets the model's shape and names the tokens in the sequence box
            and in the tick labels.
        mask: "causal", "sliding" (each position sees itself and window - 1 before it)
            or "none" (every position sees every other).
        window: the sliding window's width.
        head: ``ALL_HEADS`` (-1) for every head, or one head's number.
        layer: which attention layer is shown, 0 or 1 for induction (its toggle is shown
            only there); the one-layer tasks have layer 0 only.

    Read-outs: ``status`` ("4 heads · d_head = 8 · 4 panels", with fewer kv heads than heads
    the KV cache per token against plain multi-head attention's, and the sequence in the
    task's tokens when it was typed otherwise, e.g. as ids), ``message`` (a friendly
    error, empty when all is well), ``metrics`` (loss and accuracy), ``image`` (the PNG),
    ``diagram`` (the head-split diagram as a PNG), ``progress`` (training's progress bar),
    ``figure`` (the last matplotlib figure drawn), ``weights`` ((panels, T, T) numpy array),
    ``mask_shown`` ((T, T) bool, True = blocked, the mask the model applied), ``history`` (the
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
        layer: int = 0,
        n_kv_heads: int | None = None,
    ):
        check_explorer_task(task)
        check_sizes(n_heads, d_model, n_kv_heads)
        check_layer(layer, task_n_layers(task))
        # the controls and read-outs (controls.py): self.n_heads, ..., self.diagram
        made = controls.make_widgets(
            n_heads, d_model, sequence, trained, task, mask, window, head, layer, n_kv_heads
        )
        for name, widget in made.items():
            setattr(self, name, widget)
        self.figure = None  # the last matplotlib figure drawn
        self.weights: np.ndarray | None = None  # (panels, T, T), the weights on show
        self.mask_shown: np.ndarray | None = None  # (T, T) bool, True = blocked
        self.history: TrainHistory | None = None  # trained mode: how training went
        self._picture = Picture()  # the heatmap grids and diagrams drawn so far
        self._models = ModelCache()  # (trained, task, sizes, mask, kv) -> (model, history)
        self._metrics_cache: dict[tuple, str] = {}
        self._diagram_key: tuple | None = None  # the size the diagram should show
        self._metrics_key: tuple | None = None  # (model, history, task) on show
        self._with_diagram = diagram
        if not diagram:
            self.diagram.layout.display = "none"
        self._labels: tuple = ()  # tokens, titles, suptitle, panel size of the picture on show
        self._groups: list[int] | None = None  # the kv head of each panel on show (GQA only)
        self._holding = False

        super().__init__(
            controls.arrange(self),
            layout=widgets.Layout(width="100%", max_width="100%", overflow="hidden"),
        )
        self.add_class("attention-lab-explorer")
        self.n_heads.observe(self._on_n_heads, names="value")
        self.task.observe(self._on_task, names="value")
        controls_ = (self.d_model, self.n_kv_heads, self.sequence, self.trained, self.mask)
        for control in (*controls_, self.window):
            control.observe(self._on_change, names="value")
        self.head.observe(self._on_change, names="value")
        self.layer.observe(self._on_change, names="value")
        self.mask.observe(self._sync_window, names="value")
        self._sync_window()
        self.redraw()
        if prebuild if prebuild is not None else kernel.in_kernel():
            self.prebuild()

    # -- what the page shows -------------------------------------------------------------

    def __repr__(self) -> str:
        kv = self.n_kv_heads.value
        return (
            f"AttentionExplorer(n_heads={self.n_heads.value}, "
            + (f"n_kv_heads={kv}, " if kv != self.n_heads.value else "")
            + f"d_model={self.d_model.value}, "
            f"trained={self.trained.value}, task={self.task.value!r}, mask={self.mask.value!r}"
            + (f", layer={self.layer.value})" if task_n_layers(self.task.value) > 1 else ")")
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
            kv = kv_heads_after(n_heads, change["old"], self.n_kv_heads.value)
            controls.set_kv_heads(self.n_kv_heads, n_heads, kv)
            choices = d_model_choices(n_heads)
            keep = self.d_model.value
            if keep not in choices:  # the nearest width that works with this many heads
                keep = min(choices, key=lambda d: (abs(d - keep), d))
            self.d_model.options = choices
            self.d_model.value = keep
            head = self.head.value
            self.head.options = controls.head_options(n_heads)
            self.head.value = head if head < n_heads else ALL_HEADS

    def _on_task(self, change) -> None:
        task = change["new"]
        with self.hold():
            self.sequence.placeholder = placeholder(task)
            self.sequence.value = example_sequence(task)
            self.window.max = task_context_length(task)  # the longest input of the task
            n_layers, layer = task_n_layers(task), self.layer.value
            if len(self.layer.options) != n_layers:
                self.layer.options = controls.layer_options(n_layers)
                self.layer.value = layer if layer < n_layers else 0
            controls.show_layer_row(self.layer_row, n_layers)

    def _on_change(self, change=None) -> None:
        if not self._holding:
            self.redraw()

    def _sync_window(self, change=None) -> None:
        self.window.disabled = self.mask.value != "sliding"

    # -- the work ------------------------------------------------------------------------

    def setting(self) -> dict:
        """The current choice of every control, as plain values."""
        return {name: getattr(self, name).value for name in SETTING_NAMES}

    def model_for(
        self,
        trained: bool,
        task: str,
        d_model: int,
        n_heads: int,
        mask: str,
        window: int | None,
        n_kv_heads: int | None = None,
    ) -> tuple[TinyLM, TrainHistory | None]:
        """The model for one setting, trained or built on first use, then cached."""
        return self._models.model_for(
            trained, task, d_model, n_heads, mask, window, train=self._train, n_kv_heads=n_kv_heads
        )

    def _train(
        self, task, d_model, n_heads, mask, window, n_kv_heads=None
    ) -> tuple[TinyLM, TrainHistory]:
        """Train one setting; asked from the page, its progress bar shows in ``progress``."""
        kv = {"n_kv_heads": n_kv_heads}
        if not kernel.from_the_page():
            return train_setting(task, d_model, n_heads, mask, window, **kv)
        self.progress.layout.display = None
        try:
            with self.progress:
                return train_setting(task, d_model, n_heads, mask, window, progress=True, **kv)
        finally:
            self.progress.clear_output()
            self.progress.layout.display = "none"

    def redraw(self) -> None:
        """Draw the heatmaps for the current controls; a problem becomes a message, never a
        traceback."""
        try:
            self._redraw()
        except Exception as error:  # noqa: BLE001 -- show any problem in the page
            self.message.value = error_html(error)
            for hide in (self.image, self.diagram, self.metrics):  # no stale picture
                hide.layout.display = "none"
            self.status.value = ""

    def _redraw(self) -> None:
        s = self.setting()
        ids = parse_sequence(s["sequence"], task=s["task"])
        window = s["window"] if s["mask"] == "sliding" else None
        if s["trained"]:
            self.message.value = training_html(s)
        model, history = self.model_for(
            s["trained"], s["task"], s["d_model"], s["n_heads"], s["mask"], window, s["n_kv_heads"]
        )
        # (panels, T, T), (T, T): the heads of the layer on show
        heads, w, blocked = head_weights(model, ids, s["head"], s["layer"])
        d_head = model.config.d_head  # the sizes were checked once, by the model's config
        tokens = position_labels(s["task"], ids)  # "3:c=4": position and token
        titles = panel_titles(s, heads, d_head)
        groups = None  # plain multi-head: no kv groups to frame
        if s["n_kv_heads"] != s["n_heads"]:
            groups = [kv_head_of(h, s["n_heads"], s["n_kv_heads"]) for h in heads]
        grid, png = self._picture.heatmaps(w, tokens, titles, suptitle(s), blocked, groups)
        controls.show_png(self.image, png, CSS_DPI)
        self.figure, self.weights, self.mask_shown, self.history = grid.figure, w, blocked, history
        self._labels = (tokens, titles, grid.suptitle.get_text(), grid.panel_size)
        self._groups = groups
        cache = cache_html(s, *kv_cache_per_token(model.config))
        self.status.value = status_html(s, d_head, len(heads), ids, cache)
        self.message.value = ""
        # the read-outs beside the picture: at once when known, else once the picture is out
        self._metrics_key = (model, history, s["task"])
        self._diagram_key = (len(ids), s["d_model"], s["n_heads"])
        known = (id(model), s["task"]) in self._metrics_cache and (
            self._picture.has_diagram(self._diagram_key) or not self._with_diagram
        )
        if known or not kernel.later(self._draw_readouts):
            self._draw_readouts()

    def _draw_readouts(self) -> None:
        """Show the loss and accuracy, and the head-split diagram, for the setting on show."""
        if self.message.value != "" or self._metrics_key is None:
            return  # a problem is on show instead
        model, history, task = self._metrics_key
        key = (id(model), task)
        if key not in self._metrics_cache:
            self._metrics_cache[key] = metrics_html(model, history, task)
        self.metrics.value = self._metrics_cache[key]
        self.metrics.layout.display = None
        self._draw_diagram()

    def _draw_diagram(self) -> None:
        """Show the head-split diagram for the current size (drawn once per size)."""
        key = self._diagram_key
        if key is None or not self._with_diagram:
            return
        png = self._picture.diagram(key)
        if key == self._diagram_key and self.message.value == "":  # still the setting on show
            controls.show_png(self.diagram, png, DIAGRAM_CSS_DPI)

    def prebuild(self) -> None:
        """Build and draw the heatmap grid of every panel count for the current sequence, so
        the first visit to 1, 2, 4 or 8 heads costs no more than any other redraw."""
        task = self.task.value
        try:
            tokens = position_labels(task, parse_sequence(self.sequence.value, task=task))
        except ValueError:
            return
        self._picture.prebuild(HEAD_CHOICES, tokens, skip=self.figure)  # on show: drawn already

    def snapshot(self) -> LabFigure:
        """The picture on show as a static ``plot_heads`` figure: end a cell with it so
        readers without a live kernel (GitHub, a PDF) see what the explorer shows."""
        if self.weights is None:
            raise ValueError(
                error_text("the explorer has not drawn anything yet; fix the message first")
            )
        return snapshot(self.weights, self._labels, self.mask_shown, self._groups)
