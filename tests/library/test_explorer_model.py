"""What the explorer computes, without its page: settings, tasks, the sequence box, models,
weights and the read-outs' text. Nothing here imports ipywidgets (the first test checks it)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from attention_lab import tasks
from attention_lab.masks import build_mask
from attention_lab.viz.canvas import png_bytes
from attention_lab.viz.explorer import kernel as explorer_kernel
from attention_lab.viz.explorer.model import (
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
    check_layer,
    check_sizes,
    d_model_choices,
    example_sequence,
    explorer_settings,
    head_weights,
    kv_cache_per_token,
    kv_head_choices,
    kv_head_of,
    kv_heads_after,
    model_config,
    parse_sequence,
    placeholder,
    position_labels,
    task_context_length,
    task_n_layers,
    task_vocab_size,
    train_setting,
    train_settings,
    train_steps,
    untrained_model,
)
from attention_lab.viz.explorer.picture import (
    FRAME_WIDTH,
    KV_COLORS,
    RENDER_DPI,
    Picture,
    css_width,
    snapshot,
)
from attention_lab.viz.explorer.text import (
    cache_html,
    error_html,
    metrics_html,
    panel_titles,
    status_html,
    suptitle,
    training_html,
)


def test_the_explorer_model_text_picture_and_kernel_modules_load_without_ipywidgets():
    code = (
        "import sys\n"
        "import attention_lab.viz.explorer.model, attention_lab.viz.explorer.text\n"
        "import attention_lab.viz.explorer.picture, attention_lab.viz.explorer.kernel\n"
        "assert 'ipywidgets' not in sys.modules, 'ipywidgets was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- what is offered ----------------------------------------------------------------------


def test_the_tasks_offered_are_those_with_an_explorer_entry_in_the_table():
    listed = tuple(t for t, row in tasks.TASK_SETTINGS.items() if "explorer" in row)
    assert TASK_CHOICES == listed == ("copy", "previous", "repeat", "lookup", "induction")
    # every one-layer task offered fits the explorer's vocabulary; trigram's ids do not
    assert all(tasks.MIN_VOCAB[t] <= VOCAB_SIZE for t in tasks.TASKS if t in TASK_CHOICES)
    assert tasks.MIN_VOCAB["trigram"] > VOCAB_SIZE
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
    assert "layer" in SETTING_NAMES and "n_kv_heads" in SETTING_NAMES


# -- one table of training settings -------------------------------------------------------


@pytest.mark.parametrize("task", TASK_CHOICES)
def test_the_explorers_settings_are_the_tables_row_with_its_explorer_changes(task):
    row = dict(tasks.TASK_SETTINGS[task])
    changes = row.pop("explorer")
    assert explorer_settings(task) == {**row, **changes}
    assert train_settings(task) == {k: explorer_settings(task)[k] for k in tasks.TRAIN_OPTIONS}
    model = untrained_model(16, 2, "causal", None, task)
    assert model.vocab_size == task_vocab_size(task) == explorer_settings(task)["vocab_size"]
    assert model.context_length == task_context_length(task)
    assert model.config.n_layers == task_n_layers(task) == row.get("n_layers", 1)
    assert model.config.d_model == 16 and model.config.n_heads == 2  # the sliders' sizes


def test_the_one_layer_tasks_keep_the_explorers_old_settings():
    # 64 ids, 16 tokens, 64 Adam steps (2 epochs of 1024 rows in batches of 32 at lr 1e-2),
    # 128 for lookup: what the explorer trained before its settings moved into the table
    for task in ("copy", "previous", "repeat", "lookup"):
        epochs = 4 if task == "lookup" else 2
        assert train_settings(task) == {
            "epochs": epochs,
            "n_rows": 1024,
            "batch_size": 32,
            "lr": 1e-2,
        }
        assert (
            (task_vocab_size(task), task_context_length(task), task_n_layers(task))
            == (
                VOCAB_SIZE,
                CONTEXT_LENGTH,
                1,
            )
            == (64, 16, 1)
        )
    assert train_steps("copy") == 64 and train_steps("lookup") == 128


def test_a_task_without_an_explorer_entry_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="does not offer the trigram task"):
        explorer_settings("trigram")
    assert "explorer" not in tasks.TASK_SETTINGS["trigram"]
    assert "explorer" not in tasks.task_settings("copy")  # the chapter's row, flat
    assert tasks.task_settings("copy")["context_length"] == 12  # notebook 08's, not the explorer's


# -- the induction task: two layers, a layer selector ------------------------------------


def test_the_induction_task_trains_two_layers_on_its_own_vocabulary_and_length():
    settings = explorer_settings("induction")
    assert task_n_layers("induction") == 2 and settings["n_layers"] == 2
    # the lesson's 32 ids; 24 tokens (the task needs >= 17), 250 steps
    assert (task_vocab_size("induction"), task_context_length("induction")) == (32, 24)
    assert train_steps("induction") == 250
    config = model_config(32, 4, "causal", None, "induction")
    assert config.n_layers == 2 and config.uses_residual and config.vocab_size == 32
    ids = parse_sequence(example_sequence("induction"), task="induction")
    assert len(ids) == 24 and max(ids) < 32
    # the example holds the task's repeated segment: 8 ids that come back later
    T, L = len(ids), 8
    assert any(ids[a : a + L] == ids[b : b + L] for a in range(T) for b in range(a + L, T - L + 1))
    with pytest.raises(ValueError, match="token id 32 is outside the vocabulary.*0 to 31"):
        parse_sequence("3 32", task="induction")
    with pytest.raises(ValueError, match="25 tokens are more than the context_length=24"):
        parse_sequence(" ".join(["1"] * 25), task="induction")
    assert placeholder("induction") == "token ids 0..31, e.g. 5 12 7 7"


def test_the_weights_of_layer_1_are_the_models_layer_1_weights():
    model = untrained_model(32, 4, "causal", None, "induction")
    ids = [5, 12, 7, 7, 3, 9]
    with torch.no_grad():
        _, expected = model(torch.tensor([ids]), return_weights=True)  # (1, L, H, T, T)
    assert expected.shape == (1, 2, 4, 6, 6)
    for layer in (0, 1):
        heads, w, blocked = head_weights(model, ids, ALL_HEADS, layer)
        assert heads == [0, 1, 2, 3]
        np.testing.assert_array_equal(w, expected[0, layer].numpy())
        np.testing.assert_array_equal(blocked, build_mask("causal", 6).numpy())
    assert not np.array_equal(expected[0, 0].numpy(), expected[0, 1].numpy())  # two layers
    one = head_weights(model, ids, 2, layer=1)
    np.testing.assert_array_equal(one[1][0], expected[0, 1, 2].numpy())
    # each layer's own mask: a sliding window shows in both
    slide = untrained_model(32, 4, "sliding", 2, "induction")
    for layer in (0, 1):
        np.testing.assert_array_equal(
            head_weights(slide, ids, ALL_HEADS, layer)[2], build_mask("sliding", 6, 2).numpy()
        )


@pytest.mark.parametrize("layer", [2, -1, 1.0, True, "1", None])
def test_a_layer_the_model_lacks_gives_a_message_that_lists_the_layers(layer):
    model = untrained_model(32, 4, "causal", None, "induction")
    with pytest.raises(ValueError) as raised:
        head_weights(model, [1, 2, 3], ALL_HEADS, layer)
    assert f"layer={layer!r} is not offered: pick one of (0, 1)" in str(raised.value)
    with pytest.raises(ValueError, match=r"layer=1 is not offered: pick one of \(0,\)"):
        head_weights(untrained_model(32, 4, "causal", None), [1, 2, 3], ALL_HEADS, 1)
    assert check_layer(1, 2) == 1 and check_layer(np.int64(0), 1) == 0


def test_untrained_models_are_shared_only_by_tasks_of_the_same_shape():
    cache = ModelCache()
    copy = cache.model_for(False, "copy", 16, 2, "causal", None)[0]
    assert cache.model_for(False, "repeat", 16, 2, "causal", None)[0] is copy
    induction = cache.model_for(False, "induction", 16, 2, "causal", None)[0]
    assert induction is not copy and induction.config.n_layers == 2
    assert copy.config.n_layers == 1 and len(cache) == 2


# -- the sequence box ---------------------------------------------------------------------


def test_parse_sequence_accepts_spaces_and_commas():
    assert parse_sequence(" 5, 12 7\t7 ") == [5, 12, 7, 7]


@pytest.mark.parametrize("task", TASK_CHOICES)
def test_an_example_is_written_in_the_tasks_tokens_and_reads_back_as_its_ids(task):
    x, _ = tasks.make_batch(
        task,
        1,
        task_context_length(task),
        task_vocab_size(task),
        generator=torch.Generator().manual_seed(7),
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

    def fake_train(*setting, n_kv_heads):
        calls.append((*setting, n_kv_heads))
        return untrained_model(*setting[1:], n_kv_heads=n_kv_heads), "history"

    cache = ModelCache()
    model, history = cache.model_for(False, "lookup", 16, 2, "causal", None, train=fake_train)
    assert history is None and not calls
    assert cache.model_for(False, "copy", 16, 2, "causal", None)[0] is model  # task: trained only
    trained = cache.model_for(True, "copy", 16, 2, "causal", None, train=fake_train)
    assert trained[1] == "history" and calls == [("copy", 16, 2, "causal", None, None)]
    assert cache.model_for(True, "copy", 16, 2, "causal", None, train=fake_train) is trained
    assert len(calls) == 1 and len(cache) == 2
    # n_kv_heads = n_heads is plain multi-head attention: the same model, not a new one
    mha = cache.model_for(True, "copy", 16, 2, "causal", None, train=fake_train, n_kv_heads=2)
    assert mha is trained and len(calls) == 1
    mqa = cache.model_for(True, "copy", 16, 2, "causal", None, train=fake_train, n_kv_heads=1)
    assert calls[-1] == ("copy", 16, 2, "causal", None, 1) and mqa is not trained
    assert mqa[0].config.n_kv_heads == 1 and len(cache) == 3


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
    s = {**s, "window": 4, "head": ALL_HEADS, "layer": 0, **changes}
    return {"n_kv_heads": s["n_heads"], **s}


def test_the_title_names_the_model_the_sizes_and_the_mask():
    assert suptitle(setting()) == "TinyLM, untrained: n_heads = 4, d_model = 32, causal mask"
    s = setting(trained=True, mask="sliding", window=3, task="copy")
    assert suptitle(s) == (
        "TinyLM, trained on copy: n_heads = 4, d_model = 32, sliding window of 3"
    )
    assert suptitle(setting(mask="none")).endswith(", no mask")
    two = setting(trained=True, task="induction", layer=1)
    assert suptitle(two) == (
        "TinyLM, trained on induction, layer 1 of 2: n_heads = 4, d_model = 32, causal mask"
    )


def test_the_read_outs_of_a_two_layer_task_name_the_layer_and_the_budget():
    s = setting(task="induction", sequence="3 9 3", layer=1)
    assert (
        status_html(s, 8, 4, [3, 9, 3]) == "<b>4 heads · d_head = 8</b> · layer 1 of 2 · 4 panels"
    )
    assert cache_html(s, 512, 512) == ""  # MHA: the status line as before the kv control
    gqa = {**s, "n_kv_heads": 2}
    assert status_html(gqa, 8, 4, [3, 9, 3], cache_html(gqa, 256, 512)) == (
        "<b>4 heads · d_head = 8</b> · layer 1 of 2 · 4 panels · KV cache 256 bytes per token "
        "(2 kv heads): 1/2 of MHA's 512"
    )
    assert "layer" not in status_html(setting(), 8, 4, [12, 30, 7])  # one layer: not named
    assert training_html(s) == (
        "<i>training TinyLM on the induction task (n_heads=4, d_model=32, 2 layers, 250 steps: "
        "a few seconds, once per setting) ...</i>"
    )
    assert training_html(setting()) == (
        "<i>training TinyLM on the lookup task (n_heads=4, d_model=32) ...</i>"
    )
    text = metrics_html(untrained_model(16, 2, "causal", None, "induction"), None, "induction")
    assert "chance: ln 32 = 3.47" in text and "scored on the repeat only" in text


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


# -- key/value heads: grouped-query and multi-query attention --------------------------------


def test_the_kv_heads_offered_are_h_halved_down_to_1_and_each_builds_a_model():
    offered = {n_heads: kv_head_choices(n_heads) for n_heads in HEAD_CHOICES}
    assert offered == {1: (1,), 2: (2, 1), 4: (4, 2, 1), 8: (8, 4, 2, 1)}
    for n_heads, choices in offered.items():
        d_model = d_model_choices(n_heads)[0]
        for n_kv in choices:
            check_sizes(n_heads, d_model, n_kv)
            model = untrained_model(d_model, n_heads, "causal", None, n_kv_heads=n_kv)
            assert model.config.kv_heads == n_kv
    with pytest.raises(ValueError, match=r"n_kv_heads=3 is not offered with n_heads=8; pick one "
                       r"of \(8, 4, 2, 1\): each key/value head serves"):  # fmt: skip
        check_sizes(8, 32, 3)
    with pytest.raises(ValueError, match=r"n_kv_heads=8 is not offered with n_heads=4"):
        check_sizes(4, 32, 8)


def test_as_many_kv_heads_as_heads_is_the_explorers_old_model_bitwise():
    assert model_config(32, 4, "causal", None, "copy", 4) == model_config(32, 4, "causal", None)
    assert model_config(32, 4, "causal", None, "copy", 4).n_kv_heads is None
    a = untrained_model(32, 4, "causal", None, n_kv_heads=4).state_dict()
    b = untrained_model(32, 4, "causal", None).state_dict()
    assert list(a) == list(b)
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=0)


def _weights_by_hand(model, ids, group_of) -> np.ndarray:
    """Each head's weights of a one-layer model computed here from its fused projection (rows
    Q, then K, then V): head h's queries against the keys of kv head ``group_of(h)``."""
    attention = model.attention_layers()[0]
    seen = {}
    handle = attention.register_forward_pre_hook(lambda module, args: seen.update(x=args[0]))
    with torch.no_grad():
        model(torch.tensor([ids]))
        handle.remove()
        c = model.config
        d_head, n_kv = c.d_model // c.n_heads, c.kv_heads
        qkv = attention.qkv(seen["x"])[0]  # (T, D + 2 n_kv d_head)
        q, k = qkv[:, : c.d_model], qkv[:, c.d_model : c.d_model + n_kv * d_head]
        T = len(ids)
        future = torch.ones(T, T, dtype=torch.bool).triu(1)  # (T, T), True = blocked
        out = []
        for h in range(c.n_heads):
            g = group_of(h)
            scores = q[:, h * d_head : (h + 1) * d_head] @ k[:, g * d_head : (g + 1) * d_head].T
            scores = (scores / d_head**0.5).masked_fill(future, float("-inf"))  # (T, T)
            out.append(scores.softmax(-1))
    return torch.stack(out).numpy()  # (H, T, T)


