"""A bank of the wrong answers learners write for the skeletons of lessons 02, 05 and 06, and
for the exercises that compare whole outputs (of lessons 02, 06, 09, 10, 11 and 12): each gets "not
yet", with the mistake named in the first line of the verdict; the right answers, written as a
learner would, still pass.

Every class keeps the ``__init__`` the notebook gives and writes its own ``forward``, as a
learner completing the skeleton does."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from attention_lab import causal_mask
from attention_lab.exercises import (
    check_copy_gap,
    check_cross_attention,
    check_einsum_attention,
    check_frozen_ceiling,
    check_grouped_kv,
    check_k_composition,
    check_kv_cache_size,
    check_mean_ablated_loss,
    check_offset_share,
    check_offset_weights,
    check_prefix_match_score,
    check_rotary_qkv,
    modules,
)
from attention_lab.exercises._summary import FAILED, PASSED

# --- the skeletons' __init__, as the notebooks give them ---------------------------------------


class Head02(nn.Module):
    """Notebook 02's SingleHeadAttention, forward written right."""

    def __init__(self, d_in, d_out):
        super().__init__()
        self.W_q = nn.Linear(d_in, d_out, bias=False)
        self.W_k = nn.Linear(d_in, d_out, bias=False)
        self.W_v = nn.Linear(d_in, d_out, bias=False)

    def forward(self, x):
        Q, K, V = self.W_q(x), self.W_k(x), self.W_v(x)
        weights = torch.softmax(Q @ K.transpose(-2, -1) / K.size(-1) ** 0.5, dim=-1)
        return weights @ V


class Causal05(nn.Module):
    """Notebook 05's CausalAttention, forward written right."""

    def __init__(self, d_in, d_out, context_length, dropout=0.0):
        super().__init__()
        self.W_q = nn.Linear(d_in, d_out, bias=False)
        self.W_k = nn.Linear(d_in, d_out, bias=False)
        self.W_v = nn.Linear(d_in, d_out, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", causal_mask(context_length), persistent=False)

    def scores(self, x):
        T = x.shape[1]
        q, k = self.W_q(x), self.W_k(x)
        scores = q @ k.transpose(-2, -1) / k.shape[-1] ** 0.5
        return scores.masked_fill(self.mask[:T, :T], float("-inf"))

    def forward(self, x, return_weights=False):
        weights = torch.softmax(self.scores(x), dim=-1)
        out = self.dropout(weights) @ self.W_v(x)
        return (out, weights) if return_weights else out


class MultiHead06(nn.Module):
    """Notebook 06's MultiHeadAttention, forward written right."""

    def __init__(self, d_model, n_heads, context_length, dropout=0.0):
        super().__init__()
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        self.W_q, self.W_k, self.W_v = (nn.Linear(d_model, d_model, bias=False) for _ in "qkv")
        self.W_o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", causal_mask(context_length), persistent=False)

    def split(self, t):
        B, T, D = t.shape
        return t.view(B, T, self.n_heads, self.d_head).transpose(1, 2)

    def weights(self, x, scale=None):
        T = x.shape[1]
        q, k = self.split(self.W_q(x)), self.split(self.W_k(x))
        scores = q @ k.transpose(-2, -1) / (scale or self.d_head**0.5)
        scores = scores.masked_fill(self.mask[:T, :T], float("-inf"))
        return torch.softmax(scores, dim=-1)  # (B, H, T, T)

    def attend(self, x, scale=None):
        v = self.split(self.W_v(x))
        return self.dropout(self.weights(x, scale)) @ v  # (B, H, T, d_head)

    def forward(self, x, return_weights=False):
        B, T, D = x.shape
        out = self.W_o(self.attend(x).transpose(1, 2).contiguous().view(B, T, D))
        return (out, self.weights(x)) if return_weights else out


# --- lesson 02: one head ---------------------------------------------------------------------


class ScaledByInputWidth(Head02):
    def forward(self, x):
        Q, K, V = self.W_q(x), self.W_k(x), self.W_v(x)
        return torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(x.shape[-1]), dim=-1) @ V


