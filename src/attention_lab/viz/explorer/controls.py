"""The explorer's controls and read-outs, and how the page arranges them (ipywidgets).

``widgets.AttentionExplorer`` takes its widgets from here and only wires them together. Every
widget carries a CSS class ``attention-lab-<name>`` (the browser tests find them by it).
A picture is scaled down as a whole when the page is narrower (``width: 100%; height: auto``:
the panels stay square), and the read-outs move below the figure when there is no room.
"""

from __future__ import annotations

import ipywidgets as widgets

from ...i18n import _, pgettext
from .model import (
    ALL_HEADS,
    HEAD_CHOICES,
    KV_TOOLTIPS,
    MASK_CHOICES,
    TASK_CHOICES,
    TASK_TOOLTIPS,
    d_model_choices,
    example_sequence,
    kv_head_choices,
    placeholder,
    task_context_length,
    task_n_layers,
)
from .picture import css_width
from .text import task_button_label

# attribute name -> CSS class name (attention-lab-<name>)
CSS_NAMES = {
    "n_heads": "n-heads",
    "d_model": "d-model",
    "n_kv_heads": "n-kv-heads",
    "sequence": "sequence",
    "trained": "trained",
    "task": "task",
    "mask": "mask",
    "window": "window",
    "head": "head",
    "layer": "layer",
    "status": "status",
    "message": "message",
    "progress": "progress",
    "metrics": "metrics",
    "image": "heatmap",
    "diagram": "diagram",
}


def head_options(n_heads: int) -> list[tuple[str, int]]:
    """The ``head`` dropdown's choices: every head, or one of them."""
    return [(_("all heads"), ALL_HEADS)] + [(_("head {h}").format(h=h), h) for h in range(n_heads)]


def kv_head_options(n_heads: int) -> list[tuple[str, int]]:
    """The kv heads toggle's choices with ``n_heads`` heads: H, H/2, ..., 1 (``kv_head_choices``),
    so a count that does not divide n_heads cannot be picked."""
    return [(str(k), k) for k in kv_head_choices(n_heads)]


