"""The exercise checkers accept the reference solutions and reject typical mistakes with a
specific message; the learner notebook is generated from the solutions and kept in date."""

from __future__ import annotations

import importlib
import math

import nbformat
import pytest
import torch

from attention_lab import (
    CausalAttention,
    MultiHeadAttention,
    MultiHeadSelfAttention,
    SingleHeadAttention,
)
from attention_lab import exercises as ex
from tools import make_exercises  # tools/make_exercises.py (pytest's pythonpath)


def _future(T):
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # (T, T)


def _stub(*args, **kwargs):
    raise NotImplementedError


# --- reference solutions and typical mistakes, one pair (or more) per checker ----------------


# lesson 01


def stable_softmax(scores):
    e = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)
    return e / e.sum(dim=-1, keepdim=True)


def softmax_overflows(scores):
    e = torch.exp(scores)
    return e / e.sum(dim=-1, keepdim=True)


def softmax_one_max(scores):
    e = torch.exp(scores - scores.max())
    return e / e.sum(dim=-1, keepdim=True)


def softmax_over_columns(scores):
    e = torch.exp(scores - scores.max(dim=0, keepdim=True).values)
    return e / e.sum(dim=0, keepdim=True)


def softmax_library(scores):
    return torch.softmax(scores, dim=-1)


def softmax_method(scores):
    return scores.softmax(dim=-1)


def decay_weights(T, r):
    i = torch.arange(T)
    distance = (i[:, None] - i[None, :]).float()  # (T, T)
    w = (r**distance).masked_fill(distance < 0, 0.0)
    return w / w.sum(dim=-1, keepdim=True)


def decay_reversed(T, r):
    i = torch.arange(T)
    distance = (i[None, :] - i[:, None]).float()  # j - i: the oldest key counts most
    w = (r**distance).masked_fill(distance > 0, 0.0)
    return w / w.sum(dim=-1, keepdim=True)


def decay_unnormalised(T, r):
    i = torch.arange(T)
    distance = (i[:, None] - i[None, :]).float()
    return (r**distance).masked_fill(distance < 0, 0.0)


def decay_future_open(T, r):
    i = torch.arange(T)
    distance = (i[:, None] - i[None, :]).abs().float()
    w = r**distance
    return w / w.sum(dim=-1, keepdim=True)


# lesson 03


def score_variances(q, k):
    score = (q * k).sum(dim=-1)  # (N,)
    return score.var().item(), (score / math.sqrt(q.shape[-1])).var().item()


def score_std_not_var(q, k):
    score = (q * k).sum(dim=-1)
    return score.std().item(), (score / math.sqrt(q.shape[-1])).std().item()


def score_all_pairs(q, k):
    score = q @ k.T  # (N, N): every query against every key
    return score.var().item(), (score / math.sqrt(q.shape[-1])).var().item()


def score_divided_by_d(q, k):
    score = (q * k).sum(dim=-1)
    return score.var().item(), (score / q.shape[-1]).var().item()


def score_per_feature(q, k):
    return (q * k).var(dim=0), (q * k).var(dim=0)


def projected_variance(d_head, var_q, var_k, scaled):
    return var_q * var_k * (1 if scaled else d_head)


def projected_added(d_head, var_q, var_k, scaled):
    return (var_q + var_k) * (1 if scaled else d_head)


def projected_unit(d_head, var_q, var_k, scaled):
    return 1.0 if scaled else float(d_head)


# lesson 04


def looks_ahead(attend, x):
    out = attend(x)
    for j in range(x.shape[1]):
        changed = x.clone()
        changed[:, j] = torch.randn_like(changed[:, j])
        if not torch.allclose(attend(changed)[:, :j], out[:, :j]):
            return True
    return False


def looks_ahead_last_token_only(attend, x):
    changed = x.clone()
    changed[:, -1] += 1.0
    return not torch.allclose(attend(changed)[:, :-1], attend(x)[:, :-1])


def looks_ahead_only_the_previous_output(attend, x):
    out = attend(x)
    for j in range(1, x.shape[1]):
        changed = x.clone()
        changed[:, j] += 1.0
        if not torch.allclose(attend(changed)[:, j - 1], out[:, j - 1]):
            return True
    return False


def looks_ahead_includes_j(attend, x):
    out = attend(x)
    for j in range(x.shape[1]):
        changed = x.clone()
        changed[:, j] += 1.0
        if not torch.allclose(attend(changed)[:, : j + 1], out[:, : j + 1]):
            return True
    return False


def looks_ahead_returns_tensor_list(attend, x):
    return [True]


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


# lesson 06


def head_as_causal(mha, h):
    d_head = mha.d_head
    head = CausalAttention(mha.d_model, d_head, mha.context_length)
    rows = slice(h * d_head, (h + 1) * d_head)
    with torch.no_grad():
        for name in ("W_q", "W_k", "W_v"):
            getattr(head, name).weight.copy_(getattr(mha, name).weight[rows])
    return head


def head_as_causal_next_head(mha, h):
    return head_as_causal(mha, (h + 1) % mha.n_heads)


def head_as_causal_values_forgotten(mha, h):
    head = head_as_causal(mha, h)
    with torch.no_grad():
        head.W_v.weight.normal_()
    return head


def head_as_causal_full_width(mha, h):
    return CausalAttention(mha.d_model, mha.d_model, mha.context_length)


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


# lesson 07


def head_rows_from_fused(qkv_weight, n_heads, h):
    D = qkv_weight.shape[1]
    d_head = D // n_heads
    return tuple(
        qkv_weight[part * D + h * d_head : part * D + (h + 1) * d_head] for part in range(3)
    )


def head_rows_without_block_offset(qkv_weight, n_heads, h):
    D = qkv_weight.shape[1]
    d_head = D // n_heads
    return tuple(qkv_weight[h * d_head : (h + 1) * d_head] for _ in range(3))


def head_rows_as_columns(qkv_weight, n_heads, h):
    return tuple(w.T for w in head_rows_from_fused(qkv_weight, n_heads, h))


def head_rows_k_v_swapped(qkv_weight, n_heads, h):
    w_q, w_k, w_v = head_rows_from_fused(qkv_weight, n_heads, h)
    return w_q, w_v, w_k


def outnumber(d_model, n_heads):
    params = 4 * d_model**2 + 4 * d_model
    T = 1
    while n_heads * T * T <= params:
        T += 1
    return T


def outnumber_without_heads(d_model, n_heads):
    return outnumber(d_model, 1)


def outnumber_at_equality(d_model, n_heads):
    return outnumber(d_model, n_heads) - 1


def outnumber_without_biases(d_model, n_heads):
    T = 1
    while n_heads * T * T <= 4 * d_model**2:
        T += 1
    return T


# lesson 08


def lookback_distance(weights):
    i = torch.arange(weights.shape[-1])
    distance = (i[:, None] - i[None, :]).float()  # (T, T)
    return (weights * distance).sum(dim=-1)  # (B, H, T)


def lookback_negative(weights):
    return -lookback_distance(weights)


def lookback_top_key_only(weights):
    i = torch.arange(weights.shape[-1])
    return (i - weights.argmax(dim=-1)).float()


def lookback_per_head(weights):
    return lookback_distance(weights).mean(dim=(0, 2))


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


def cross_attention(x_q, x_kv, W_q, W_k, W_v):
    q, k, v = W_q(x_q), W_k(x_kv), W_v(x_kv)  # (B, T_q, d_head), (B, T_kv, d_head) x 2
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ v, weights  # (B, T_q, d_head), (B, T_q, T_kv)


def cross_unscaled(x_q, x_kv, W_q, W_k, W_v):
    q, k, v = W_q(x_q), W_k(x_kv), W_v(x_kv)
    weights = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
    return weights @ v, weights


def cross_softmax_over_queries(x_q, x_kv, W_q, W_k, W_v):
    q, k, v = W_q(x_q), W_k(x_kv), W_v(x_kv)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-2)
    return weights @ v, weights


def cross_keys_on_rows(x_q, x_kv, W_q, W_k, W_v):
    out, weights = cross_attention(x_q, x_kv, W_q, W_k, W_v)
    return out, weights.transpose(-2, -1)


def cross_self_attention_only(x_q, x_kv, W_q, W_k, W_v):
    return cross_attention(x_q, x_q, W_q, W_k, W_v)


