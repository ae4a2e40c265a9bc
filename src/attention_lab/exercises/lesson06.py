"""Lesson 06 · multi-head attention (notebooks/06_multi_head.ipynb): take one head out of a
``MultiHeadAttention`` as a ``CausalAttention``, attention over (B, H, T, d_head) written with
``torch.einsum``, and a padding mask for left-padded rows, broadcast over the heads.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..heads import CausalAttention
from ..i18n import N_, _
from ..masks import causal_mask, sliding_window_mask
from ..multihead import MultiHeadAttention
from .core import Wrong, answer_tensor, call, checker, close, masked_softmax

# --- exercise 6.1: one head of MultiHeadAttention, on its own --------------------------------


@checker("06", N_("build CausalAttention(d_model, d_head, context_length) and copy rows into it"))
def check_head_as_causal(fn) -> str:
    """``fn(mha, h) -> CausalAttention``: the head whose weights are head h's weights of
    ``mha`` (and whose output is head h's slice of the context, before W_o)."""
    for D, H, ctx, T, h in ((12, 3, 8, 6, 1), (16, 4, 10, 7, 3), (8, 2, 5, 5, 0)):
        mha = MultiHeadAttention(D, H, ctx).eval()
        d_head = D // H
        x = torch.randn(2, T, D)  # (B, T, D)
        with torch.no_grad():
            _out, want_w = mha(x, return_weights=True)  # (B, H, T, T)
            v = mha.W_v(x).view(2, T, H, d_head).transpose(1, 2)  # (B, H, T, d_head)
            want_out = want_w @ v  # (B, H, T, d_head)
        head = call(fn, mha, h)
        if not isinstance(head, CausalAttention):
            raise Wrong(
                _("your function returned a {type}, not a CausalAttention").format(
                    type=type(head).__name__
                ),
                _("return the CausalAttention you built"),
            )
        if head.d_out != d_head:
            raise Wrong(
                _(
                    "your head has d_out={d_out}; one head of {H} at d_model={D} is "
                    "d_head={d_head} wide"
                ).format(d_out=head.d_out, H=H, D=D, d_head=d_head),
                _("CausalAttention(d_model, d_model // n_heads, context_length)"),
            )
        head.eval()
        with torch.no_grad():
            result = call(head, x, return_weights=True)
        out = answer_tensor(result[0], _("the head's output"), (2, T, d_head))
        weights = answer_tensor(result[1], _("the head's weights"), (2, T, T))
        if close(weights, want_w[:, h]) and close(out, want_out[:, h]):
            continue
        where = _("with d_model={D}, n_heads={H}, head h={h}").format(D=D, H=H, h=h)
        for other in range(H):
            if other != h and close(weights, want_w[:, other]):
                raise Wrong(
                    _("{where}, your head computes the weights of head {other}").format(
                        where=where, other=other
                    ),
                    _("head h owns rows h*d_head:(h+1)*d_head of W_q, W_k and W_v"),
                )
        if close(weights, want_w[:, h]):
            raise Wrong(
                _("{where}, the weights are head {h}'s, but the output is not").format(
                    where=where, h=h
                ),
                _("copy W_v's rows of head h as well"),
            )
        raise Wrong(
            _("{where}, the weights differ from head {h}'s by up to {gap:.3f}").format(
                where=where, h=h, gap=(weights - want_w[:, h]).abs().max().item()
            ),
            _(
                "copy rows h*d_head:(h+1)*d_head of mha.W_q.weight into head.W_q.weight (and "
                "the same for W_k, W_v) under torch.no_grad()"
            ),
        )
    return _("your head reproduces head h's weights and its slice of the context, for 3 sizes")


# --- exercise 6.2: attention with torch.einsum -----------------------------------------------


@checker("06", N_("return (context, weights) from q, k, v of shape (B, H, T, d_head)"))
def check_einsum_attention(fn) -> str:
    """``fn(q, k, v, mask=None) -> (context, weights)``; against F.scaled_dot_product_attention."""
    B, H, T, d = 2, 3, 5, 8
    for kind in ("none", "causal", "sliding"):
        q, k, v = torch.randn(3, B, H, T, d)  # (B, H, T, d_head) each
        mask = {"none": None, "causal": causal_mask(T), "sliding": sliding_window_mask(T, 2)}[kind]
        result = call(fn, q, k, v, mask)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise Wrong(
                _("your function returned a {type}, not (context, weights)").format(
                    type=type(result).__name__
                ),
                _("return context, weights"),
            )
        context = answer_tensor(result[0], "context", (B, H, T, d))
        weights = answer_tensor(result[1], "weights", (B, H, T, T))
        sdpa_mask = None if mask is None else ~mask  # SDPA: True = may attend
        want_ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=sdpa_mask)  # (B, H, T, d)
        scores = torch.matmul(q, k.transpose(-2, -1))  # (B, H, T, T), unscaled
        blocked = torch.zeros(T, T, dtype=torch.bool) if mask is None else mask
        want_w = masked_softmax(scores / math.sqrt(d), blocked)  # (B, H, T, T)
        if close(weights, want_w, 1e-5) and close(context, want_ctx, 1e-5):
            continue
        where = _("with mask={kind}").format(kind=kind)
        if close(weights, masked_softmax(scores, blocked)):
            raise Wrong(
                _("{where}, the scores are not scaled").format(where=where),
                _("divide q·k by √d_head (here √{d_head}) before the softmax").format(d_head=d),
            )
        if close(weights, masked_softmax(scores / d, blocked)):
            raise Wrong(
                _("{where}, the scores are divided by d_head").format(where=where),
                _("divide by √d_head, not d_head"),
            )
        over_queries = torch.softmax(
            (scores / math.sqrt(d)).masked_fill(blocked, float("-inf")), dim=-2
        )  # (B, H, T, T): each column sums to 1
        if close(weights, over_queries):
            raise Wrong(
                _(
                    "{where}, softmax over the wrong axis (queries instead of keys): each column "
                    "of the weights sums to 1, not each row"
                ).format(where=where),
                _("softmax over the keys, the last dimension: torch.softmax(scores, dim=-1)"),
            )
        if close(weights, masked_softmax(scores.transpose(-2, -1) / math.sqrt(d), blocked)):
            raise Wrong(
                _(
                    "{where}, the scores are transposed: keys on the rows, queries on the columns"
                ).format(where=where),
                _("the query index comes first: torch.einsum('bhqd,bhkd->bhqk', q, k)"),
            )
        if mask is not None:
            if close(weights, masked_softmax(scores / math.sqrt(d), ~mask)):
                raise Wrong(
                    _("{where}, your mask blocks the past and lets the future through").format(
                        where=where
                    ),
                    _("True means blocked: masked_fill(mask, float('-inf'))"),
                )
            if close(weights, masked_softmax(scores / math.sqrt(d), torch.zeros_like(mask))):
                raise Wrong(
                    _("{where}, the mask was ignored").format(where=where),
                    _("apply it before the softmax"),
                )
        if not close(weights, want_w, 1e-5):
            raise Wrong(
                _("{where}, the weights differ from the reference by up to {gap:.3f}").format(
                    where=where, gap=(weights - want_w).abs().max().item()
                ),
                _("softmax over the keys, dim=-1"),
            )
        if close(context, weights @ k):
            raise Wrong(
                _(
                    "{where}, the weights are right, but the context uses the keys where the "
                    "values belong"
                ).format(where=where),
                _("context = torch.einsum('bhqk,bhkd->bhqd', weights, v)"),
            )
        raise Wrong(
            _("{where}, the weights are right but the context is not").format(where=where),
            _("context = torch.einsum('bhqk,bhkd->bhqd', weights, v)"),
        )
    return _("equal to F.scaled_dot_product_attention, with no mask, causal and sliding masks")


