"""The toy tasks of tasks.py (notebook 08): the rows ``make_batch`` draws and their targets."""

from __future__ import annotations

import pytest
import torch
from conftest import raises

from attention_lab import IGNORE_INDEX, SEP, TASKS, make_batch, tasks, train_tiny_lm
from attention_lab.tasks import repeat_offset

# --- copy and previous ----------------------------------------------------------------


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


@pytest.mark.parametrize(
    "call",
    [lambda: make_batch("reverse"), lambda: train_tiny_lm("reverse", epochs=1, n_rows=8)],
    ids=["make_batch", "train_tiny_lm"],
)
def test_unknown_task_name_lists_the_known_ones(call):
    with raises(ValueError, "task='reverse'", "'copy'", "'previous'"):
        call()


# --- repeat ---------------------------------------------------------------------------


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


# --- lookup: a lookup by content ------------------------------------------------------


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


# --- trigram: three sources, in order -------------------------------------------------


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
