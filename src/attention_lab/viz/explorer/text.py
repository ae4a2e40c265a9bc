"""What the explorer's read-outs say: the figure's title, the status line, the messages, the
loss and accuracy (HTML strings; no ipywidgets).

``s`` is a setting as ``AttentionExplorer.setting()`` returns it: a dict of every control's value
(``model.SETTING_NAMES``).
"""

from __future__ import annotations

import html
import math

from ...i18n import _, get_language, pgettext
from ...tasks import token_labels
from ...tiny_lm import TinyLM
from ...training import TrainHistory, evaluate
from .model import kv_head_of, task_n_layers, train_steps


def short_task_name(task: str) -> str:
    """How the read-outs name ``task`` in a sentence: the task's code name in English
    ("trained on copy"), in Chinese the glossary's phrase (复制任务, “previous”任务).
    ``tasks.task_name`` is the long form ("copy task") other read-outs use."""
    names = {
        "copy": pgettext("task name", "copy"),
        "previous": pgettext("task name", "previous"),
        "repeat": pgettext("task name", "repeat"),
        "lookup": pgettext("task name", "lookup"),
        "trigram": pgettext("task name", "trigram"),
        "induction": pgettext("task name", "induction"),
    }
    return names.get(task, task)


def task_button_label(task: str) -> str:
    """The label of ``task``'s button in the task toggle (its value stays the code name)."""
    labels = {
        "copy": pgettext("task button", "copy"),
        "previous": pgettext("task button", "previous"),
        "repeat": pgettext("task button", "repeat"),
        "lookup": pgettext("task button", "lookup"),
        "induction": pgettext("task button", "induction"),
    }
    return labels.get(task, task)


def training_html(s: dict) -> str:
    """The message on show while the setting ``s`` trains (a two-layer task says how many
    steps: it takes a few seconds, where the others take a fraction of one)."""
    sizes = f"n_heads={s['n_heads']}, d_model={s['d_model']}"
    if s["n_kv_heads"] != s["n_heads"]:
        sizes = f"n_heads={s['n_heads']}, n_kv_heads={s['n_kv_heads']}, d_model={s['d_model']}"
    fields = {"task": short_task_name(s["task"]), "sizes": sizes}
    if task_n_layers(s["task"]) > 1:
        return _(
            "<i>training TinyLM on the {task} task ({sizes}, {n_layers} layers, {steps} steps: "
            "a few seconds, once per setting) ...</i>"
        ).format(n_layers=task_n_layers(s["task"]), steps=train_steps(s["task"]), **fields)
    return _("<i>training TinyLM on the {task} task ({sizes}) ...</i>").format(**fields)


def error_html(error: Exception) -> str:
    """A problem as the page shows it: a friendly box, never a traceback. In a translation,
    only the translated lines of the library's message (``i18n.error_text``: the English
    first line is for searching, the page speaks the reader's language)."""
    heading = html.escape(_("Cannot draw this setting."))
    return (
        '<div style="color:#a40000;border:1px solid #a40000;padding:6px;'
        f'max-width:640px"><b>{heading}</b> {html.escape(readable_error(error))}</div>'
    )


def readable_error(error: Exception) -> str:
    """The text of ``error`` in the reader's language: an ``error_text`` message without its
    English first line when the lines below it are the translation."""
    text = str(error)
    if get_language() != "en" and "\n" in text:
        english, translated = text.split("\n", 1)
        if _has_cjk(translated):
            return translated
    return text


