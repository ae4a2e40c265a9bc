"""The attention explorer (notebooks 06, 08 and explorer.ipynb, ``make explore``):
``from attention_lab.viz.explorer import AttentionExplorer``.

One module per room; all but ``controls`` and ``widgets`` run without ipywidgets:

* ``widgets``: ``AttentionExplorer``, the page, which wires the controls to the work;
* ``model``: the settings and tasks offered, the sequence box, the models and their weights;
* ``text``: what the read-outs say;
* ``picture``: heatmaps painted in place, the head-split diagram, PNGs sized for the screen;
* ``controls``: the widgets and their layout;
* ``kernel``: whether it runs in a kernel, and whether a reader moved a control.

``AttentionExplorer`` loads ``widgets`` (and ipywidgets) the first time it is used, so the rooms
without ipywidgets import without it.
"""

from __future__ import annotations

__all__ = ["AttentionExplorer"]


def __getattr__(name: str):
    if name == "AttentionExplorer":
        from .widgets import AttentionExplorer

        return AttentionExplorer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