class Unscaled(Head02):
    def forward(self, x):
        Q, K, V = self.W_q(x), self.W_k(x), self.W_v(x)
        return torch.softmax(Q @ K.transpose(-2, -1), dim=-1) @ V


class SoftmaxOverQueries(Head02):
    def forward(self, x):
        Q, K, V = self.W_q(x), self.W_k(x), self.W_v(x)
        return torch.softmax(Q @ K.transpose(1, 2) / K.size(-1) ** 0.5, dim=1) @ V


class KeysAsValues(Head02):
    def forward(self, x):
        Q, K = self.W_q(x), self.W_k(x)
        return torch.softmax(Q @ K.transpose(-2, -1) / K.size(-1) ** 0.5, dim=-1) @ K


class NoSoftmax(Head02):
    def forward(self, x):
        Q, K, V = self.W_q(x), self.W_k(x), self.W_v(x)
        return (Q @ K.transpose(-2, -1) / K.size(-1) ** 0.5) @ V


class ReturnsWeights(Head02):
    def forward(self, x):
        Q, K = self.W_q(x), self.W_k(x)
        return torch.softmax(Q @ K.transpose(-2, -1) / K.size(-1) ** 0.5, dim=-1)


# --- lesson 05: the causal head and its dropout -----------------------------------------------


class NeverCallsDropout(Causal05):
    def forward(self, x, return_weights=False):
        weights = torch.softmax(self.scores(x), dim=-1)
        out = weights @ self.W_v(x)  # self.dropout is built but never called
        return (out, weights) if return_weights else out


class DropoutNotRescaled(Causal05):
    def forward(self, x, return_weights=False):
        weights = torch.softmax(self.scores(x), dim=-1)
        dropped = weights
        if self.training:
            dropped = weights * (torch.rand_like(weights) >= self.dropout.p)
        out = dropped @ self.W_v(x)
        return (out, weights) if return_weights else out


class DropoutInEvalToo(Causal05):
    def forward(self, x, return_weights=False):
        weights = torch.softmax(self.scores(x), dim=-1)
        out = F.dropout(weights, self.dropout.p) @ self.W_v(x)  # training=True by default
        return (out, weights) if return_weights else out


class FusedKernelDropoutAlways(Causal05):
    def forward(self, x, return_weights=False):
        q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.dropout.p)


class DropoutOnTheOutput(Causal05):
    def forward(self, x, return_weights=False):
        weights = torch.softmax(self.scores(x), dim=-1)
        out = self.dropout(weights @ self.W_v(x))
        return (out, weights) if return_weights else out


class DropoutOnTheScores(Causal05):
    def forward(self, x, return_weights=False):
        weights = torch.softmax(self.dropout(self.scores(x)), dim=-1)
        out = weights @ self.W_v(x)
        return (out, weights) if return_weights else out


class DropoutRenormalised(Causal05):
    def forward(self, x, return_weights=False):
        weights = torch.softmax(self.scores(x), dim=-1)
        dropped = self.dropout(weights)
        dropped = dropped / dropped.sum(-1, keepdim=True)  # "rows must sum to 1"
        out = dropped @ self.W_v(x)
        return (out, weights) if return_weights else out


class MaskNotAssigned(Causal05):
    def forward(self, x, return_weights=False):
        T = x.shape[1]
        q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)
        scores = q @ k.transpose(-2, -1) / k.shape[-1] ** 0.5
        scores.masked_fill(self.mask[:T, :T], float("-inf"))  # the result is thrown away
        weights = torch.softmax(scores, dim=-1)
        out = self.dropout(weights) @ v
        return (out, weights) if return_weights else out


