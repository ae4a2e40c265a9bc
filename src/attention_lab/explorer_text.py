"""What the explorer's read-outs say: the figure's title, the status line, the messages, the
loss and accuracy (HTML strings; no ipywidgets).

``s`` is a setting as ``AttentionExplorer.setting()`` returns it: a dict of every control's value
(``explorer_model.SETTING_NAMES``).
"""

from __future__ import annotations

import html
import math

from .explorer_model import VOCAB_SIZE
from .tasks import token_labels
from .tiny_lm import TinyLM
from .training import TrainHistory, evaluate


def training_html(s: dict) -> str:
    """The message on show while the setting ``s`` trains."""
    return (
        f"<i>training TinyLM on the {s['task']} task (n_heads={s['n_heads']}, "
        f"d_model={s['d_model']}) ...</i>"
    )


def error_html(error: Exception) -> str:
    """A problem as the page shows it: a friendly box, never a traceback."""
    return (
        '<div style="color:#a40000;border:1px solid #a40000;padding:6px;'
        f'max-width:640px"><b>Cannot draw this setting.</b> {html.escape(str(error))}'
        "</div>"
    )


def suptitle(s: dict) -> str:
    """The figure's title for a setting ``s`` (``AttentionExplorer.setting()``)."""
    mask = {"causal": "causal mask", "none": "no mask"}.get(
        s["mask"], f"sliding window of {s['window']}"
    )
    model = f"trained on {s['task']}" if s["trained"] else "untrained"
    return f"TinyLM, {model}: n_heads = {s['n_heads']}, d_model = {s['d_model']}, {mask}"


def status_html(s: dict, d_head: int, n_panels: int, ids: list[int]) -> str:
    """``4 heads · d_head = 8 · 4 panels``, and the sequence in the task's tokens when it was
    typed otherwise (e.g. as ids)."""
    readable = " ".join(token_labels(s["task"], ids))
    typed = " ".join(s["sequence"].replace(",", " ").split())
    reads_as = f" · reads as <code>{html.escape(readable)}</code>" if typed != readable else ""
    return (
        f"<b>{_count(s['n_heads'], 'head')} · d_head = {d_head}</b> · "
        f"{_count(n_panels, 'panel')}{reads_as}"
    )


def metrics_html(model: TinyLM, history: TrainHistory | None, task: str) -> str:
    """Loss and accuracy: measured on 128 fresh rows when untrained, else from ``history``."""
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


def _count(n: int, noun: str) -> str:
    """``1 head``, ``4 heads``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
