"""The one decoder stack of ``TinyLM`` and ``CharLM`` (decoder.py, config.py; notebook
12_attention_in_todays_llms): every checkpoint of the models before the stack was shared loads
and gives the same logits, and a seeded model draws the same weights; both models take every
switch; cached logits equal the full pass to 1e-5 and cached generation gives the same ids, for
every variant and 1, 2 and 3 layers -- and a cache that drops its oldest entry or skips the RoPE
offset fails that check; the cache's bytes equal the formula and the tensors' nbytes; bad values
are refused once, at the config.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from attention_lab import TinyLM, TinyLMConfig, freeze_attention
from attention_lab.charlm import CharLM, CharLMConfig
from attention_lab.fused import MultiHeadSelfAttention
from attention_lab.interventions import ablate_heads, attention_layers, even_weights
from attention_lab.kv_cache import CacheShape, KVCache, LayerCache, cache_bytes
from attention_lab.latent import LatentAttention
from attention_lab.published import PUBLISHED_MODELS
from tests.conftest import message
from tests.library.test_kv_cache import DropsTheOldest, SkipsTheRopeOffset  # the broken caches

SNAPSHOTS = Path(__file__).parents[1] / "data" / "decoders_1278c0f.pt"
VOCAB, CONTEXT = 20, 16

# every switch, alone and combined; the window is 4 positions
VARIANTS = {
    "mha": {},
    "gqa": {"n_kv_heads": 2},
    "mqa": {"n_kv_heads": 1},
    "rope": {"positions": "rope"},
    "no_positions": {"positions": "none"},
    "sliding": {"window": 4},
    "mla": {"d_latent": 6},
    "gqa_rope_sliding": {"n_kv_heads": 2, "positions": "rope", "window": 4},
}


def build(model: str, variant: str, n_layers: int, **extra):
    fields = {**VARIANTS[variant], **extra}
    sizes = dict(vocab_size=VOCAB, context_length=CONTEXT, d_model=16, n_heads=4, n_layers=n_layers)
    if model == "TinyLM":
        if "window" in fields:
            fields["mask_kind"] = "sliding"  # TinyLMConfig spells the kind out
        return TinyLM(TinyLMConfig(**sizes, **fields)).eval()
    return CharLM(CharLMConfig(**sizes, **fields)).eval()


def assert_cached_equals_full(model, idx, chunks=(5, 1, 1, 3, 1, 1), cache=None):
    """The check: a prefill chunk and single tokens from one cache give the full pass's
    logits to 1e-5 (and its weights on the explicit path)."""
    cache = model.new_cache() if cache is None else cache
    with torch.no_grad():
        full = model(idx)  # (B, T, vocab)
        pieces, t = [], 0
        for n in chunks:
            pieces.append(model(idx[:, t : t + n], cache=cache))  # (B, n, vocab)
            t += n
        torch.testing.assert_close(torch.cat(pieces, dim=1), full[:, :t], rtol=1e-5, atol=1e-5)
    return cache


def generated(model, prompt, n, use_cache):
    if isinstance(model, CharLM):
        gen = torch.Generator().manual_seed(0)
        return model.generate(prompt, n, temperature=0.7, generator=gen, use_cache=use_cache)
    return model.generate(prompt, n, use_cache=use_cache)


MODELS = ["TinyLM", "CharLM"]


@pytest.mark.parametrize("n_layers", [1, 2, 3])
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("model_name", MODELS)
def test_cached_logits_equal_the_full_pass_and_generation_gives_the_same_ids(
    model_name, variant, n_layers
):
    torch.manual_seed(0)
    model = build(model_name, variant, n_layers)
    idx = torch.randint(VOCAB, (3, 12))  # (B, T)
    assert_cached_equals_full(model, idx)
    with torch.no_grad():  # the explicit path agrees too, weights over the kept keys
        cache = model.new_cache()
        _, w_prefill = model(idx[:, :5], return_weights=True, cache=cache)
        _, w_full = model(idx[:, :6], return_weights=True)
        _, w_step = model(idx[:, 5:6], return_weights=True, cache=cache)
    kept = w_step.shape[-1]
    torch.testing.assert_close(
        w_step[..., 0, :], w_full[..., 5, 6 - kept : 6], rtol=1e-5, atol=1e-5
    )
    prompt = idx[:, :4]
    cached = generated(model, prompt, CONTEXT - 4, use_cache=True)
    assert torch.equal(cached, generated(model, prompt, CONTEXT - 4, use_cache=False))
    assert cached.shape == (3, CONTEXT)


# --- the check can fail -----------------------------------------------------------------


def broken_cache(model, layer_cache: type) -> KVCache:
    cache = model.new_cache()
    cache.layers = [layer_cache(model.context_length) for _ in cache.layers]
    return cache


@pytest.mark.parametrize("model_name", MODELS)
@pytest.mark.parametrize("variant", ["mha", "gqa", "rope", "mla"])
def test_a_cache_that_drops_its_oldest_entry_fails_the_check(model_name, variant):
    """(Not with a sliding window: the next tokens need only its last window - 1 positions,
    so a window cache that drops its oldest one still gives the same logits.)"""
    model = build(model_name, variant, 2)
    idx = torch.randint(VOCAB, (2, 12))
    assert_cached_equals_full(model, idx)  # the right cache passes ...
    with pytest.raises(AssertionError):  # ... the broken one does not
        assert_cached_equals_full(model, idx, cache=broken_cache(model, DropsTheOldest))


@pytest.mark.parametrize("model_name", MODELS)
@pytest.mark.parametrize("variant", ["rope", "gqa_rope_sliding"])
def test_a_cache_that_skips_the_rope_offset_fails_the_check(model_name, variant):
    model = build(model_name, variant, 2)
    idx = torch.randint(VOCAB, (2, 12))
    assert_cached_equals_full(model, idx, chunks=[1] * 12)
    with pytest.raises(AssertionError):
        assert_cached_equals_full(
            model, idx, chunks=[1] * 12, cache=broken_cache(model, SkipsTheRopeOffset)
        )


# --- the cache's bytes ------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("model_name", MODELS)
def test_the_caches_bytes_equal_the_formula_and_the_tensors_nbytes(model_name, variant):
    model = build(model_name, variant, 3)
    cache = model.new_cache()
    with torch.no_grad():
        model(torch.randint(VOCAB, (2, 3)), cache=cache)
        for T in range(4, CONTEXT + 1):
            model(torch.randint(VOCAB, (2, 1)), cache=cache)
            formula = cache_bytes(model.config, T, bytes_per_element=4, batch_size=2)
            tensors = sum(t.nbytes for layer in cache for t in layer.tensors)
            assert cache.nbytes() == formula == tensors, T
    c = model.config
    positions = min(CONTEXT, c.window or CONTEXT)
    per_token = c.d_latent if c.d_latent else 2 * c.kv_heads * c.d_head
    assert cache.nbytes() == 3 * per_token * positions * 4 * 2  # written out once more


def test_the_formula_can_fail_on_a_cache_that_keeps_more_than_it_says():
    """The check above, on a cache whose trimmed window is a view of the longer tensor: its
    tensors' nbytes still match the formula, but the storage it holds does not."""

    class KeepsViews(LayerCache):
        def update(self, *new, window=None):
            out = super().update(*new, window=window)
            self.tensors = tuple(t[..., -min(t.shape[-2], 2) :, :] for t in out)
            return out

    model = build("TinyLM", "sliding", 1, window=2)
    cache = broken_cache(model, KeepsViews)
    with torch.no_grad():
        model(torch.randint(VOCAB, (1, 8)), cache=cache)
    formula = cache_bytes(model.config, 8, bytes_per_element=4)
    assert sum(t.nbytes for layer in cache for t in layer.tensors) == formula
    assert cache.nbytes() > formula


