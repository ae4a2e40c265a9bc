"""train_once.py: with ATTENTION_LAB_TRAIN_ONCE set, a run trained once is loaded, bitwise.

Every check compares a loaded run with one that trained (the store unset), and each has its
control: a run that differs in one thing trains again.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from attention_lab import TinyLM, make_batch, train, train_once, train_tiny_lm
from attention_lab.induction import InductionRecorder
from attention_lab.training import parallel_map, train_tiny_lms

SMALL = dict(n_rows=256)  # 3 epochs of 8 steps of the copy task: a few tenths of a second


def log(where) -> list[str]:
    """The store's log: "trained" or "loaded" per run, in order."""
    path = where / "log.txt"
    lines = path.read_text().splitlines() if path.exists() else []
    return [line.split(" ")[0] for line in lines]


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def numbers(history) -> dict:
    """A history's numbers, without its wall-clock time (a loaded run keeps the first's)."""
    return {k: v for k, v in dataclasses.asdict(history).items() if k != "seconds"}


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv(train_once.ENV, str(tmp_path / "runs"))
    return tmp_path / "runs"


def test_unset_it_keeps_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv(train_once.ENV, raising=False)
    assert train_once.folder() is None
    train_tiny_lm("copy", progress=False, **SMALL)
    assert list(tmp_path.iterdir()) == []


def test_the_second_run_is_loaded_bitwise_and_a_changed_run_trains(store, monkeypatch):
    first, h1 = train_tiny_lm("copy", progress=False, **SMALL)
    second, h2 = train_tiny_lm("copy", progress=False, **SMALL)
    assert log(store) == ["trained", "loaded"]
    monkeypatch.delenv(train_once.ENV)
    fresh, h3 = train_tiny_lm("copy", progress=False, **SMALL)  # trains: the reference
    assert same_weights(second, fresh) and same_weights(first, fresh)
    assert numbers(h2) == numbers(h3) == numbers(h1)
    assert h2.seconds == h1.seconds  # the loaded run reports the time it took to train
    assert not second.training and not any(m.training for m in second.modules())
    # the controls: another learning rate, seed, size or task is another run
    monkeypatch.setenv(train_once.ENV, str(store))
    train_tiny_lm("copy", progress=False, lr=3e-3, **SMALL)
    train_tiny_lm("copy", progress=False, seed=1, **SMALL)
    train_tiny_lm("copy", progress=False, n_heads=2, **SMALL)
    train_tiny_lm("previous", progress=False, **SMALL)
    # a switch without weights of its own: the same initial weights, another model
    train_tiny_lm("copy", progress=False, n_layers=1, residual=True, **SMALL)
    # the same run with only the math attention kernel allowed
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.MATH]):
        train_tiny_lm("copy", progress=False, **SMALL)
    assert log(store) == ["trained", "loaded"] + ["trained"] * 6


def test_other_initial_weights_are_another_run(store):
    torch.manual_seed(0)
    a = TinyLM()
    b = TinyLM()
    b.load_state_dict(a.state_dict())
    with torch.no_grad():
        b.lm_head.bias[0] += 1e-7  # one number, one last bit or so
    train(a, "copy", progress=False, **SMALL)
    train(b, "copy", progress=False, **SMALL)
    assert log(store) == ["trained", "trained"]


def test_a_recorder_gets_back_what_it_recorded(store, monkeypatch):
    rows, _ = make_batch("induction", 16, generator=torch.Generator().manual_seed(5))
    options = dict(n_layers=2, n_rows=640, progress=False)  # 10 steps

    def recorded():
        recorder = InductionRecorder(rows, every=5)
        model, history = train_tiny_lm("induction", on_step=recorder, **options)
        return model, history, recorder

    m1, h1, r1 = recorded()
    m2, h2, r2 = recorded()
    assert log(store) == ["trained", "loaded"]
    monkeypatch.delenv(train_once.ENV)
    m3, h3, r3 = recorded()
    assert r2.steps == r3.steps == [0, 5, 10]
    assert torch.equal(r2.previous, r3.previous) and torch.equal(r2.prefix, r3.prefix)
    assert same_weights(m2, m3) and numbers(h2) == numbers(h3)
    # the control: a recorder on other rows is another run
    monkeypatch.setenv(train_once.ENV, str(store))
    other = InductionRecorder(rows[:8], every=5)
    train_tiny_lm("induction", on_step=other, **options)
    assert log(store)[-1] == "trained" and other.steps == [0, 5, 10]


def test_a_plain_callback_runs_at_every_step_so_its_run_always_trains(store):
    seen = []
    for _ in range(2):
        train_tiny_lm("copy", progress=False, on_step=lambda step, m: seen.append(step), **SMALL)
    assert seen == list(range(25)) * 2  # steps 0..24, both times
    assert log(store) == []  # neither run was kept


def test_a_run_that_draws_random_numbers_is_never_kept(store):
    for _ in range(2):
        train_tiny_lm("copy", progress=False, dropout=0.1, **SMALL)
    assert log(store) == ["not", "not"]  # "not kept (drew random numbers)", twice


def test_train_tiny_lms_loads_too_and_counts_its_steps(store, monkeypatch):
    runs = [dict(seed=0), dict(seed=1)]
    first = train_tiny_lms(runs, task="copy", progress=False, **SMALL)
    again = train_tiny_lms(runs, task="copy", progress=False, **SMALL)
    assert sorted(log(store)) == ["loaded", "loaded", "trained", "trained"]
    monkeypatch.delenv(train_once.ENV)
    loop = [train_tiny_lm("copy", seed=s, progress=False, **SMALL) for s in (0, 1)]
    for (m1, _), (m2, h2), (m3, h3) in zip(first, again, loop):
        assert same_weights(m1, m3) and same_weights(m2, m3) and numbers(h2) == numbers(h3)


def test_two_runs_of_the_same_model_at_once_train_it_once(store):
    # two threads, one run: the lock makes the second wait, then load what the first stored
    torch.manual_seed(0)
    a = TinyLM()
    b = TinyLM()
    b.load_state_dict(a.state_dict())
    parallel_map(lambda m: train(m, "copy", progress=False, **SMALL), [a, b])
    assert sorted(log(store)) == ["loaded", "trained"]
    assert same_weights(a, b)
