"""What the explorer computes, without its page: settings, tasks, the sequence box, models,
weights and the read-outs' text. Nothing here imports ipywidgets (the first test checks it)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from attention_lab import explorer_kernel, tasks
from attention_lab.explorer_model import (
    ALL_HEADS,
    CONTEXT_LENGTH,
    D_MODEL_CHOICES,
    HEAD_CHOICES,
    SETTING_NAMES,
    TASK_CHOICES,
    TASK_TOOLTIPS,
    VOCAB_SIZE,
    ModelCache,
    check_explorer_task,
    check_sizes,
    d_model_choices,
    example_sequence,
    head_weights,
    model_config,
    parse_sequence,
    placeholder,
    position_labels,
    train_setting,
    train_settings,
    untrained_model,
)
from attention_lab.explorer_picture import RENDER_DPI, css_width
from attention_lab.explorer_text import error_html, metrics_html, status_html, suptitle
from attention_lab.masks import build_mask
from attention_lab.plotting import png_bytes


def test_the_explorer_model_text_picture_and_kernel_modules_load_without_ipywidgets():
    code = (
        "import sys\n"
        "import attention_lab.explorer_model, attention_lab.explorer_text\n"
        "import attention_lab.explorer_picture, attention_lab.explorer_kernel\n"
        "assert 'ipywidgets' not in sys.modules, 'ipywidgets was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- what is offered ----------------------------------------------------------------------


def test_the_tasks_offered_are_those_whose_ids_fit_the_vocabulary():
    fits = tuple(t for t in tasks.TASKS if tasks.MIN_VOCAB[t] <= VOCAB_SIZE)
    assert TASK_CHOICES == fits == ("copy", "previous", "repeat", "lookup")
    assert set(TASK_TOOLTIPS) == set(TASK_CHOICES)
    assert check_explorer_task("lookup") == "lookup"
    with pytest.raises(ValueError, match="does not offer the trigram task.*vocab_size >= 68"):
        check_explorer_task("trigram")
    with pytest.raises(ValueError, match="not known"):
        check_explorer_task("reverse")


def test_only_widths_divisible_by_n_heads_are_offered():
    for n_heads in HEAD_CHOICES:
        choices = d_model_choices(n_heads)
        assert choices and set(choices) <= set(D_MODEL_CHOICES)
        assert all(d % n_heads == 0 for d in choices)
        for d_model in choices:
            check_sizes(n_heads, d_model)
    with pytest.raises(ValueError, match="n_heads=3 is not offered"):
        check_sizes(3, 24)
    with pytest.raises(ValueError, match=r"d_model=12 is not offered with n_heads=8"):
        check_sizes(8, 12)


def test_a_setting_is_a_tinylm_config_with_the_explorers_vocabulary_and_context():
    config = model_config(24, 2, "sliding", 3)
    assert (config.vocab_size, config.context_length) == (VOCAB_SIZE, CONTEXT_LENGTH)
    assert (config.d_model, config.n_heads, config.mask_kind, config.window) == (
        24,
        2,
        "sliding",
        3,
    )
    assert train_settings("lookup")["epochs"] == 4 and train_settings("copy")["epochs"] == 2
    assert SETTING_NAMES[:2] == ("n_heads", "d_model") and "head" in SETTING_NAMES


# -- the sequence box ---------------------------------------------------------------------


def test_parse_sequence_accepts_spaces_and_commas():
    assert parse_sequence(" 5, 12 7\t7 ") == [5, 12, 7, 7]


@pytest.mark.parametrize("task", TASK_CHOICES)
def test_an_example_is_written_in_the_tasks_tokens_and_reads_back_as_its_ids(task):
    x, _ = tasks.make_batch(
        task, 1, CONTEXT_LENGTH, VOCAB_SIZE, generator=torch.Generator().manual_seed(7)
    )
    text = example_sequence(task)
    assert text.split() == tasks.token_labels(task, x[0])
    assert parse_sequence(text, task=task) == x[0].tolist()
    assert parse_sequence(" ".join(map(str, x[0].tolist())), task=task) == x[0].tolist()  # ids
    assert position_labels(task, x[0]) == [f"{i}:{n}" for i, n in enumerate(text.split())]


def test_lookup_and_repeat_tokens_can_be_typed_and_ids_still_work():
    assert parse_sequence("a=0 F=5 c? 3", task="lookup") == [12, 47, 8, 3]
    assert parse_sequence("5 sep 5", task="repeat") == [5, tasks.SEP, 5]
    assert parse_sequence("5, 12 7") == [5, 12, 7]


@pytest.mark.parametrize(
    "task, text, words",
    [
        (None, "1 2 x", "'x' is not a token id"),
        (None, "3 64", "token id 64 is outside the vocabulary"),
        (None, "   ", "the sequence is empty"),
        (None, " ".join(["1"] * 17), "17 tokens are more than the context_length=16"),
        ("lookup", "a=3 g=1", "'g=1' is not a token of the lookup task"),
        ("lookup", "a=3 SEP", "queries such as c?"),
        ("lookup", "", "for example a=3 b=1 a?"),
        ("repeat", "5 sop 5", "or SEP for the separator"),
        ("copy", "a=3", "'a=3' is not a token id"),
    ],
)
def test_a_bad_sequence_raises_a_message_that_says_what_to_type(task, text, words):
    with pytest.raises(ValueError) as raised:
        parse_sequence(text, task=task)
    assert words in str(raised.value)


def test_the_placeholder_suggests_the_tasks_own_tokens():
    assert "a=3 b=1 a?" in placeholder("lookup") and "SEP" in placeholder("repeat")
    assert placeholder("copy") == f"token ids 0..{VOCAB_SIZE - 1}, e.g. 5 12 7 7"


# -- models and weights -------------------------------------------------------------------


def test_an_untrained_model_is_seeded_and_leaves_the_global_random_state_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    a, b = untrained_model(16, 2, "causal", None), untrained_model(16, 2, "causal", None)
    torch.testing.assert_close(torch.rand(3), expected)
    for pa, pb in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(pa, pb, rtol=0, atol=0)
    assert not a.training


def test_the_model_cache_builds_once_per_setting_and_trains_with_the_given_function():
    calls = []

    def fake_train(*setting):
        calls.append(setting)
        return untrained_model(*setting[1:]), "history"

    cache = ModelCache()
    model, history = cache.model_for(False, "lookup", 16, 2, "causal", None, train=fake_train)
    assert history is None and not calls
    assert cache.model_for(False, "copy", 16, 2, "causal", None)[0] is model  # task: trained only
    trained = cache.model_for(True, "copy", 16, 2, "causal", None, train=fake_train)
    assert trained[1] == "history" and calls == [("copy", 16, 2, "causal", None)]
    assert cache.model_for(True, "copy", 16, 2, "causal", None, train=fake_train) is trained
    assert len(calls) == 1 and len(cache) == 2


@pytest.mark.parametrize("mask, window", [("causal", None), ("sliding", 3), ("none", None)])
def test_head_weights_are_every_head_or_one_with_the_mask_the_model_applied(mask, window):
    model = untrained_model(32, 4, mask, window)
    ids = [5, 12, 7, 7, 3]
    heads, w, blocked = head_weights(model, ids, ALL_HEADS)
    assert heads == [0, 1, 2, 3] and w.shape == (4, 5, 5)
    np.testing.assert_array_equal(blocked, build_mask(mask, 5, window).numpy())
    assert np.all(w[:, blocked] == 0) and np.allclose(w.sum(-1), 1)
    one = head_weights(model, ids, 2)
    assert one[0] == [2]
    np.testing.assert_array_equal(one[1][0], w[2])


def test_train_setting_leaves_the_global_random_state_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    model, history = train_setting("copy", 8, 1, "causal", None)
    torch.testing.assert_close(torch.rand(3), expected)
    assert len(history.step_losses) == 64 and model.config == model_config(8, 1, "causal", None)


# -- the read-outs' text, the picture's size, the kernel ------------------------------------


def setting(**changes) -> dict:
    s = dict(n_heads=4, d_model=32, sequence="12 30 7", trained=False, task="lookup", mask="causal")
    return {**s, "window": 4, "head": ALL_HEADS, **changes}


def test_the_title_names_the_model_the_sizes_and_the_mask():
    assert suptitle(setting()) == "TinyLM, untrained: n_heads = 4, d_model = 32, causal mask"
    s = setting(trained=True, mask="sliding", window=3, task="copy")
    assert suptitle(s) == (
        "TinyLM, trained on copy: n_heads = 4, d_model = 32, sliding window of 3"
    )
    assert suptitle(setting(mask="none")).endswith(", no mask")


def test_the_status_line_counts_heads_and_panels_and_reads_ids_as_tokens():
    s = setting()
    status = status_html(s, 8, 4, parse_sequence(s["sequence"], task="lookup"))
    assert status.startswith("<b>4 heads · d_head = 8</b> · 4 panels")
    assert "reads as <code>a=0 d=0 b?</code>" in status
    one = setting(n_heads=1, d_model=16, sequence="a=0 d=0 b?")
    assert status_html(one, 16, 1, [12, 30, 7]) == "<b>1 head · d_head = 16</b> · 1 panel"


def test_the_metrics_of_an_untrained_model_are_measured_and_say_so():
    text = metrics_html(untrained_model(16, 2, "causal", None), None, "previous")
    assert text.startswith("<b>untrained</b><br>loss on previous: ")
    assert f"chance: ln {VOCAB_SIZE} = 4.16" in text
    assert "Cannot draw this setting.</b> a &lt;b&gt;" in error_html(ValueError("a <b>"))


def test_css_width_shows_the_png_at_the_css_dpi():
    png = png_bytes(np.zeros((30, 300, 4), dtype=np.uint8))
    assert css_width(png, 100) == f"{round(300 * 100 / RENDER_DPI)}px"
    assert css_width(png, 80, pixel_dpi=80) == "300px"


def test_outside_a_kernel_nothing_waits_for_the_page():
    assert explorer_kernel.in_kernel() is False
    assert explorer_kernel.from_the_page() is False
    assert explorer_kernel.later(lambda: None) is False