@pytest.mark.parametrize("n_heads, n_kv", [(8, 2), (8, 4), (4, 2), (4, 1), (8, 8)])
def test_each_panel_is_its_query_head_against_the_kv_head_its_title_names(n_heads, n_kv):
    model = untrained_model(32, n_heads, "causal", None, "previous", n_kv)
    ids = [5, 12, 7, 7, 3, 9, 40]
    _, shown, _ = head_weights(model, ids, ALL_HEADS)
    group = n_heads // n_kv  # Llama's grouping: heads 0..g-1 read kv head 0, ...
    assert [kv_head_of(h, n_heads, n_kv) for h in range(n_heads)] == [
        h // group for h in range(n_heads)
    ]
    expected = _weights_by_hand(model, ids, lambda h: kv_head_of(h, n_heads, n_kv))
    np.testing.assert_allclose(shown, expected, rtol=1e-5, atol=1e-6)
    if 1 < n_kv < n_heads:  # the check can fail: tiling (h % n_kv) reads other kv heads
        tiled = _weights_by_hand(model, ids, lambda h: h % n_kv)
        assert not np.allclose(shown, tiled, atol=1e-3)
    titles = panel_titles(setting(n_heads=n_heads, n_kv_heads=n_kv), list(range(n_heads)), 4)
    assert all(f"head {h} · " in t for h, t in enumerate(titles))
    if n_kv < n_heads:
        assert [t.split(" · ")[1] for t in titles] == [f"kv {h // group}" for h in range(n_heads)]