def cross_values_from_queries(x_q, x_kv, W_q, W_k, W_v):
    _, weights = cross_attention(x_q, x_kv, W_q, W_k, W_v)
    return weights @ W_v(x_q), weights


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


# lesson 09


def offset_share(weights, k):
    on_key = torch.diagonal(weights, offset=-k, dim1=-2, dim2=-1)  # (B, H, T - k)
    return on_key.mean(dim=(0, -1))


def offset_share_future(weights, k):
    return torch.diagonal(weights, offset=k, dim1=-2, dim2=-1).mean(dim=(0, -1))


def offset_share_one_too_far(weights, k):
    return offset_share(weights, k + 1)


def offset_share_all_queries(weights, k):
    on_key = torch.diagonal(weights, offset=-k, dim1=-2, dim2=-1)
    return on_key.sum(dim=(0, -1)) / (weights.shape[0] * weights.shape[-1])


def offset_share_heads_averaged(weights, k):
    return offset_share(weights, k).mean()


def offset_share_per_row(weights, k):
    return torch.diagonal(weights, offset=-k, dim1=-2, dim2=-1).mean(dim=-1)


def offset_share_summed(weights, k):
    return torch.diagonal(weights, offset=-k, dim1=-2, dim2=-1).sum(dim=(0, -1))


def offset_weights(T, k):
    i = torch.arange(T)
    weights = torch.zeros(T, T)
    weights[i, (i - k).clamp(min=0)] = 1.0
    return weights


def offset_weights_future(T, k):
    return offset_weights(T, k).T.contiguous()


def offset_weights_empty_first_rows(T, k):
    return torch.diag(torch.ones(T - k), -k)


def offset_weights_one_short(T, k):
    return offset_weights(T, max(k - 1, 0)) if k > 0 else offset_weights(T, 1)


def offset_weights_bool(T, k):
    return offset_weights(T, k).bool()


# lesson 10


def _prefix_matches(ids, shift=1, *, diagonal=0, causal=True, rolled=False):
    """(B, T, T), [b, i, j]: ids[b, j - shift] == ids[b, i], written as a learner would."""
    T = ids.shape[1]
    if rolled:
        match = ids.roll(shift, dims=1)[:, None, :] == ids[:, :, None]
    elif shift == 1:
        same = ids[:, :, None] == ids[:, None, :-1]  # (B, T, T - 1)
        match = torch.cat([torch.zeros_like(same[..., :1]), same], dim=-1)
    elif shift == 0:
        match = ids[:, :, None] == ids[:, None, :]
    else:  # ids[j + 1]
        same = ids[:, :, None] == ids[:, None, 1:]
        match = torch.cat([same, torch.zeros_like(same[..., :1])], dim=-1)
    if causal:
        match = match & torch.ones(T, T, dtype=torch.bool).tril(diagonal)
    return match


def _mean_over_matching_queries(weights, match):
    on_match = (weights * match[:, None]).sum(dim=-1)  # (B, H, T)
    return on_match.transpose(0, 1)[:, match.any(dim=-1)].mean(dim=-1)  # (H,)


def prefix_match_score(weights, ids):
    return _mean_over_matching_queries(weights, _prefix_matches(ids))


def prefix_match_score_loop(weights, ids):
    B, H, T, _ = weights.shape
    total, n = torch.zeros(H), 0
    for b in range(B):
        for i in range(T):
            keys = [j for j in range(1, i + 1) if ids[b, j - 1] == ids[b, i]]
            if keys:
                total += weights[b, :, i, keys].sum(dim=-1)
                n += 1
    return total / n


def prefix_match_on_the_occurrence(weights, ids):
    return _mean_over_matching_queries(weights, _prefix_matches(ids, 0))


def prefix_match_on_the_earlier_occurrence(weights, ids):
    return _mean_over_matching_queries(weights, _prefix_matches(ids, 0, diagonal=-1))


def prefix_match_before_the_occurrence(weights, ids):
    return _mean_over_matching_queries(weights, _prefix_matches(ids, -1))


def prefix_match_without_the_diagonal(weights, ids):
    return _mean_over_matching_queries(weights, _prefix_matches(ids, diagonal=-1))


def prefix_match_without_the_causal_limit(weights, ids):
    return _mean_over_matching_queries(weights, _prefix_matches(ids, causal=False))


def prefix_match_rolled(weights, ids):
    return _mean_over_matching_queries(weights, _prefix_matches(ids, rolled=True))


def prefix_match_over_every_query(weights, ids):
    return (weights * _prefix_matches(ids)[:, None]).sum(dim=-1).mean(dim=(0, 2))


def _prefix_match_per_row(weights, ids):
    match = _prefix_matches(ids)
    on_match = (weights * match[:, None]).sum(dim=-1)  # (B, H, T)
    counted = match.any(dim=-1)[:, None].float()  # (B, 1, T)
    return (on_match * counted).sum(dim=-1) / counted.sum(dim=-1)  # (B, H)


def prefix_match_row_by_row(weights, ids):
    return _prefix_match_per_row(weights, ids).mean(dim=0)


def prefix_match_summed(weights, ids):
    return (weights * _prefix_matches(ids)[:, None]).sum(dim=(0, 2, 3))


def prefix_match_mean_over_keys(weights, ids):
    match = _prefix_matches(ids)
    n_keys = match.sum(dim=-1)  # (B, T)
    on_match = (weights * match[:, None]).sum(dim=-1) / n_keys.clamp(min=1)[:, None]
    return on_match.transpose(0, 1)[:, n_keys > 0].mean(dim=-1)


def prefix_match_latest_only(weights, ids):
    B, H, T, _ = weights.shape
    total, n = torch.zeros(H), 0
    for b in range(B):
        for i in range(1, T):
            earlier = [p for p in range(i) if ids[b, p] == ids[b, i]]
            if earlier:
                total += weights[b, :, i, earlier[-1] + 1]
                n += 1
    return total / n


def prefix_match_heads_averaged(weights, ids):
    return prefix_match_score(weights, ids).mean()


# lesson 09, exercise 9.3: the ceiling of a readout of frozen heads


def frozen_ceiling(n_letters, heads):
    """Per distinct head over k sources, (bags of k letters) / n ** k; 1 / n per source no
    head takes."""
    groups = {tuple(sorted(head)) for head in heads}
    value = 1.0
    for group in groups:
        value *= math.comb(n_letters + len(group) - 1, len(group)) / n_letters ** len(group)
    taken = {k for group in groups for k in group}
    return value / n_letters ** (3 - len(taken))


def frozen_ceiling_by_counting(n_letters, heads):
    """Right as well: every word, what the heads show of it, one right guess per view."""
    import itertools

    groups = sorted({tuple(sorted(head)) for head in heads})
    words = list(itertools.product(range(n_letters), repeat=3))
    views = {tuple(tuple(sorted(w[k] for k in g)) for g in groups) for w in words}
    return torch.tensor(len(views) / len(words), dtype=torch.float64)  # a 0-d tensor counts


def _frozen(n_letters, heads, per_head, per_missing=None, distinct=True, combine=math.prod):
    groups = [tuple(sorted(h)) for h in heads]
    if distinct:
        groups = sorted(set(groups))
    taken = {k for g in groups for k in g}
    missing = (1 / n_letters if per_missing is None else per_missing) ** (3 - len(taken))
    return combine([per_head(n_letters, len(g)) for g in groups]) * missing


def _bags_share(n, k):
    return math.comb(n + k - 1, k) / n**k


def frozen_orders_factorial(n_letters, heads):
    return _frozen(n_letters, heads, lambda n, k: 1 / math.factorial(k))


def frozen_mean_over_bags(n_letters, heads):
    import itertools

    def per_head(n, k):
        bags = list(itertools.combinations_with_replacement(range(n), k))
        orders = [len(set(itertools.permutations(bag))) for bag in bags]
        return sum(1 / o for o in orders) / len(bags)

    return _frozen(n_letters, heads, per_head)


def frozen_combinations(n_letters, heads):
    return _frozen(n_letters, heads, lambda n, k: math.comb(n, k) / n**k)


def frozen_missing_ignored(n_letters, heads):
    return _frozen(n_letters, heads, _bags_share, per_missing=1.0)


