"""The explorer, the heatmap grid and the core modules' errors in Simplified Chinese.

A zh-CN reader meets English only in code identifiers: every control's description, option
label, tooltip and placeholder, every read-out, every word the explorer's figure draws and
every problem the page shows is Chinese (``chinese`` below says what that means). Errors the
library raises keep their English first line (searchable) with the translation below it,
and are exactly the old English in English.
"""

from __future__ import annotations

import html
import re

import ipywidgets
import numpy as np
import pytest
import torch

from attention_lab import MultiHeadAttention, TinyLM
from attention_lab.viz.explorer.model import TASK_CHOICES, kv_head_choices, parse_sequence
from attention_lab.viz.explorer.text import error_html, training_html
from attention_lab.viz.explorer.widgets import AttentionExplorer
from attention_lab.viz.headgrid import HeadGrid
from tests.conftest import message

# English a Chinese text may still contain: code identifiers (argument names, classes, the
# tasks' code names), the words the glossary keeps (softmax, token, dropout), the repeat
# task's SEP token, and units.
ALLOWED = {
    "n_heads",
    "n_kv_heads",
    "d_model",
    "d_head",
    "d_k",
    "vocab_size",
    "context_length",
    "TinyLM",
    "HeadGrid",
    "copy",
    "previous",
    "repeat",
    "lookup",
    "trigram",
    "induction",
    "train_tiny_lm",
    "SEP",
    "softmax",
    "token",
    "dropout",
}
# Labels that are an identifier and nothing else (a slider named after its argument, a
# task's button showing its code name): no Chinese needed.
IDENTIFIER_LABELS = {"n_heads", "d_model", "copy", "previous", "repeat", "lookup", "induction"}
CJK = re.compile(r"[\u4e00-\u9fff]")


