"""The toy tasks, ``TinyLM`` and the training loop (notebook 08; seed 000's demo)."""

from __future__ import annotations

import math

import pytest
import torch

from attention_lab import (
    IGNORE_INDEX,
    SEP,
    TASKS,
    TinyLM,
    evaluate,
    make_batch,
    pick_device,
    tasks,
    train,
    train_tiny_lm,
)
from attention_lab.tasks import repeat_offset, rows_in

CHANCE = math.log(64)  # ln 64 = 4.16: the loss of a uniform guess over 64 ids


# --- the tasks -------------------------------------------------------------------------


def test_copy_rows_are_one_id_repeated_and_targets_are_inputs_shifted_by_one():
    g = torch.Generator().manual_seed(0)
    x, y = make_batch("copy", n_rows=50, context_length=12, vocab_size=64, generator=g)
    assert x.shape == y.shape == (50, 12)
    assert x.dtype == y.dtype == torch.int64
    assert torch.equal(x, x[:, :1].expand(50, 12))  # one id per row
    assert torch.equal(y[:, :-1], x[:, 1:])  # the next token
    assert torch.equal(y[:, -1], x[:, -1])  # ...which, in a repeated row, is the same id
    assert x.min() >= 0 and x.max() < 64
    assert len(x[:, 0].unique()) > 20, "rows should hold different ids"


def test_previous_targets_are_the_token_one_step_back_and_position_0_is_ignored():
    g = torch.Generator().manual_seed(0)
    x, y = make_batch("previous", n_rows=50, context_length=12, vocab_size=64, generator=g)
    assert x.shape == y.shape == (50, 12)
    assert torch.equal(y[:, 1:], x[:, :-1])
    assert (y[:, 0] == IGNORE_INDEX).all()
    assert IGNORE_INDEX == -100  # the default ignore_index of F.cross_entropy
    assert x.min() >= 0 and x.max() < 64
    assert (x[:, 1:] != x[:, :-1]).any(), "previous-task rows must not be constant"


@pytest.mark.parametrize("task", TASKS)
def test_make_batch_is_reproducible_from_its_generator(task):
    a = make_batch(task, 8, generator=torch.Generator().manual_seed(3))
    b = make_batch(task, 8, generator=torch.Generator().manual_seed(3))
    c = make_batch(task, 8, generator=torch.Generator().manual_seed(4))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])


def test_make_batch_respects_its_sizes():
    x, y = make_batch("previous", n_rows=3, context_length=5, vocab_size=7)
    assert x.shape == y.shape == (3, 5)
    assert x.max() < 7


# --- TinyLM ------------------------------------------------------------------------------


def test_tiny_lm_maps_ids_b_t_to_logits_b_t_vocab_and_weights_b_h_t_t():
    model = TinyLM().eval()
    idx = torch.randint(64, (3, 12))  # (B, T)
    logits = model(idx)
    logits2, weights = model(idx, return_weights=True)
    assert logits.shape == (3, 12, 64)
    assert weights.shape == (3, 4, 12, 12)
    torch.testing.assert_close(logits, logits2)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 4, 12))
    assert model(idx[:, :5]).shape == (3, 5, 64)
    assert model(idx.int()).shape == (3, 12, 64)


@pytest.mark.parametrize("mask_kind, window", [("causal", None), ("sliding", 4)])
@pytest.mark.parametrize("return_weights", [False, True], ids=["sdpa_path", "explicit_path"])
def test_future_tokens_do_not_change_earlier_logits_of_tiny_lm(mask_kind, window, return_weights):
    model = TinyLM(mask_kind=mask_kind, window=window).eval()

    def logits(idx):
        return model(idx, return_weights=True)[0] if return_weights else model(idx)

    idx = torch.randint(64, (2, 12))  # (B, T)
    for t in range(11):
        changed = idx.clone()
        changed[:, t + 1 :] = (changed[:, t + 1 :] + 1 + torch.randint(62, (2, 11 - t))) % 64
        before, after = logits(idx), logits(changed)
        torch.testing.assert_close(after[:, : t + 1], before[:, : t + 1], rtol=0, atol=1e-6)
        assert not torch.allclose(after[:, t + 1 :], before[:, t + 1 :])


def test_tiny_lm_without_a_mask_lets_the_future_leak():
    """The same check fails for an encoder-style TinyLM: the causality test can fail."""
    model = TinyLM(mask_kind="none").eval()
    idx = torch.randint(64, (2, 12))  # (B, T)
    changed = idx.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 64
    assert not torch.allclose(model(changed)[:, 0], model(idx)[:, 0])