def frozen_missing_is_zero(n_letters, heads):
    return _frozen(n_letters, heads, _bags_share, per_missing=0.0)


def frozen_duplicates_counted(n_letters, heads):
    return _frozen(n_letters, heads, _bags_share, distinct=False)


def frozen_heads_averaged(n_letters, heads):
    return _frozen(n_letters, heads, _bags_share, combine=lambda xs: sum(xs) / len(xs))


def frozen_percent(n_letters, heads):
    return 100 * frozen_ceiling(n_letters, heads)


def frozen_chance(n_letters, heads):
    return 1 / n_letters**3


# lesson 10, exercise 10.2: the K-composition score


def _circuits(W_Q, W_K, W_V, W_O):
    return W_Q.T @ W_K, W_V.T @ W_O.T  # W_QK, W_OV: (D, D) each


def k_composition(W_Q, W_K, W_V, W_O):
    W_QK, W_OV = _circuits(W_Q, W_K, W_V, W_O)
    return ((W_QK @ W_OV.T).norm() / (W_QK.norm() * W_OV.norm())).item()


def k_composition_columns(W_Q, W_K, W_V, W_O):
    """Right as well: Elhage's column-vector W_OV = W_O W_V with their product W_QK W_OV."""
    W_QK, W_OV = W_Q.T @ W_K, W_O @ W_V
    return torch.linalg.matrix_norm(W_QK @ W_OV) / (W_QK.norm() * W_OV.norm())


def k_composition_paper_product(W_Q, W_K, W_V, W_O):
    W_QK, W_OV = _circuits(W_Q, W_K, W_V, W_O)
    return ((W_QK @ W_OV).norm() / (W_QK.norm() * W_OV.norm())).item()


def k_composition_query_side(W_Q, W_K, W_V, W_O):
    W_QK, W_OV = _circuits(W_Q, W_K, W_V, W_O)
    return ((W_OV @ W_QK).norm() / (W_QK.norm() * W_OV.norm())).item()


def k_composition_qk_swapped(W_Q, W_K, W_V, W_O):
    """W_QK built as W_Kᵀ W_Q (key and query swapped): gives the Q-composition score."""
    W_QK, W_OV = W_K.T @ W_Q, W_V.T @ W_O.T
    return ((W_QK @ W_OV.T).norm() / (W_QK.norm() * W_OV.norm())).item()


def k_composition_transpose_first(W_Q, W_K, W_V, W_O):
    W_QK, W_OV = _circuits(W_Q, W_K, W_V, W_O)
    return ((W_OV.T @ W_QK).norm() / (W_QK.norm() * W_OV.norm())).item()


def k_composition_unnormalised(W_Q, W_K, W_V, W_O):
    W_QK, W_OV = _circuits(W_Q, W_K, W_V, W_O)
    return (W_QK @ W_OV.T).norm().item()


def k_composition_four_norms(W_Q, W_K, W_V, W_O):
    W_QK, W_OV = _circuits(W_Q, W_K, W_V, W_O)
    slices = W_Q.norm() * W_K.norm() * W_V.norm() * W_O.norm()
    return ((W_QK @ W_OV.T).norm() / slices).item()


def k_composition_spectral(W_Q, W_K, W_V, W_O):
    W_QK, W_OV = _circuits(W_Q, W_K, W_V, W_O)
    return (torch.linalg.matrix_norm(W_QK @ W_OV.T, ord=2) / (W_QK.norm() * W_OV.norm())).item()


def k_composition_matrix(W_Q, W_K, W_V, W_O):
    W_QK, W_OV = _circuits(W_Q, W_K, W_V, W_O)
    return W_QK @ W_OV.T


# lesson 11


def _mean_ablated(
    model, ids, reference, heads, *, zero=False, per_position=False, from_ids=False,
    sequential=False, output=False, unscaled=False, keep_hooks=False, rise=False,
    other_head=False, hooks_off_early=False,
):  # fmt: skip
    """The loss with heads replaced by their mean, written with hooks as a learner would;
    each keyword builds in one typical mistake."""
    from attention_lab.charlm import evaluate_loss

    attns = [block.attn for block in model.blocks]
    if other_head:
        heads = [(layer, (head + 1) % 4) for layer, head in heads]
    layers = sorted({layer for layer, _ in heads})
    base = evaluate_loss(model, ids)
    source = reference
    if from_ids:
        T = model.context_length
        n = (len(ids) - 1) // T
        source = ids[: n * T].view(n, T)
    means, handles = {}, []

    def hook_for(layer):
        d = attns[layer].d_head

        def replace(x):
            x = x.clone()
            for chosen, head in heads:
                if chosen == layer:
                    part = slice(head, head + d) if unscaled else slice(head * d, (head + 1) * d)
                    x[..., part] = 0.0 if zero else means[layer][..., part]
            return x

        if output:
            return attns[layer].out_proj.register_forward_hook(lambda m, a, out: replace(out))
        return attns[layer].out_proj.register_forward_pre_hook(lambda m, a: (replace(a[0]),))

    for layer in layers:
        seen = []
        grab = attns[layer].out_proj.register_forward_hook(
            lambda m, a, out, seen=seen: seen.append(out if output else a[0])
        )
        with torch.no_grad():
            model(source)
        grab.remove()
        means[layer] = seen[0].mean(dim=0) if per_position else seen[0].mean(dim=(0, 1))
        if sequential:
            handles.append(hook_for(layer))
    if not sequential:
        handles = [hook_for(layer) for layer in layers]
    if hooks_off_early:
        for handle in handles:
            handle.remove()
    loss = evaluate_loss(model, ids)
    if not keep_hooks:
        for handle in handles:
            handle.remove()
    return loss - base if rise else loss


def mean_ablated_loss(model, ids, reference, heads):
    return _mean_ablated(model, ids, reference, heads)


def mean_ablated_with_the_toolkit(model, ids, reference, heads):
    from attention_lab.charlm import evaluate_loss
    from attention_lab.interventions import ablate_heads

    with ablate_heads(model, heads, how="mean", reference=reference):
        return torch.tensor(evaluate_loss(model, ids))  # a 0-d tensor is a number too


def _mistake(name, **mistake):
    def answer(model, ids, reference, heads):
        return _mean_ablated(model, ids, reference, heads, **mistake)

    answer.__name__ = name
    return answer


ablated_with_zeros = _mistake("ablated_with_zeros", zero=True)
ablated_per_position = _mistake("ablated_per_position", per_position=True)
ablated_means_from_ids = _mistake("ablated_means_from_ids", from_ids=True)
ablated_means_after_ablation = _mistake("ablated_means_after_ablation", sequential=True)
ablated_output_columns = _mistake("ablated_output_columns", output=True)
ablated_unscaled_slice = _mistake("ablated_unscaled_slice", unscaled=True)
ablated_hooks_left_on = _mistake("ablated_hooks_left_on", keep_hooks=True)
ablated_rise_returned = _mistake("ablated_rise_returned", rise=True)
ablated_next_head = _mistake("ablated_next_head", other_head=True)
ablated_hooks_removed_early = _mistake("ablated_hooks_removed_early", hooks_off_early=True)


def ablated_by_editing_weights(model, ids, reference, heads):
    """Zeroes the head's columns of W_o for good: the model is left changed."""
    from attention_lab.charlm import evaluate_loss

    with torch.no_grad():
        for layer, head in heads:
            attn = model.blocks[layer].attn
            attn.out_proj.weight[:, head * attn.d_head : (head + 1) * attn.d_head] = 0.0
    return evaluate_loss(model, ids)


# lesson 11, exercise 11.2: the copy test with ids between the copies


def _copy_losses(model, strings, between, *, rows=None, second_from=1, first_to=None):
    m, f = strings.shape[1], between.shape[1]
    x = torch.cat([strings, between, strings], dim=1) if rows is None else rows
    f = x.shape[1] - 2 * m
    with torch.no_grad():
        logits = model(x)  # (N, T, V)
    ce = torch.nn.functional.cross_entropy(
        logits[:, :-1].transpose(1, 2), x[:, 1:], reduction="none"
    )  # (N, T - 1): column t predicts id t + 1
    first = ce[:, : (m - 1 if first_to is None else first_to)]
    second = ce[:, m + f - 1 + second_from : 2 * m + f - 1]
    return first, second