def visible(text: str) -> str:
    """What a reader sees of an HTML read-out: no tags, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", " ", text))


def english_words(text: str) -> list[str]:
    """Words of 3 or more Latin letters (identifiers with underscores count as one word)
    that are not in ALLOWED."""
    words = re.findall(r"[A-Za-z_]+", visible(text))
    return [w for w in words if sum(c.isalpha() for c in w) >= 3 and w not in ALLOWED]


def assert_chinese(text: str, where: str) -> None:
    shown = visible(text).strip()
    assert shown, f"{where}: empty"
    if shown in IDENTIFIER_LABELS or re.fullmatch(r"[\d.\s]+", shown):
        return  # an identifier, or a number (a slider's choice)
    assert CJK.search(shown), f"{where}: no Chinese in {shown!r}"
    assert not english_words(shown), f"{where}: English {english_words(shown)} in {shown!r}"


def walk(widget):
    """``widget`` and every widget inside it."""
    yield widget
    for child in getattr(widget, "children", ()):
        yield from walk(child)


def texts_of(ex: AttentionExplorer) -> list[tuple[str, str]]:
    """(where, text) for every piece of text the page shows a reader."""
    found = []
    for w in walk(ex):
        name = type(w).__name__
        if getattr(w, "description", ""):
            found.append((f"{name}.description", w.description))
        if isinstance(w, ipywidgets.Label):
            found.append(("Label", w.value))
        if isinstance(w, ipywidgets.widgets.widget_selection._Selection):
            labels = getattr(w, "_options_labels", ())
            found += [(f"{name} option", label) for label in labels]
        for tip in getattr(w, "tooltips", None) or ():
            found.append((f"{name} tooltip", tip))
        if getattr(w, "placeholder", "").strip("\u200b"):
            found.append((f"{name}.placeholder", w.placeholder))
    for name in ("status", "metrics"):
        found.append((name, getattr(ex, name).value))
    return found


def figure_texts(grid_figure) -> list[tuple[str, str]]:
    """(where, text) for the words a HeadGrid figure draws (not the token tick labels)."""
    found = [("suptitle", grid_figure.get_suptitle())]
    for ax in grid_figure.axes:
        if not ax.get_visible():
            continue
        if not ax.images:  # the colour bar
            found.append(("colorbar", ax.get_ylabel()))
            continue
        for where, text in (
            ("title", ax.get_title()),
            ("xlabel", ax.get_xlabel()),
            ("ylabel", ax.get_ylabel()),
        ):
            if text:
                found.append((where, text))
    for legend in grid_figure.legends:
        found += [("legend", t.get_text()) for t in legend.get_texts()]
    return found


@pytest.fixture
def zh_explorer(zh):
    return AttentionExplorer(n_heads=4, d_model=32, task="lookup", mask="sliding", diagram=False)


def test_every_control_label_option_tooltip_and_read_out_is_chinese(zh_explorer):
    texts = texts_of(zh_explorer)
    kinds = {where.split()[0].split(".")[0] for where, _ in texts}
    # the check saw every kind of text the page has
    assert {"SelectionSlider", "Text", "ToggleButtons", "Dropdown", "Label"} <= kinds
    tooltips = len(TASK_CHOICES) + len(kv_head_choices(4))  # the task and kv heads toggles
    assert sum(where == "ToggleButtons tooltip" for where, _ in texts) == tooltips
    for where, text in texts:
        assert_chinese(text, where)
    assert zh_explorer.message.value == ""


def test_labels_are_translated_but_the_values_stay_the_code_names(zh_explorer):
    ex = zh_explorer
    assert ex.task.value == "lookup" and ex.mask.value == "sliding"
    # the task buttons show the tasks' code names, all five in one style (the glossary names
    # four of them so in Chinese prose); each tooltip opens with the Chinese name
    assert tuple(ex.task.options) == TASK_CHOICES
    names = ["复制任务", "“previous”任务", "“repeat”任务", "“lookup”任务", "“induction”任务"]
    assert len(names) == len(TASK_CHOICES)
    assert [tip.startswith(name) for tip, name in zip(ex.task.tooltips, names)] == [True] * 5
    assert [value for _, value in ex.mask.options] == ["causal", "sliding", "none"]
    ex.mask.value = "causal"  # driving it from code by value still works
    assert ex.figure.get_suptitle().endswith("因果掩码")
    ex.head.value = 2
    assert [ax.get_title() for ax in ex.figure.axes if ax.images][0] == "头 2 · d_head = 8"
    assert "1 个面板" in ex.status.value


def test_the_two_layer_task_names_its_layers_in_chinese(zh):
    ex = AttentionExplorer(task="induction", layer=1, diagram=False)
    assert [label for label, _ in ex.layer.options] == ["第 0 层", "第 1 层"]
    for where, text in texts_of(ex):
        assert_chinese(text, where)
    assert "第 1 层（共 2 层）" in ex.status.value
    assert ex.figure.get_suptitle().startswith("TinyLM，未训练，第 1 层（共 2 层）：")
    assert_chinese(ex.figure.get_suptitle(), "suptitle")
    assert "只对重复出现的片段评分" in ex.metrics.value and "ln 32" in ex.metrics.value
    training = training_html(ex.setting())
    assert_chinese(training, "training message")
    assert "2 层，250 步" in training
    with pytest.raises(ValueError) as raised:
        AttentionExplorer(task="copy", layer=1)
    assert "不提供 layer=1；请从 (0,) 中选一个" in str(raised.value)


def test_the_kv_heads_toggle_its_titles_and_the_cache_speak_chinese(zh):
    ex = AttentionExplorer(n_heads=8, d_model=32, n_kv_heads=2, diagram=False)
    labels = [w.value for w in walk(ex) if isinstance(w, ipywidgets.Label)]
    assert "键/值头" in labels
    assert ex.n_kv_heads.tooltips == (
        "8 个键/值头：普通多头注意力，每个查询头各有一个",
        "4 个键/值头：分组查询注意力，每 2 个查询头共用一个",
        "2 个键/值头：分组查询注意力，每 4 个查询头共用一个",
        "1 个键/值头：多查询注意力，全部 8 个查询头共用它",
    )
    for where, text in texts_of(ex) + figure_texts(ex.figure):
        assert_chinese(text, where)
    titles = [ax.get_title() for ax in ex.figure.axes if ax.images]
    assert titles[5] == "头 5 · 键/值头 1 · d_head = 4"
    assert "n_kv_heads = 2" in ex.figure.get_suptitle()
    assert "每个 token 的 KV 缓存 64 字节（2 个键/值头）：是多头注意力 256 字节的 1/4" in (
        ex.status.value
    )
    ex.n_kv_heads.value = 1
    assert "（1 个键/值头，多查询注意力）：是多头注意力 256 字节的 1/8" in ex.status.value
    ex.n_kv_heads.value = 8
    assert "KV 缓存" not in ex.status.value  # plain multi-head attention: as before
    ex.trained.value = True  # the training message names the kv heads too
    ex.n_kv_heads.value = 4
    training = training_html(ex.setting())
    assert "（n_heads=8, n_kv_heads=4, d_model=32）" in training
    assert_chinese(training, "training message")
    with pytest.raises(ValueError) as raised:
        AttentionExplorer(n_heads=8, d_model=32, n_kv_heads=3)
    chinese = str(raised.value).split("\n")[1]
    assert chinese.startswith("n_heads=8 时不提供 n_kv_heads=3；请从 (8, 4, 2, 1) 中选一个")
    assert_chinese(chinese, "message")


def test_a_trained_model_reports_its_loss_in_chinese(zh):
    ex = AttentionExplorer(n_heads=1, d_model=8, trained=True, diagram=False)
    assert ex.history is not None
    assert_chinese(ex.metrics.value, "metrics")
    assert "已在复制任务上训练" in ex.metrics.value and "损失：" in ex.metrics.value
    assert_chinese(ex.figure.get_suptitle(), "suptitle")
    assert "已在复制任务上训练" in ex.figure.get_suptitle()


def test_every_word_the_heatmap_figure_draws_is_chinese(zh_explorer):
    fig = zh_explorer.figure
    texts = figure_texts(fig)
    wheres = [where for where, _ in texts]
    assert {"suptitle", "title", "xlabel", "ylabel", "colorbar", "legend"} <= set(wheres)
    for where, text in texts:
        assert_chinese(text, where)
    grid_labels = {text for where, text in texts if where in ("xlabel", "ylabel")}
    assert grid_labels == {"键（被看的一方）", "查询（看的一方）"}
    assert [text for where, text in texts if where == "colorbar"] == ["注意力权重（平方根刻度）"]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["屏蔽"]


def test_a_headgrid_of_its_own_draws_chinese_labels_and_default_titles(zh):
    grid = HeadGrid(2, 3, ["x", "y", "z"])
    grid.update(np.full((2, 3, 3), 1 / 3), mask=np.triu(np.ones((3, 3), bool), 1))
    assert [ax.get_title() for ax in grid.axes] == ["头 0", "头 1"]
    for where, text in figure_texts(grid.figure):
        if text:
            assert_chinese(text, where)
    assert grid.colorbar.ax.get_ylabel() == "注意力权重（平方根刻度）"


def test_the_same_figure_in_english_keeps_its_english_labels():
    grid = HeadGrid(1, 3)
    grid.update(np.full((1, 3, 3), 1 / 3))
    ax = grid.axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("key (looked at)", "query (looking)")
    assert grid.colorbar.ax.get_ylabel() == "attention weight (√ scale)"
    assert ax.get_title() == "head 0"


@pytest.mark.parametrize(
    "text, words",
    [
        ("1 2 x", "不是“lookup”任务的 token"),
        ("3 64", "token id 64 超出了词表"),
        ("   ", "序列为空"),
        (" ".join(["1"] * 17), "17 个 token 超过了模型构建时的 context_length=16"),
    ],
)
def test_a_bad_sequence_shows_a_chinese_message_and_no_traceback(zh_explorer, text, words):
    ex = zh_explorer
    ex.sequence.value = text
    shown = visible(ex.message.value)
    assert words in shown
    assert "无法绘制这个设置。" in shown
    assert "Traceback" not in shown and "Error" not in shown
    assert_chinese(shown, "message")  # the English first line is left out of the page
    assert ex.image.layout.display == "none" and ex.status.value == ""
    ex.sequence.value = "1 2 3"
    assert ex.message.value == "" and "<b>4 个头 · d_head = 8</b>" in ex.status.value


def test_an_invalid_pair_forced_from_code_shows_the_core_check_in_chinese(zh):
    ex = AttentionExplorer(n_heads=8, d_model=32, diagram=False)
    ex.d_model.options = (12,)  # the controls never offer this pair
    shown = visible(ex.message.value)
    assert "d_model=12 不能被 n_heads=8 整除" in shown and "is not divisible" not in shown
    assert_chinese(shown, "message")


def test_a_core_error_in_chinese_has_the_english_first_line_and_the_translation_below(zh):
    text = message(ValueError, lambda: MultiHeadAttention(d_model=32, n_heads=3, context_length=8))
    english, chinese = text.split("\n")
    assert english == (
        "d_model=32 is not divisible by n_heads=3; pick d_model as a multiple of n_heads "
        "(for example d_model=30 or 33)"
    )
    assert chinese == (
        "d_model=32 不能被 n_heads=3 整除；"
        "请把 d_model 取为 n_heads 的倍数（例如 d_model=30 或 33）"
    )
    assert_chinese(chinese, "translation")
    # both lines are filled in (no {placeholder} left), for a TypeError too
    text = message(TypeError, lambda: TinyLM()(torch.zeros(1, 3)))
    english, chinese = text.split("\n")
    assert english.startswith("TinyLM takes token ids as an int64 tensor (B, T), got torch.float32")
    assert "收到的是 torch.float32" in chinese and "{" not in text


def test_the_same_core_error_in_english_is_exactly_the_old_message():
    text = message(ValueError, lambda: MultiHeadAttention(d_model=32, n_heads=3, context_length=8))
    assert text == (
        "d_model=32 is not divisible by n_heads=3; pick d_model as a multiple of n_heads "
        "(for example d_model=30 or 33)"
    )
    text = message(ValueError, lambda: TinyLM()(torch.zeros(1, 3, dtype=torch.long)[0]))
    assert text == (
        "idx has shape (3,) (rank 1), but TinyLM takes (B, T) token ids; "
        "add a batch dimension with idx.unsqueeze(0)"
    )


def test_a_sequence_error_puts_each_piece_in_the_language_of_its_line(zh):
    text = message(ValueError, lambda: parse_sequence("1 x", task="repeat"))
    english, chinese = text.split("\n")
    assert english == (
        "'x' is not a token of the repeat task; use whole numbers from 0 to 63, or SEP for the "
        "separator (id 0), separated by spaces"
    )
    assert chinese == (
        "'x' 不是“repeat”任务的 token；请用 0 到 63 的整数，或用 SEP 表示分隔符（id 0），用空格分隔"
    )


def test_the_explorer_shows_an_english_error_whole_in_english():
    shown = error_html(ValueError("first line\nsecond line"))
    assert "first line\nsecond line" in shown and "Cannot draw this setting." in shown