class MaskInverted(Causal05):
    def forward(self, x, return_weights=False):
        T = x.shape[1]
        q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)
        scores = q @ k.transpose(-2, -1) / k.shape[-1] ** 0.5
        scores = scores.masked_fill(~self.mask[:T, :T], float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        out = self.dropout(weights) @ v
        return (out, weights) if return_weights else out


class MaskedWithZero(Causal05):
    def forward(self, x, return_weights=False):
        T = x.shape[1]
        q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)
        scores = q @ k.transpose(-2, -1) / k.shape[-1] ** 0.5
        scores = scores.masked_fill(self.mask[:T, :T], 0.0)
        weights = torch.softmax(scores, dim=-1)
        out = self.dropout(weights) @ v
        return (out, weights) if return_weights else out


class MaskNotSliced(Causal05):
    def forward(self, x, return_weights=False):
        q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)
        scores = q @ k.transpose(-2, -1) / k.shape[-1] ** 0.5
        scores = scores.masked_fill(self.mask, float("-inf"))  # (ctx, ctx), not (T, T)
        weights = torch.softmax(scores, dim=-1)
        out = self.dropout(weights) @ v
        return (out, weights) if return_weights else out


class UnscaledAndUnmasked(Causal05):
    def forward(self, x, return_weights=False):
        q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)
        weights = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
        out = self.dropout(weights) @ v
        return (out, weights) if return_weights else out


# --- lesson 06: several heads -----------------------------------------------------------------


class SplitWithoutTranspose(MultiHead06):
    def split(self, t):
        B, T, D = t.shape
        return t.view(B, self.n_heads, T, self.d_head)


class MergedWithoutTransposeBack(MultiHead06):
    def forward(self, x, return_weights=False):
        B, T, D = x.shape
        return self.W_o(self.attend(x).reshape(B, T, D))


class ScaledByDModel(MultiHead06):
    def forward(self, x, return_weights=False):
        B, T, D = x.shape
        context = self.attend(x, scale=D**0.5)
        return self.W_o(context.transpose(1, 2).contiguous().view(B, T, D))


class OutProjMissing(MultiHead06):
    def forward(self, x, return_weights=False):
        B, T, D = x.shape
        return self.attend(x).transpose(1, 2).contiguous().view(B, T, D)


class MultiHeadKeysAsValues(MultiHead06):
    def forward(self, x, return_weights=False):
        B, T, D = x.shape
        q, k = self.split(self.W_q(x)), self.split(self.W_k(x))
        scores = (q @ k.transpose(-2, -1) / self.d_head**0.5).masked_fill(
            self.mask[:T, :T], float("-inf")
        )
        context = self.dropout(torch.softmax(scores, dim=-1)) @ k
        return self.W_o(context.transpose(1, 2).contiguous().view(B, T, D))


class MultiHeadNeverDrops(MultiHead06):
    def forward(self, x, return_weights=False):
        B, T, D = x.shape
        q, k, v = self.split(self.W_q(x)), self.split(self.W_k(x)), self.split(self.W_v(x))
        scores = (q @ k.transpose(-2, -1) / self.d_head**0.5).masked_fill(
            self.mask[:T, :T], float("-inf")
        )
        context = torch.softmax(scores, dim=-1) @ v
        return self.W_o(context.transpose(1, 2).contiguous().view(B, T, D))


# --- exercises that compare whole outputs ------------------------------------------------------


def cross_attention_keys_as_values(x_q, x_kv, W_q, W_k, W_v):
    q, k = W_q(x_q), W_k(x_kv)
    weights = torch.softmax(q @ k.transpose(-2, -1) / k.shape[-1] ** 0.5, dim=-1)
    return weights @ k, weights


def einsum_over_queries(q, k, v, mask=None):
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-2)
    return torch.einsum("bhqk,bhkd->bhqd", weights, v), weights


def einsum_keys_as_values(q, k, v, mask=None):
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("bhqk,bhkd->bhqd", weights, k), weights


# lessons 09 to 11: a share on a fixed offset, weights that take one, the prefix-matching score,
# a head replaced by its mean