def test_moving_n_heads_keeps_the_query_heads_per_kv_head_where_it_can():
    assert kv_heads_after(4, 8, 8) == 4  # MHA stays MHA
    assert kv_heads_after(8, 4, 4) == 8
    assert kv_heads_after(8, 4, 2) == 4  # 2 query heads per kv head, before and after
    assert kv_heads_after(4, 8, 2) == 1  # 4 per kv head: all four share one
    assert kv_heads_after(2, 8, 1) == 1  # MQA stays MQA going down
    for new in HEAD_CHOICES:
        for old in HEAD_CHOICES:
            for n_kv in kv_head_choices(old):
                assert kv_heads_after(new, old, n_kv) in kv_head_choices(new)


@pytest.mark.parametrize(
    "task, n_heads, n_kv", [("copy", 8, 8), ("copy", 8, 2), ("copy", 4, 1), ("induction", 8, 2)]
)
def test_the_cache_per_token_is_the_formula_and_what_the_models_cache_holds(task, n_heads, n_kv):
    model = untrained_model(32, n_heads, "causal", None, task, n_kv)
    per_token, mha = kv_cache_per_token(model.config)
    layers, d_head = task_n_layers(task), 32 // n_heads
    assert per_token == layers * 2 * n_kv * d_head * 4  # k and v, float32
    assert mha == layers * 2 * n_heads * d_head * 4 == layers * 2 * 32 * 4
    cache = model.new_cache()
    with torch.no_grad():
        model(torch.tensor([[1, 2, 3, 4, 5]]), cache=cache)
    assert cache.nbytes() == 5 * per_token  # the tensors the model cached for 5 tokens