def copy_gap(model, strings, between):
    first, second = _copy_losses(model, strings, between)
    gaps = second.mean(dim=1) - first.mean(dim=1)  # (N,)
    return gaps.mean().item(), (gaps.std() / len(gaps) ** 0.5).item()


def copy_gap_in_a_loop(model, strings, between):
    """Right as well: one string at a time, float64, the standard error from the sum of squares."""
    N, m = strings.shape
    gaps = []
    for n in range(N):
        row = torch.cat([strings[n], between[n], strings[n]])[None]  # (1, T)
        with torch.no_grad():
            logp = torch.log_softmax(model(row)[0].double(), dim=-1)  # (T, V)
        ce = [-logp[t, row[0, t + 1]].item() for t in range(row.shape[1] - 1)]
        f = between.shape[1]
        gaps.append(sum(ce[m + f : 2 * m + f - 1]) / (m - 1) - sum(ce[: m - 1]) / (m - 1))
    mean = sum(gaps) / N
    var = sum((g - mean) ** 2 for g in gaps) / (N - 1)
    return torch.tensor(mean), math.sqrt(var / N)


def _gap_of(first, second, sign=1):
    gaps = sign * (second.mean(dim=1) - first.mean(dim=1))
    return gaps.mean().item(), (gaps.std() / len(gaps) ** 0.5).item()


def copy_gap_without_between(model, strings, between):
    return copy_gap(model, strings, between[:, :0])


def copy_gap_between_after(model, strings, between):
    rows = torch.cat([strings, strings, between], dim=1)
    m = strings.shape[1]
    first, second = _copy_losses(model, strings, between, rows=rows)
    with torch.no_grad():
        logits = model(rows)
    ce = torch.nn.functional.cross_entropy(
        logits[:, :-1].transpose(1, 2), rows[:, 1:], reduction="none"
    )
    return _gap_of(ce[:, : m - 1], ce[:, m : 2 * m - 1])


def copy_gap_not_shifted(model, strings, between):
    m, f = strings.shape[1], between.shape[1]
    x = torch.cat([strings, between, strings], dim=1)
    with torch.no_grad():
        ce = torch.nn.functional.cross_entropy(model(x).transpose(1, 2), x, reduction="none")
    return _gap_of(ce[:, 1:m], ce[:, m + f + 1 :])


def copy_gap_first_minus_second(model, strings, between):
    return _gap_of(*_copy_losses(model, strings, between), sign=-1)


def copy_gap_with_character_0(model, strings, between):
    return _gap_of(*_copy_losses(model, strings, between, second_from=0))


def copy_gap_first_one_too_far(model, strings, between):
    return _gap_of(*_copy_losses(model, strings, between, first_to=strings.shape[1]))


def copy_gap_between_with_first(model, strings, between):
    m = strings.shape[1]
    return _gap_of(*_copy_losses(model, strings, between, first_to=m + between.shape[1] - 1))


def copy_gap_std_not_error(model, strings, between):
    first, second = _copy_losses(model, strings, between)
    gaps = second.mean(dim=1) - first.mean(dim=1)
    return gaps.mean().item(), gaps.std().item()


def copy_gap_error_over_characters(model, strings, between):
    first, second = _copy_losses(model, strings, between)
    per_char = second - first  # (N, m - 1)
    return per_char.mean().item(), (per_char.std() / per_char.numel() ** 0.5).item()


def copy_gap_two_losses(model, strings, between):
    first, second = _copy_losses(model, strings, between)
    return first.mean().item(), second.mean().item()


# lesson 12


def grouped_kv(kv, n_rep):
    return kv.repeat_interleave(n_rep, dim=1)


def grouped_kv_expanded(kv, n_rep):
    B, n_kv, T, d = kv.shape
    return kv[:, :, None].expand(B, n_kv, n_rep, T, d).reshape(B, n_kv * n_rep, T, d)


def grouped_kv_tiled(kv, n_rep):
    return kv.repeat(1, n_rep, 1, 1)


def grouped_kv_expanded_first(kv, n_rep):
    B, n_kv, T, d = kv.shape
    return kv[:, None].expand(B, n_rep, n_kv, T, d).reshape(B, n_kv * n_rep, T, d)


def grouped_kv_not_merged(kv, n_rep):
    B, n_kv, T, d = kv.shape
    return kv[:, :, None].expand(B, n_kv, n_rep, T, d)


def grouped_kv_along_time(kv, n_rep):
    return kv.repeat_interleave(n_rep, dim=2)


def grouped_kv_along_features(kv, n_rep):
    return kv.repeat_interleave(n_rep, dim=-1)


def _rope(x, positions, layout="half", sign=1.0, per_feature=False):
    d = x.shape[-1]
    steps = torch.arange(d // 2) if per_feature else torch.arange(0, d, 2)
    angle = sign * positions[:, None].float() * 10_000.0 ** (-steps / d)  # (T, d/2)
    cos, sin = angle.cos(), angle.sin()
    if layout == "half":
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)


def rotary_qkv(q, k, v, start):
    positions = torch.arange(start, start + q.shape[-2])
    return _rope(q, positions), _rope(k, positions), v


def rotary_qkv_with_the_library(q, k, v, start):
    from attention_lab import apply_rope, rope_cos_sin

    cos, sin = rope_cos_sin(torch.arange(start, start + q.shape[-2]), q.shape[-1])
    return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v


def rotary_qkv_v_too(q, k, v, start):
    positions = torch.arange(start, start + q.shape[-2])
    return _rope(q, positions), _rope(k, positions), _rope(v, positions)


def rotary_qkv_v_dropped(q, k, v, start):
    q, k, _ = rotary_qkv(q, k, v, start)
    return q, k, torch.zeros_like(v)


def rotary_qkv_q_only(q, k, v, start):
    return _rope(q, torch.arange(start, start + q.shape[-2])), k, v


def rotary_qkv_from_zero(q, k, v, start):
    return rotary_qkv(q, k, v, 0)


def rotary_qkv_one_late(q, k, v, start):
    return rotary_qkv(q, k, v, start + 1)


def rotary_qkv_interleaved(q, k, v, start):
    positions = torch.arange(start, start + q.shape[-2])
    return _rope(q, positions, "interleaved"), _rope(k, positions, "interleaved"), v


def rotary_qkv_backwards(q, k, v, start):
    positions = torch.arange(start, start + q.shape[-2])
    return _rope(q, positions, sign=-1.0), _rope(k, positions, sign=-1.0), v


def rotary_qkv_per_feature(q, k, v, start):
    positions = torch.arange(start, start + q.shape[-2])
    return _rope(q, positions, per_feature=True), _rope(k, positions, per_feature=True), v


def rotary_qkv_pair(q, k, v, start):
    return rotary_qkv(q, k, v, start)[:2]


def _kept(T, window):
    return T if window is None else min(T, window)


def _bytes_per_number(dtype):
    return torch.empty((), dtype=dtype).element_size()


def kv_cache_size(n_layers, n_heads, n_kv_heads, d_head, T, dtype, window=None):
    return n_layers * 2 * n_kv_heads * d_head * _kept(T, window) * _bytes_per_number(dtype)


def kv_cache_size_as_tensor(n_layers, n_heads, n_kv_heads, d_head, T, dtype, window=None):
    """Right as well: the size of the two tensors a cache would hold, per layer."""
    kept = _kept(T, window)
    k = torch.empty(1, n_kv_heads, kept, d_head, dtype=dtype)
    return torch.tensor(n_layers * 2 * k.nelement() * k.element_size())


def kv_cache_size_keys_only(n_layers, n_heads, n_kv_heads, d_head, T, dtype, window=None):
    return n_layers * n_kv_heads * d_head * _kept(T, window) * _bytes_per_number(dtype)


def kv_cache_size_query_heads(n_layers, n_heads, n_kv_heads, d_head, T, dtype, window=None):
    return n_layers * 2 * n_heads * d_head * _kept(T, window) * _bytes_per_number(dtype)


def kv_cache_size_in_bits(n_layers, n_heads, n_kv_heads, d_head, T, dtype, window=None):
    return n_layers * 2 * n_kv_heads * d_head * _kept(T, window) * torch.finfo(dtype).bits