def share_with_a_mask_over_every_query(weights, k):
    """A 0/1 mask of key i - k, then the mean over all T queries (the first k count as 0)."""
    T = weights.shape[-1]
    on_key = torch.ones(T, T).tril(-k) - torch.ones(T, T).tril(-k - 1)  # (T, T)
    return (weights * on_key).sum(dim=-1).mean(dim=(0, 2))


def share_read_above_the_diagonal(weights, k):
    return torch.diagonal(weights, offset=k, dim1=-2, dim2=-1).mean(dim=(0, -1))


def weights_rolled_along_the_keys(T, k):
    return torch.eye(T).roll(k, dims=1)  # row i: key i + k


def weights_rolled_along_the_queries(T, k):
    return torch.eye(T).roll(k, dims=0)  # row i: key i - k, wrapped to the end for i < k


def prefix_match_on_the_occurrence_itself(weights, ids):
    """Weight on the earlier occurrences of the current token (ids[j] == ids[i]), j < i."""
    T = ids.shape[1]
    earlier = (ids[:, :, None] == ids[:, None, :]) & torch.ones(T, T).tril(-1).bool()
    on_earlier = (weights * earlier[:, None]).sum(dim=-1)  # (B, H, T)
    return on_earlier.transpose(0, 1)[:, earlier.any(dim=-1)].mean(dim=-1)


def prefix_match_with_rolled_ids(weights, ids):
    """ids[j - 1] from torch.roll: key 0 gets the row's last id as its previous token."""
    T = ids.shape[1]
    match = (ids.roll(1, dims=1)[:, None, :] == ids[:, :, None]) & torch.ones(T, T).tril().bool()
    on_match = (weights * match[:, None]).sum(dim=-1)  # (B, H, T)
    return on_match.transpose(0, 1)[:, match.any(dim=-1)].mean(dim=-1)


def prefix_match_over_all_queries_in_a_loop(weights, ids):
    """Every query counts, those with no earlier occurrence as 0."""
    B, H, T, _ = weights.shape
    total = torch.zeros(H)
    for b in range(B):
        for i in range(T):
            for j in range(1, i + 1):
                if ids[b, j - 1] == ids[b, i]:
                    total += weights[b, :, i, j]
    return total / (B * T)


def prefix_match_with_j_below_i(weights, ids):
    """for j in range(1, i): the query's own key is never counted."""
    B, H, T, _ = weights.shape
    total, n = torch.zeros(H), 0
    for b in range(B):
        for i in range(T):
            keys = [j for j in range(1, i) if ids[b, j - 1] == ids[b, i]]
            if keys:
                total += weights[b, :, i, keys].sum(dim=-1)
                n += 1
    return total / n


def loss_with_a_hook_on_the_attention_output(model, ids, reference, heads):
    """Replaces columns of what the attention block returns (after out_proj) by their mean."""
    from attention_lab.charlm import evaluate_loss

    attns = [block.attn for block in model.blocks]
    seen = {}
    grabs = [
        attns[layer].register_forward_hook(lambda m, a, out, layer=layer: seen.update({layer: out}))
        for layer, _head in heads
    ]
    with torch.no_grad():
        model(reference)
    for grab in grabs:
        grab.remove()

    def hook_for(layer, head):
        d = attns[layer].d_head
        mean = seen[layer].mean(dim=(0, 1))[head * d : (head + 1) * d]

        def hook(_module, _args, out):
            out = out.clone()
            out[..., head * d : (head + 1) * d] = mean
            return out

        return hook

    handles = [attns[layer].register_forward_hook(hook_for(layer, head)) for layer, head in heads]
    try:
        return evaluate_loss(model, ids)
    finally:
        for handle in handles:
            handle.remove()


def loss_with_zero_ablation(model, ids, reference, heads):
    from attention_lab.charlm import evaluate_loss
    from attention_lab.interventions import ablate_heads

    with ablate_heads(model, heads, how="zero"):
        return evaluate_loss(model, ids)


