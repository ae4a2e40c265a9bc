"""Lesson 07 · the fused QKV projection (notebooks/07_fused_qkv.ipynb): read one head's query,
key and value weights out of the fused ``qkv`` weight, and find the length at which one
sequence's attention weights outnumber the block's parameters.
"""

from __future__ import annotations

import torch

from ..fused import MultiHeadSelfAttention
from ..i18n import N_, _
from ..multihead import split_heads
from .core import Wrong, answer_tensor, call, checker, close

# --- exercise 7.1: one head's rows of the fused weight ---------------------------------------


@checker("07", N_("return three (d_head, D) tensors cut from the (3D, D) fused weight"))
def check_head_rows_from_fused(fn) -> str:
    """``fn(qkv_weight, n_heads, h) -> (w_q, w_k, w_v)``, each (d_head, D): the rows of the
    fused (3D, D) weight that make head h's queries, keys and values."""
    for D, H, h in ((12, 3, 2), (16, 4, 1), (8, 2, 0)):
        block = MultiHeadSelfAttention(D, H, context_length=6, qkv_bias=False).eval()
        d_head = D // H
        x = torch.randn(2, 5, D)  # (B, T, D)
        with torch.no_grad():
            q, k, v = block.qkv(x).split(D, dim=-1)  # 3 x (B, T, D)
            want = [split_heads(t, H)[:, h] for t in (q, k, v)]  # 3 x (B, T, d_head)
        weight = block.qkv.weight.detach().clone()  # (3D, D)
        result = call(fn, weight.clone(), H, h)
        if not (isinstance(result, (tuple, list)) and len(result) == 3):
            raise Wrong(
                _("your function returned a {type}, not (w_q, w_k, w_v)").format(
                    type=type(result).__name__
                ),
                _("return w_q, w_k, w_v"),
            )
        where = _("with D={D}, n_heads={H}, head h={h}").format(D=D, H=H, h=h)
        got = []
        for name, w in zip(("w_q", "w_k", "w_v"), result):
            if isinstance(w, torch.Tensor) and tuple(w.shape) == (D, d_head):
                raise Wrong(
                    _("{where}, {name} is ({D}, {d_head}): columns, not rows").format(
                        where=where, name=name, D=D, d_head=d_head
                    ),
                    _("a Linear's output features are the rows of its weight: cut rows, w[a:b]"),
                )
            what = _("{name} with D={D}, n_heads={H}, head h={h}").format(name=name, D=D, H=H, h=h)
            got.append(answer_tensor(w, what, (d_head, D)))
        made = [x @ w.detach().T for w in got]  # 3 x (B, T, d_head)
        if all(close(m, t) for m, t in zip(made, want)):
            continue
        q_rows = weight[h * d_head : (h + 1) * d_head]  # head h's Q rows
        if all(torch.equal(w, q_rows) for w in got):
            raise Wrong(
                _("{where}, all three are head {h}'s query rows").format(where=where, h=h),
                _("the K block starts at row D and the V block at row 2D: add part * D"),
            )
        for part, (name, m, t) in enumerate(zip(("w_q", "w_k", "w_v"), made, want)):
            if not close(m, t):
                start = part * D + h * d_head
                wrong = (
                    _("{where}, {name} does not make head {h}'s queries"),
                    _("{where}, {name} does not make head {h}'s keys"),
                    _("{where}, {name} does not make head {h}'s values"),
                )[part]
                raise Wrong(
                    wrong.format(where=where, name=name, h=h),
                    _("those are rows {start}:{stop} of the fused weight").format(
                        start=start, stop=start + d_head
                    ),
                )
    return _("each head's three bands, read out of the fused weight, make its q, k and v")


# --- exercise 7.2: when do the weights outnumber the parameters? -----------------------------


def _params(d_model: int) -> int:
    return 4 * d_model * d_model + 4 * d_model  # qkv (3D, D) + 3D, out_proj (D, D) + D


def _reference_crossover(d_model: int, n_heads: int) -> int:
    T = 1
    while n_heads * T * T <= _params(d_model):
        T += 1
    return T


@checker("07", N_("return an int: the smallest T that passes the parameter count"))
def check_weights_outnumber_params(fn) -> str:
    """``fn(d_model, n_heads) -> int``: the smallest T at which one sequence's attention
    weights, (H, T, T) numbers, are more than the parameters of MultiHeadSelfAttention
    (with its biases)."""
    found = {}
    for D, H in ((768, 12), (32, 4), (32, 8), (12, 3), (64, 1)):
        want = _reference_crossover(D, H)
        answer = call(fn, D, H)
        try:
            got = int(answer)
        except (TypeError, ValueError, RuntimeError):
            raise Wrong(
                _("your function returned a {type}, not a whole number").format(
                    type=type(answer).__name__
                ),
                _("return an int: count T up until H * T * T is more than the parameters"),
            ) from None
        if got == want:
            found[(D, H)] = got
            continue
        if got == _reference_crossover_no_bias(D, H):
            hint = _("the block has biases too: 4 * D**2 + 4 * D parameters")
        elif got == _reference_crossover(D, 1) and H > 1:
            hint = _("one sequence holds H weight matrices of (T, T): count H * T * T")
        elif 0 < got and H * got * got <= _params(D):
            hint = _(
                "at T={T} the weights hold {weights:,} numbers, not more than the "
                "{params:,} parameters yet"
            ).format(T=got, weights=H * got * got, params=_params(D))
        elif H * (got - 1) ** 2 > _params(D):
            hint = _("T={T} already passes; you want the smallest such T").format(T=got - 1)
        else:
            hint = _("parameters: 4 * D**2 + 4 * D; weights of one sequence: H * T * T")
        raise Wrong(
            _("for d_model={D}, n_heads={H} you answer T={got}; the answer is T={want}").format(
                D=D, H=H, got=got, want=want
            ),
            hint,
        )
    return _(
        "GPT-2 size (d_model 768, 12 heads): from T={T} on, one sequence's "
        "weights outnumber the block's {params:,} parameters"
    ).format(T=found[(768, 12)], params=_params(768))


def _reference_crossover_no_bias(d_model: int, n_heads: int) -> int:
    T = 1
    while n_heads * T * T <= 4 * d_model * d_model:
        T += 1
    return T
