"""Lesson 10 · two layers and induction heads (notebooks/10_induction_heads.ipynb): the
prefix-matching score of every head, measured by hand, and the K-composition score of two
heads, read from their weights.
"""

from __future__ import annotations

import math

import torch

from ..i18n import N_, _
from ..interventions import after_previous_occurrence, source_shares
from ..masks import causal_mask
from .core import (
    Wrong,
    answer_number,
    answer_tensor,
    call,
    checker,
    close,
    example_scores,
    masked_softmax,
)

# --- exercise 10.1: the prefix-matching score, per head --------------------------------------

# the first case's ids, written out so that each mistake gives its own scores: a token just
# after itself (1 1, 2 2 2), tokens seen two and three times before, rows with different counts
# of matching queries, and last tokens seen before (rows 1-3) and not (row 0)
_IDS = torch.tensor(
    [
        [3, 1, 0, 1, 1, 2, 3, 1, 0, 2, 0, 4],
        [2, 2, 2, 0, 1, 3, 3, 4, 4, 1, 1, 0],
        [0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2],
        [4, 3, 4, 3, 1, 1, 0, 2, 0, 0, 2, 3],
    ]
)
# (B, H, T, vocabulary) of the cases after it: random ids from few values, so that tokens repeat
_CASES = ((4, 4, 12, 5), (3, 2, 10, 4), (2, 3, 16, 6), (5, 1, 8, 3))


def _keys_rule(
    ids: torch.Tensor,
    shift: int = 1,
    *,
    strict: bool = False,
    causal: bool = True,
    wrap: bool = False,
    latest: bool = False,
) -> torch.Tensor:
    """(B, T) ids -> (B, T, T) bool, [b, i, j]: key j counts for query i when
    ids[j - shift] == ids[i], written independently of ``after_previous_occurrence``.

    shift=1, j <= i: the prefix-matching rule. The variants are the checker's mistakes:
    ``shift=0`` the earlier occurrence itself, ``shift=-1`` the token before it; ``strict``
    j < i; ``causal=False`` every j; ``wrap`` key 0's previous token is ids[T - 1] (torch.roll);
    ``latest`` only the key after the latest earlier occurrence."""
    B, T = ids.shape
    j = torch.arange(T)  # (T,)
    source = j - shift  # (T,): the position key j is compared by
    exists = torch.ones(T, dtype=torch.bool) if wrap else (source >= 0) & (source < T)  # (T,)
    compared = ids[:, source % T]  # (B, T): ids[j - shift] for every key j
    rule = (compared[:, None, :] == ids[:, :, None]) & exists  # (B, T, T)
    if causal:
        below = j[None, :] < j[:, None] if strict else j[None, :] <= j[:, None]  # (T, T)
        rule = rule & below
    if latest:
        last = torch.where(rule, j, -1).max(dim=-1).values  # (B, T): the latest key, -1: none
        rule = (j == last[..., None]) & (last[..., None] >= 0)  # (B, T, T)
    return rule


def _score(weights: torch.Tensor, rule: torch.Tensor, *, over: str = "pairs", keys="sum"):
    """(B, H, T, T) weights, (B, T, T) rule -> (H,) or (B, H): each query's total weight on its
    keys, averaged over the (row, query) pairs that have a key (``over="pairs"``), or the
    checker's mistakes: ``"all"`` every query, ``"rows"`` each row then the rows, ``"sum"``
    no division, ``"per_row"`` (B, H); ``keys="mean"`` the mean over a query's keys."""
    counts = rule.sum(dim=-1)  # (B, T): keys per query
    on_keys = (weights * rule[:, None]).sum(dim=-1)  # (B, H, T)
    if keys == "mean":
        on_keys = on_keys / counts.clamp(min=1)[:, None]
    counted = (counts > 0)[:, None].to(weights.dtype).expand_as(on_keys)  # (B, H, T)
    if over == "all":
        return on_keys.mean(dim=(0, 2))
    if over == "sum":
        return (on_keys * counted).sum(dim=(0, 2))
    per_row = (on_keys * counted).sum(dim=2) / counted.sum(dim=2)  # (B, H)
    if over == "per_row":
        return per_row
    if over == "rows":
        return per_row.mean(dim=0)
    return (on_keys * counted).sum(dim=(0, 2)) / counted.sum(dim=(0, 2))