def kv_cache_size_float32(n_layers, n_heads, n_kv_heads, d_head, T, dtype, window=None):
    return n_layers * 2 * n_kv_heads * d_head * _kept(T, window) * 4


def kv_cache_size_one_layer(n_layers, n_heads, n_kv_heads, d_head, T, dtype, window=None):
    return 2 * n_kv_heads * d_head * _kept(T, window) * _bytes_per_number(dtype)


def kv_cache_size_window_ignored(n_layers, n_heads, n_kv_heads, d_head, T, dtype, window=None):
    return kv_cache_size(n_layers, n_heads, n_kv_heads, d_head, T, dtype)


def kv_cache_size_window_always(n_layers, n_heads, n_kv_heads, d_head, T, dtype, window=None):
    kept = T if window is None else window
    return n_layers * 2 * n_kv_heads * d_head * kept * _bytes_per_number(dtype)


CASES = [
    # checker, reference solution, [(typical mistake, words the verdict must contain)]
    (
        ex.check_stable_softmax,
        stable_softmax,
        [
            (softmax_overflows, "overflows"),
            (softmax_one_max, "one maximum for every row"),
            (softmax_over_columns, "each column sums to 1"),
            (softmax_library, "torch's own softmax"),
            (softmax_method, "torch's own softmax"),
        ],
    ),
    (
        ex.check_decay_weights,
        decay_weights,
        [
            (decay_reversed, "the oldest token gets the most weight"),
            (decay_unnormalised, "not normalised"),
            (decay_future_open, "a future key"),
        ],
    ),
    (
        ex.check_cross_attention,
        cross_attention,
        [
            (cross_unscaled, "not scaled"),
            (cross_softmax_over_queries, "each column"),
            (cross_keys_on_rows, "keys on the rows"),
            (cross_self_attention_only, "keys come from x_q"),
            (cross_values_from_queries, "values come from x_q"),
        ],
    ),
    (
        ex.check_score_variances,
        score_variances,
        [
            (score_std_not_var, "standard deviation"),
            (score_all_pairs, "every query against every key"),
            (score_divided_by_d, "divided by d_head²"),
            (score_per_feature, "not two numbers"),
        ],
    ),
    (
        ex.check_projected_score_variance,
        projected_variance,
        [(projected_added, "added the variances"), (projected_unit, "as if every entry")],
    ),
    (
        ex.check_looks_ahead,
        looks_ahead,
        [
            (looks_ahead_last_token_only, "not only the last one"),
            (looks_ahead_only_the_previous_output, "not only the one just before it"),
            (looks_ahead_includes_j, "your test flags a correctly masked head"),
            (looks_ahead_returns_tensor_list, "not True or False"),
        ],
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
        ex.check_head_as_causal,
        head_as_causal,
        [
            (head_as_causal_next_head, "the weights of head"),
            (head_as_causal_values_forgotten, "but the output is not"),
            (head_as_causal_full_width, "d_head="),
        ],
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
        ex.check_padded_causal_mask,
        padded_causal_mask,
        [
            (padded_mask_and, "not &"),
            (padded_mask_all_blocked_rows, "NaN"),
            (padded_mask_no_head_axis, "mask[:, None]"),
        ],
    ),
    (
        ex.check_head_rows_from_fused,
        head_rows_from_fused,
        [
            (head_rows_without_block_offset, "all three are head"),
            (head_rows_as_columns, "columns, not rows"),
            (head_rows_k_v_swapped, "w_k does not make head"),
        ],
    ),
    (
        ex.check_weights_outnumber_params,
        outnumber,
        [
            (outnumber_without_heads, "H * T * T"),
            (outnumber_at_equality, "not more than the"),
            (outnumber_without_biases, "biases too"),
        ],
    ),
    (
        ex.check_lookback_distance,
        lookback_distance,
        [
            (lookback_negative, "j - i"),
            (lookback_top_key_only, "largest weight only"),
            (lookback_per_head, "one per query"),
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
    (
        ex.check_offset_share,
        offset_share,
        [
            (offset_share_future, "key i + k, above the diagonal"),
            (offset_share_one_too_far, "the key 2 back, not 1 back"),
            (offset_share_all_queries, "divided by all"),
            (offset_share_heads_averaged, "the heads were averaged together"),
            (offset_share_per_row, "shape (B, H)"),
            (offset_share_summed, "sums, not means"),
        ],
    ),
    (
        ex.check_offset_weights,
        offset_weights,
        [
            (offset_weights_future, "the future"),
            (offset_weights_empty_first_rows, "freeze_attention refuses rows"),
            (offset_weights_one_short, "0 back, not 1 back"),
            (offset_weights_bool, "dtype torch.bool"),
        ],
    ),
    (
        ex.check_frozen_ceiling,
        frozen_ceiling,
        [
            (frozen_orders_factorial, "as if its letters always differed"),
            (frozen_mean_over_bags, "as if every bag were equally likely"),
            (frozen_combinations, "only the bags of different letters"),
            (frozen_missing_ignored, "you left out the 1 source(s) that no head takes"),
            (frozen_missing_is_zero, "you answered 0 because a source is missing"),
            (frozen_duplicates_counted, "average the same sources twice"),
            (frozen_heads_averaged, "you averaged the heads' ceilings"),
            (frozen_percent, "a percentage"),
            (frozen_chance, "a reader that sees nothing"),
        ],
    ),
    (
        ex.check_prefix_match_score,
        prefix_match_score,
        [
            (prefix_match_on_the_occurrence, "not on the tokens just after them"),
            (prefix_match_on_the_earlier_occurrence, "not on the tokens just after them"),
            (prefix_match_before_the_occurrence, "ids[j + 1] == ids[i]"),
            (prefix_match_without_the_diagonal, "you left out key j = i"),
            (prefix_match_without_the_causal_limit, "lie in the future (j > i)"),
            (prefix_match_rolled, "torch.roll wrapped the last id around"),
            (prefix_match_over_every_query, "divided by all 48 (row, query) pairs"),
            (prefix_match_row_by_row, "you averaged each row first"),
            (prefix_match_summed, "sums over the queries, not means"),
            (prefix_match_mean_over_keys, "averaged the weights of a query's matching keys"),
            (prefix_match_latest_only, "only the key after the latest earlier occurrence"),
            (prefix_match_heads_averaged, "the heads were averaged together"),
            (_prefix_match_per_row, "shape (B, H)"),
        ],
    ),
    (
        ex.check_k_composition,
        k_composition,
        [
            (k_composition_paper_product, "W_QK W_OV scores 0.000, W_QK W_OVᵀ 0.707"),
            (k_composition_query_side, "Q-composition"),
            (k_composition_qk_swapped, "Q-composition"),
            (k_composition_transpose_first, "W_OV on the query's side"),
            (k_composition_unnormalised, "without dividing by ‖W_QK‖ ‖W_OV‖"),
            (k_composition_four_norms, "norms of the four slices"),
            (k_composition_spectral, "largest singular value"),
            (k_composition_matrix, "a (8, 8) matrix, not its score"),
        ],
    ),
    (
        ex.check_mean_ablated_loss,
        mean_ablated_loss,
        [
            (ablated_with_zeros, "set to zero, not to their mean"),
            (ablated_per_position, "one per position"),
            (ablated_means_from_ids, "from the evaluated text"),
            (ablated_means_after_ablation, "already replaced"),
            (ablated_output_columns, "out_proj's output"),
            (ablated_unscaled_slice, "starts at column h"),
            (ablated_hooks_left_on, "left 1 hook(s) on the model"),
            (ablated_rise_returned, "the rise of the loss"),
            (ablated_next_head, "you replaced head 2 of block 0 instead"),
            (ablated_hooks_removed_early, "nothing was replaced"),
            (ablated_by_editing_weights, "changed the model's"),
        ],
    ),
    (
        ex.check_copy_gap,
        copy_gap,
        [
            (copy_gap_without_between, "the ids between are not between the copies"),
            (copy_gap_between_after, "the ids between are not between the copies"),
            (copy_gap_not_shifted, "against its own id"),
            (copy_gap_first_minus_second, "the wrong sign"),
            (copy_gap_with_character_0, "you counted the second copy's first id"),
            (copy_gap_first_one_too_far, "one column too far"),
            (copy_gap_between_with_first, "the ids between the copies with the first copy"),
            (copy_gap_std_not_error, "not its standard error"),
            (copy_gap_error_over_characters, "counts every character as a sample"),
            (copy_gap_two_losses, "the mean loss on each copy"),
        ],
    ),
    (
        ex.check_grouped_kv,
        grouped_kv,
        [
            (grouped_kv_tiled, "you tiled the heads"),
            (grouped_kv_expanded_first, "you tiled the heads"),
            (grouped_kv_not_merged, "still a dimension of their own"),
            (grouped_kv_along_time, "along the time axis"),
            (grouped_kv_along_features, "along the features"),
        ],
    ),
    (
        ex.check_rotary_qkv,
        rotary_qkv,
        [
            (rotary_qkv_v_too, "you turned v too"),
            (rotary_qkv_v_dropped, "v changed"),
            (rotary_qkv_q_only, "k is not turned at all"),
            (rotary_qkv_from_zero, "as if no token came before"),
            (rotary_qkv_one_late, "your positions are one too far: 1 to 5"),
            (rotary_qkv_interleaved, "RoFormer's interleaved layout"),
            (rotary_qkv_backwards, "the other way"),
            (rotary_qkv_per_feature, "base ** (-i / d_head)"),
            (rotary_qkv_pair, "not (q, k, v)"),
        ],
    ),
    (
        ex.check_kv_cache_size,
        kv_cache_size,
        [
            (kv_cache_size_keys_only, "only the keys"),
            (kv_cache_size_query_heads, "you counted the 32 query heads"),
            (kv_cache_size_in_bits, "that is bits"),
            (kv_cache_size_float32, "but bfloat16 takes 2 bytes"),
            (kv_cache_size_one_layer, "one layer's cache"),
            (kv_cache_size_window_ignored, "keeps only the last 64"),
            (kv_cache_size_window_always, "but only 40 came so far"),
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
    ex.check_head_as_causal(head_as_causal)
    ex.check_einsum_attention(einsum_attention)
    ex.check_looks_ahead(looks_ahead)
    assert torch.equal(torch.get_rng_state(), before)


def test_every_lesson_from_01_to_12_has_a_checked_exercise():
    assert ex.LESSONS == ("01", "02", "03", "04", "05", "06", "07", "08", "09", "10", "11", "12")
    for lesson in ex.LESSONS:
        assert ex.EXERCISES.get(lesson), f"lesson {lesson} has no checker"
    placed = {(c.lesson, c.exercise) for c, _, _ in CASES}
    assert placed == {(les, name) for les, names in ex.EXERCISES.items() for name in names}


def test_mean_ablated_loss_accepts_the_toolkit_and_leaves_its_model_as_it_was(capsys):
    """ablate_heads itself passes (a 0-d tensor counts as a number); the checker's model is
    the same after every check, so one check cannot spoil the next."""
    from attention_lab.exercises import lesson11

    assert ex.check_mean_ablated_loss(mean_ablated_with_the_toolkit, record=False)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1234)
        first = lesson11._checker_model().state_dict()
        torch.manual_seed(1234)
        second = lesson11._checker_model().state_dict()
    assert all(torch.equal(first[name], second[name]) for name in first)
    assert "✅ passed" in capsys.readouterr().out


def test_the_ablation_variants_differ_from_the_right_loss_by_more_than_the_tolerance():
    """Each mistake the checker names moves the loss of its model by more than its tolerance,
    on the first case where it differs at all, so no wrong answer passes by rounding."""
    from attention_lab.charlm import evaluate_loss
    from attention_lab.exercises import lesson11

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1234)
        model = lesson11._checker_model()
        ids = torch.randint(0, 11, (8 * 16 + 1,))
        reference = torch.randint(0, 11, (24, 8))
    heads = [(0, 3), (1, 0)]
    right = lesson11._variant_loss(model, ids, reference, heads)
    from attention_lab.interventions import ablate_heads

    with ablate_heads(model, heads, how="mean", reference=reference):
        assert math.isclose(evaluate_loss(model, ids), right, abs_tol=1e-6)
    for options in (
        dict(how="zero"),
        dict(how="position"),
        dict(how="scalar"),
        dict(means_from="ids"),
        dict(means_from="ablated"),
        dict(place="output"),
        dict(part="unscaled"),
    ):
        gap = abs(lesson11._variant_loss(model, ids, reference, heads, **options) - right)
        assert gap > 10 * lesson11._TOLERANCE, (options, gap)


def test_prefix_match_score_accepts_a_loop_over_rows_and_queries(capsys):
    assert ex.check_prefix_match_score(prefix_match_score_loop, record=False)
    assert "✅ passed" in capsys.readouterr().out


def test_the_prefix_match_rule_counts_key_i_when_the_token_repeats_at_once():
    """after_previous_occurrence allows j <= i: in "7 7", query 1's own key is the token just
    after the earlier 7, so the checker names leaving it out as a mistake."""
    from attention_lab.interventions import after_previous_occurrence

    rule = after_previous_occurrence(torch.tensor([[7, 7, 3]]))  # (1, 3, 3)
    assert rule[0].tolist() == [
        [False, False, False],
        [False, True, False],
        [False, False, False],
    ]


def test_the_prefix_match_checkers_rules_are_the_librarys_and_its_mistakes_all_differ():
    """The checker's own rule is after_previous_occurrence on every case; on the first case,
    every mistake it names gives scores that differ from the right ones and from those of
    every other named mistake by more than the tolerance, so each is told apart."""
    from attention_lab.exercises import lesson10
    from attention_lab.exercises.core import close
    from attention_lab.interventions import after_previous_occurrence, source_shares

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1234)
        cases = [lesson10._case(number) for number in range(len(lesson10._CASES))]
    for _weights, ids in cases:
        rule = lesson10._keys_rule(ids)  # (B, T, T)
        assert torch.equal(rule, after_previous_occurrence(ids))
        counted = rule.any(dim=-1)  # (B, T): queries with a matching key
        assert counted.any(dim=-1).all() and not counted.all(dim=-1).any()  # some, never all
    weights, ids = cases[0]
    want = source_shares(weights, keys=after_previous_occurrence(ids))
    mistakes = lesson10._mistakes(weights, ids, "here")
    assert len({message for _shares, message, _hint in mistakes}) == 10
    for shares, message, _hint in mistakes:
        assert not close(shares, want, atol=1e-3), message
        for other, other_message, _ in mistakes:
            if other_message != message:
                assert not close(shares, other, atol=1e-3), (message, other_message)


def test_each_checker_lives_in_the_module_of_its_lesson():
    for checker, _, _ in CASES:
        assert checker.__module__ == f"attention_lab.exercises.lesson{checker.lesson}"


def test_summary_shows_passed_wrong_and_not_attempted_for_one_lesson(capsys):
    ex.reset()
    ex.check_head_as_causal(head_as_causal)
    ex.check_einsum_attention(einsum_unscaled)
    ex.check_padded_causal_mask(_stub)
    ex.check_sliding_mask(sliding_mask)  # lesson 04: not in lesson 06's table
    capsys.readouterr()
    table = ex.summary("06")
    out = capsys.readouterr().out
    assert out == f"{table}\n"
    assert out.startswith("lesson 06: 1 of 3 exercises pass\n")
    lines = out.splitlines()[1:]
    assert [line.split()[1] for line in lines] == ex.EXERCISES["06"]
    marks = {line.split()[1]: line.split()[0] for line in lines}
    assert marks == {"head_as_causal": "✅", "einsum_attention": "❌", "padded_causal_mask": "⏳"}
    assert table.passed == 1 and not table
    assert table._ipython_display_() is None
    ex.check_looks_ahead(looks_ahead)
    capsys.readouterr()
    assert ex.summary("04", show=False).rows == [
        ("04", "looks_ahead", "passed"),
        ("04", "sliding_mask", "passed"),
    ]


def test_summary_of_each_lesson_lists_the_checkers_of_its_module():
    importlib.import_module("attention_lab.exercises.modules")  # the lessons' own skeletons
    for lesson in ex.LESSONS:
        module = importlib.import_module(f"attention_lab.exercises.lesson{lesson}")
        names = [n.removeprefix("check_") for n in vars(module) if n.startswith("check_")]
        assert ex.EXERCISES[lesson] == names, lesson
        assert [name for _, name, _ in ex.summary(lesson, show=False).rows] == names


def test_summary_keeps_the_latest_verdict_and_reset_forgets_it(capsys):
    ex.reset()
    ex.check_score_variances(score_std_not_var)
    ex.check_score_variances(score_variances)
    assert ex.RESULTS[("03", "score_variances")]
    assert ("03", "score_variances", "passed") in ex.summary(3, show=False).rows
    ex.reset("03")
    assert ("03", "score_variances") not in ex.RESULTS
    assert "lesson 03" not in capsys.readouterr().out  # show=False prints nothing


def test_a_demonstration_with_record_false_leaves_the_learners_verdict_alone(capsys):
    ex.reset()
    ex.check_score_variances(score_variances)
    verdict = ex.check_score_variances(score_std_not_var, record=False)
    assert not verdict  # still graded and printed ...
    assert "not yet" in capsys.readouterr().out
    assert ex.RESULTS[("03", "score_variances")]  # ... but the recorded verdict is the pass


def test_summary_of_every_lesson_and_of_an_unknown_lesson_never_raises(capsys):
    ex.reset()
    everything = ex.summary(show=False)
    assert {lesson for lesson, _, _ in everything.rows} == set(ex.LESSONS)
    assert everything.passed == 0
    for bad in ("13", "00", "x", None, 4.5, [4]):
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


def test_cross_attention_of_a_sequence_with_itself_is_the_library_head():
    head = SingleHeadAttention(6, 4)
    x = torch.randn(2, 5, 6)  # (B, T, d_in)
    out, weights = cross_attention(x, x, head.W_q, head.W_k, head.W_v)
    want_out, want_w = head(x, return_weights=True)
    torch.testing.assert_close(out, want_out)
    torch.testing.assert_close(weights, want_w)


def test_softmax_checker_restores_torch_softmax(capsys):
    methods = (torch.softmax, torch.nn.functional.softmax, torch.Tensor.softmax)
    ex.check_stable_softmax(softmax_library)
    ex.check_stable_softmax(_stub)
    assert (torch.softmax, torch.nn.functional.softmax, torch.Tensor.softmax) == methods
    assert "softmax" not in vars(torch.Tensor)


def test_decay_checker_reference_at_r_1_is_the_running_mean_of_lesson_01():
    from attention_lab.exercises.lesson01 import _reference_decay

    ones = torch.tril(torch.ones(5, 5, dtype=torch.float64))
    torch.testing.assert_close(_reference_decay(5, 1.0), ones / ones.sum(dim=1, keepdim=True))
    torch.testing.assert_close(decay_weights(5, 0.5).double(), _reference_decay(5, 0.5))


def test_the_parameter_count_behind_exercise_7_2_is_the_blocks_own():
    from attention_lab.exercises.lesson07 import _params

    for D, H in ((768, 12), (32, 4), (12, 3)):
        block = MultiHeadSelfAttention(D, H, context_length=2)
        assert sum(p.numel() for p in block.parameters()) == _params(D)


def test_head_checker_reference_is_the_heads_own_weights():
    mha = MultiHeadAttention(12, 3, 8)
    x = torch.randn(2, 5, 12)
    _, weights = mha(x, return_weights=True)  # (B, H, T, T)
    _, head_weights = head_as_causal(mha, 2)(x, return_weights=True)
    torch.testing.assert_close(head_weights, weights[:, 2])


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


def test_every_lesson_01_to_08_has_a_block_of_checked_exercises():
    blocks = make_exercises.lesson_blocks(nbformat.read(make_exercises.SOLUTIONS, as_version=4))
    assert sorted(blocks) == list(ex.LESSONS)
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
    for path in (make_exercises.SOLUTIONS.parent).glob("[0-9][0-9]_*.ipynb"):
        (notebooks / path.name).write_bytes(path.read_bytes())
    solutions = nbformat.read(make_exercises.SOLUTIONS, as_version=4)
    cell = next(c for c in solutions.cells if "def dropout_rescale" in c.source)
    cell.source = cell.source.replace("def dropout_rescale(", "def dropout_rescaled(")
    edited = notebooks / "exercises_solutions.ipynb"
    nbformat.write(solutions, edited)
    problems = make_exercises.stale_lessons(edited, notebooks)
    assert any(p.startswith("05_causal_head.ipynb") for p in problems), problems


def test_learner_only_writes_the_exercises_notebook_and_leaves_the_lessons_alone(tmp_path):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    for path in (make_exercises.SOLUTIONS.parent).glob("[0-9][0-9]_*.ipynb"):
        (notebooks / path.name).write_bytes(path.read_bytes())
    (notebooks / "exercises_solutions.ipynb").write_bytes(make_exercises.SOLUTIONS.read_bytes())
    lessons = {p.name: p.read_bytes() for p in notebooks.glob("0*.ipynb")}
    assert make_exercises.main(["--root", str(tmp_path), "--learner-only", "--no-run"]) == 0
    assert {p.name: p.read_bytes() for p in notebooks.glob("0*.ipynb")} == lessons
    learner = notebooks / "exercises.ipynb"
    assert not make_exercises.stale_cells(notebooks / "exercises_solutions.ipynb", learner)
    assert make_exercises.main(["--root", str(tmp_path), "--learner-only", "--check"]) == 0


# --- exercises 9.3, 10.2, 11.2 and lesson 12: other right answers, and the references --------


@pytest.mark.parametrize(
    "checker, answer",
    [
        (ex.check_frozen_ceiling, frozen_ceiling_by_counting),
        (ex.check_k_composition, k_composition_columns),
        (ex.check_copy_gap, copy_gap_in_a_loop),
        (ex.check_grouped_kv, grouped_kv_expanded),
        (ex.check_rotary_qkv, rotary_qkv_with_the_library),
        (ex.check_kv_cache_size, kv_cache_size_as_tensor),
    ],
    ids=lambda x: getattr(x, "__name__", ""),
)
def test_another_right_answer_passes_too(checker, answer, capsys):
    assert checker(answer, record=False), capsys.readouterr().out


def test_the_frozen_ceiling_of_one_even_head_is_the_lessons_ceiling():
    """The checker's enumeration gives notebook 09's trigram_even_average_ceiling for one head
    over the three sources, 1 when every source has a head, and 1 / n per missing source."""
    from attention_lab.exercises import lesson09
    from attention_lab.tasks import trigram_even_average_ceiling

    assert lesson09._views_ceiling(4, [(0, 1, 2)]) == 0.3125
    assert math.isclose(trigram_even_average_ceiling(), 0.3125, rel_tol=1e-12)
    assert lesson09._views_ceiling(4, [(0,), (1,), (2,), (2,)]) == 1.0
    assert lesson09._views_ceiling(4, [(0,), (1,), (1,), (1,)]) == 0.25
    assert lesson09._views_ceiling(4, [(0, 1), (2,)]) == 10 / 16
    assert lesson09._views_ceiling(5, []) == 1 / 125


def test_each_frozen_ceiling_mistake_is_told_apart_where_the_checker_meets_it():
    """On the case where a named mistake first differs from the right answer, no other named
    mistake listed before it gives the same number (the checker names the first that matches)."""
    from attention_lab.exercises import lesson09

    cases = [
        (4, [(0, 1, 2)]),
        (4, [(0,), (1,), (2,), (2,)]),
        (4, [(0,), (1,), (1,), (1,)]),
        (4, [(0, 1), (0, 1), (2,), (2,)]),
    ]
    for n, heads in cases:
        want = lesson09._views_ceiling(n, heads)
        values = [v for v, _m, _h in lesson09._heads_mistakes(n, heads) if v != want]
        assert len({round(v, 12) for v in values}) == len(values), (n, heads, values)


def test_the_k_composition_reference_is_the_circuits_module_on_a_model():
    """On a two-layer TinyLM the checker's score of each (layer-1 head, layer-0 head) pair is
    interventions.circuits.composition_scores; its built heads score 1/√d_head, the paper's
    product 0 there."""
    from attention_lab import TinyLM, TinyLMConfig
    from attention_lab.exercises import lesson10
    from attention_lab.interventions.circuits import composition_scores, head_weights

    torch.manual_seed(0)
    model = TinyLM(TinyLMConfig(vocab_size=12, d_model=16, n_heads=4, n_layers=2))
    want = composition_scores(model, "k")  # (H, H)
    for r in range(4):
        for w in range(4):
            R, W = head_weights(model, 1, r), head_weights(model, 0, w)
            got = lesson10._k_variants(R.W_Q, R.W_K, W.W_V, W.W_O)["right"]
            assert math.isclose(got, want[r, w].item(), rel_tol=1e-6)  # float32 products there
    built = lesson10._k_variants(*lesson10._reads_the_writer(8, 2))
    assert math.isclose(built["right"], 2**-0.5, rel_tol=1e-12)
    assert built["no transpose"] == 0.0


def test_the_k_composition_mistakes_differ_on_random_weights():
    from attention_lab.exercises import lesson10

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1234)
        weights = (torch.randn(2, 8), torch.randn(2, 8), torch.randn(2, 8), torch.randn(8, 2))
    values = list(lesson10._k_variants(*weights).values())
    for i, a in enumerate(values):
        for b in values[i + 1 :]:
            assert not math.isclose(a, b, rel_tol=1e-3), values


def test_the_copy_checkers_models_copy_or_cannot_and_its_mistakes_differ():
    """The model made to copy finds the second copy far easier (a gap below -1.5 nats), the one
    with bonus 0 does not (|gap| < 0.3): a test of the test, as notebook 11's positive control.
    Each named mistake moves the answer by more than the tolerance on the first case."""
    from attention_lab.exercises import lesson11
    from attention_lab.interventions import after_previous_occurrence

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1234)
        copier = lesson11._Copier(32, 32, bonus=6.0)
        torch.manual_seed(1234)
        blank = lesson11._Copier(32, 32, bonus=0.0)  # the same table and positions
        strings, between = torch.randint(32, (200, 8)), torch.randint(32, (200, 6))
    x = torch.cat([strings, between, strings], dim=1)  # (N, T)
    bonus = copier(x) - blank(x)  # (N, T, V): 5 on one id where the copy rule applies
    rule = after_previous_occurrence(x)  # (N, T, T): keys j <= t with x[j - 1] == x[t]
    has = rule.any(dim=-1)  # (N, T)
    latest = torch.where(rule, torch.arange(x.shape[1]), 0).amax(dim=-1)  # (N, T)
    assert has.any() and not has.all()
    assert torch.equal(bonus.amax(dim=-1) > 0, has)
    assert torch.equal(bonus.argmax(dim=-1)[has], x.gather(1, latest)[has])
    gap, se = lesson11._copy_variant(copier, strings, between)
    assert gap < -1.5 and se < 0.1
    assert abs(lesson11._copy_variant(blank, strings, between)[0]) < 0.3
    right = (gap, se)
    for options in (
        dict(rows="no between"),
        dict(shifted=False),
        dict(sign=-1),
        dict(columns="second from 0"),
        dict(columns="first too far"),
        dict(columns="between in first"),
        dict(spread="losses"),
        dict(spread="sd"),
        dict(spread="chars"),
    ):
        other = lesson11._copy_variant(copier, strings, between, **options)
        assert max(abs(a - b) for a, b in zip(other, right)) > 1e-3, options