def test_the_formula_gives_the_published_models_caches_worked_out_by_hand():
    """Numbers from tests/library/test_published.py's hand computation, bf16 (2 bytes)."""
    by_name = {m.name: m for m in PUBLISHED_MODELS}
    assert cache_bytes(by_name["Llama 3.1 8B"], 1, bytes_per_element=2) == 32 * 2 * 8 * 128 * 2
    assert cache_bytes(by_name["DeepSeek-V3"], 1, bytes_per_element=2) == 61 * (512 + 64) * 2
    gemma = cache_bytes(by_name["Gemma 2 9B"], 8192, bytes_per_element=2)
    assert gemma == 2 * 8 * 256 * 2 * 21 * (8192 + 4096) == 2_113_929_216
    mistral = by_name["Mistral 7B v0.1"]
    assert cache_bytes(mistral, 32_768, 2) == cache_bytes(mistral, 4096, 2) == 32 * 4096 * 4096
    mqa = CacheShape(n_layers=2, n_kv_heads=1, d_head=16)
    assert cache_bytes(mqa, 100) == 2 * 2 * 1 * 16 * 100 * 4


# --- every checkpoint loads; a seeded model draws today's weights -------------------------


def _sha256(state: dict) -> str:
    digest = hashlib.sha256()
    for key, value in state.items():
        digest.update(key.encode())
        digest.update(value.contiguous().numpy().tobytes())
    return digest.hexdigest()


