"""The toy tasks of tasks.py (notebook 08): the rows ``make_batch`` draws and their targets."""

from __future__ import annotations

import pytest
import torch

from attention_lab import IGNORE_INDEX, SEP, TASKS, make_batch, tasks, train_tiny_lm
from attention_lab.induction import induction_placements
from attention_lab.tasks import repeat_offset
from tests.conftest import raises

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


@pytest.mark.parametrize("task", tasks.ALL_TASKS)
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


def test_sorted_pairs_stand_in_key_order_and_keep_every_lookup_target():
    x, _ = _lookup_rows(64)
    in_order = tasks.sort_pairs(x)
    P = tasks.lookup_pairs(12)
    keys, _ = _pair_key_value(in_order[:, :P])
    assert torch.equal(keys, torch.arange(P).expand(64, P))  # key k at position k, every row
    assert torch.equal(in_order[:, P:], x[:, P:])  # the queries are untouched
    assert torch.equal(in_order[:, :P].sort(1).values, x[:, :P].sort(1).values)  # same pairs
    assert torch.equal(tasks.lookup_sources(in_order), x[:, P:] - tasks.LOOKUP_QUERY)
    assert torch.equal(tasks.sort_pairs(tasks.shuffle_pairs(x)), in_order)


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


# --- induction: a segment repeated at a random distance -------------------------------

L_SEG = tasks.INDUCTION_SEGMENT


def _induction_rows(n=200, T=32, vocab=32, seed=0):
    return make_batch("induction", n, T, vocab, generator=torch.Generator().manual_seed(seed))


def _copies(row: list[int]) -> list[tuple[int, int]]:
    """Every (a, b), b - a >= 8, where the 8 ids from a and from b are the same: by brute force."""
    T = len(row)
    return [
        (a, b)
        for b in range(T - L_SEG + 1)
        for a in range(b - L_SEG + 1)
        if row[a : a + L_SEG] == row[b : b + L_SEG]
    ]


def test_induction_rows_by_hand():
    # T = 17, 12 ids: the two copies fit at (0, 8), (0, 9) or (1, 9)
    assert induction_placements(17).tolist() == [[0, 8], [0, 9], [1, 9]]
    x, y = _induction_rows(3, T=17, vocab=12, seed=5)
    for row, target in zip(x.tolist(), y.tolist()):
        ((a, b),) = _copies(row)  # exactly one repeated segment
        segment = row[a : a + L_SEG]
        assert len(set(segment)) == L_SEG  # eight different ids
        assert not set(segment) & set(row[:a] + row[a + L_SEG : b] + row[b + L_SEG :])
        # scored: the positions holding the copy's 1st..7th id; target: its 2nd..8th
        assert [p for p, t in enumerate(target) if t != IGNORE_INDEX] == list(range(b, b + 7))
        assert [t for t in target if t != IGNORE_INDEX] == segment[1:]
    # one row written out: the segment 0..7 at 1 and again at 9 (filler 8..11)
    row = [9, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7]
    assert _copies(row) == [(1, 9)]


def test_each_scored_target_is_the_id_after_the_earlier_occurrence_of_the_current_id():
    x, y = _induction_rows(300)
    assert x.shape == y.shape == (300, 32) and x.min() >= 0 and x.max() < 32
    assert ((y != IGNORE_INDEX).sum(1) == L_SEG - 1).all()
    for row, target in zip(x.tolist(), y.tolist()):
        for p, t in enumerate(target):
            if t == IGNORE_INDEX:
                continue
            earlier = [q for q in range(p) if row[q] == row[p]]
            assert len(earlier) == 1  # one earlier occurrence: no ambiguity
            assert t == row[earlier[0] + 1]  # the induction rule
            assert earlier[0] + 1 < p  # ...which lies before p: predictable from the row
            if p + 1 < len(row):
                assert t == row[p + 1]  # and it is the next id


