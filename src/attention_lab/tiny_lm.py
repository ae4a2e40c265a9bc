"""``TinyLM``: the smallest model around the attention block (notebook 08).

token embedding + position embedding -> MultiHeadSelfAttention -> LM head.
No feed-forward block, residual or layer norm: the chapter leaves those to the next one,
so every bit of information between positions has to pass through attention.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from ._checks import check_positive
from .fused import MultiHeadSelfAttention


class TinyLM(nn.Module):
    """Token ids (B, T) -> next-token logits (B, T, vocab_size)."""

    def __init__(
        self,
        vocab_size: int = 64,
        d_model: int = 32,
        n_heads: int = 4,
        context_length: int = 12,
        dropout: float = 0.0,
        mask_kind: str = "causal",
        window: int | None = None,
    ):
        super().__init__()
        self.vocab_size = check_positive("vocab_size", vocab_size)
        self.context_length = check_positive("context_length", context_length)
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(context_length, d_model)
        self.attn = MultiHeadSelfAttention(
            d_model, n_heads, context_length, dropout=dropout, mask_kind=mask_kind, window=window
        )
        self.lm_head = nn.Linear(d_model, vocab_size)

    def forward(self, idx: torch.Tensor, return_weights: bool = False):
        if not isinstance(idx, torch.Tensor) or idx.dtype not in (torch.int64, torch.int32):
            dtype = getattr(idx, "dtype", type(idx).__name__)
            raise TypeError(
                f"TinyLM takes token ids as an int64 tensor (B, T), got {dtype}; "
                "convert whole-number ids with idx.long() (TinyLM embeds the ids itself)"
            )
        if idx.dim() != 2:
            fix = "add a batch dimension with idx.unsqueeze(0)" if idx.dim() == 1 else "reshape it"
            raise ValueError(
                f"idx has shape {tuple(idx.shape)} (rank {idx.dim()}), but TinyLM takes (B, T) "
                f"token ids; {fix}"
            )
        T = idx.shape[1]
        if T > self.context_length:
            raise ValueError(
                f"idx has T={T} positions, more than context_length={self.context_length}; "
                f"build TinyLM with context_length>={T} or feed idx[:, -{self.context_length}:]"
            )
        if idx.numel() and (idx.min() < 0 or idx.max() >= self.vocab_size):
            low, high = int(idx.min()), int(idx.max())
            fix = (
                "ids are row numbers of the embedding table and cannot be negative"
                if low < 0
                else f"build TinyLM with vocab_size>={high + 1}"
            )
            raise ValueError(
                f"token ids must lie in [0, {self.vocab_size}) for vocab_size={self.vocab_size}; "
                f"got values from {low} to {high}; {fix}"
            )
        pos = torch.arange(T, device=idx.device)  # (T,)
        x = self.tok_emb(idx) + self.pos_emb(pos)  # (B, T, D)
        if return_weights:
            out, weights = self.attn(x, return_weights=True)  # (B, T, D), (B, H, T, T)
            return self.lm_head(out), weights  # (B, T, vocab)
        return self.lm_head(self.attn(x))  # (B, T, vocab)