# lessons 09 to 12, the exercises on the idea: written as a learner would, not as the checker's
# own variants are


def ceiling_from_a_counter_of_bags(n_letters, heads):
    """For one head over the three sources: the mean of 1 / (orders) over the bags."""
    import itertools
    from collections import Counter

    value = 1.0
    for head in {tuple(sorted(h)) for h in heads}:
        bags = Counter(
            tuple(sorted(w)) for w in itertools.product(range(n_letters), repeat=len(head))
        )
        value *= sum(1 / orders for orders in bags.values()) / len(bags)
    return value


def ceiling_without_the_missing_letter(n_letters, heads):
    """Counts views as the checker does, but never guesses a letter no head brings."""
    import itertools

    groups = sorted({tuple(sorted(h)) for h in heads})
    seen = sorted({k for g in groups for k in g})
    words = list(itertools.product(range(n_letters), repeat=len(seen)))
    views = {tuple(tuple(sorted(w[seen.index(k)] for k in g)) for g in groups) for w in words}
    return len(views) / len(words)


def k_score_as_in_the_paper(W_Q, W_K, W_V, W_O):
    """Elhage's ‖W_QK W_OV‖ typed in with the chapter's row-vector W_OV."""
    qk = W_Q.t() @ W_K
    ov = W_V.t() @ W_O.t()
    return float(torch.linalg.norm(qk @ ov) / (torch.linalg.norm(qk) * torch.linalg.norm(ov)))


def k_score_without_the_norms(W_Q, W_K, W_V, W_O):
    return float(torch.linalg.norm((W_Q.t() @ W_K) @ (W_V.t() @ W_O.t()).t()))


def copy_gap_in_a_loop_without_the_shift(model, strings, between):
    """Each position's loss against its own id, string by string."""
    N, m = strings.shape
    gaps = []
    for n in range(N):
        row = torch.cat([strings[n], between[n], strings[n]])
        with torch.no_grad():
            loss = F.cross_entropy(model(row[None])[0], row, reduction="none")  # (T,)
        gaps.append(loss[-(m - 1) :].mean() - loss[1:m].mean())
    gaps = torch.stack(gaps)
    return gaps.mean().item(), (gaps.std() / N**0.5).item()


def copy_gap_reported_with_its_std(model, strings, between):
    m, f = strings.shape[1], between.shape[1]
    rows = torch.cat([strings, between, strings], dim=1)
    with torch.no_grad():
        logp = model(rows).log_softmax(dim=-1)[:, :-1]  # (N, T - 1, V)
    loss = -logp.gather(-1, rows[:, 1:, None])[..., 0]  # (N, T - 1)
    gaps = loss[:, m + f :].mean(dim=1) - loss[:, : m - 1].mean(dim=1)
    return gaps.mean().item(), gaps.std().item()


def kv_heads_stacked_in_a_list(kv, n_rep):
    return torch.cat([kv] * n_rep, dim=1)  # kv 0, 1, 0, 1, ...


def kv_heads_expanded_but_not_merged(kv, n_rep):
    return kv.unsqueeze(2).expand(-1, -1, n_rep, -1, -1)