def test_the_lesson_12_references_are_the_librarys():
    """_grouped is repeat_kv (and the tiled variant is not); _rotated is apply_rope with
    rope_cos_sin, and its interleaved layout equals it under the RoFormer permutation of the
    features; the cache bytes are KVCache's measured nbytes for a TinyLM with a window."""
    from attention_lab import (
        TinyLM,
        TinyLMConfig,
        apply_rope,
        cache_bytes,
        repeat_kv,
        rope_cos_sin,
    )
    from attention_lab.exercises import lesson12

    kv = torch.randn(2, 3, 5, 4)
    assert torch.equal(lesson12._grouped(kv, 2), repeat_kv(kv, 2))
    assert not torch.equal(lesson12._grouped(kv, 2, tiled=True), repeat_kv(kv, 2))
    x = torch.randn(2, 3, 6, 8, dtype=torch.float64)
    positions = torch.arange(4, 10)
    cos, sin = rope_cos_sin(positions, 8, dtype=torch.float64)
    torch.testing.assert_close(lesson12._rotated(x, positions), apply_rope(x, cos, sin))
    # interleaved pair i = features (2i, 2i + 1): the same rotation of the permuted features
    order = torch.cat([torch.arange(0, 8, 2), torch.arange(1, 8, 2)])  # halves <- even, odd
    interleaved = lesson12._rotated(x, positions, layout="interleaved")
    torch.testing.assert_close(interleaved[..., order], lesson12._rotated(x[..., order], positions))
    model = TinyLM(TinyLMConfig(vocab_size=10, context_length=40, n_layers=2, n_kv_heads=2,
                                mask_kind="sliding", window=8))  # fmt: skip
    cache = model.new_cache()
    with torch.no_grad():
        model(torch.randint(10, (1, 20)), cache=cache)
    assert cache.nbytes() == cache_bytes(model.config, 20)
    assert cache.nbytes() == kv_cache_size(2, 4, 2, model.config.d_head, 20, torch.float32, 8)