def test_a_grouped_query_setting_trains_with_its_kv_heads():
    model, history = train_setting("copy", 32, 8, "causal", None, n_kv_heads=2)
    assert model.config.n_kv_heads == 2
    assert model.attention_layers()[0].qkv.out_features == 32 + 2 * 2 * 4  # Q, then 2 K, 2 V
    assert history.final_loss < 0.05  # the copy task is solved with 2 kv heads too


def test_the_read_outs_name_the_kv_heads_and_the_cache_against_mha():
    gqa = setting(n_heads=8, n_kv_heads=2, trained=True, task="copy")
    assert suptitle(gqa) == (
        "TinyLM, trained on copy: n_heads = 8, n_kv_heads = 2, d_model = 32, causal mask"
    )
    assert "n_kv_heads" not in suptitle(setting())  # MHA: the title as it always was
    assert panel_titles(gqa, [5], 4) == ["head 5 · kv 1 · d_head = 4"]
    assert panel_titles(setting(), [0, 1], 8) == ["head 0 · d_head = 8", "head 1 · d_head = 8"]
    assert training_html(gqa) == (
        "<i>training TinyLM on the copy task (n_heads=8, n_kv_heads=2, d_model=32) ...</i>"
    )
    assert cache_html(gqa, 64, 256) == (
        "KV cache 64 bytes per token (2 kv heads): 1/4 of MHA's 256"
    )
    mqa = setting(n_heads=8, n_kv_heads=1)
    assert cache_html(mqa, 32, 256) == (
        "KV cache 32 bytes per token (1 kv head, MQA): 1/8 of MHA's 256"
    )
    assert cache_html(setting(), 256, 256) == ""  # plain multi-head attention: not said


