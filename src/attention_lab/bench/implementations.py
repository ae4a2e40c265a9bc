"""The implementations ``make bench`` compares, all holding one block's weights (notebooks 05-07).

``build_implementations`` converts one ``MultiHeadSelfAttention`` (the reference) into every
layout the chapter builds: a list of ``CausalAttention`` heads (06), ``MultiHeadAttention``
(06), the fused block on its explicit and on its fast path (07), ``nn.MultiheadAttention``
and the bare ``F.scaled_dot_product_attention`` block that every time is divided by.
"""

from __future__ import annotations

import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..fused import MultiHeadSelfAttention
from ..heads import CausalAttention
from ..masks import causal_mask

REFERENCE = "bare SDPA block"
FAST = "MHSA fast path"
COMPILED = "MHSA fast, torch.compile"

# the order of the rows in the table and the plot; other (extra) names come after
ORDER = (
    "list of single heads",
    "MultiHeadAttention",
    "MHSA explicit path",
    FAST,
    COMPILED,
    "nn.MultiheadAttention",
    REFERENCE,
)


class HeadList(nn.Module):
    """The first multi-head version (notebook 06): H ``CausalAttention`` heads side by side,
    their outputs concatenated, then one output projection W_o."""

    def __init__(self, heads: list[CausalAttention], W_o: nn.Linear):
        super().__init__()
        self.heads = nn.ModuleList(heads)
        self.W_o = W_o

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ctx = torch.cat([head(x) for head in self.heads], dim=-1)  # (B, T, D)
        return self.W_o(ctx)  # (B, T, D)


class ExplicitPath(nn.Module):
    """``MultiHeadSelfAttention`` forced onto its explicit path (``return_weights=True``)."""

    def __init__(self, block: MultiHeadSelfAttention):
        super().__init__()
        self.block = block

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x, return_weights=True)[0]  # (B, T, D)


class BareSDPABlock(nn.Module):
    """The shortest fast block (nanoGPT's): fused QKV, ``F.scaled_dot_product_attention``,
    output projection. No input checks, no mask buffer: the yardstick for the others."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=-1)  # 3 x (B, T, D)
        q = q.view(B, T, self.n_heads, D // self.n_heads).transpose(1, 2)  # (B, H, T, d_head)
        k = k.view(B, T, self.n_heads, D // self.n_heads).transpose(1, 2)  # (B, H, T, d_head)
        v = v.view(B, T, self.n_heads, D // self.n_heads).transpose(1, 2)  # (B, H, T, d_head)
        ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, d_head)
        return self.out_proj(ctx.transpose(1, 2).reshape(B, T, D))  # (B, T, D)


class TorchMultihead(nn.Module):
    """``torch.nn.MultiheadAttention`` with a causal mask and ``need_weights=False``.

    The boolean mask uses our convention (True = blocked); ``is_causal=True`` tells
    PyTorch it is the causal one, so it may use the fused kernel."""

    def __init__(self, mha: nn.MultiheadAttention, context_length: int):
        super().__init__()
        self.mha = mha
        self.register_buffer("mask", causal_mask(context_length))  # (ctx, ctx)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[1]
        mask = self.mask[:T, :T]  # (T, T), True = blocked
        return self.mha(x, x, x, attn_mask=mask, need_weights=False, is_causal=True)[0]


def build_implementations(
    d_model: int, n_heads: int, context_length: int, seed: int = 0
) -> tuple[MultiHeadSelfAttention, dict[str, nn.Module]]:
    """One ``MultiHeadSelfAttention`` (the reference) and every implementation, all holding
    its weights. Biases are off so that every layout can hold the same function."""
    torch.manual_seed(seed)
    ref = MultiHeadSelfAttention(
        d_model, n_heads, context_length, qkv_bias=False, out_bias=False
    ).eval()
    separate = ref.to_separate().eval()  # W_q, W_k, W_v, W_o, no biases
    d_head = d_model // n_heads
    heads = []
    for h in range(n_heads):
        head = CausalAttention(d_model, d_head, context_length)
        rows = slice(h * d_head, (h + 1) * d_head)  # head h owns these output features
        with torch.no_grad():
            head.W_q.weight.copy_(separate.W_q.weight[rows])
            head.W_k.weight.copy_(separate.W_k.weight[rows])
            head.W_v.weight.copy_(separate.W_v.weight[rows])
        heads.append(head)
    W_o = nn.Linear(d_model, d_model, bias=separate.W_o.bias is not None)
    W_o.load_state_dict(separate.W_o.state_dict())
    bare = BareSDPABlock(d_model, n_heads)
    bare.load_state_dict({"qkv.weight": ref.qkv.weight, "out_proj.weight": ref.out_proj.weight})
    impls = {
        "list of single heads": HeadList(heads, W_o),
        "MultiHeadAttention": separate,
        "MHSA explicit path": ExplicitPath(_copy_of(ref)),
        FAST: _copy_of(ref),
        REFERENCE: bare,
        "nn.MultiheadAttention": TorchMultihead(ref.to_torch(), context_length),
    }
    return ref, {name: module.eval() for name, module in impls.items()}


def _copy_of(block: MultiHeadSelfAttention) -> MultiHeadSelfAttention:
    twin = MultiHeadSelfAttention(
        block.d_model,
        block.n_heads,
        block.context_length,
        qkv_bias=block.qkv.bias is not None,
        out_bias=block.out_proj.bias is not None,
    )
    twin.load_state_dict(block.state_dict())
    return twin.eval()


def try_compile(module: nn.Module, x: torch.Tensor) -> tuple[nn.Module | None, str]:
    """``torch.compile(module)`` run once forward and backward on ``x``; (None, why) on failure."""
    start = time.perf_counter()
    try:
        compiled = torch.compile(module, dynamic=False)
        with torch.no_grad():
            compiled(x)
        compiled(x.detach().requires_grad_(True)).sum().backward()
        module.zero_grad(set_to_none=True)
    except Exception as error:  # any compiler failure means: skip this row, say why
        first_line = (str(error).strip().splitlines() or [""])[0][:200]
        return None, f"torch.compile failed: {type(error).__name__}: {first_line}"
    return compiled, f"compiled in {time.perf_counter() - start:.0f} s"


def in_order(names) -> list[str]:
    """``names`` in the table's order: the known rows first, then any extra ones."""
    names = list(names)
    return [n for n in ORDER if n in names] + [n for n in names if n not in ORDER]