def test_every_parameter_of_tiny_lm_gets_a_gradient():
    model = TinyLM().train()
    x, y = make_batch("copy", 16)
    logits = model(x)  # (B, T, vocab)
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten()).backward()
    names = [n for n, _ in model.named_parameters()]
    assert {"tok_emb.weight", "pos_emb.weight", "attn.qkv.weight", "lm_head.weight"} <= set(names)
    for name, param in model.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name


def test_tiny_lm_follows_double_and_keeps_its_mask_boolean():
    model = TinyLM().double().eval()
    logits, weights = model(torch.randint(64, (2, 12)), return_weights=True)
    assert logits.dtype == weights.dtype == torch.float64
    assert model.attn.mask.dtype == torch.bool
    assert "attn.mask" not in model.state_dict()  # derived from the config, not saved


@pytest.mark.skipif(
    torch.cuda.is_available() or torch.backends.mps.is_available(),
    reason="an accelerator is present: pick_device picks it",
)
def test_pick_device_returns_the_cpu_on_a_machine_without_an_accelerator():
    device = pick_device()
    assert device == torch.device("cpu")
    assert TinyLM().to(device)(torch.zeros(1, 3, dtype=torch.long)).device == device


# --- training ----------------------------------------------------------------------------


# copy_run, previous_run, repeat_run: session fixtures in conftest.py (trained once)


def test_copy_task_starts_near_chance(copy_run):
    _, history = copy_run
    assert abs(history.initial_loss - CHANCE) < 0.3
    assert abs(history.step_losses[0] - CHANCE) < 0.5


def test_copy_task_trains_to_a_fresh_batch_loss_of_at_most_0_01(copy_run):
    model, history = copy_run
    assert history.task == "copy"
    assert len(history.epoch_losses) == 3
    assert len(history.step_losses) == 3 * 2048 // 32
    # Falling: the first epoch still learns, the later ones sit near zero.
    assert history.epoch_losses[0] > 10 * max(history.epoch_losses[1:])
    assert history.epoch_losses[-1] < 0.01
    assert history.final_loss <= 0.01
    assert history.final_accuracy >= 0.999
    assert not model.training, "train() leaves the model in eval mode"
    # The copy task has only 64 rows, all in training: the evaluation is a fresh batch,
    # not a held-out set, and the history says so. Its numbers are evaluate()'s.
    assert not history.held_out and history.eval_rows == 512
    assert evaluate(model, "copy") == pytest.approx((history.final_loss, history.final_accuracy))


def test_a_held_out_copy_set_cannot_exist_and_evaluate_says_so(copy_run):
    model, _ = copy_run
    x_train, _ = make_batch("copy", 2048, generator=torch.Generator().manual_seed(0))
    assert len(torch.unique(x_train[:, 0])) == 64  # every possible row is a training row
    with pytest.raises(ValueError, match="too few different rows.*exclude=None"):
        evaluate(model, "copy", exclude=x_train)


def test_evaluate_restores_the_training_mode(copy_run):
    model, _ = copy_run
    model.train()
    evaluate(model, n_rows=16)
    assert model.training
    model.eval()
    evaluate(model, n_rows=16)
    assert not model.training


def test_previous_task_reaches_95_percent_accuracy_with_the_defaults(previous_run):
    model, history = previous_run
    assert abs(history.initial_loss - CHANCE) < 0.3
    assert history.final_accuracy >= 0.95
    # To solve it, some head must look one step back: its weight on t-1 dominates.
    x, _ = make_batch("previous", 64, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        _, weights = model(x, return_weights=True)  # (B, H, T, T)
    one_back = weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(0, 2))  # (H,)
    assert one_back.max() > 0.9


def test_training_is_reproducible_from_the_seed():
    kwargs = dict(epochs=1, n_rows=256, progress=False)
    _, a = train_tiny_lm("copy", seed=7, **kwargs)
    _, b = train_tiny_lm("copy", seed=7, **kwargs)
    _, c = train_tiny_lm("copy", seed=8, **kwargs)
    assert len(a.step_losses) == 8
    assert a.step_losses == b.step_losses
    assert a.initial_loss == b.initial_loss and a.final_loss == b.final_loss
    assert a.step_losses != c.step_losses


def test_train_with_an_explicit_seed_uses_the_same_data_order():
    runs = []
    for _ in range(2):
        torch.manual_seed(1)
        model = TinyLM(context_length=6, vocab_size=10)
        runs.append(train(model, epochs=1, n_rows=64, batch_size=16, seed=3, progress=False))
    assert runs[0].step_losses == runs[1].step_losses