def _copy_of_the_notebooks(tmp_path):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    for path in (make_exercises.SOLUTIONS.parent).glob("[0-9][0-9]_*.ipynb"):
        (notebooks / path.name).write_bytes(path.read_bytes())
    for name in ("exercises_solutions.ipynb", "exercises.ipynb"):
        (notebooks / name).write_bytes((make_exercises.SOLUTIONS.parent / name).read_bytes())
    return notebooks


def test_lessons_writes_only_the_blocks_it_names(tmp_path, capsys):
    """An edit to the exercises of lessons 05 and 08: `--lessons 5` rewrites 05's block only,
    leaving 08 and exercises.ipynb as they were; `--check --lessons 08` then still reports 08,
    `--check --lessons 05` nothing; an unknown lesson is refused with the ones there are."""
    notebooks = _copy_of_the_notebooks(tmp_path)
    solutions = nbformat.read(notebooks / "exercises_solutions.ipynb", as_version=4)
    for name in ("def dropout_rescale(", "def lookback_distance("):
        cell = next(c for c in solutions.cells if name in c.source)
        cell.source = cell.source.replace(name, name.replace("(", "_edited("))
    nbformat.write(solutions, notebooks / "exercises_solutions.ipynb")
    before = {p.name: p.read_bytes() for p in notebooks.glob("*.ipynb")}
    root = ["--root", str(tmp_path)]
    assert make_exercises.main([*root, "--lessons", "5", "--no-run"]) == 0
    after = {p.name: p.read_bytes() for p in notebooks.glob("*.ipynb")}
    changed = {name for name in before if before[name] != after[name]}
    assert changed == {"05_causal_head.ipynb"}
    assert "dropout_rescale_edited" in after["05_causal_head.ipynb"].decode()
    assert make_exercises.main([*root, "--check", "--lessons", "05"]) == 0
    assert make_exercises.main([*root, "--check", "--lessons", "08"]) == 1
    assert "08_training_copy_task.ipynb" in capsys.readouterr().out
    assert make_exercises.main([*root, "--check", "--learner-only"]) == 1  # not written
    with pytest.raises(SystemExit):
        make_exercises.main([*root, "--lessons", "13", "--no-run"])
    assert "no such lesson in the solutions" in capsys.readouterr().err


def test_learner_only_with_lessons_writes_both(tmp_path):
    notebooks = _copy_of_the_notebooks(tmp_path)
    solutions = nbformat.read(notebooks / "exercises_solutions.ipynb", as_version=4)
    cell = next(c for c in solutions.cells if "def dropout_rescale(" in c.source)
    cell.source = cell.source.replace("def dropout_rescale(", "def dropout_rescale_edited(")
    nbformat.write(solutions, notebooks / "exercises_solutions.ipynb")
    root = ["--root", str(tmp_path)]
    assert make_exercises.main([*root, "--learner-only", "--lessons", "05", "--no-run"]) == 0
    assert make_exercises.main([*root, "--check", "--learner-only", "--lessons", "05"]) == 0
    assert make_exercises.main([*root, "--check", "--learner-only"]) == 0
