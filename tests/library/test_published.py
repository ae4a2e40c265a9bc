"""published.py: every entry agrees with itself and names the files its numbers came from, and
cache sizes worked out by hand from the entries come out as the lesson's table will print them.

The consistency rules live in ``problems(model)``; each rule is shown to catch a deliberately
broken copy of a real entry, so a rule that could never fail would be seen here.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from attention_lab import published
from attention_lab.published import PUBLISHED_MODELS, PublishedModel

BY_NAME = {m.name: m for m in PUBLISHED_MODELS}
EACH_MODEL = pytest.mark.parametrize(
    "model", PUBLISHED_MODELS, ids=[m.name for m in PUBLISHED_MODELS]
)
LATENT_FIELDS = ("d_latent", "d_rope", "d_nope", "d_v")
GITHUB_FILE_AT_COMMIT = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+/blob/[0-9a-f]{40}/\S+")
HUGGING_FACE_PAGE = re.compile(r"https://huggingface\.co/\S+")
BF16 = 2  # bytes per cached number


def problems(model: PublishedModel) -> list[str]:
    """What is inconsistent in one entry (empty when nothing is)."""
    found = []
    if model.n_heads % model.n_kv_heads:
        found.append("n_heads not divisible by n_kv_heads")
    width = model.n_heads * model.d_head
    if width != model.d_model and not any(
        "H * d_head" in note and f"{width}" in note for note in model.notes
    ):
        found.append("H * d_head differs from d_model and no note says so")
    latent = [getattr(model, name) is not None for name in LATENT_FIELDS]
    if any(latent) and not all(latent):
        found.append("some latent (MLA) fields set, not all")
    if model.is_latent and (model.d_head != model.d_nope or model.d_head != model.d_v):
        found.append("an MLA entry's d_head is not its qk_nope_head_dim and v_head_dim")
    if (model.window is None) != (model.sliding_layers == ()):
        found.append("a window without sliding layers, or sliding layers without a window")
    if model.window is not None and not 1 <= model.window < model.context_length:
        found.append("window not between 1 and the context length")
    if list(model.sliding_layers) != sorted(set(model.sliding_layers)) or not all(
        0 <= i < model.n_layers for i in model.sliding_layers
    ):
        found.append("sliding layers not distinct sorted layer indices")
    if not model.sources:
        found.append("no source")
    for source in model.sources:
        if not (GITHUB_FILE_AT_COMMIT.fullmatch(source) or HUGGING_FACE_PAGE.fullmatch(source)):
            found.append(
                f"source is neither a GitHub file at a commit nor a Hugging Face page: {source}"
            )
    return found


def cache_bytes_by_hand(model: PublishedModel, T: int, bytes_per_number: int = BF16) -> int:
    """The KV cache of one sequence of T tokens, written independently of the library:
    per layer, keys and values of min(T, window) tokens on a sliding layer and of T tokens
    on a global one; for MLA, d_latent + d_rope numbers per token and layer."""
    if model.is_latent:
        return model.n_layers * T * (model.d_latent + model.d_rope) * bytes_per_number
    per_token = 2 * model.n_kv_heads * model.d_head * bytes_per_number  # K and V of one layer
    sliding = len(model.sliding_layers) * min(T, model.window or T)
    return per_token * (sliding + len(model.global_layers) * T)


@EACH_MODEL
def test_every_entry_is_consistent_and_names_its_sources(model):
    assert problems(model) == []


BROKEN = {
    "n_heads not divisible by n_kv_heads": ("Llama 3.1 8B", {"n_kv_heads": 5}),
    "H * d_head differs from d_model and no note says so": ("Llama 3.1 8B", {"d_head": 96}),
    "some latent (MLA) fields set, not all": ("DeepSeek-V3", {"d_rope": None}),
    "an MLA entry's d_head is not its qk_nope_head_dim and v_head_dim": (
        "DeepSeek-V2",
        {"d_head": 192, "notes": ("H * d_head = 24576",)},
    ),
    "a window without sliding layers, or sliding layers without a window": (
        "Qwen2.5-7B",
        {"window": 4096},
    ),
    "window not between 1 and the context length": ("Mistral 7B v0.1", {"window": 32_768}),
    "sliding layers not distinct sorted layer indices": ("Gemma 2 9B", {"sliding_layers": (0, 42)}),
    "no source": ("Gemma 3 12B", {"sources": ()}),
}


@pytest.mark.parametrize("problem", BROKEN)
def test_each_consistency_rule_catches_a_broken_copy_of_a_real_entry(problem):
    name, changes = BROKEN[problem]
    assert problems(BY_NAME[name]) == []
    assert problem in problems(dataclasses.replace(BY_NAME[name], **changes))


def test_a_source_must_be_a_file_at_a_commit_or_a_hugging_face_page():
    moving = "https://github.com/meta-llama/llama-models/blob/main/models/sku_list.py"
    broken = dataclasses.replace(BY_NAME["Llama 3.1 8B"], sources=(moving,))
    assert problems(broken) == [
        f"source is neither a GitHub file at a commit nor a Hugging Face page: {moving}"
    ]


def test_the_table_has_a_llama_3_mistral_7b_a_qwen_a_gemma_and_a_deepseek():
    for family in ("Llama 3", "Mistral 7B", "Qwen", "Gemma", "DeepSeek-V"):
        assert any(name.startswith(family) for name in BY_NAME), family
    assert len(BY_NAME) == len(PUBLISHED_MODELS), "two entries share a name"


def test_only_the_deepseek_models_use_latent_attention_and_they_do_not_group_heads():
    latent = {m.name for m in PUBLISHED_MODELS if m.is_latent}
    assert latent == {"DeepSeek-V2", "DeepSeek-V3"}
    for name in latent:
        assert BY_NAME[name].n_kv_heads == BY_NAME[name].n_heads
        assert BY_NAME[name].window is None


def test_deepseek_v2_caches_as_much_as_gqa_with_2_25_groups():
    """The DeepSeek-V2 paper: d_c = 4 d_h and d_h^R = d_h / 2, so MLA's cache per token and
    layer, d_c + d_h^R = 4.5 d_h, equals GQA's 2 * n_g * d_h with n_g = 2.25 groups."""
    v2 = BY_NAME["DeepSeek-V2"]
    assert v2.d_latent == 4 * v2.d_head and v2.d_rope == v2.d_head // 2
    assert v2.d_latent + v2.d_rope == 2 * 2.25 * v2.d_head


