"""Lesson 02 · query, key, value (notebooks/02_query_key_value.ipynb): cross-attention, where the
queries come from one sequence and the keys and values from another; with one sequence in both
roles it is the self-attention of ``SingleHeadAttention``."""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from ..heads import SingleHeadAttention
from ..i18n import N_, _
from .core import Wrong, answer_tensor, call, checker, close

# --- exercise 2.1: cross-attention -----------------------------------------------------------


@checker("02", N_("queries from x_q, keys and values from x_kv: the two may differ in length"))
def check_cross_attention(fn) -> str:
    """``fn(x_q, x_kv, W_q, W_k, W_v) -> (out, weights)``: x_q is (B, T_q, d_in), x_kv is
    (B, T_kv, d_in), each W_* an ``nn.Linear(d_in, d_head, bias=False)``; queries from x_q, keys
    and values from x_kv; out is (B, T_q, d_head), weights (B, T_q, T_kv)."""
    for B, T_q, T_kv, d_in, d_head in ((1, 4, 4, 6, 4), (2, 3, 5, 8, 8), (2, 6, 2, 5, 3)):
        head = SingleHeadAttention(d_in, d_head).eval()
        x_q, x_kv = torch.randn(B, T_q, d_in), torch.randn(B, T_kv, d_in)
        with torch.no_grad():
            q, k, v = head.W_q(x_q), head.W_k(x_kv), head.W_v(x_kv)  # (B, T_q|T_kv, d_head)
            scores = q @ k.transpose(-2, -1)  # (B, T_q, T_kv), unscaled
            want_w = torch.softmax(scores / math.sqrt(d_head), dim=-1)  # (B, T_q, T_kv)
            want_out = want_w @ v  # (B, T_q, d_head)
            layers = [_copy(layer) for layer in (head.W_q, head.W_k, head.W_v)]
            result = call(fn, x_q.clone(), x_kv.clone(), *layers)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise Wrong(
                _("your function returned a {type}, not (out, weights)").format(
                    type=type(result).__name__
                ),
                _("return out, weights"),
            )
        where = _("with T_q={T_q} queries and T_kv={T_kv} keys").format(T_q=T_q, T_kv=T_kv)
        got_w = result[1]
        if isinstance(got_w, torch.Tensor) and T_q != T_kv:
            if tuple(got_w.shape) == (B, T_kv, T_q):
                raise Wrong(
                    _("{where}, the weights are (B, T_kv, T_q) = {shape}: keys on the rows").format(
                        where=where, shape=tuple(got_w.shape)
                    ),
                    _("row i holds query i: scores = q @ k.transpose(-2, -1), (B, T_q, T_kv)"),
                )
            if tuple(got_w.shape) in ((B, T_q, T_q), (B, T_kv, T_kv)):
                raise Wrong(
                    _(
                        "{where}, the weights are {shape}: queries and keys come from "
                        "the same sequence"
                    ).format(where=where, shape=tuple(got_w.shape)),
                    _("queries from x_q, keys (and values) from x_kv"),
                )
        weights = answer_tensor(got_w, "weights", (B, T_q, T_kv))
        out = answer_tensor(result[0], "out", (B, T_q, d_head))
        if close(weights, want_w) and close(out, want_out):
            continue
        if close(weights, torch.softmax(scores, dim=-1)):
            raise Wrong(
                _("{where}, the scores are not scaled").format(where=where),
                _(
                    "divide q @ k.transpose(-2, -1) by √d_head (here √{d_head}) before the softmax"
                ).format(d_head=d_head),
            )
        if close(weights, torch.softmax(scores / math.sqrt(d_head), dim=-2)):
            raise Wrong(
                _("{where}, each column of the weights sums to 1, not each row").format(
                    where=where
                ),
                _("softmax over the keys, the last dimension: torch.softmax(scores, dim=-1)"),
            )
        if T_q == T_kv and close(weights, want_w.transpose(-2, -1)):
            raise Wrong(
                _(
                    "{where}, the weights are transposed: keys on the rows, queries on the columns"
                ).format(where=where),
                _("row i holds query i: scores = q @ k.transpose(-2, -1), (B, T_q, T_kv)"),
            )
        if T_q == T_kv:
            with torch.no_grad():
                self_w = torch.softmax(
                    q @ head.W_k(x_q).transpose(-2, -1) / math.sqrt(d_head), dim=-1
                )  # keys from x_q by mistake
                self_out = want_w @ head.W_v(x_q)  # values from x_q by mistake
            if close(weights, self_w):
                raise Wrong(
                    _("{where}, the keys come from x_q").format(where=where),
                    _("keys (and values) come from x_kv"),
                )
            if close(weights, want_w) and close(out, self_out):
                raise Wrong(
                    _("{where}, the weights are right, but the values come from x_q").format(
                        where=where
                    ),
                    _("the values come from the sequence being read: v = W_v(x_kv)"),
                )
        if not close(weights, want_w):
            raise Wrong(
                _("{where}, the weights differ from the reference by up to {gap:.3f}").format(
                    where=where, gap=(weights - want_w).abs().max().item()
                ),
                _(
                    "q = W_q(x_q), k = W_k(x_kv); "
                    "weights = softmax(q @ k.transpose(-2, -1) / √d_head)"
                ),
            )
        if close(out, weights @ k):
            raise Wrong(
                _(
                    "{where}, the weights are right, but out uses the keys where the values belong"
                ).format(where=where),
                _("out is the weighted average of the values: weights @ W_v(x_kv)"),
            )
        raise Wrong(
            _("{where}, the weights are right but out is not").format(where=where),
            _("out is the weighted average of the values: weights @ W_v(x_kv)"),
        )
    with torch.no_grad():
        head = SingleHeadAttention(6, 4).eval()
        x = torch.randn(2, 5, 6)  # (B, T, d_in)
        layers = [_copy(layer) for layer in (head.W_q, head.W_k, head.W_v)]
        out, _weights = call(fn, x, x, *layers)
        same = close(out, head(x))
    if same:
        return _(
            "queries from one sequence, keys and values from the other; "
            "with x_q = x_kv it is SingleHeadAttention's self-attention"
        )
    return _("queries from one sequence, keys and values from the other")


def _copy(layer: nn.Linear) -> nn.Linear:
    """A copy of ``layer`` for the learner, so that nothing it does changes the reference."""
    twin = nn.Linear(layer.in_features, layer.out_features, bias=layer.bias is not None)
    twin.load_state_dict(layer.state_dict())
    return twin
