"""``TinyLM``: the smallest model around the attention block (notebook 08).

token embedding + position embedding -> MultiHeadSelfAttention -> LM head
(``positions=False`` in the config leaves the position embedding out).
No feed-forward block, residual or layer norm: the chapter leaves those to the next one,
so every bit of information between positions has to pass through attention.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from ._checks import check_positive, check_token_ids
from .config import TinyLMConfig
from .fused import MultiHeadSelfAttention


class TinyLM(nn.Module):
    """Token ids (B, T) -> next-token logits (B, T, vocab_size).

    One way to configure it: a ``TinyLMConfig``. ``TinyLM(config)`` takes one;
    ``TinyLM(n_heads=8)`` is short for ``TinyLM(TinyLMConfig(n_heads=8))``
    (see ``TinyLMConfig.of``).
    """

    def __init__(self, config: TinyLMConfig | None = None, **fields):
        super().__init__()
        self.config = c = TinyLMConfig.of(config, **fields)
        self.vocab_size, self.context_length = c.vocab_size, c.context_length
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        # None without positions: no table that would get no gradient
        self.pos_emb = nn.Embedding(c.context_length, c.d_model) if c.positions else None
        self.attn = MultiHeadSelfAttention(
            c.d_model,
            c.n_heads,
            c.context_length,
            dropout=c.dropout,
            qkv_bias=c.qkv_bias,
            out_bias=c.out_bias,
            mask_kind=c.mask_kind,
            window=c.window,
        )
        self.lm_head = nn.Linear(c.d_model, c.vocab_size)

    def forward(
        self, idx: torch.Tensor, return_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """(B, T) int64 ids -> (B, T, vocab) logits, and (B, H, T, T) weights if asked."""
        check_token_ids(idx, self.vocab_size, self.context_length)
        x = self.tok_emb(idx)  # (B, T, D)
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(idx.shape[1], device=idx.device))  # (B, T, D)
        if return_weights:
            out, weights = self.attn(x, return_weights=True)  # (B, T, D), (B, H, T, T)
            return self.lm_head(out), weights  # (B, T, vocab)
        return self.lm_head(self.attn(x))  # (B, T, vocab)

    @torch.no_grad()
    def generate(self, idx: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
        """Greedy decoding: append the most likely next id ``max_new_tokens`` times.

        ``idx`` is (B, T0) ids; returns (B, T0 + max_new_tokens). The model sees at most the
        last ``context_length`` ids at each step.
        """
        check_positive("max_new_tokens", max_new_tokens)
        was_training = self.training
        self.eval()
        for _ in range(max_new_tokens):
            logits = self(idx[:, -self.context_length :])  # (B, T, vocab)
            next_id = logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
            idx = torch.cat([idx, next_id], dim=1)  # (B, T + 1)
        self.train(was_training)
        return idx