SNAPSHOT_NAMES = ["tiny_lm_two_layers", "tiny_lm_three_layers_sliding", "charlm", "charlm_window"]


@pytest.mark.parametrize("name", SNAPSHOT_NAMES)
def test_checkpoints_saved_before_the_shared_stack_load_and_give_the_same_logits(name):
    """Saved by the code of commit 1278c0f: keys, seeded weights, logits and weights."""
    snap = torch.load(SNAPSHOTS, weights_only=True)[name]

    def fresh():
        if snap["class"] == "TinyLM":
            return TinyLM(**snap["config"]).eval()
        return CharLM(CharLMConfig(**snap["config"])).eval()

    torch.manual_seed(snap["seed"])
    seeded = fresh()
    assert list(seeded.state_dict()) == snap["keys"]
    assert _sha256(seeded.state_dict()) == snap["sha256"]  # the same seed: the same weights
    model = fresh()
    model.load_state_dict(snap["state_dict"])  # strict
    with torch.no_grad():
        logits = model(snap["idx"])
        _, weights = model(snap["idx"], return_weights=True)
    torch.testing.assert_close(logits, snap["logits"], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(weights, snap["weights"], rtol=1e-6, atol=1e-6)


def test_charlm_keeps_its_keys_and_tinylm_its_one_layer_attn():
    keys = set(CharLM(CharLMConfig(vocab_size=10, n_layers=1)).state_dict())
    for part in ("ln1.weight", "attn.qkv.weight", "ln2.bias", "mlp.0.weight", "mlp.2.bias"):
        assert f"blocks.0.{part}" in keys
    assert {"ln_f.weight", "pos_emb.weight", "tok_emb.weight", "lm_head.bias"} <= keys
    one = TinyLM(n_kv_heads=2, positions="rope")
    assert isinstance(one.attn, MultiHeadSelfAttention) and one.attn.n_kv_heads == 2
    assert one.attention_layers() == [one.attn] == attention_layers(one)
    assert one.pos_emb is None and "pos_emb.weight" not in one.state_dict()
    assert all(k.startswith(("tok_emb.", "attn.", "lm_head.")) for k in one.state_dict())


def test_positions_true_and_false_still_mean_learned_and_none():
    assert TinyLMConfig(positions=True) == TinyLMConfig(positions="learned") == TinyLMConfig()
    assert TinyLMConfig(positions=False) == TinyLMConfig(positions="none")
    assert TinyLMConfig(positions=False).positions == "none"
    torch.manual_seed(0)
    old_style = TinyLM(positions=False)
    torch.manual_seed(0)
    new_style = TinyLM(positions="none")
    assert old_style.pos_emb is None
    for a, b in zip(old_style.state_dict().values(), new_style.state_dict().values(), strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("model_name", MODELS)
def test_every_switch_builds_the_block_it_names(model_name):
    model = build(model_name, "gqa_rope_sliding", 2)
    for attn in model.attention_layers():
        assert isinstance(attn, MultiHeadSelfAttention)
        assert (attn.n_kv_heads, attn.rope, attn.mask_kind, attn.window) == (2, True, "sliding", 4)
    assert model.pos_emb is None
    mla = build(model_name, "mla", 2)
    assert all(isinstance(a, LatentAttention) and a.d_latent == 6 for a in mla.attention_layers())
    assert len(attention_layers(mla)) == 2


def test_a_charlm_config_with_a_window_slides_and_one_of_tinylm_says_so():
    assert CharLMConfig(vocab_size=10, window=3).resolved_mask_kind == "sliding"
    assert CharLMConfig(vocab_size=10).resolved_mask_kind == "causal"
    with pytest.raises(ValueError, match="window=4 only applies to mask_kind='sliding'"):
        TinyLMConfig(window=4)


def test_the_configs_share_their_fields_and_keep_their_own_defaults():
    tiny, char = TinyLMConfig(), CharLMConfig(vocab_size=62)
    assert (tiny.vocab_size, tiny.d_model, tiny.context_length, tiny.n_layers) == (64, 32, 12, 1)
    assert (char.d_model, char.context_length, char.n_layers, char.mlp) == (64, 32, 2, True)
    assert not tiny.mlp and tiny.uses_residual is False and char.uses_residual is True
    assert char.replace(n_kv_heads=2).kv_heads == 2 and char.kv_heads == 4
    with pytest.raises(TypeError, match="CharLMConfig has no field 'n_kv_head'.*n_kv_heads"):
        char.replace(n_kv_head=2)
    with pytest.raises(TypeError):  # keyword-only: the two list their sizes in another order
        CharLMConfig(62, 32)


# --- interventions on the new blocks -----------------------------------------------------


def test_freezing_and_ablating_work_on_gqa_rope_and_latent_models():
    for variant in ("gqa", "gqa_rope_sliding", "mla"):
        model = build("TinyLM", variant, 2)
        idx = torch.randint(VOCAB, (2, 8))
        mask_kind = model.attention_layers()[0].mask_kind
        window = model.attention_layers()[0].window
        with torch.no_grad():
            before = model(idx)
            with freeze_attention(model, even_weights(8, mask_kind, window), layer=1):
                frozen, weights = model(idx, return_weights=True)
            with ablate_heads(model, [(0, 1)]):
                ablated = model(idx)
            assert torch.equal(model(idx), before)
        torch.testing.assert_close(
            weights[:, 1], even_weights(8, mask_kind, window).expand(2, 4, 8, 8)
        )
        assert not torch.allclose(frozen, before) and not torch.allclose(ablated, before)


def test_a_frozen_gqa_layer_averages_its_own_grouped_values():
    """Frozen to weights that pick key 0, every query head outputs its group's value 0."""
    model = build("TinyLM", "gqa", 1)
    attn = model.attn
    x_ids = torch.randint(VOCAB, (1, 5))
    pick_first = torch.zeros(5, 5)
    pick_first[:, 0] = 1.0
    seen = []
    attn.out_proj.register_forward_pre_hook(lambda m, args: seen.append(args[0]))
    with torch.no_grad(), freeze_attention(model, pick_first):
        model(x_ids)
    x = model.tok_emb(x_ids) + model.pos_emb(torch.arange(5))
    _, _, v = attn.project(x)  # (1, n_kv=2, T, d_head)
    ctx = seen[-1].view(1, 5, 4, 4)  # (B, T, H, d_head)
    for h in range(4):
        torch.testing.assert_close(ctx[0, :, h], v[0, h // 2, 0].expand(5, 4))


# --- refusals, once, at the boundary ------------------------------------------------------


def test_bad_values_are_refused_by_the_config_with_the_fix():
    with pytest.raises(ValueError, match="n_heads=4 is not divisible by n_kv_heads=3.*1, 2, 4"):
        TinyLMConfig(n_kv_heads=3)
    with pytest.raises(ValueError, match="d_head=3 is odd.*d_model=16 with n_heads=4"):
        CharLMConfig(vocab_size=10, d_model=12, positions="rope")
    with pytest.raises(ValueError, match="window=0 must be a whole number >= 1"):
        CharLMConfig(vocab_size=10, window=0)
    with pytest.raises(ValueError, match="window=0 must be a whole number >= 1"):
        TinyLMConfig(mask_kind="sliding", window=0)
    assert message(ValueError, lambda: TinyLMConfig(positions="sinusoidal")) == (
        "positions='sinusoidal' is not known; use 'learned' (a position table), 'rope' "
        "(rotary, in every layer) or 'none' (True and False also work: 'learned' and 'none')"
    )
    with pytest.raises(ValueError, match="latent attention .*cannot take RoPE"):
        CharLMConfig(vocab_size=10, d_latent=8, positions="rope")
    with pytest.raises(ValueError, match="n_kv_heads=2 does not apply with d_latent"):
        TinyLMConfig(d_latent=8, n_kv_heads=2)
    with pytest.raises(ValueError, match="residual=False does not apply with mlp=True"):
        CharLMConfig(vocab_size=10, residual=False)


@pytest.mark.parametrize("model_name", MODELS)
def test_generating_past_the_context_from_a_cache_is_refused_before_any_work(model_name):
    model = build(model_name, "mha", 1)
    prompt = torch.randint(VOCAB, (1, 10))
    with pytest.raises(
        ValueError, match=r"holds 0 positions and 17 more would pass context_length=16"
    ):
        generated(model, prompt, 8, use_cache=True)
    assert generated(model, prompt, 8, use_cache=False).shape == (1, 18)  # slides instead
    assert generated(model, prompt, 7, use_cache=True).shape == (1, 17)  # 10 + 6 fed: fits


def test_a_model_refuses_a_cache_that_is_not_its_own():
    model = build("CharLM", "mha", 2)
    idx = torch.randint(VOCAB, (1, 3))
    with pytest.raises(TypeError, match=r"one entry per layer \(2\), got KVCache\(n_layers=3\)"):
        model(idx, cache=KVCache(3, CONTEXT))
    with pytest.raises(TypeError, match="got LayerCache; make one with model.new_cache()"):
        model(idx, cache=LayerCache(CONTEXT))
    cache = model.new_cache()
    model(torch.randint(VOCAB, (1, 14)), cache=cache)
    with pytest.raises(ValueError, match="holds 14 positions and 3 more"):
        model(idx, cache=cache)


def test_generate_keeps_the_mode_and_the_default_is_the_uncached_loop():
    model = build("TinyLM", "rope", 2).train()
    out = model.generate(torch.randint(VOCAB, (1, 3)), 4, use_cache=True)
    assert model.training and out.shape == (1, 7)
    import inspect

    for cls in (TinyLM, CharLM):
        assert inspect.signature(cls.generate).parameters["use_cache"].default is False


@pytest.mark.slow
def test_a_model_with_the_new_switches_compiles_to_the_eager_logits():
    model = build("TinyLM", "gqa_rope_sliding", 2)
    idx = torch.randint(VOCAB, (2, 12))
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(idx), model(idx))