def _case(number: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Case ``number``: causal softmax weights (B, H, T, T) and ids (B, T), the first case's
    ids ``_IDS``, the others' drawn from V values."""
    B, H, T, V = _CASES[number]
    weights = masked_softmax(example_scores(B, H, T, T), causal_mask(T))  # (B, H, T, T)
    ids = _IDS.clone() if number == 0 else torch.randint(0, V, (B, T))  # (B, T)
    return weights, ids


def _mistakes(weights: torch.Tensor, ids: torch.Tensor, where: str):
    """``[(shares (H,), message, hint)]``: what each typical mistake returns on this case."""
    B, T = ids.shape
    rule = _keys_rule(ids)  # (B, T, T)
    counted = int(rule.any(dim=-1).sum())
    itself = _(
        "{where}, you took the weight on the earlier occurrences of the current token "
        "(ids[j] == ids[i]), not on the tokens just after them"
    ).format(where=where)
    itself_hint = _(
        "key j counts when the token before it, ids[j - 1], equals ids[i]: the key one "
        "to the right of each earlier occurrence"
    )
    before = _(
        "{where}, you matched ids[j + 1] == ids[i]: the keys just before the earlier "
        "occurrences, not just after them"
    ).format(where=where)
    before_hint = _("the token before key j is ids[j - 1], so key j = (earlier occurrence) + 1")
    return [
        (_score(weights, _keys_rule(ids, 0)), itself, itself_hint),
        (_score(weights, _keys_rule(ids, 0, strict=True)), itself, itself_hint),
        (_score(weights, _keys_rule(ids, -1)), before, before_hint),
        (_score(weights, _keys_rule(ids, -1, strict=True)), before, before_hint),
        (
            _score(weights, _keys_rule(ids, strict=True)),
            _(
                "{where}, you left out key j = i: where the previous token equals the current "
                "one (ids[i - 1] == ids[i]), the token just after that earlier occurrence is "
                "the query's own"
            ).format(where=where),
            _("let j run up to i included: keys j <= i, as after_previous_occurrence does"),
        ),
        (
            _score(weights, _keys_rule(ids, causal=False)),
            _(
                "{where}, you also counted queries whose only matching keys lie in the "
                "future (j > i): the causal mask gives those keys no weight, and these "
                "queries' zeros pull the mean down"
            ).format(where=where),
            _(
                "keep only the keys j <= i (torch.tril) before you decide which queries "
                "have a matching key"
            ),
        ),
        (
            _score(weights, _keys_rule(ids, wrap=True)),
            _(
                "{where}, key 0 counts for the queries whose token equals the last one, "
                "ids[T - 1]: torch.roll wrapped the last id around to stand before key 0"
            ).format(where=where),
            _(
                "key 0 has no previous token, so it never counts: put a column of False "
                "in front instead of rolling"
            ),
        ),
        (
            _score(weights, rule, over="all"),
            _(
                "{where}, you divided by all {total} (row, query) pairs, but only {counted} "
                "have an earlier occurrence of their token: the others' zeros pull the mean down"
            ).format(where=where, total=B * T, counted=counted),
            _("average over the (row, query) pairs that have at least one matching key only"),
        ),
        (
            _score(weights, rule, over="rows"),
            _(
                "{where}, you averaged each row first, then the rows: a row with few "
                "matching queries weighs as much as a row with many"
            ).format(where=where),
            _(
                "pool the matching (row, query) pairs of the whole batch, then divide by "
                "their count"
            ),
        ),
        (
            _score(weights, rule, over="sum"),
            _("{where}, your scores are sums over the queries, not means").format(where=where),
            _("divide by the number of (row, query) pairs that have a matching key"),
        ),
        (
            _score(weights, rule, keys="mean"),
            _(
                "{where}, you averaged the weights of a query's matching keys, but the "
                "score is their total: a token seen twice before has two keys to look at"
            ).format(where=where),
            _("sum each query's weights over all its matching keys, then average the queries"),
        ),
        (
            _score(weights, _keys_rule(ids, latest=True)),
            _(
                "{where}, you counted only the key after the latest earlier occurrence; "
                "the key after every earlier occurrence counts"
            ).format(where=where),
            _("sum over every key j <= i with ids[j - 1] == ids[i]"),
        ),
    ]


@checker("10", N_("return a (H,) tensor: one prefix-matching score per head"))
def check_prefix_match_score(fn) -> str:
    """``fn(weights (B, H, T, T), ids (B, T)) -> (H,)``: for each head, the mean over the
    (row, query) pairs that have one of the total weight query i puts on the keys j <= i
    with ids[j - 1] == ids[i]: the token just after an earlier occurrence of the current one."""
    for number, (B, H, T, _V) in enumerate(_CASES):
        weights, ids = _case(number)
        want = source_shares(weights, keys=after_previous_occurrence(ids))  # (H,)
        got = call(fn, weights.clone(), ids.clone())
        where = _("with weights of shape {shape} and ids of shape {ids}").format(
            shape=(B, H, T, T), ids=(B, T)
        )
        if isinstance(got, torch.Tensor) and got.dim() == 0 and H > 1:
            raise Wrong(
                _("{where}, you returned one number: the heads were averaged together").format(
                    where=where
                ),
                _("keep the head axis: average over the rows and the queries only"),
            )
        if isinstance(got, torch.Tensor) and tuple(got.shape) == (B, H):
            raise Wrong(
                _("{where}, you returned one score per row and head, shape (B, H)").format(
                    where=where
                ),
                _("average over the rows too: one score per head, shape (H,)"),
            )
        got = answer_tensor(got, _("the scores {where}").format(where=where), (H,))
        if close(got, want):
            continue
        for shares, message, hint in _mistakes(weights, ids, where):
            if close(got, shares):
                raise Wrong(message, hint)
        raise Wrong(
            _("{where}, your scores differ by up to {gap:.3f}").format(
                where=where,
                gap=(got.detach().double() - want.double()).abs().max().item(),
            ),
            _(
                "for each row b and query i, add weights[b, h, i, j] over the keys j <= i "
                "with ids[b, j - 1] == ids[b, i]; average over the (b, i) that have such a key"
            ),
        )
    return _(
        "for every head: the weight on the tokens just after earlier occurrences of the "
        "current token, over the queries that have one"
    )


# --- exercise 10.2: the K-composition score of two heads -------------------------------------


def _frobenius_ratio(M: torch.Tensor, A: torch.Tensor, B: torch.Tensor) -> float:
    return (M.norm() / (A.norm() * B.norm())).item()


def _k_variants(W_Q, W_K, W_V, W_O) -> dict[str, float]:
    """The K-composition score and what each typical mistake gives, in float64, written from
    the maths of the exercise (the key of the reading head reads r_j = x_j + y_j W_OV)."""
    W_Q, W_K, W_V, W_O = (w.double() for w in (W_Q, W_K, W_V, W_O))
    QK = W_Q.T @ W_K  # (D, D): s_ij = x_i QK x_j^T
    OV = W_V.T @ W_O.T  # (D, D): the writer reads y, writes y OV
    spectral = torch.linalg.matrix_norm(QK @ OV.T, ord=2).item()
    return {
        "right": _frobenius_ratio(QK @ OV.T, QK, OV),
        "no transpose": _frobenius_ratio(QK @ OV, QK, OV),
        "query side": _frobenius_ratio(OV @ QK, QK, OV),
        "transpose first": _frobenius_ratio(OV.T @ QK, QK, OV),
        "unnormalised": (QK @ OV.T).norm().item(),
        "four norms": (
            (QK @ OV.T).norm() / (W_Q.norm() * W_K.norm() * W_V.norm() * W_O.norm())
        ).item(),
        "spectral": spectral / (QK.norm() * OV.norm()).item(),
    }


def _reads_the_writer(D: int, d_head: int) -> tuple[torch.Tensor, ...]:
    """W_Q, W_K (reader) and W_V, W_O (writer), (d_head, D) and (D, d_head): a writer that
    copies the first d_head features into the next d_head ones, and a reading head whose key
    reads exactly those d_head features (its query reads the last ones): a key that reads
    what the writer writes, the best K-composition there is, 1 / sqrt(d_head)."""
    eye = torch.eye(D)
    W_V = eye[:d_head]  # (d_head, D): reads features 0 .. d_head - 1
    W_O = eye[:, d_head : 2 * d_head]  # (D, d_head): writes them to d_head .. 2 d_head - 1
    W_K = eye[d_head : 2 * d_head]  # (d_head, D): the key reads what the writer wrote
    W_Q = eye[D - d_head :]  # (d_head, D)
    return W_Q, W_K, W_V, W_O


@checker("10", N_("return one float: the K-composition score of the two heads"))
def check_k_composition(fn) -> str:
    """``fn(W_Q, W_K, W_V, W_O) -> float``: the K-composition score of a reading head (its
    W_Q, W_K, rows of qkv.weight, (d_head, D)) with a writing head of an earlier layer (its
    W_V, (d_head, D), and W_O, columns of out_proj.weight, (D, d_head)):
    ‖W_QK W_OVᵀ‖_F / (‖W_QK‖_F ‖W_OV‖_F), W_QK = W_Qᵀ W_K, W_OV = W_Vᵀ W_Oᵀ."""
    cases = [("random", 8, 2), ("random", 16, 4), ("random", 12, 6), ("built", 8, 2)]
    built = _k_variants(*_reads_the_writer(8, 2))  # what each product gives on the built heads
    for kind, D, d_head in cases:
        if kind == "built":
            weights = _reads_the_writer(D, d_head)
        else:
            weights = (
                torch.randn(d_head, D),
                torch.randn(d_head, D),
                torch.randn(d_head, D),
                torch.randn(D, d_head),
            )
        scores = _k_variants(*weights)
        want = scores["right"]
        if kind == "built":
            where = _(
                "on heads where the key reads exactly what the writer writes (D={D}, d_head={d})"
            ).format(D=D, d=d_head)
        else:
            where = _("on random weights with D={D}, d_head={d}").format(D=D, d=d_head)
        answer = call(fn, *(w.clone() for w in weights))
        if isinstance(answer, torch.Tensor) and answer.dim() == 2 and answer.numel() > 1:
            raise Wrong(
                _("{where}, you returned a {shape} matrix, not its score").format(
                    where=where, shape=tuple(answer.shape)
                ),
                _("return ‖W_QK W_OVᵀ‖ / (‖W_QK‖ ‖W_OV‖): one number, .item()"),
            )
        got = answer_number(answer, where, _("return one float"))
        if math.isclose(got, want, rel_tol=1e-4, abs_tol=1e-6):
            continue
        mistakes = {
            "no transpose": (
                _(
                    "{where}, your score is {got:.3f}, not {want:.3f}: you multiplied W_QK W_OV, "
                    "the paper's product; with row vectors the key reads y_j W_OV, so the "
                    "score holds W_QK (y_j W_OV)ᵀ = W_QK W_OVᵀ y_jᵀ. On heads whose key reads "
                    "exactly what the writer writes, W_QK W_OV scores {zero:.3f}, W_QK W_OVᵀ "
                    "{best:.3f}"
                ),
                _(
                    "Elhage et al. write columns (W_OV = W_O W_V); here a head writes y W_Vᵀ "
                    "W_Oᵀ: transpose W_OV, W_QK @ W_OV.T"
                ),
            ),
            "query side": (
                _(
                    "{where}, your score is {got:.3f}, not {want:.3f}: W_OV W_QK is "
                    "Q-composition, the query reading the writer, not the key"
                ),
                _("the key is the right-hand side of x_i W_QK x_jᵀ: W_QK @ W_OV.T"),
            ),
            "transpose first": (
                _(
                    "{where}, your score is {got:.3f}, not {want:.3f}: you multiplied "
                    "W_OVᵀ W_QK, with W_OV on the query's side"
                ),
                _("the key is the right-hand side of x_i W_QK x_jᵀ: W_QK @ W_OV.T"),
            ),
            "unnormalised": (
                _(
                    "{where}, your score is {got:.3f}, not {want:.3f}: ‖W_QK W_OVᵀ‖ without "
                    "dividing by ‖W_QK‖ ‖W_OV‖; it grows with the weights' size"
                ),
                _("divide by the Frobenius norms of the two factors, W_QK.norm() * W_OV.norm()"),
            ),
            "four norms": (
                _(
                    "{where}, your score is {got:.3f}, not {want:.3f}: you divided by the norms "
                    "of the four slices, not of W_QK and W_OV"
                ),
                _("divide by the norms of the two (D, D) factors: W_QK.norm() * W_OV.norm()"),
            ),
            "spectral": (
                _(
                    "{where}, your score is {got:.3f}, not {want:.3f}: you took the largest "
                    "singular value of the product (ord=2), not its Frobenius norm"
                ),
                _("the score uses Frobenius norms throughout: .norm()"),
            ),
        }
        for name, (message, hint) in mistakes.items():
            if math.isclose(got, scores[name], rel_tol=1e-4, abs_tol=1e-6):
                raise Wrong(
                    message.format(
                        where=where,
                        got=got,
                        want=want,
                        zero=built["no transpose"],
                        best=built["right"],
                    ),
                    hint,
                )
        raise Wrong(
            _("{where}, your score is {got:.4f}; the K-composition score is {want:.4f}").format(
                where=where, got=got, want=want
            ),
            _(
                "W_QK = W_Q.T @ W_K and W_OV = W_V.T @ W_O.T, both (D, D); the score is "
                "(W_QK @ W_OV.T).norm() / (W_QK.norm() * W_OV.norm())"
            ),
        )
    return _(
        "the K-composition score: 1/√d_head where the key reads exactly what the writer writes, "
        "and on random weights"
    )