# --- exercise 6.3: left padding and the causal mask together ---------------------------------


def _reference_padded_mask(lengths: list[int], T: int) -> torch.Tensor:
    """Loop version: left padding; key j is blocked if j > i, or if j is padding and j != i."""
    want = torch.zeros(len(lengths), 1, T, T, dtype=torch.bool)
    for b, n in enumerate(lengths):
        first_real = T - n
        for i in range(T):
            for j in range(T):
                want[b, 0, i, j] = j > i or (j < first_real and j != i)
    return want


@checker("06", N_("return a (B, 1, T, T) bool tensor, True = blocked"))
def check_padded_causal_mask(fn) -> str:
    """``fn(lengths, T) -> (B, 1, T, T)`` for left-padded rows (padding first, then lengths[b]
    real tokens): key j is blocked if it is in the future (j > i) or padding (j < T - lengths[b]),
    except that every position may see itself, so no row is blocked entirely."""
    for lengths, T in (([5, 3, 1], 5), ([4, 4], 4), ([2, 6, 3], 6)):
        B = len(lengths)
        got = call(fn, torch.tensor(lengths), T)
        if isinstance(got, torch.Tensor) and tuple(got.shape) == (B, T, T):
            raise Wrong(
                _("the mask is (B, T, T) = {shape}; it must broadcast over heads").format(
                    shape=tuple(got.shape)
                ),
                _("add a head axis: mask[:, None] gives (B, 1, T, T)"),
            )
        got = answer_tensor(got, _("the mask"), (B, 1, T, T))
        if got.dtype != torch.bool:
            raise Wrong(
                _("the mask has dtype {dtype}").format(dtype=got.dtype),
                _("masks are torch.bool, True = blocked"),
            )
        want = _reference_padded_mask(lengths, T)  # (B, 1, T, T)
        if torch.equal(got, want):
            continue
        where = _("with lengths={lengths}, T={T}").format(lengths=lengths, T=T)
        j = torch.arange(T)  # (T,)
        future = causal_mask(T)  # (T, T)
        eye = torch.eye(T, dtype=torch.bool)  # (T, T)
        left = j[None, :] < T - torch.tensor(lengths)[:, None]  # (B, T), padding keys
        right = j[None, :] >= torch.tensor(lengths)[:, None]  # (B, T), padding at the end
        if torch.equal(got, ~want):
            raise Wrong(
                _("{where}, your mask blocks exactly what should be seen").format(where=where),
                _("True means blocked: future keys and padding keys"),
            )
        if torch.equal(got, (future | left[:, None, :])[:, None]):
            raise Wrong(
                _(
                    "{where}, rows made only of padding have every key blocked: their softmax "
                    "would be NaN"
                ).format(where=where),
                _("let every position see itself: (future | padding) & ~torch.eye(T, dtype=bool)"),
            )
        if torch.equal(got[:, 0], (future | (right[:, None, :] & ~eye))) or torch.equal(
            got[:, 0], future | right[:, None, :]
        ):
            raise Wrong(
                _("{where}, you blocked padding at the end of each row").format(where=where),
                _("the padding is on the left: positions j < T - lengths[b]"),
            )
        if torch.equal(got[:, 0], future & left[:, None, :]):
            raise Wrong(
                _(
                    "{where}, a key is blocked only when it is both in the future and padding"
                ).format(where=where),
                _("either reason is enough: combine the two masks with |, not &"),
            )
        if torch.equal(got[:, 0], (future | left[:, :, None]) & ~eye):
            raise Wrong(
                _("{where}, the padding blocks query rows, not key columns").format(where=where),
                _(
                    "padding must be invisible as a key: "
                    "padding[:, None, :] (B, 1, T) blocks columns"
                ),
            )
        if torch.equal(got[:, 0], future.expand(B, T, T)):
            raise Wrong(
                _("{where}, only the future is blocked: real tokens still read the padding").format(
                    where=where
                ),
                _("also block keys j < T - lengths[b]"),
            )
        raise Wrong(
            _("{where}, the mask differs from the expected one in {count} places").format(
                where=where, count=int((got != want).sum())
            ),
            _("blocked = ((j > i) | (j < T - lengths[b])) & (j != i), built with broadcasting"),
        )
    return _("future keys and padding keys are blocked, and no row is blocked entirely")
