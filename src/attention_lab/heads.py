"""One attention head: ``SingleHeadAttention`` (notebook 02) and ``CausalAttention`` (notebook 05).

The classic APIs. Both take ``x`` of shape (B, T, d_in) and return (B, T, d_out); pass
``return_weights=True`` to also get the (B, T, T) attention weights.

The conventions every module of this library shares (heads, ``multihead``, ``fused``):
``qkv_bias`` switches the biases of the query/key/value projections (off by default in the
classic modules, as in the chapter's source text), ``out_bias`` that of an output projection,
and ``dropout`` is an ``nn.Dropout`` whose probability is applied to the attention weights
in training mode only.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from ._checks import check_dropout, check_input, check_positive
from .functional import attention
from .masks import causal_mask


class SingleHeadAttention(nn.Module):
    """Self-attention with learned W_q, W_k, W_v and no mask: every token sees every token."""

    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False):
        super().__init__()
        self.d_in = check_positive("d_in", d_in)
        self.d_out = check_positive("d_out", d_out)
        self.W_q = nn.Linear(self.d_in, self.d_out, bias=qkv_bias)
        self.W_k = nn.Linear(self.d_in, self.d_out, bias=qkv_bias)
        self.W_v = nn.Linear(self.d_in, self.d_out, bias=qkv_bias)

    def forward(
        self, x: torch.Tensor, return_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """(B, T, d_in) -> (B, T, d_out), and the (B, T, T) weights if ``return_weights``."""
        check_input(x, self.d_in)
        q = self.W_q(x)  # (B, T, d_out)
        k = self.W_k(x)  # (B, T, d_out)
        v = self.W_v(x)  # (B, T, d_out)
        out, weights = attention(q, k, v)  # (B, T, d_out), (B, T, T)
        return (out, weights) if return_weights else out


class CausalAttention(nn.Module):
    """One causal head: query position i attends to key positions j <= i only, with dropout.

    The (context_length, context_length) mask is a buffer: it follows ``.to(device)`` and is
    not a parameter. It is not saved in ``state_dict`` (``persistent=False``): it is derived
    from the configuration, so a checkpoint holds the learned weights only and loads into a
    head of any ``context_length``. Each forward slices the mask to (T, T).
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float = 0.0,
        qkv_bias: bool = False,
    ):
        super().__init__()
        self.d_in = check_positive("d_in", d_in)
        self.d_out = check_positive("d_out", d_out)
        self.context_length = check_positive("context_length", context_length)
        self.W_q = nn.Linear(self.d_in, self.d_out, bias=qkv_bias)
        self.W_k = nn.Linear(self.d_in, self.d_out, bias=qkv_bias)
        self.W_v = nn.Linear(self.d_in, self.d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(check_dropout(dropout))
        mask = causal_mask(self.context_length)  # (ctx, ctx), True = blocked
        self.register_buffer("mask", mask, persistent=False)

    def forward(
        self, x: torch.Tensor, return_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """(B, T, d_in) -> (B, T, d_out), and the (B, T, T) weights if ``return_weights``."""
        _, T = check_input(x, self.d_in, self.context_length)
        q = self.W_q(x)  # (B, T, d_out)
        k = self.W_k(x)  # (B, T, d_out)
        v = self.W_v(x)  # (B, T, d_out)
        p = self.dropout.p if self.training else 0.0
        out, weights = attention(q, k, v, self.mask[:T, :T], dropout_p=p)  # (B, T, d_out)
        return (out, weights) if return_weights else out
