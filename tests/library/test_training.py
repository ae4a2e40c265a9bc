"""The training loop of training.py (notebook 08; seed 000's demo): ``train``, ``evaluate``,
``train_tiny_lm`` and ``compare_n_heads``, and what the trained models learn.

The tasks' rows: test_tasks.py; the model: test_tiny_lm.py.
"""

from __future__ import annotations

import inspect
import math

import pytest
import torch

from attention_lab import (
    IGNORE_INDEX,
    TinyLM,
    TinyLMConfig,
    TrainHistory,
    evaluate,
    make_batch,
    parallel_map,
    tasks,
    train,
    train_tiny_lm,
    train_tiny_lms,
)
from attention_lab.tasks import repeat_offset, rows_in

pytestmark = pytest.mark.slow  # every test trains a model, or reads one trained for the session

CHANCE = math.log(64)  # ln 64 = 4.16: the loss of a uniform guess over 64 ids


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


def _train_on_rows(x: torch.Tensor, y: torch.Tensor, seed: int = 0) -> TinyLM:
    """A TinyLM trained on the given rows as `train` trains (Adam, lr 0.01, batches of 32,
    3 epochs): notebook 09's train_on_rows, for rows `make_batch` never draws."""
    torch.manual_seed(seed)
    model = TinyLM()
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(seed)
    for _ in range(3):
        for rows in torch.randperm(len(x), generator=g).split(32):
            logits = model(x[rows])  # (32, T, vocab)
            loss = torch.nn.functional.cross_entropy(
                logits.flatten(0, 1), y[rows].flatten(), ignore_index=IGNORE_INDEX
            )
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    return model.eval()


def test_rows_in_random_order_catch_a_model_that_learned_the_lookup_by_position(lookup_runs):
    # The control of notebook 09, seen failing: a model trained with the pairs always in key
    # order may find a pair by its position, and does; pairs in a random order expose it. The
    # model trained on rows in a random order passes the same test.
    x, y = make_batch("lookup", 2048, generator=torch.Generator().manual_seed(0))
    by_position = _train_on_rows(tasks.sort_pairs(x), y)
    x_test, y_test = make_batch("lookup", 256, generator=torch.Generator().manual_seed(99))
    keep = y_test != IGNORE_INDEX

    def accuracy(model, rows):
        with torch.no_grad():
            return (model(rows).argmax(-1)[keep] == y_test[keep]).float().mean().item()

    in_order, shuffled = tasks.sort_pairs(x_test), x_test
    assert accuracy(by_position, in_order) >= 0.95 > 0.5 > accuracy(by_position, shuffled)
    by_content, _ = lookup_runs[True]
    assert min(accuracy(by_content, in_order), accuracy(by_content, shuffled)) >= 0.95


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


def test_train_tiny_lm_with_no_argument_trains_the_tables_setting():
    for task, setting in tasks.TASK_SETTINGS.items():
        model, history = train_tiny_lm(task, epochs=1, n_rows=32, progress=False)
        assert model.vocab_size == setting["vocab_size"]
        assert model.context_length == setting["context_length"]
    _, history = train_tiny_lm("trigram", n_heads=2, n_rows=64, progress=False)
    assert len(history.epoch_losses) == tasks.TASK_SETTINGS["trigram"]["epochs"]
    assert len(history.step_losses) == 3 * 2  # 64 rows in batches of 32, 3 epochs


def test_every_row_of_the_table_holds_every_train_option():
    for task, row in tasks.TASK_SETTINGS.items():
        assert set(tasks.TRAIN_OPTIONS) <= set(row), task
        assert all(row[k] > 0 for k in tasks.TRAIN_OPTIONS), task


def test_train_has_no_defaults_of_its_own_it_reads_the_tasks_row(monkeypatch):
    signature = inspect.signature(train)
    assert all(signature.parameters[k].default is None for k in tasks.TRAIN_OPTIONS)
    # the copy row: 3 epochs in batches of 32, so 64 rows are 2 steps per epoch
    history = train(TinyLM(), "copy", n_rows=64, progress=False)
    assert len(history.epoch_losses) == 3 and len(history.step_losses) == 6
    # the induction row: 1 epoch in batches of 64
    model = TinyLM(vocab_size=32, context_length=24, n_layers=2)
    history = train(model, "induction", n_rows=128, progress=False)
    assert len(history.epoch_losses) == 1 and len(history.step_losses) == 2
    # the learning rate too: with the row's lr set to 0 nothing moves
    monkeypatch.setitem(tasks.TASK_SETTINGS["copy"], "lr", 0.0)
    model = TinyLM()
    before = [p.detach().clone() for p in model.parameters()]
    train(model, "copy", epochs=1, n_rows=64, progress=False)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    train(model, "copy", epochs=1, n_rows=64, lr=1e-2, progress=False)  # a keyword wins
    assert not all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_train_tiny_lm_reproduces_the_notebooks_model_of_each_task(previous_run):
    # 08 builds TinyLM(config) under torch.manual_seed(0) and calls train(model, task): the
    # same model and numbers as train_tiny_lm(task) with no other argument.
    model, history = train_tiny_lm("previous", progress=False)
    assert history.final_loss == previous_run[1].final_loss
    for a, b in zip(model.parameters(), previous_run[0].parameters()):
        assert torch.equal(a, b)