# -- the picture: panels framed by kv head -----------------------------------------------------


def _pixel(pixels, ax) -> tuple:
    """The RGB of a pixel 3/4 of a frame's width inside the panel's left edge (past the
    panel's own outline), half-way up."""
    x0, y0, x1, y1 = ax.bbox.extents
    row = int(pixels.shape[0] - (y0 + y1) / 2)
    inset = 0.75 * FRAME_WIDTH * ax.figure.dpi / 72  # pixels
    return tuple(int(c) for c in pixels[row, int(x0 + inset), :3])


def _rgb(color: str) -> tuple:
    return tuple(int(color[i : i + 2], 16) for i in (1, 3, 5))


def test_the_panels_of_one_kv_head_share_a_frame_colour_and_mha_draws_none():
    w = np.full((8, 6, 6), 1 / 6)  # (H, T, T): light blue everywhere
    tokens = [f"{i}:{i}" for i in range(6)]
    titles = [f"head {h}" for h in range(8)]
    picture = Picture()
    grid, _ = picture.heatmaps(w, tokens, titles, "", None, groups=None)
    plain = grid.render().copy()
    grid, _ = picture.heatmaps(w, tokens, titles, "", None, groups=[h // 2 for h in range(8)])
    framed = grid.render().copy()
    colours = [_pixel(framed, ax) for ax in grid.axes]
    assert colours == [_rgb(KV_COLORS[h // 2]) for h in range(8)]
    assert len(set(colours)) == 4  # four kv heads, four colours
    assert all(_pixel(plain, ax) != c for ax, c in zip(grid.axes, colours))
    # back to plain multi-head attention: the frames leave nothing behind
    grid, _ = picture.heatmaps(w, tokens, titles, "", None, groups=None)
    np.testing.assert_array_equal(grid.render(), plain)
    # the static copy frames its panels alike
    fig = snapshot(w, (tokens, titles, "", grid.panel_size), None, [h // 4 for h in range(8)])
    fig.canvas.draw()
    pixels = np.asarray(fig.canvas.buffer_rgba())
    panels = [ax for ax in fig.axes if ax.images][:8]
    assert [_pixel(pixels, ax) for ax in panels] == [_rgb(KV_COLORS[h // 4]) for h in range(8)]


def test_a_frame_drawn_outside_its_panel_would_be_left_behind():
    # the control for the test above: a frame that is not clipped to its panel paints pixels
    # outside it that the redraw does not restore, so going back to MHA would not be clean
    w = np.full((4, 6, 6), 1 / 6)
    tokens, titles = [str(i) for i in range(6)], [f"head {h}" for h in range(4)]
    picture = Picture()
    grid, _ = picture.heatmaps(w, tokens, titles, "", None, groups=None)
    plain = grid.render().copy()
    for frame in grid.frames:
        frame.set_clip_on(False)
    picture.heatmaps(w, tokens, titles, "", None, groups=[0, 0, 1, 1])
    grid, _ = picture.heatmaps(w, tokens, titles, "", None, groups=None)
    assert not np.array_equal(grid.render(), plain)


def test_a_long_title_over_one_panel_is_broken_into_two_lines_inside_the_figure():
    s = setting(n_heads=4, n_kv_heads=2, task="induction", layer=1, mask="sliding", window=6)
    title = suptitle(s)  # one line: wider than the one-panel figure
    w = np.full((1, 6, 6), 1 / 6)
    tokens = [str(i) for i in range(6)]
    grid, _ = Picture().heatmaps(w, tokens, ["head 3"], title, None)
    renderer = grid.figure.canvas.get_renderer()
    shown = grid.suptitle.get_text()
    assert shown == title.replace(": n_heads", ":\nn_heads", 1)  # broken after the model
    box = grid.suptitle.get_window_extent(renderer)
    assert 0 <= box.x0 and box.x1 <= grid.figure.bbox.width
    panel_title = grid.axes[0].title.get_window_extent(renderer)
    assert box.y0 > panel_title.y1  # above the panel's own title, not over it
    grid.suptitle.set_text(title)  # the control: the same title on one line runs off
    box = grid.suptitle.get_window_extent(renderer)
    assert box.x0 < 0 and box.x1 > grid.figure.bbox.width
    # four panels have room: the title stays on one line
    grid, _ = Picture().heatmaps(np.full((4, 6, 6), 1 / 6), tokens, list("abcd"), title, None)
    assert grid.suptitle.get_text() == title