def test_the_configs_that_derive_d_head_say_so_and_the_others_state_a_wider_one():
    """Llama, Mistral and Qwen have no head_dim in the config read (d_head = D / H); Gemma and
    DeepSeek set head_dim apart from hidden_size, and their heads are wider than D."""
    derived = {"Llama 3.1 8B", "Llama 3.1 70B", "Mistral 7B v0.1", "Qwen2.5-7B"}
    for model in PUBLISHED_MODELS:
        if model.name in derived:
            assert model.n_heads * model.d_head == model.d_model, model.name
            assert any("no head_dim" in note for note in model.notes), model.name
        else:
            assert model.n_heads * model.d_head > model.d_model, model.name


def test_the_sliding_layers_follow_each_models_pattern():
    assert BY_NAME["Mistral 7B v0.1"].global_layers == ()
    # Gemma 2: [LOCAL_SLIDING, GLOBAL] * 21, so the odd layers are global
    assert BY_NAME["Gemma 2 9B"].global_layers == tuple(range(1, 42, 2))
    # Gemma 3: five sliding layers, then one global
    assert BY_NAME["Gemma 3 12B"].global_layers == (5, 11, 17, 23, 29, 35, 41, 47)
    for name in ("Llama 3.1 8B", "Llama 3.1 70B", "Qwen2.5-7B", "DeepSeek-V2", "DeepSeek-V3"):
        assert BY_NAME[name].global_layers == tuple(range(BY_NAME[name].n_layers)), name


def test_llama_3_1_8b_caches_131072_bytes_per_token_in_bf16():
    # 32 layers x (K and V) x 8 kv heads x 128 numbers x 2 bytes
    assert cache_bytes_by_hand(BY_NAME["Llama 3.1 8B"], T=1) == 32 * 2 * 8 * 128 * 2 == 131_072
    assert cache_bytes_by_hand(BY_NAME["Llama 3.1 70B"], T=1) == 80 * 2 * 8 * 128 * 2 == 327_680


def test_deepseek_v3_caches_576_numbers_per_token_and_layer():
    v3 = BY_NAME["DeepSeek-V3"]
    assert cache_bytes_by_hand(v3, T=1) == 61 * (512 + 64) * 2 == 70_272
    # the same 128 heads, cached as plain multi-head attention: 57 times more
    assert 2 * v3.n_layers * v3.n_kv_heads * v3.d_head * BF16 == 3_997_696


def test_a_sliding_layer_stops_growing_at_its_window():
    gemma2, mistral = BY_NAME["Gemma 2 9B"], BY_NAME["Mistral 7B v0.1"]
    per_layer_token = 2 * 8 * 256 * 2  # Gemma 2 9B: K and V, 8 kv heads, d_head 256, bf16
    # at its full context, 21 global layers hold 8192 tokens and 21 sliding layers 4096
    assert cache_bytes_by_hand(gemma2, T=8192) == per_layer_token * 21 * (8192 + 4096)
    assert cache_bytes_by_hand(gemma2, T=8192) == 2_113_929_216
    # below the window, every layer holds every token
    assert cache_bytes_by_hand(gemma2, T=4096) == per_layer_token * 42 * 4096
    # Mistral slides on every layer: 32 layers x 4096 tokens x 4096 bytes, whatever T
    assert cache_bytes_by_hand(mistral, T=4096) == 32 * 4096 * 4096 == 536_870_912
    assert cache_bytes_by_hand(mistral, T=32_768) == 536_870_912


def test_entries_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        BY_NAME["Llama 3.1 8B"].n_kv_heads = 1


def test_the_module_is_plain_data_without_torch_or_network():
    tree = ast.parse(Path(published.__file__).read_text(encoding="utf-8"))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= {"__future__", "dataclasses"}