def _has_cjk(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" or "\u3000" <= ch <= "\u303f" for ch in text)


def suptitle(s: dict) -> str:
    """The figure's title for a setting ``s`` (``AttentionExplorer.setting()``)."""
    if s["mask"] == "causal":
        mask = _("causal mask")
    elif s["mask"] == "none":
        mask = _("no mask")
    else:
        mask = _("sliding window of {window}").format(window=s["window"])
    model = (
        _("trained on {task}").format(task=short_task_name(s["task"]))
        if s["trained"]
        else pgettext("explorer", "untrained")
    )
    if task_n_layers(s["task"]) > 1:
        model = _("{model}, layer {layer} of {n_layers}").format(
            model=model, layer=s["layer"], n_layers=task_n_layers(s["task"])
        )
    if s["n_kv_heads"] != s["n_heads"]:  # grouped-query or multi-query attention
        return _(
            "TinyLM, {model}: n_heads = {n_heads}, n_kv_heads = {n_kv_heads}, "
            "d_model = {d_model}, {mask}"
        ).format(
            model=model,
            n_heads=s["n_heads"],
            n_kv_heads=s["n_kv_heads"],
            d_model=s["d_model"],
            mask=mask,
        )
    return _("TinyLM, {model}: n_heads = {n_heads}, d_model = {d_model}, {mask}").format(
        model=model, n_heads=s["n_heads"], d_model=s["d_model"], mask=mask
    )


def panel_titles(s: dict, heads: list[int], d_head: int) -> list[str]:
    """One title per panel: ``head 5 · d_head = 4``, and with fewer key/value heads than
    heads the kv head each one reads, ``head 5 · kv 1 · d_head = 4``."""
    if s["n_kv_heads"] == s["n_heads"]:
        return [_("head {h} · d_head = {d_head}").format(h=h, d_head=d_head) for h in heads]
    return [
        _("head {h} · kv {kv} · d_head = {d_head}").format(
            h=h, kv=kv_head_of(h, s["n_heads"], s["n_kv_heads"]), d_head=d_head
        )
        for h in heads
    ]


def cache_html(s: dict, per_token: int, mha_per_token: int) -> str:
    """What the KV cache costs per token (``model.kv_cache_per_token``), against plain
    multi-head attention's: ``KV cache 64 bytes per token (2 kv heads): 1/4 of MHA's 256``.
    Empty for plain multi-head attention itself: its status line stays as it was before the
    kv heads control (notebook 06 prints it)."""
    n_kv, n_heads = s["n_kv_heads"], s["n_heads"]
    if n_kv == n_heads:
        return ""
    ratio = f"1/{mha_per_token // per_token}"  # n_kv_heads divides n_heads
    if n_kv == 1:
        text = _("KV cache {bytes} bytes per token (1 kv head, MQA): {ratio} of MHA's {mha}")
    else:
        text = _("KV cache {bytes} bytes per token ({n_kv} kv heads): {ratio} of MHA's {mha}")
    return text.format(bytes=per_token, n_kv=n_kv, ratio=ratio, mha=mha_per_token)


def status_html(
    s: dict, d_head: int, n_panels: int, ids: list[int], cache: str | None = None
) -> str:
    """``4 heads · d_head = 8 · 4 panels``, the KV cache per token (``cache``, from
    ``cache_html``; empty for plain multi-head attention) and the sequence in the task's
    tokens when it was typed otherwise (e.g. as ids)."""
    readable = " ".join(token_labels(s["task"], ids))
    typed = " ".join(s["sequence"].replace(",", " ").split())
    reads_as = (
        _(" · reads as <code>{tokens}</code>").format(tokens=html.escape(readable))
        if typed != readable
        else ""
    )
    heads = _("1 head") if s["n_heads"] == 1 else _("{n} heads").format(n=s["n_heads"])
    panels = _("1 panel") if n_panels == 1 else _("{n} panels").format(n=n_panels)
    layer = ""
    if task_n_layers(s["task"]) > 1:
        layer = " · " + _("layer {layer} of {n_layers}").format(
            layer=s["layer"], n_layers=task_n_layers(s["task"])
        )
    cache = f" · {cache}" if cache else ""
    return f"<b>{heads} · d_head = {d_head}</b>{layer} · {panels}{cache}{reads_as}"


def metrics_html(model: TinyLM, history: TrainHistory | None, task: str) -> str:
    """Loss and accuracy: measured on 128 fresh rows when untrained, else from ``history``.
    Chance is ln of the model's vocabulary (64 ids; induction: 32)."""
    chance = math.log(model.vocab_size)
    name = short_task_name(task)
    # induction scores only the repeat's predictable positions: say so under the numbers
    scored = [_("<small>scored on the repeat only</small>")] if task == "induction" else []
    if history is None:
        loss, accuracy = evaluate(model, task, n_rows=128)
        return "<br>".join(
            [
                "<b>{}</b>".format(pgettext("explorer", "untrained")),
                _("loss on {task}: {loss:.3f}").format(task=name, loss=loss),
                _("accuracy: {accuracy:.1%}").format(accuracy=accuracy),
                _("chance: ln {vocab_size} = {chance:.2f}").format(
                    vocab_size=model.vocab_size, chance=chance
                ),
                *scored,
                _("<small>the weights are random: switch to <i>trained</i></small>"),
            ]
        )
    steps = len(history.step_losses)
    if getattr(history, "held_out", True):
        loss = _("held-out loss: {loss:.4f}").format(loss=history.final_loss)
    else:
        loss = _("loss: {loss:.4f}").format(loss=history.final_loss)
    return "<br>".join(
        [
            _("<b>trained on {task}</b> ({steps} steps, {seconds:.1f} s)").format(
                task=name, steps=steps, seconds=history.seconds
            ),
            loss,
            _("accuracy: {accuracy:.1%}").format(accuracy=history.final_accuracy),
            _("before training: {loss:.2f} (chance {chance:.2f})").format(
                loss=history.initial_loss, chance=chance
            ),
            *scored,
        ]
    )