def _training_rows(task: str, seed: int = 0) -> torch.Tensor:
    """The inputs train() draws first from its seed: the training set."""
    x, _ = make_batch(task, 2048, generator=torch.Generator().manual_seed(seed))
    return x


@pytest.mark.parametrize("task", ["previous", "repeat"])
def test_tasks_with_many_rows_are_evaluated_on_rows_never_trained_on(task, request):
    model, history = request.getfixturevalue(f"{task}_run")
    assert history.held_out
    x_eval, y_eval = make_batch(task, 512, generator=torch.Generator().manual_seed(1234))
    unseen = ~rows_in(x_eval, _training_rows(task))
    assert unseen.sum() == history.eval_rows > 0
    loss, accuracy = evaluate(model, task, exclude=_training_rows(task))
    assert (loss, accuracy) == pytest.approx((history.final_loss, history.final_accuracy))


def test_repeat_rows_are_a_sequence_a_separator_and_the_sequence_again():
    T = 12
    m = repeat_offset(T)
    x, y = make_batch("repeat", 50, T, 64, generator=torch.Generator().manual_seed(0))
    assert m == 6 and x.shape == y.shape == (50, T)
    assert (x[:, m] == SEP).all() and (x[:, :m] != SEP).all()
    torch.testing.assert_close(x[:, m + 1 :], x[:, : T - m - 1])  # second half = first half
    assert (y[:, :m] == IGNORE_INDEX).all()  # the random first half is not scored
    torch.testing.assert_close(y[:, m:], x[:, : T - m])  # target at p is the token at p - m


@pytest.mark.parametrize("T", [2, 3, 7])
def test_repeat_targets_lie_m_positions_back_for_any_length(T):
    x, y = make_batch("repeat", 20, T, 9, generator=torch.Generator().manual_seed(1))
    m = repeat_offset(T)
    scored = (y != IGNORE_INDEX).nonzero().tolist()
    assert len(scored) == 20 * (T - m) > 0
    for row, p in scored:
        assert y[row, p] == x[row, p - m]  # the answer at p sits m positions back


def test_repeat_needs_room_for_a_separator():
    with pytest.raises(ValueError, match="context_length >= 2.*context_length=1"):
        make_batch("repeat", 4, 1, 64)


