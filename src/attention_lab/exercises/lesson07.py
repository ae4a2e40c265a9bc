"""Lesson 07 · the fused QKV projection (notebooks/07_fused_qkv.ipynb): pack W_q, W_k, W_v
into one weight, and count the block's parameters at GPT-2 size.
"""

from __future__ import annotations

import torch

from ..fused import MultiHeadSelfAttention
from ..multihead import MultiHeadAttention
from ._core import _call, _close, _tensor, _Wrong, checker

# --- exercise 8 of exercises.ipynb: pack W_q, W_k, W_v into one fused weight -----------------


@checker("07", "return one (3D, D) tensor built from the three (D, D) weights")
def check_fuse_qkv(fn) -> str:
    """``fn(w_q, w_k, w_v) -> (3D, D)``: the fused block then matches MultiHeadAttention."""
    D, H, T = 16, 4, 6
    separate = MultiHeadAttention(D, H, T).eval()
    ws = [layer.weight.detach().clone() for layer in (separate.W_q, separate.W_k, separate.W_v)]
    fused = _call(fn, *[w.clone() for w in ws])
    if isinstance(fused, torch.Tensor) and tuple(fused.shape) == (D, 3 * D):
        raise _Wrong(
            f"the fused weight is ({D}, {3 * D}), expected ({3 * D}, {D})",
            "nn.Linear weights are (out_features, in_features): stack the three along the "
            "rows, torch.cat([...], dim=0)",
        )
    fused = _tensor(fused, "the fused weight", (3 * D, D))
    blocks = fused.detach().split(D, dim=0)  # 3 x (D, D)
    names = ("Q", "K", "V")
    order = [next((n for n, w in zip(names, ws) if torch.equal(b, w)), "?") for b in blocks]
    if order != list(names) and "?" not in order:
        raise _Wrong(
            f"the blocks are in the order {', '.join(order)}",
            "qkv(x).split(D, dim=-1) reads Q first, then K, then V",
        )
    if all(torch.equal(b, w.T) for b, w in zip(blocks, ws)):
        raise _Wrong("each block is transposed", "concatenate the weights as they are, no .T")
    block = MultiHeadSelfAttention(D, H, T).eval()
    with torch.no_grad():
        block.qkv.weight.copy_(fused)
        block.qkv.bias.zero_()
        block.out_proj.weight.copy_(separate.W_o.weight)
        block.out_proj.bias.copy_(separate.W_o.bias)
        x = torch.randn(2, T, D)  # (B, T, D)
        same = _close(block(x), separate(x))
    if not same:
        raise _Wrong(
            "the fused block does not compute what the three layers compute",
            "rows [0:D] make Q, rows [D:2D] make K, rows [2D:3D] make V",
        )
    return "the fused block gives the same output as the three separate layers"


# --- exercise 9 of exercises.ipynb: count the parameters -------------------------------------


@checker("07", "return an int computed from d_model (and bias)")
def check_param_count(fn) -> str:
    """``fn(d_model, n_heads, bias) -> int``: the parameters of MultiHeadSelfAttention."""
    gpt2 = {}
    for D, H, bias in ((768, 12, True), (768, 12, False), (32, 4, True), (48, 3, False)):
        block = MultiHeadSelfAttention(D, H, context_length=4, qkv_bias=bias, out_bias=bias)
        want = sum(p.numel() for p in block.parameters())
        answer = _call(fn, D, H, bias)
        try:
            got = int(answer)
        except (TypeError, ValueError):
            raise _Wrong(
                f"your function returned a {type(answer).__name__}, not a number",
                "return an int such as 4 * d_model**2",
            ) from None
        if got == want:
            if D == 768:
                gpt2[bias] = got
            continue
        case = f"d_model={D}, n_heads={H}, bias={bias}"
        if bias and got == 4 * D * D:
            hint = "you left out the biases: qkv has 3D of them, out_proj has D"
        elif not bias and got == 4 * D * D + 4 * D:
            hint = "with bias=False neither layer has a bias"
        elif got in (3 * D * D, 3 * D * D + 3 * D * bias):
            hint = "you left out the output projection out_proj, a (D, D) layer"
        elif got == want * H or got * H == want:
            hint = "the heads split D among themselves; they add no parameters"
        else:
            hint = "two layers: qkv = Linear(D, 3D) and out_proj = Linear(D, D)"
        raise _Wrong(f"for {case} you count {got:,}; the block has {want:,}", hint)
    return (
        f"GPT-2 size (d_model 768, 12 heads): {gpt2[True]:,} with biases, {gpt2[False]:,} without"
    )
