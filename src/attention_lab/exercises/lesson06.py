"""Lesson 06 · multi-head attention (notebooks/06_multi_head.ipynb): one head of
``MultiHeadAttention`` is a ``CausalAttention``, and splitting (B, T, D) into heads.
"""

from __future__ import annotations

import torch

from ..heads import CausalAttention
from ..multihead import MultiHeadAttention, merge_heads
from ._core import _call, _close, _tensor, _Wrong, checker

# --- exercise 2 of exercises.ipynb: MultiHeadAttention with one head is CausalAttention ------


@checker("06", "build MultiHeadAttention(d_model, 1, context_length) and copy the weights into it")
def check_mha_from_causal(fn) -> str:
    """``fn(ca: CausalAttention) -> MultiHeadAttention`` computing the same function."""
    for d, ctx, T in ((8, 6, 6), (16, 10, 7)):
        ca = CausalAttention(d, d, ctx).eval()
        x = torch.randn(2, T, d)  # (B, T, d)
        with torch.no_grad():
            want = ca(x)  # (B, T, d)
        mha = _call(fn, ca)
        if not isinstance(mha, MultiHeadAttention):
            raise _Wrong(
                f"your function returned a {type(mha).__name__}, not a MultiHeadAttention",
                "return the MultiHeadAttention you built",
            )
        if mha.n_heads != 1:
            raise _Wrong(
                f"your MultiHeadAttention has n_heads={mha.n_heads}",
                "the exercise compares one head with CausalAttention: n_heads=1",
            )
        mha.eval()
        with torch.no_grad():
            got = _tensor(_call(mha, x), "the output", tuple(want.shape))  # (B, T, d)
        if _close(got, want):
            continue
        pairs = ((mha.W_q, ca.W_q), (mha.W_k, ca.W_k), (mha.W_v, ca.W_v))
        if any(_close(m.weight, c.weight.T) and d > 1 for m, c in pairs):
            raise _Wrong(
                "some copied weights are transposed",
                "nn.Linear stores its weight as (out_features, in_features) in both classes: "
                "copy it as it is, m.weight.copy_(c.weight)",
            )
        if all(_close(m.weight, c.weight) for m, c in pairs):
            raise _Wrong(
                "W_q, W_k and W_v are copied, yet the outputs differ: same shape "
                f"{tuple(got.shape)}, values apart by up to {(got - want).abs().max().item():.2f}",
                "MultiHeadAttention also has an output projection W_o (with a bias) that "
                "CausalAttention lacks: set W_o.weight to the identity and W_o.bias to zero",
            )
        raise _Wrong(
            "the outputs have the same shape but different values",
            "copy W_q, W_k and W_v one by one under torch.no_grad(), and make W_o the identity",
        )
    return "same shape and same values as CausalAttention: one head with W_o = identity is it"


# --- exercise 7 of exercises.ipynb: split the heads ------------------------------------------


@checker("06", "return x reshaped to (B, n_heads, T, d_head)")
def check_split_heads(fn) -> str:
    """``fn(x, n_heads) -> (B, H, T, d_head)``; head h owns features h*d_head:(h+1)*d_head."""
    for B, T, D, H in ((2, 5, 12, 3), (1, 4, 8, 2), (3, 6, 16, 4)):
        x = torch.randn(B, T, D)  # (B, T, D)
        d_head = D // H
        got = _call(fn, x, H)
        if isinstance(got, torch.Tensor) and tuple(got.shape) == (B, T, H, d_head):
            raise _Wrong(
                f"the shape is (B, T, H, d_head) = {tuple(got.shape)}: the heads are not "
                "next to the batch yet",
                "finish with .transpose(1, 2) to get (B, H, T, d_head)",
            )
        got = _tensor(got, "the result", (B, H, T, d_head))
        want = torch.stack(x.chunk(H, dim=-1), dim=1)  # (B, H, T, d_head)
        if torch.equal(got, want):
            if not torch.equal(merge_heads(got), x):
                raise _Wrong("merging your heads does not give x back", "use view and transpose")
            continue
        if torch.equal(got, x.reshape(B, H, T, d_head)):
            raise _Wrong(
                "right shape, scrambled values: the heads are transposed wrongly; viewing "
                "(B, T, D) straight as (B, H, T, d_head) mixes time steps into the heads",
                "view as (B, T, H, d_head) first, then .transpose(1, 2)",
            )
        if torch.equal(got, x.reshape(B, T, d_head, H).permute(0, 3, 1, 2)):
            raise _Wrong(
                "each head takes every H-th feature; a head must own one contiguous slice",
                "view as (B, T, H, d_head): head h gets features h*d_head:(h+1)*d_head",
            )
        raise _Wrong(
            f"with B={B}, T={T}, D={D}, H={H} the values are not where they belong",
            "result[b, h, t] must equal x[b, t, h*d_head:(h+1)*d_head]",
        )
    return "head h holds features h*d_head:(h+1)*d_head of every time step"