# --- train_tiny_lm: config fields and training options --------------------------------


def test_train_tiny_lm_splits_config_fields_from_training_options():
    model, history = train_tiny_lm(
        "previous", TinyLMConfig(d_model=16), n_heads=2, epochs=1, n_rows=64, progress=False
    )
    assert model.config == TinyLMConfig(d_model=16, n_heads=2)
    assert len(history.step_losses) == 2  # 64 rows / batch 32: the option reached train()


# --- parallel_map: several small models trained side by side --------------------------------


def _made(seed: int) -> TinyLM:
    torch.manual_seed(seed)
    return TinyLM(TinyLMConfig(vocab_size=16, context_length=8, d_model=16, n_heads=2))


def _trained(model: TinyLM) -> tuple[TinyLM, TrainHistory]:
    return model, train(model, "previous", epochs=1, n_rows=256, seed=7, progress=False)


def test_parallel_map_trains_models_bitwise_as_a_loop_does():
    seeds = (0, 1, 2, 3)
    in_a_loop = [_trained(_made(s)) for s in seeds]
    side_by_side = parallel_map(_trained, [_made(s) for s in seeds], workers=2)
    for (a, ha), (b, hb) in zip(in_a_loop, side_by_side):
        assert ha.step_losses == hb.step_losses and ha.final_loss == hb.final_loss
        for (name, p), q in zip(a.state_dict().items(), b.state_dict().values()):
            assert torch.equal(p, q), name
    # the control: a different seed gives different weights, so the equality above means something
    assert not torch.equal(
        in_a_loop[0][0].state_dict()["tok_emb.weight"],
        side_by_side[1][0].state_dict()["tok_emb.weight"],
    )


def test_parallel_map_keeps_the_order_of_its_items_and_puts_torchs_threads_back():
    import time

    threads = torch.get_num_threads()

    def slow_first(i: int) -> tuple[int, int]:
        time.sleep(0.05 * (3 - i))  # the first item finishes last
        return i, torch.get_num_threads()

    assert parallel_map(slow_first, range(4), workers=4) == [(i, 1) for i in range(4)]
    assert torch.get_num_threads() == threads


def test_parallel_map_refuses_a_function_that_draws_from_the_global_generator():
    with pytest.raises(RuntimeError, match="global random generator"):
        parallel_map(lambda _: torch.rand(1), range(2), workers=2)
    assert parallel_map(
        lambda i: torch.rand(1, generator=torch.Generator().manual_seed(i)), range(2)
    )


def test_parallel_map_passes_a_functions_error_on_and_names_a_bad_worker_count():
    def fails(i: int) -> int:
        if i == 1:
            raise ValueError("item 1 is bad")
        return i

    with pytest.raises(ValueError, match="item 1 is bad"):
        parallel_map(fails, range(3), workers=2)
    with pytest.raises(ValueError, match="workers"):
        parallel_map(fails, range(3), workers=0)


def test_train_tiny_lms_gives_bitwise_the_loops_models_and_leaves_the_generator_as_the_loop():
    runs = [
        dict(seed=0),
        dict(seed=1, n_heads=1),
        dict(seed=2, epochs=2),
        dict(task="copy", seed=3),
    ]
    seen = []
    runs[0]["on_step"] = lambda step, model: seen.append(step)
    torch.manual_seed(99)
    in_a_loop = [
        train_tiny_lm(**{"task": "previous", "epochs": 1, "progress": False, **run}) for run in runs
    ]
    after_loop = torch.random.get_rng_state()
    steps = list(seen)
    seen.clear()
    torch.manual_seed(99)
    side_by_side = train_tiny_lms(runs, task="previous", epochs=1, progress=False, workers=2)
    assert torch.equal(torch.random.get_rng_state(), after_loop)
    assert seen == steps == list(range(len(in_a_loop[0][1].step_losses) + 1))  # on_step kept
    for (a, ha), (b, hb) in zip(in_a_loop, side_by_side):
        assert a.config == b.config and ha.step_losses == hb.step_losses
        for (name, p), q in zip(a.state_dict().items(), b.state_dict().values()):
            assert torch.equal(p, q), name
    assert len(side_by_side[2][1].step_losses) == 2 * len(side_by_side[0][1].step_losses)
    assert [h.task for _, h in side_by_side] == ["previous"] * 3 + ["copy"]  # a run's own task
    # the control: another seed trains other weights, so the equality above means something
    assert in_a_loop[0][1].step_losses != side_by_side[1][1].step_losses


def test_train_tiny_lms_names_a_run_that_is_not_a_dict_or_brings_its_own_bar():
    with pytest.raises(TypeError, match="index 1.*runs=\\[dict"):
        train_tiny_lms([dict(seed=0), 3])
    with pytest.raises(TypeError, match="without 'progress'"):
        train_tiny_lms([dict(seed=0, progress=True)])
    with pytest.raises(TypeError, match="on_step must be a function"):
        train_tiny_lms([dict(seed=0, on_step=3)])