def test_repeat_task_routes_each_answer_from_m_positions_back(repeat_run):
    model, history = repeat_run
    assert abs(history.initial_loss - CHANCE) < 0.3
    assert history.final_accuracy >= 0.95
    x, _ = make_batch("repeat", 64, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        _, weights = model(x, return_weights=True)  # (B, H, T, T)
    m = repeat_offset(12)
    # query p >= m must fetch its answer from key p - m: some head's weight sits on that
    # diagonal, shifted m steps below the main one
    shifted = weights.diagonal(offset=-m, dim1=-2, dim2=-1)  # (B, H, T - m)
    assert shifted.mean(dim=(0, 2)).max() > 0.8


def test_generate_writes_the_second_half_from_the_first(repeat_run):
    model, _ = repeat_run
    x, _ = make_batch("repeat", 32, generator=torch.Generator().manual_seed(9))
    m = repeat_offset(12)
    prompt = x[:, : m + 1]  # the first half and the separator
    out = model.generate(prompt, max_new_tokens=12 - m)  # (B, 12 + 1)
    assert out.shape == (32, 13)
    torch.testing.assert_close(out[:, : m + 1], prompt)
    accuracy = (out[:, m + 1 :] == x[:, : 12 - m]).float().mean().item()  # = first half
    assert accuracy >= 0.95


def test_generate_is_greedy_and_keeps_the_mode(copy_run):
    model, _ = copy_run
    model.train()
    idx = torch.tensor([[5, 5, 5]])
    out = model.generate(idx, 4)
    assert model.training
    torch.testing.assert_close(out, torch.tensor([[5] * 7]))  # the copy model repeats
    model.eval()


def test_compare_n_heads_trains_one_model_per_head_count_and_seed():
    from attention_lab.training import compare_n_heads

    result = compare_n_heads("previous", (1, 2), seeds=(0, 1), d_model=8, epochs=1, n_rows=64)
    assert list(result) == [1, 2] and all(len(v) == 2 for v in result.values())
    # each entry is the final loss train_tiny_lm reports for that setting
    _, history = train_tiny_lm(
        "previous", n_heads=2, d_model=8, seed=1, epochs=1, n_rows=64, progress=False
    )
    assert result[2][1] == history.final_loss
    assert result[1][0] != result[2][0]


# --- the lookup task: a lookup by content -------------------------------------------------


def _lookup_rows(n=64, T=12, seed=0):
    return make_batch("lookup", n, T, 64, generator=torch.Generator().manual_seed(seed))


def _pair_key_value(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    offset = ids - tasks.LOOKUP_PAIR
    return offset // tasks.LOOKUP_VALUES, offset % tasks.LOOKUP_VALUES


@pytest.mark.parametrize("T", [2, 5, 12, 16])
def test_lookup_rows_are_pairs_with_distinct_keys_then_queries_with_their_values(T):
    x, y = _lookup_rows(40, T)
    P = tasks.lookup_pairs(T)
    assert x.shape == y.shape == (40, T) and P == min(6, T // 2)
    keys, values = _pair_key_value(x[:, :P])
    assert (x[:, :P] >= tasks.LOOKUP_PAIR).all() and (x[:, :P] < tasks.MIN_VOCAB["lookup"]).all()
    assert all(len(set(row.tolist())) == P for row in keys)  # one pair per key
    assert (y[:, :P] == IGNORE_INDEX).all()  # the pairs themselves are not scored
    asked = x[:, P:] - tasks.LOOKUP_QUERY  # (N, T - P): the key each query asks for
    assert ((asked >= 0) & (asked < len(tasks.LOOKUP_KEYS))).all()
    for row in range(40):
        stored = dict(zip(keys[row].tolist(), values[row].tolist()))
        assert y[row, P:].tolist() == [stored[k] for k in asked[row].tolist()]


def test_the_answer_of_a_lookup_sits_at_a_position_chosen_by_content():
    # Over many rows, the pair a query needs stands at every one of the pair positions:
    # no fixed offset (as in "previous" or "repeat") can find it.
    x, _ = _lookup_rows(512)
    P = tasks.lookup_pairs(12)
    where = (x[:, :P, None] - tasks.LOOKUP_PAIR) // tasks.LOOKUP_VALUES == (
        x[:, None, P:] - tasks.LOOKUP_QUERY
    )  # (N, P, T - P): pair p holds the key that query q asks for
    assert (where.sum(1) == 1).all()  # exactly one pair answers each query
    positions = where.float().argmax(1)  # (N, T - P)
    assert set(positions.flatten().tolist()) == set(range(P))
    assert torch.equal(tasks.lookup_sources(x), positions)


def test_shuffling_the_pairs_keeps_every_lookup_target():
    x, y = _lookup_rows(64)
    shuffled = tasks.shuffle_pairs(x, torch.Generator().manual_seed(3))
    P = tasks.lookup_pairs(12)
    assert not torch.equal(shuffled, x)
    assert torch.equal(shuffled[:, P:], x[:, P:])
    assert torch.equal(shuffled[:, :P].sort(1).values, x[:, :P].sort(1).values)
    for row in range(64):  # the same dictionary, so the same answers
        assert dict(zip(*map(torch.Tensor.tolist, _pair_key_value(shuffled[row, :P])))) == dict(
            zip(*map(torch.Tensor.tolist, _pair_key_value(x[row, :P])))
        )


def test_token_labels_name_pairs_queries_values_trigrams_and_the_separator():
    x, y = _lookup_rows(1)
    labels = tasks.token_labels("lookup", x[0])
    assert labels[0].count("=") == 1 and labels[-1].endswith("?")
    assert tasks.token_labels("lookup", [0, 6, 12, 47]) == ["0", "a?", "a=0", "f=5"]
    assert tasks.token_labels("trigram", [0, 3, 4, 5, 67]) == ["a", "d", "aaa", "aab", "ddd"]
    assert tasks.token_labels("repeat", [SEP, 5]) == ["SEP", "5"]
    assert tasks.token_labels("copy", [0, 5]) == ["0", "5"]


@pytest.mark.parametrize("task", ["lookup", "trigram"])
def test_a_vocabulary_too_small_for_the_task_is_refused_with_the_fix(task):
    need = tasks.MIN_VOCAB[task]
    with pytest.raises(ValueError, match=f"vocab_size >= {need}.*vocab_size={need - 1}"):
        make_batch(task, 4, 12, need - 1)


@pytest.fixture(scope="module")
def lookup_runs():
    """The lookup task trained with and without position embeddings (notebook 08's setting)."""
    return {pos: train_tiny_lm("lookup", positions=pos, progress=False) for pos in (True, False)}


def test_lookup_reaches_95_percent_on_held_out_rows_with_and_without_positions(lookup_runs):
    for positions, (_model, history) in lookup_runs.items():
        assert history.held_out and history.eval_rows > 400
        assert history.final_accuracy >= 0.95, positions
    assert lookup_runs[False][0].pos_emb is None


def test_a_trained_lookup_model_still_answers_when_the_pairs_are_shuffled(lookup_runs):
    model, _ = lookup_runs[True]
    x, y = make_batch("lookup", 256, generator=torch.Generator().manual_seed(99))
    shuffled = tasks.shuffle_pairs(x, torch.Generator().manual_seed(5))
    with torch.no_grad():
        for rows in (x, shuffled):
            keep = y != IGNORE_INDEX
            assert (model(rows).argmax(-1)[keep] == y[keep]).float().mean() >= 0.95


def test_lookup_attention_goes_to_the_pair_with_the_asked_key(lookup_runs):
    model, _ = lookup_runs[False]
    x, _ = make_batch("lookup", 128, generator=torch.Generator().manual_seed(4))
    P = tasks.lookup_pairs(12)
    with torch.no_grad():
        _, w = model(x, return_weights=True)  # (N, H, T, T)
    match = (x[:, None, :P] - tasks.LOOKUP_PAIR) // tasks.LOOKUP_VALUES == (
        x[:, P:, None] - tasks.LOOKUP_QUERY
    )  # (N, T - P, P): query q's key is in pair p
    on_match = (w[:, :, P:, :P] * match[:, None]).sum(-1).mean(dim=(0, 2))  # (H,)
    even = sum(1 / (i + 1) for i in range(P, 12)) / (12 - P)  # an even spread's share
    assert on_match.max() > max(0.5, 4 * even)  # a head looks up the pair by its key


def test_without_positions_the_repeat_task_collapses_but_lookup_does_not(lookup_runs):
    _, rep = train_tiny_lm("repeat", positions=False, progress=False)
    assert rep.final_accuracy < 0.5 <= 0.95 <= lookup_runs[False][1].final_accuracy


# --- the trigram task: three sources, in order -------------------------------------------


def test_trigram_targets_are_the_last_three_letters_in_order():
    x, y = make_batch("trigram", 30, 12, 68, generator=torch.Generator().manual_seed(2))
    assert x.shape == y.shape == (30, 12) and x.max() < 4
    assert (y[:, :2] == IGNORE_INDEX).all()
    for row in range(30):
        for i in range(2, 12):
            word = "".join(tasks.TRIGRAM_LETTERS[int(t)] for t in x[row, i - 2 : i + 1])
            assert tasks.token_labels("trigram", [y[row, i]]) == [word]


def test_an_even_average_of_the_three_sources_cannot_tell_their_order():
    # The argument behind one head's ceiling: the mean of three value vectors is the same
    # for every order of the same letters, so at best one ordering per multiset is right.
    from itertools import product

    words = list(product(range(4), repeat=3))
    orders = {}
    for w in words:
        orders.setdefault(tuple(sorted(w)), []).append(w)
    ceiling = sum(1 / len(orders[tuple(sorted(w))]) for w in words) / len(words)
    assert ceiling == pytest.approx(tasks.trigram_even_average_ceiling()) == 20 / 64


def test_train_tiny_lm_with_no_argument_trains_the_tables_setting():
    for task, setting in tasks.TASK_SETTINGS.items():
        model, history = train_tiny_lm(task, epochs=1, n_rows=32, progress=False)
        assert model.vocab_size == setting["vocab_size"]
        assert model.context_length == setting["context_length"]
    _, history = train_tiny_lm("trigram", n_heads=2, n_rows=64, progress=False)
    assert len(history.epoch_losses) == tasks.TASK_SETTINGS["trigram"]["epochs"]
    assert len(history.step_losses) == 3 * 2  # 64 rows in batches of 32, 3 epochs


def test_train_tiny_lm_reproduces_the_notebooks_model_of_each_task(previous_run):
    # 08 builds TinyLM(config) under torch.manual_seed(0) and calls train(model, task): the
    # same model and numbers as train_tiny_lm(task) with no other argument.
    model, history = train_tiny_lm("previous", progress=False)
    assert history.final_loss == previous_run[1].final_loss
    for a, b in zip(model.parameters(), previous_run[0].parameters()):
        assert torch.equal(a, b)
