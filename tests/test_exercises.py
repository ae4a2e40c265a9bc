"""The exercise checkers accept the reference solutions and reject typical mistakes with a
specific message; the learner notebook is generated from the solutions and kept in date."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import nbformat
import pytest
import torch

from attention_lab import MultiHeadAttention, SingleHeadAttention
from attention_lab import exercises as ex

ROOT = Path(__file__).resolve().parents[1]


def _load_tool():
    sys.path.insert(0, str(ROOT / "tools"))
    spec = importlib.util.spec_from_file_location(
        "make_exercises", ROOT / "tools/make_exercises.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_exercises = _load_tool()


def _future(T):
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # (T, T)


def _stub(*args, **kwargs):
    raise NotImplementedError


# --- reference solutions and typical mistakes, one pair (or more) per checker ----------------


def mask_then_softmax(scores):
    T = scores.shape[-1]
    return torch.softmax(scores.masked_fill(_future(T), float("-inf")), dim=-1)


def mask_inverted(scores):
    T = scores.shape[-1]
    past = torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)  # blocks the past
    return torch.softmax(scores.masked_fill(past, float("-inf")), dim=-1)


def mask_with_zero(scores):
    return torch.softmax(scores.masked_fill(_future(scores.shape[-1]), 0.0), dim=-1)


def mask_diagonal_blocked(scores):
    T = scores.shape[-1]
    blocked = torch.triu(torch.ones(T, T, dtype=torch.bool))  # the diagonal too
    return torch.softmax(scores.masked_fill(blocked, float("-inf")), dim=-1)


def tril_then_softmax(scores):
    return torch.softmax(torch.tril(scores), dim=-1)


def softmax_then_renormalise(scores):
    w = torch.softmax(scores, dim=-1).masked_fill(_future(scores.shape[-1]), 0.0)
    return w / w.sum(dim=-1, keepdim=True)


def softmax_then_zero_only(scores):
    return torch.softmax(scores, dim=-1).masked_fill(_future(scores.shape[-1]), 0.0)


def mha_from_causal(ca):
    mha = MultiHeadAttention(ca.d_out, 1, ca.context_length)
    with torch.no_grad():
        for mine, theirs in ((mha.W_q, ca.W_q), (mha.W_k, ca.W_k), (mha.W_v, ca.W_v)):
            mine.weight.copy_(theirs.weight)
        mha.W_o.weight.copy_(torch.eye(ca.d_out))
        mha.W_o.bias.zero_()
    return mha


def mha_without_identity_out(ca):
    mha = mha_from_causal(ca)
    torch.nn.init.normal_(mha.W_o.weight)
    return mha


def mha_two_heads(ca):
    return MultiHeadAttention(ca.d_out, 2, ca.context_length)


def sliding_mask(T, window):
    ones = torch.ones(T, T, dtype=torch.bool)
    return torch.triu(ones, diagonal=1) | torch.tril(ones, diagonal=-window)


def sliding_off_by_one(T, window):
    ones = torch.ones(T, T, dtype=torch.bool)
    return torch.triu(ones, diagonal=1) | torch.tril(ones, diagonal=-window - 1)


def sliding_inverted(T, window):
    return ~sliding_mask(T, window)


def sliding_float(T, window):
    return sliding_mask(T, window).float()


def sliding_future_open(T, window):
    return torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-window)


def previous_token_share(weights):
    return weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(0, 2))


def previous_share_wrong_offset(weights):
    return weights.diagonal(offset=1, dim1=-2, dim2=-1).mean(dim=(0, 2))


def previous_share_all_heads(weights):
    return weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean()


def predicted_score_variance(d_head, scaled):
    return 1.0 if scaled else float(d_head)


def predicted_std_not_variance(d_head, scaled):
    return 1.0 if scaled else math.sqrt(d_head)


def einsum_attention(q, k, v, mask=None):
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("bhqk,bhkd->bhqd", weights, v), weights


def einsum_unscaled(q, k, v, mask=None):
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k)
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("bhqk,bhkd->bhqd", weights, v), weights


def einsum_transposed_scores(q, k, v, mask=None):
    scores = torch.einsum("bhkd,bhqd->bhqk", k, q) / math.sqrt(q.shape[-1])
    scores = scores.transpose(-2, -1)  # keys on the rows
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("bhqk,bhkd->bhqd", weights, v), weights


def einsum_inverted_mask(q, k, v, mask=None):
    return einsum_attention(q, k, v, None if mask is None else ~mask)


def split_heads(x, n_heads):
    B, T, D = x.shape
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)


def split_heads_no_transpose(x, n_heads):
    B, T, D = x.shape
    return x.view(B, n_heads, T, D // n_heads)


def split_heads_strided(x, n_heads):
    B, T, D = x.shape
    return x.view(B, T, D // n_heads, n_heads).permute(0, 3, 1, 2)


def fuse_qkv(w_q, w_k, w_v):
    return torch.cat([w_q, w_k, w_v], dim=0)


def fuse_qkv_columns(w_q, w_k, w_v):
    return torch.cat([w_q, w_k, w_v], dim=1)


def fuse_qkv_wrong_order(w_q, w_k, w_v):
    return torch.cat([w_k, w_q, w_v], dim=0)


def param_count(d_model, n_heads, bias=True):
    return 4 * d_model * d_model + (4 * d_model if bias else 0)


def param_count_no_bias(d_model, n_heads, bias=True):
    return 4 * d_model * d_model


def param_count_no_out_proj(d_model, n_heads, bias=True):
    return 3 * d_model * d_model + (3 * d_model if bias else 0)


def padded_causal_mask(lengths, T):
    j = torch.arange(T)
    future = j[None, :] > j[:, None]  # (T, T)
    padding = j[None, :] < (T - lengths)[:, None]  # (B, T)
    blocked = (future | padding[:, None, :]) & ~torch.eye(T, dtype=torch.bool)  # (B, T, T)
    return blocked[:, None]  # (B, 1, T, T)


def padded_mask_and(lengths, T):
    j = torch.arange(T)
    future = j[None, :] > j[:, None]
    padding = j[None, :] < (T - lengths)[:, None]
    return (future & padding[:, None, :])[:, None]


def padded_mask_all_blocked_rows(lengths, T):
    j = torch.arange(T)
    future = j[None, :] > j[:, None]
    padding = j[None, :] < (T - lengths)[:, None]
    return (future | padding[:, None, :])[:, None]


def padded_mask_no_head_axis(lengths, T):
    return padded_causal_mask(lengths, T)[:, 0]


def single_head_forward(x, W_q, W_k, W_v):
    q, k, v = W_q(x), W_k(x), W_v(x)  # (B, T, d_out) each
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ v, weights  # (B, T, d_out), (B, T, T)


def single_head_unscaled(x, W_q, W_k, W_v):
    q, k, v = W_q(x), W_k(x), W_v(x)
    weights = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
    return weights @ v, weights


def single_head_softmax_over_queries(x, W_q, W_k, W_v):
    q, k, v = W_q(x), W_k(x), W_v(x)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-2)
    return weights @ v, weights


def single_head_untransposed_weights(x, W_q, W_k, W_v):
    q, k, v = x @ W_q.weight, x @ W_k.weight, x @ W_v.weight
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ v, weights


def dropout_rescale(weights, keep, p):
    return weights * keep / (1 - p)


def dropout_no_rescale(weights, keep, p):
    return weights * keep


def dropout_divide_by_p(weights, keep, p):
    return weights * keep / p if p > 0 else weights


def dropout_renormalise_rows(weights, keep, p):
    kept = weights * keep
    return kept / kept.sum(dim=-1, keepdim=True)


def dropout_keeps_the_dropped(weights, keep, p):
    return weights * ~keep / (1 - p)


def repeat_batch(first, T):
    m = first.shape[1]
    sep = torch.zeros(len(first), 1, dtype=torch.long)  # (N, 1), SEP = 0
    row = torch.cat([first, sep, first], dim=1)[:, : T + 1]  # (N, T + 1)
    inputs, targets = row[:, :-1].clone(), row[:, 1:].clone()  # (N, T) each
    targets[:, :m] = -100  # IGNORE_INDEX
    return inputs, targets


def repeat_scores_first_half(first, T):
    sep = torch.zeros(len(first), 1, dtype=torch.long)
    row = torch.cat([first, sep, first], dim=1)[:, : T + 1]
    return row[:, :-1], row[:, 1:]


def repeat_no_separator(first, T):
    m = first.shape[1]
    row = torch.cat([first, first, first], dim=1)[:, : T + 1]  # (N, T + 1), no SEP
    inputs, targets = row[:, :-1].clone(), row[:, 1:].clone()
    targets[:, :m] = -100
    return inputs, targets


def repeat_targets_not_shifted(first, T):
    inputs, _ = repeat_batch(first, T)
    targets = inputs.clone()
    targets[:, : first.shape[1]] = -100
    return inputs, targets


def repeat_ignored_with_zero(first, T):
    inputs, targets = repeat_batch(first, T)
    return inputs, targets.masked_fill(targets == -100, 0)


CASES = [
    # checker, reference solution, [(typical mistake, words the verdict must contain)]
    (
        ex.check_mask_then_softmax,
        mask_then_softmax,
        [
            (mask_inverted, "blocks the past and lets the future through"),
            (mask_with_zero, "not to -inf"),
            (mask_diagonal_blocked, "NaN"),
            (softmax_then_zero_only, "sum to"),
        ],
    ),
    (
        ex.check_tril_then_softmax,
        tril_then_softmax,
        [(mask_then_softmax, "correct mask-then-softmax")],
    ),
    (
        ex.check_softmax_then_renormalise,
        softmax_then_renormalise,
        [(softmax_then_zero_only, "no longer sum to 1"), (tril_then_softmax, "not to -inf")],
    ),
    (
        ex.check_mha_from_causal,
        mha_from_causal,
        [(mha_without_identity_out, "W_o"), (mha_two_heads, "n_heads=2")],
    ),
    (
        ex.check_sliding_mask,
        sliding_mask,
        [
            (sliding_inverted, "exact opposite"),
            (sliding_off_by_one, "positions; it should see"),
            (sliding_float, "dtype"),
            (sliding_future_open, "future positions are not blocked"),
        ],
    ),
    (
        ex.check_previous_token_share,
        previous_token_share,
        [
            (previous_share_wrong_offset, "offset=1"),
            (previous_share_all_heads, "one per head"),
        ],
    ),
    (
        ex.check_score_variance,
        predicted_score_variance,
        [(predicted_std_not_variance, "standard deviation")],
    ),
    (
        ex.check_einsum_attention,
        einsum_attention,
        [
            (einsum_unscaled, "not scaled"),
            (einsum_transposed_scores, "transposed"),
            (einsum_inverted_mask, "blocks the past and lets the future through"),
        ],
    ),
    (
        ex.check_split_heads,
        split_heads,
        [
            (split_heads_no_transpose, "heads are transposed wrongly"),
            (split_heads_strided, "every H-th feature"),
        ],
    ),
    (
        ex.check_fuse_qkv,
        fuse_qkv,
        [(fuse_qkv_columns, "dim=0"), (fuse_qkv_wrong_order, "order K, Q, V")],
    ),
    (
        ex.check_param_count,
        param_count,
        [(param_count_no_bias, "biases"), (param_count_no_out_proj, "out_proj")],
    ),
    (
        ex.check_padded_causal_mask,
        padded_causal_mask,
        [
            (padded_mask_and, "not &"),
            (padded_mask_all_blocked_rows, "NaN"),
            (padded_mask_no_head_axis, "mask[:, None]"),
        ],
    ),
    (
        ex.check_single_head_forward,
        single_head_forward,
        [
            (single_head_unscaled, "not scaled"),
            (single_head_softmax_over_queries, "each column"),
            (single_head_untransposed_weights, "not by their transposes"),
        ],
    ),
    (
        ex.check_dropout_rescale,
        dropout_rescale,
        [
            (dropout_no_rescale, "keep their old values"),
            (dropout_divide_by_p, "divided by p"),
            (dropout_renormalise_rows, "renormalised"),
            (dropout_keeps_the_dropped, "kept the weights that should be dropped"),
        ],
    ),
    (
        ex.check_repeat_batch,
        repeat_batch,
        [
            (repeat_scores_first_half, "no model can predict it"),
            (repeat_no_separator, "separator is missing"),
            (repeat_targets_not_shifted, "its own position"),
            (repeat_ignored_with_zero, "not IGNORE_INDEX"),
        ],
    ),
]
IDS = [checker.__name__ for checker, _, _ in CASES]


def test_every_checker_is_covered_by_these_tests():
    checkers = {name for name in ex.__all__ if name.startswith("check_")}
    assert checkers == set(IDS)


@pytest.mark.parametrize("checker, solution, mistakes", CASES, ids=IDS)
def test_checker_accepts_the_reference_solution(checker, solution, mistakes, capsys):
    verdict = checker(solution)
    out = capsys.readouterr().out
    assert verdict, out
    assert out.startswith("✅ passed: ")


@pytest.mark.parametrize("checker, solution, mistakes", CASES, ids=IDS)
def test_checker_names_each_typical_mistake(checker, solution, mistakes, capsys):
    for mistake, words in mistakes:
        verdict = checker(mistake)
        out = capsys.readouterr().out
        assert not verdict, f"{mistake.__name__} passed"
        assert out.startswith("❌ not yet: "), out
        assert words in out, f"{mistake.__name__}: {out}"
        assert "\n   hint: " in out


@pytest.mark.parametrize("checker, solution, mistakes", CASES, ids=IDS)
def test_an_unsolved_stub_is_not_attempted_yet(checker, solution, mistakes, capsys):
    verdict = checker(_stub)
    out = capsys.readouterr().out
    assert verdict.status == "not attempted yet"
    assert out.startswith("⏳ not attempted yet: ")


@pytest.mark.parametrize("checker, solution, mistakes", CASES, ids=IDS)
def test_checker_never_raises_whatever_the_answer(checker, solution, mistakes, capsys):
    def crashes(*args, **kwargs):
        raise RuntimeError("shape '[2, 3]' is invalid")

    answers = [crashes, lambda *a, **k: None, lambda *a, **k: "text", lambda *a, **k: (1, 2)]
    for answer in answers + [42]:
        verdict = checker(answer)
        out = capsys.readouterr().out
        assert not verdict
        assert out.startswith("❌ not yet: ")
        assert "Traceback" not in out
    checker(crashes)
    assert "raised RuntimeError: shape '[2, 3]' is invalid" in capsys.readouterr().out


def test_checkers_leave_the_global_random_state_alone(capsys):
    torch.manual_seed(0)
    before = torch.get_rng_state()
    ex.check_mha_from_causal(mha_from_causal)
    ex.check_einsum_attention(einsum_attention)
    assert torch.equal(torch.get_rng_state(), before)


def test_every_lesson_from_02_to_08_has_a_checked_exercise():
    assert ex.LESSONS == ("02", "03", "04", "05", "06", "07", "08")
    for lesson in ex.LESSONS:
        assert ex.EXERCISES.get(lesson), f"lesson {lesson} has no checker"
    placed = {(c.lesson, c.exercise) for c, _, _ in CASES}
    assert placed == {(les, name) for les, names in ex.EXERCISES.items() for name in names}


def test_each_checker_lives_in_the_module_of_its_lesson():
    for checker, _, _ in CASES:
        assert checker.__module__ == f"attention_lab.exercises.lesson{checker.lesson}"


def test_summary_shows_passed_wrong_and_not_attempted_for_one_lesson(capsys):
    ex.reset()
    ex.check_mask_then_softmax(mask_then_softmax)
    ex.check_sliding_mask(sliding_inverted)
    ex.check_padded_causal_mask(_stub)
    capsys.readouterr()
    table = ex.summary("04")
    out = capsys.readouterr().out
    assert out == f"{table}\n"
    assert out.startswith("lesson 04: 1 of 5 exercises pass\n")
    lines = out.splitlines()[1:]
    assert [line.split()[1] for line in lines] == ex.EXERCISES["04"]
    marks = {line.split()[1]: line.split()[0] for line in lines}
    assert marks["mask_then_softmax"] == "✅"
    assert marks["sliding_mask"] == "❌"
    assert marks["padded_causal_mask"] == "⏳"  # stub: not attempted yet
    assert marks["tril_then_softmax"] == "⏳"  # never checked
    assert table.passed == 1 and not table
    assert table._ipython_display_() is None


def test_summary_keeps_the_latest_verdict_and_reset_forgets_it(capsys):
    ex.reset()
    ex.check_score_variance(predicted_std_not_variance)
    ex.check_score_variance(predicted_score_variance)
    assert ex.RESULTS[("03", "score_variance")]
    assert ("03", "score_variance", "passed") in ex.summary(3, show=False).rows
    ex.reset("03")
    assert ("03", "score_variance") not in ex.RESULTS
    assert "lesson 03" not in capsys.readouterr().out  # show=False prints nothing


def test_a_demonstration_with_record_false_leaves_the_learners_verdict_alone(capsys):
    ex.reset()
    ex.check_score_variance(predicted_score_variance)
    verdict = ex.check_score_variance(predicted_std_not_variance, record=False)
    assert not verdict  # still graded and printed ...
    assert "not yet" in capsys.readouterr().out
    assert ex.RESULTS[("03", "score_variance")]  # ... but the recorded verdict is the pass


def test_summary_of_every_lesson_and_of_an_unknown_lesson_never_raises(capsys):
    ex.reset()
    everything = ex.summary(show=False)
    assert {lesson for lesson, _, _ in everything.rows} == set(ex.LESSONS)
    assert everything.passed == 0
    for bad in ("09", "x", None, 4.5, [4]):
        if bad is None:
            continue
        result = ex.summary(bad)
        assert result.rows == [] and "no lesson" in str(result)
        assert "no lesson" in capsys.readouterr().out
    ex.summary("lesson05")
    assert capsys.readouterr().out.startswith("lesson 05: 0 of 1 exercises pass")


def test_repeat_checker_reference_matches_make_batch():
    from attention_lab.exercises.lesson08 import _reference_repeat_batch
    from attention_lab.tasks import make_batch, repeat_offset

    for T in (2, 7, 12):
        x, y = make_batch("repeat", 5, T, 16, generator=torch.Generator().manual_seed(T))
        want_x, want_y = _reference_repeat_batch(x[:, : repeat_offset(T)], T)
        assert torch.equal(x, want_x) and torch.equal(y, want_y)


def test_single_head_checker_agrees_with_the_library_head(capsys):
    head = SingleHeadAttention(6, 4)
    x = torch.randn(2, 5, 6)  # (B, T, d_in)
    out, weights = single_head_forward(x, head.W_q, head.W_k, head.W_v)
    want_out, want_w = head(x, return_weights=True)
    torch.testing.assert_close(out, want_out)
    torch.testing.assert_close(weights, want_w)


def test_dropout_checker_agrees_with_nn_dropout():
    torch.manual_seed(0)
    drop = torch.nn.Dropout(0.25).train()
    w = torch.softmax(torch.randn(4, 6, 6), dim=-1)  # (B, T, T)
    dropped = drop(w)
    torch.testing.assert_close(dropout_rescale(w, dropped != 0, 0.25), dropped)


def test_a_verdict_shows_nothing_extra_when_it_ends_a_cell():
    verdict = ex.Verdict("passed", "fine")
    assert verdict._ipython_display_() is None
    assert str(verdict) == "✅ passed: fine"


# --- the learner notebook ---------------------------------------------------------------


def test_stub_replaces_each_block_and_keeps_its_indentation():
    source = (
        "def f(x):\n"
        '    """Doc."""\n'
        "    ### BEGIN SOLUTION\n"
        "    y = x + 1\n"
        "    return y\n"
        "    ### END SOLUTION\n"
        "\n"
        "\n"
        "def g():\n"
        "    if True:\n"
        "        ### BEGIN SOLUTION\n"
        "        return 2\n"
        "        ### END SOLUTION"
    )
    assert make_exercises.stub_code(source) == (
        'def f(x):\n    """Doc."""\n    raise NotImplementedError\n\n\n'
        "def g():\n    if True:\n        raise NotImplementedError"
    )


@pytest.mark.parametrize(
    "source",
    [
        "### BEGIN SOLUTION\nx = 1\n### END SOLUTION",  # at top level: the notebook would stop
        "def f():\n    ### BEGIN SOLUTION\n    return 1",  # never closed
        "def f():\n    return 1\n    ### END SOLUTION",  # never opened
    ],
)
def test_a_malformed_solution_block_is_refused(source):
    with pytest.raises(make_exercises.MarkerError):
        make_exercises.stub_code(source)


def test_markdown_solution_text_and_solution_cells_are_left_out():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell(
            "# Title<!-- BEGIN SOLUTION --> (solutions)<!-- END SOLUTION -->\n\nText.\n"
            "<!-- BEGIN SOLUTION -->\n> solutions only\n<!-- END SOLUTION -->\n\nGoals"
        ),
        nbformat.v4.new_code_cell("print(1)", metadata={"tags": ["solution"]}),
        nbformat.v4.new_code_cell(
            "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION"
        ),
    ]
    learner = make_exercises.learner_notebook(nb)
    assert [c.source for c in learner.cells] == [
        "# Title\n\nText.\n\nGoals",
        "def f():\n    raise NotImplementedError",
    ]
    assert len(nb.cells) == 3  # the solutions notebook itself is untouched


def test_learner_notebook_is_up_to_date_with_the_solutions():
    problems = make_exercises.stale_cells()
    assert not problems, "run `make exercises`: " + "; ".join(problems)


def test_an_edit_to_the_solutions_makes_the_learner_notebook_out_of_date(tmp_path):
    solutions = nbformat.read(make_exercises.SOLUTIONS, as_version=4)
    cell = next(c for c in solutions.cells if "def sliding_mask" in c.source)
    cell.source = cell.source.replace("def sliding_mask(T, window):", "def sliding_mask(T, w):")
    edited = tmp_path / "exercises_solutions.ipynb"
    nbformat.write(solutions, edited)
    problems = make_exercises.stale_cells(edited, make_exercises.LEARNER)
    assert len(problems) == 1 and "differs" in problems[0]


def test_learner_notebook_has_no_solution_left_and_a_stub_per_block():
    solutions = nbformat.read(make_exercises.SOLUTIONS, as_version=4)
    learner = nbformat.read(make_exercises.LEARNER, as_version=4)
    blocks = sum(c.source.count("### BEGIN SOLUTION") for c in solutions.cells)
    code = [c for c in learner.cells if c.cell_type == "code"]
    stubs = sum(c.source.count("raise NotImplementedError") for c in code)
    assert blocks >= 12 and stubs == blocks
    text = "\n".join(c.source for c in learner.cells)
    assert "SOLUTION" not in text


def _exercise_and_check_cells(path):
    """(exercise cell, the cell after it) for every cell holding a solution block or a stub."""
    cells = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    return [
        (cell, cells[i + 1])
        for i, cell in enumerate(cells)
        if "raise NotImplementedError" in cell.source or "### BEGIN SOLUTION" in cell.source
    ]


def test_each_exercise_is_followed_by_a_check_cell_in_both_notebooks():
    for path in (make_exercises.SOLUTIONS, make_exercises.LEARNER):
        for exercise, check in _exercise_and_check_cells(path):
            assert check.source.startswith("check_"), (path.name, exercise.source[:60])


def _printed(path):
    return [
        "".join(o.get("text", "") for o in c.outputs) for _, c in _exercise_and_check_cells(path)
    ]


def test_solutions_notebook_shows_every_check_passed():
    printed = _printed(make_exercises.SOLUTIONS)
    assert len(printed) >= 12
    assert all(text.startswith("✅ passed: ") for text in printed), printed


def test_learner_notebook_shows_not_attempted_yet_for_each_check():
    printed = _printed(make_exercises.LEARNER)
    assert len(printed) == len(_printed(make_exercises.SOLUTIONS))
    assert all(text.startswith("⏳ not attempted yet: ") for text in printed), printed


# --- the exercises block at the end of each lesson ------------------------------------


def test_every_lesson_02_to_08_has_a_block_of_checked_exercises():
    blocks = make_exercises.lesson_blocks(nbformat.read(make_exercises.SOLUTIONS, as_version=4))
    assert sorted(blocks) == ["02", "03", "04", "05", "06", "07", "08"]
    for lesson, block in blocks.items():
        sources = [c.source for c in block]
        assert sources[0] == make_exercises.BLOCK_INTRO
        assert sum("raise NotImplementedError" in s for s in sources) >= 1, lesson
        assert sum(s.startswith("check_") for s in sources) >= 1, lesson
        assert sources[-1] == f'summary("{lesson}")', lesson
        assert all("SOLUTION" not in s for s in sources), lesson


def test_lesson_notebooks_carry_the_current_exercises_block_before_their_last_cell():
    problems = make_exercises.stale_lessons()
    assert not problems, "run `make exercises`: " + "; ".join(problems)


def test_the_block_replaces_itself_and_keeps_the_closing_cell_last(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Lesson"), nbformat.v4.new_markdown_cell("Next")]
    block = [
        nbformat.v4.new_markdown_cell("## Exercises", metadata={"tags": ["lesson-exercises"]}),
        nbformat.v4.new_code_cell('summary("04")', metadata={"tags": ["lesson-exercises"]}),
    ]
    once = make_exercises.with_block(nb, block)
    twice = make_exercises.with_block(once, block)
    assert [c.source for c in once.cells] == ["# Lesson", "## Exercises", 'summary("04")', "Next"]
    assert [c.source for c in twice.cells] == [c.source for c in once.cells]
    smaller = make_exercises.with_block(twice, block[:1])
    assert [c.source for c in smaller.cells] == ["# Lesson", "## Exercises", "Next"]


def test_an_edit_to_a_lessons_exercise_makes_its_notebook_out_of_date(tmp_path):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    for path in (make_exercises.SOLUTIONS.parent).glob("0[2-8]_*.ipynb"):
        (notebooks / path.name).write_bytes(path.read_bytes())
    solutions = nbformat.read(make_exercises.SOLUTIONS, as_version=4)
    cell = next(c for c in solutions.cells if "def dropout_rescale" in c.source)
    cell.source = cell.source.replace("def dropout_rescale(", "def dropout_rescaled(")
    edited = notebooks / "exercises_solutions.ipynb"
    nbformat.write(solutions, edited)
    problems = make_exercises.stale_lessons(edited, notebooks)
    assert any(p.startswith("05_causal_head.ipynb") for p in problems), problems