def test_the_scored_positions_are_exactly_the_predictable_ones():
    x, y = _induction_rows(300, seed=1)
    rule_right, rule_tried = 0, 0
    alone = 0
    for row, target in zip(x.tolist(), y.tolist()):
        matches = _copies(row)
        # a filler id equal by chance just before or after both copies lengthens the repeat
        # (1 time in 24 each side): then several windows match, all at the copy's distance
        assert len({b - a for a, b in matches}) == 1
        alone += len(matches) == 1
        scored = [p for p, t in enumerate(target) if t != IGNORE_INDEX]
        (a, b), *_ = [(a, b) for a, b in matches if scored == list(range(b, b + L_SEG - 1))]
        # everywhere else the rule has nothing to go on: the copy's first id (b - 1 predicts
        # it) follows a random placement, and after the copy's last id (b + 7) comes filler
        for p in (b - 1, b + L_SEG - 1):
            assert target[p] == IGNORE_INDEX
        p = b + L_SEG - 1
        if p + 1 < len(row):  # the rule's guess there (after the first copy) vs the truth
            rule_tried += 1
            rule_right += row[a + L_SEG] == row[p + 1]
    assert rule_tried > 100 and rule_right / rule_tried < 0.2  # filler: about 1 in 24
    assert alone > 0.8 * len(x)


def test_the_distance_between_the_copies_is_random():
    x, y = _induction_rows(4000, seed=2)
    second = (y != IGNORE_INDEX).float().argmax(1)  # (N,): where the second copy starts
    first = (x == x.gather(1, second[:, None])).float().argmax(1)  # (N,): its first id's first
    distances = (second - first).tolist()
    assert set(distances) == set(range(L_SEG, 32 - L_SEG + 1))  # 8..24: no fixed offset
    placements = set(zip(first.tolist(), second.tolist()))
    assert placements == set(map(tuple, induction_placements(32).tolist()))  # all 153


def test_induction_defaults_to_its_own_setting_and_refuses_what_does_not_fit():
    x, _ = make_batch("induction", 4)
    assert x.shape == (4, 32) and x.max() < 32  # T = 32, 32 ids (TASK_SETTINGS)
    assert make_batch("previous", 4)[0].shape == (4, 12)  # the others keep T = 12
    with raises(ValueError, "context_length >= 17", "context_length=16", "try 32"):
        make_batch("induction", 4, 16)
    with raises(ValueError, "vocab_size >= 9", "vocab_size=8", "vocab_size=32"):
        make_batch("induction", 4, 32, 8)
    assert "induction" in tasks.ALL_TASKS and "induction" not in TASKS  # one-layer tasks only
    assert tasks.token_labels("induction", [0, 31]) == ["0", "31"]
    with raises(ValueError, "task='reverse'", "'induction'"):
        make_batch("reverse")


def test_train_tiny_lm_builds_the_induction_setting_with_two_layers():
    model, history = train_tiny_lm("induction", epochs=1, n_rows=128, progress=False)
    setting = tasks.TASK_SETTINGS["induction"]
    assert model.config.n_layers == 2 and model.config.uses_residual
    assert (
        (model.vocab_size, model.context_length)
        == (32, 32)
        == tuple(setting[k] for k in ("vocab_size", "context_length"))
    )
    assert model.config.d_model == 64 and model.config.n_heads == 4
    assert len(history.step_losses) == len(history.step_accuracies) == 2  # 128 rows, batch 64
    assert all(0 <= a <= 1 for a in history.step_accuracies)  # on the scored positions
    one, _ = train_tiny_lm("induction", n_layers=1, residual=True, n_rows=64, progress=False)
    assert one.config.n_layers == 1 and one.config.uses_residual and hasattr(one, "attn")


def test_the_history_keeps_the_accuracy_of_every_training_batch():
    # "previous" is learned within its 192 steps: the batches' accuracy rises from chance
    _, history = train_tiny_lm("previous", progress=False)
    accuracies = history.step_accuracies
    assert len(accuracies) == len(history.step_losses) == 192
    assert accuracies[0] < 0.1 < 0.95 < accuracies[-1]
    assert history.final_accuracy > 0.95  # the held-out rows agree