def kv_head_tooltips(n_heads: int) -> list[str]:
    """One tooltip per kv heads button: what that many key/value heads make of the layer."""
    tips = []
    for n_kv in kv_head_choices(n_heads):
        kind = "mha" if n_kv == n_heads else "mqa" if n_kv == 1 else "gqa"
        tips.append(_(KV_TOOLTIPS[kind]).format(n_kv=n_kv, n_heads=n_heads, group=n_heads // n_kv))
    return tips


def set_kv_heads(toggle: widgets.ToggleButtons, n_heads: int, n_kv_heads: int) -> None:
    """Offer the kv heads of ``n_heads`` (options and tooltips) and pick ``n_kv_heads``."""
    options = kv_head_options(n_heads)
    if list(toggle.options) != options:
        toggle.options = options
        toggle.tooltips = kv_head_tooltips(n_heads)
    toggle.value = n_kv_heads


def layer_options(n_layers: int) -> list[tuple[str, int]]:
    """The ``layer`` toggle's choices: one button per attention layer, counted from 0."""
    return [(_("layer {layer}").format(layer=layer), layer) for layer in range(n_layers)]


def labelled_options(values, labels) -> tuple | list[tuple]:
    """Options for a toggle: ``values`` themselves where every label is its value (English,
    as the controls always were), else ``(label, value)`` pairs (a translation)."""
    labels = list(labels)
    if labels == list(values):
        return tuple(values)
    return list(zip(labels, values))


def mask_label(mask: str) -> str:
    """The label of a mask's button (its value stays "causal", "sliding" or "none")."""
    return {
        "causal": pgettext("mask button", "causal"),
        "sliding": pgettext("mask button", "sliding"),
        "none": pgettext("mask button", "none"),
    }.get(mask, mask)


def make_widgets(
    n_heads: int, d_model: int, sequence: str | None, trained: bool, task: str, mask: str,
    window: int, head: int, layer: int = 0, n_kv_heads: int | None = None,
) -> dict[str, widgets.Widget]:  # fmt: skip
    """The controls, set to these values, and the empty read-outs, by attribute name."""
    label = {"description_width": "64px"}
    slider = {"continuous_update": False, "style": label}
    made = {
        "n_heads": widgets.SelectionSlider(
            options=HEAD_CHOICES, value=n_heads, description="n_heads", **slider
        ),
        "d_model": widgets.SelectionSlider(
            options=d_model_choices(n_heads), value=d_model, description="d_model", **slider
        ),
        # H, H/2, ..., 1: buttons, one per divisor of n_heads (never a count that fails)
        "n_kv_heads": widgets.ToggleButtons(
            options=kv_head_options(n_heads),
            value=n_heads if n_kv_heads is None else n_kv_heads,
            tooltips=kv_head_tooltips(n_heads),
        ),
        "sequence": widgets.Text(
            value=sequence if sequence is not None else example_sequence(task),
            description=pgettext("explorer", "sequence"),
            placeholder=placeholder(task),
            continuous_update=False,
            layout=widgets.Layout(width="520px", max_width="100%"),
            style=label,
        ),
        "trained": widgets.ToggleButtons(
            options=[
                (pgettext("explorer", "untrained"), False),
                (pgettext("explorer", "trained"), True),
            ],
            value=trained,
        ),
        "task": widgets.ToggleButtons(
            options=labelled_options(TASK_CHOICES, map(task_button_label, TASK_CHOICES)),
            value=task,
            tooltips=[_(TASK_TOOLTIPS[t]) for t in TASK_CHOICES],
        ),
        "mask": widgets.ToggleButtons(
            options=labelled_options(MASK_CHOICES, map(mask_label, MASK_CHOICES)), value=mask
        ),
        "window": widgets.IntSlider(
            value=window,
            min=1,
            max=task_context_length(task),
            description=pgettext("explorer", "window"),
            **slider,
        ),
        "head": widgets.Dropdown(
            options=head_options(n_heads),
            value=head,
            description=pgettext("explorer", "show"),
            layout=widgets.Layout(width="170px"),
            style={"description_width": "40px"},
        ),
        # shown only for a task whose models have more than one layer (induction)
        "layer": widgets.ToggleButtons(options=layer_options(task_n_layers(task)), value=layer),
        "status": widgets.HTML(),
        "message": widgets.HTML(),
        "progress": widgets.Output(layout=widgets.Layout(display="none")),
        "metrics": widgets.HTML(
            layout=widgets.Layout(flex="1 1 220px", min_width="200px", max_width="320px")
        ),
        "image": widgets.Image(format="png", layout=widgets.Layout(**_image_layout(800))),
        "diagram": widgets.Image(format="png", layout=widgets.Layout(**_image_layout(840))),
    }
    for name in ("trained", "task", "mask", "layer"):
        made[name].style.button_width = "80px"
    made["n_kv_heads"].style.button_width = "40px"  # one digit each
    for name in ("trained", "task"):  # "untrained" and "induction" need more than 80 px
        made[name].style.button_width = "96px"
    for name, widget in made.items():
        widget.add_class(f"attention-lab-{CSS_NAMES[name]}")
    return made


def arrange(ex) -> list[widgets.Widget]:
    """The rows of the page for the widgets of ``ex``: the controls (wrapping when narrow),
    status, message, progress bar, then the picture with the read-outs beside it. The layer
    toggle and its label become ``ex.layer_row``, hidden for one-layer tasks
    (``show_layer_row``); the kv heads toggle and its label sit after n_heads."""

    def wrap():
        return widgets.Layout(flex_flow="row wrap", align_items="center", margin="0 16px 0 0")

    ex.layer_row = _labelled(pgettext("explorer", "layer"), ex.layer)
    show_layer_row(ex.layer_row, len(ex.layer.options))
    controls = widgets.HBox(
        [
            widgets.HBox([ex.n_heads, ex.d_model, ex.head, ex.layer_row], layout=wrap()),
            widgets.HBox(
                [_labelled(pgettext("explorer", "kv heads"), ex.n_kv_heads)], layout=wrap()
            ),
            widgets.HBox(
                [
                    _labelled(pgettext("explorer", "model"), ex.trained),
                    _labelled(pgettext("explorer", "task"), ex.task),
                ],
                layout=wrap(),
            ),
            widgets.HBox(
                [_labelled(pgettext("explorer", "mask"), ex.mask), ex.window], layout=wrap()
            ),
            ex.sequence,
        ],
        layout=widgets.Layout(flex_flow="row wrap", align_items="center"),
    )
    picture = widgets.HBox(
        [ex.image, ex.metrics, ex.diagram],
        layout=widgets.Layout(flex_flow="row wrap", align_items="flex-start", width="100%"),
    )
    return [controls, ex.status, ex.message, ex.progress, picture]


def show_layer_row(row: widgets.Widget, n_layers: int) -> None:
    """Show the layer toggle only when there is more than one layer to choose from."""
    display = None if n_layers > 1 else "none"
    if row.layout.display != display:
        row.layout.display = display


def show_png(image: widgets.Image, png: bytes, css_dpi: float) -> None:
    """Put ``png`` into ``image``, at most as wide as the figure is at ``css_dpi``."""
    width = css_width(png, css_dpi)
    if image.layout.width != width:
        image.layout.width = width
    image.value = png
    image.layout.display = None


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


def _labelled(text: str, control: widgets.Widget) -> widgets.HBox:
    """``control`` with a label in front, in line with the sliders' descriptions. (Toggle
    buttons' own description goes above the buttons when the row is narrow.)"""
    label = widgets.Label(text, layout=widgets.Layout(width="64px", flex="0 0 auto"))
    return widgets.HBox([label, control], layout=widgets.Layout(align_items="center"))
