"""``MultiHeadAttention`` with separate W_q, W_k, W_v, W_o (notebook 06).

The reshape is the heart of it:
(B, T, D) -> (B, T, H, d_head) -> (B, H, T, d_head), attend per head, then back.
``MultiHeadSelfAttention`` (fused.py) computes the same function with one fused
projection; ``fused.py`` converts weights between the two.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from ._checks import check_dropout, check_heads, check_input, check_positive
from .functional import attention
from .masks import causal_mask


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, D) -> (B, H, T, d_head): head h gets features h*d_head:(h+1)*d_head."""
    B, T, D = x.shape
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)  # (B, H, T, d_head)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, d_head) -> (B, T, D): the inverse of ``split_heads``."""
    B, H, T, d_head = x.shape
    return x.transpose(1, 2).contiguous().view(B, T, H * d_head)  # (B, T, D)


class MultiHeadAttention(nn.Module):
    """Causal multi-head attention with four separate linear layers.

    Args:
        d_model: D, the width of each token vector; must be divisible by ``n_heads``.
        n_heads: H, the number of heads; each works in d_head = D // H dimensions.
        context_length: the longest sequence the causal mask covers.
        dropout: probability of dropping an attention weight in training.
        qkv_bias: whether W_q, W_k, W_v have a bias (the classic version has none).
        out_bias: whether the output projection W_o has a bias (it does by default).

    The causal mask is a non-persistent buffer: not in ``state_dict``, so checkpoints hold
    the four projections only and load across ``context_length``.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        context_length: int,
        dropout: float = 0.0,
        qkv_bias: bool = False,
        out_bias: bool = True,
    ):
        super().__init__()
        self.d_head = check_heads(d_model, n_heads)
        self.d_model, self.n_heads = int(d_model), int(n_heads)
        self.context_length = check_positive("context_length", context_length)
        D = self.d_model
        self.W_q = nn.Linear(D, D, bias=qkv_bias)
        self.W_k = nn.Linear(D, D, bias=qkv_bias)
        self.W_v = nn.Linear(D, D, bias=qkv_bias)
        self.W_o = nn.Linear(D, D, bias=out_bias)
        self.dropout = nn.Dropout(check_dropout(dropout))
        mask = causal_mask(self.context_length)  # (ctx, ctx), True = blocked
        self.register_buffer("mask", mask, persistent=False)

    def forward(
        self, x: torch.Tensor, return_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """(B, T, D) -> (B, T, D), and the (B, H, T, T) weights if ``return_weights``."""
        _, T = check_input(x, self.d_model, self.context_length)
        # 1) project, 2) split into heads
        q = split_heads(self.W_q(x), self.n_heads)  # (B, H, T, d_head)
        k = split_heads(self.W_k(x), self.n_heads)  # (B, H, T, d_head)
        v = split_heads(self.W_v(x), self.n_heads)  # (B, H, T, d_head)
        # 3) attend in every head at once
        p = self.dropout.p if self.training else 0.0
        ctx, weights = attention(q, k, v, self.mask[:T, :T], dropout_p=p)  # (B, H, T, d_head)
        # 4) merge the heads, 5) mix them with the output projection
        out = self.W_o(merge_heads(ctx))  # (B, T, D)
        return (out, weights) if return_weights else out