def rope_with_complex_numbers(q, k, v, start):
    """RoFormer's form: neighbouring features as one complex number."""
    T, d = q.shape[-2:]
    theta = 10_000.0 ** (-torch.arange(0, d, 2).float() / d)  # (d/2,)
    turn = torch.polar(torch.ones(T, d // 2), torch.arange(start, start + T)[:, None] * theta)

    def rotate(x):
        pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], d // 2, 2))
        return torch.view_as_real(pairs * turn).flatten(-2)

    return rotate(q), rotate(k), v


def rope_on_all_three(q, k, v, start):
    from attention_lab import apply_rope, rope_cos_sin

    cos, sin = rope_cos_sin(torch.arange(start, start + q.shape[-2]), q.shape[-1])
    return tuple(apply_rope(x, cos, sin) for x in (q, k, v))


def rope_forgetting_the_cache(q, k, v, start):
    from attention_lab import apply_rope, rope_cos_sin

    cos, sin = rope_cos_sin(torch.arange(q.shape[-2]), q.shape[-1])
    return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v


def cache_bytes_from_d_model(n_layers, n_heads, n_kv_heads, d_head, T, dtype, window=None):
    d_model = n_heads * d_head
    tokens = T if window is None else min(T, window)
    return 2 * n_layers * d_model * tokens * torch.empty(0, dtype=dtype).element_size()


def cache_bytes_from_the_bit_width(n_layers, n_heads, n_kv_heads, d_head, T, dtype, window=None):
    tokens = T if window is None else min(T, window)
    return 2 * n_layers * n_kv_heads * d_head * tokens * torch.finfo(dtype).bits


def cache_bytes_ignoring_the_window(n_layers, n_heads, n_kv_heads, d_head, T, dtype, window=None):
    return 2 * n_layers * n_kv_heads * d_head * T * torch.empty(0, dtype=dtype).element_size()


single, causal, multi = (
    modules.check_single_head_class,
    modules.check_causal_attention_class,
    modules.check_multi_head_class,
)

# (checker, wrong answer, the words that name its mistake in the verdict's first line)
BANK = [
    (single, ScaledByInputWidth, "instead of √d_head"),
    (single, Unscaled, "no scaling"),
    (single, SoftmaxOverQueries, "softmax over the wrong axis (queries instead of keys)"),
    (single, KeysAsValues, "used the head's K where V belongs"),
    (single, NoSoftmax, "no softmax"),
    (single, ReturnsWeights, "returned the weights"),
    (causal, NeverCallsDropout, "dropout never applied"),
    (causal, DropoutNotRescaled, "dropout not rescaled"),
    (causal, DropoutInEvalToo, "dropout active in eval mode"),
    (causal, FusedKernelDropoutAlways, "dropout active in eval mode"),
    (causal, DropoutOnTheOutput, "dropout acts on the output"),
    (causal, DropoutOnTheScores, "dropout was applied to the scores"),
    (causal, DropoutRenormalised, "renormalised after dropout"),
    (causal, MaskNotAssigned, "forgot the causal mask"),
    (causal, MaskInverted, "the causal mask is inverted"),
    (causal, MaskedWithZero, "set to 0, not to -inf"),
    (causal, MaskNotSliced, "the mask was not sliced"),
    (causal, UnscaledAndUnmasked, "no scaling"),
    (causal, UnscaledAndUnmasked, "forgot the causal mask"),
    (multi, SplitWithoutTranspose, "split with view(B, H, T, d_head), no transpose"),
    (multi, MergedWithoutTransposeBack, "merged the heads without transposing back"),
    (multi, ScaledByDModel, "scaled by √d_model = √12 instead of √d_head = √4"),
    (multi, OutProjMissing, "out_proj missing"),
    (multi, MultiHeadKeysAsValues, "used the head's K where V belongs"),
    (multi, MultiHeadNeverDrops, "dropout never applied"),
    (check_cross_attention, cross_attention_keys_as_values, "the keys where the values belong"),
    (check_einsum_attention, einsum_over_queries, "softmax over the wrong axis"),
    (check_einsum_attention, einsum_keys_as_values, "the keys where the values belong"),
    (check_offset_share, share_with_a_mask_over_every_query, "divided by all 12 queries"),
    (check_offset_share, share_read_above_the_diagonal, "you read key i + k"),
    (check_offset_weights, weights_rolled_along_the_keys, "the future, above the diagonal"),
    (check_offset_weights, weights_rolled_along_the_queries, "torch.roll wraps around"),
    (check_prefix_match_score, prefix_match_on_the_occurrence_itself, "not on the tokens just"),
    (check_prefix_match_score, prefix_match_with_rolled_ids, "torch.roll wrapped the last id"),
    (check_prefix_match_score, prefix_match_over_all_queries_in_a_loop, "divided by all 48"),
    (check_prefix_match_score, prefix_match_with_j_below_i, "you left out key j = i"),
    (check_mean_ablated_loss, loss_with_a_hook_on_the_attention_output, "out_proj's output"),
    (check_mean_ablated_loss, loss_with_zero_ablation, "set to zero, not to their mean"),
    (check_frozen_ceiling, ceiling_from_a_counter_of_bags, "as if every bag were equally likely"),
    (check_frozen_ceiling, ceiling_without_the_missing_letter, "no head takes"),
    (check_k_composition, k_score_as_in_the_paper, "the paper's product"),
    (check_k_composition, k_score_without_the_norms, "without dividing"),
    (check_copy_gap, copy_gap_in_a_loop_without_the_shift, "against its own id"),
    (check_copy_gap, copy_gap_reported_with_its_std, "not its standard error"),
    (check_grouped_kv, kv_heads_stacked_in_a_list, "you tiled the heads"),
    (check_grouped_kv, kv_heads_expanded_but_not_merged, "still a dimension of their own"),
    (check_rotary_qkv, rope_with_complex_numbers, "interleaved layout"),
    (check_rotary_qkv, rope_on_all_three, "you turned v too"),
    (check_rotary_qkv, rope_forgetting_the_cache, "as if no token came before"),
    (check_kv_cache_size, cache_bytes_from_d_model, "query heads"),
    (check_kv_cache_size, cache_bytes_from_the_bit_width, "that is bits"),
    (check_kv_cache_size, cache_bytes_ignoring_the_window, "keeps only the last 64"),
]


def first_line(check, answer) -> tuple[str, str]:
    verdict = check(answer, record=False)
    return verdict.status, str(verdict).splitlines()[0]


@pytest.mark.parametrize(
    "check, answer, words",
    BANK,
    ids=[f"{answer.__name__}-{words}" for _check, answer, words in BANK],
)
def test_a_typical_wrong_answer_is_named_in_the_first_line(check, answer, words):
    status, line = first_line(check, answer)
    assert status == FAILED, line
    assert words in line, line
    assert "differs" not in line, line  # named, not only measured


def test_the_bank_holds_at_least_twelve_different_mistakes():
    assert len({answer for _check, answer, _words in BANK}) >= 12


class CausalWithFunctionalDropout(Causal05):
    """Right as well: F.dropout told the mode."""

    def forward(self, x, return_weights=False):
        weights = torch.softmax(self.scores(x), dim=-1)
        dropped = F.dropout(weights, self.dropout.p, training=self.training)
        out = dropped @ self.W_v(x)
        return (out, weights) if return_weights else out


class CausalWithFusedKernel(Causal05):
    """Right as well: PyTorch's fused kernel, its dropout off in eval mode."""

    def forward(self, x, return_weights=False):
        q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)
        p = self.dropout.p if self.training else 0.0
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=p)
        # the kernel keeps its weights to itself: the notebook draws them, so compute them
        return (out, torch.softmax(self.scores(x), dim=-1)) if return_weights else out


@pytest.mark.parametrize(
    "check, answer",
    [
        (single, Head02),
        (causal, Causal05),
        (causal, CausalWithFunctionalDropout),
        (causal, CausalWithFusedKernel),
        (multi, MultiHead06),
    ],
)
def test_the_right_answers_still_pass(check, answer):
    verdict = check(answer, record=False)
    assert verdict.status == PASSED, str(verdict)


def test_the_causal_check_trains_the_dropout_it_teaches():
    """A head that never calls its dropout gives the library's numbers in eval mode, so only
    a check in training mode can fail it: the verdict says the check trained it."""
    status, line = first_line(causal, NeverCallsDropout)
    assert status == FAILED
    assert "training mode with dropout=0.25" in line
