"""``TinyLM``: the smallest model around the attention block (notebook 08; two layers: the
induction-head lesson).

token embedding + position embedding -> ``n_layers`` x MultiHeadSelfAttention -> LM head
(``positions=False`` in the config leaves the position embedding out).
No feed-forward block or layer norm: the chapter leaves those to the next one, so every bit
of information between positions has to pass through attention.

With one layer (the default) there is no residual either: attention feeds the LM head
directly, ``lm_head(attn(x))``. With ``n_layers > 1`` each layer *adds* to a residual
stream, ``x = x + attn(x)``, so a later layer reads what the token embedding and every
earlier layer wrote (``TinyLMConfig.residual`` switches this for any number of layers;
one layer with the residual on is the two-layer model's one-layer control).

Where the layers live: ``model.attn`` with one layer (so its checkpoints load as before),
``model.blocks[i].attn`` with more (as in ``CharLM``); ``model.attention_layers()`` lists
them in forward order either way.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from ._checks import check_positive, check_token_ids
from .config import TinyLMConfig
from .fused import MultiHeadSelfAttention


class AttentionLayer(nn.Module):
    """One layer of a multi-layer ``TinyLM``: its ``attn``, on the residual stream or not.

    (B, T, D) -> (B, T, D): ``x + attn(x)`` with ``residual``, else ``attn(x)``; and the
    (B, H, T, T) weights if asked.
    """

    def __init__(self, attn: MultiHeadSelfAttention, residual: bool):
        super().__init__()
        self.attn, self.residual = attn, residual

    def forward(self, x: torch.Tensor, return_weights: bool = False):
        return _apply(self.attn, x, self.residual, return_weights)


def _apply(attn: MultiHeadSelfAttention, x: torch.Tensor, residual: bool, return_weights: bool):
    if return_weights:
        out, weights = attn(x, return_weights=True)  # (B, T, D), (B, H, T, T)
    else:
        out, weights = attn(x), None  # (B, T, D)
    if residual:
        out = x + out  # (B, T, D): the stream keeps x, attention adds to it
    return (out, weights) if return_weights else out


def run_blocks(blocks, x: torch.Tensor, return_weights: bool = False):
    """Run ``x`` (B, T, D) through each block in turn; with ``return_weights`` also stack
    each block's (B, H, T, T) weights into (B, L, H, T, T). TinyLM and CharLM share it."""
    if not return_weights:
        for block in blocks:
            x = block(x)  # (B, T, D)
        return x
    weights = []
    for block in blocks:
        x, w = block(x, return_weights=True)  # (B, T, D), (B, H, T, T)
        weights.append(w)
    return x, torch.stack(weights, dim=1)  # (B, T, D), (B, L, H, T, T)


class TinyLM(nn.Module):
    """Token ids (B, T) -> next-token logits (B, T, vocab_size).

    One way to configure it: a ``TinyLMConfig``. ``TinyLM(config)`` takes one;
    ``TinyLM(n_heads=8)`` is short for ``TinyLM(TinyLMConfig(n_heads=8))``
    (see ``TinyLMConfig.of``).

    ``return_weights=True`` also returns the attention weights: (B, H, T, T) with one
    layer, as always; (B, L, H, T, T) with L = ``n_layers`` > 1, layer ``l`` at ``[:, l]``
    (as ``CharLM`` returns them).
    """

    def __init__(self, config: TinyLMConfig | None = None, **fields):
        super().__init__()
        self.config = c = TinyLMConfig.of(config, **fields)
        self.vocab_size, self.context_length = c.vocab_size, c.context_length
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        # None without positions: no table that would get no gradient
        self.pos_emb = nn.Embedding(c.context_length, c.d_model) if c.positions else None
        self.residual = c.uses_residual
        if c.n_layers == 1:  # the chapter's model: its checkpoints keep the keys attn.*
            self.attn = self._attention(c)
        else:
            self.blocks = nn.ModuleList(
                AttentionLayer(self._attention(c), self.residual) for _ in range(c.n_layers)
            )
        self.lm_head = nn.Linear(c.d_model, c.vocab_size)

    @staticmethod
    def _attention(c: TinyLMConfig) -> MultiHeadSelfAttention:
        return MultiHeadSelfAttention(
            c.d_model,
            c.n_heads,
            c.context_length,
            dropout=c.dropout,
            qkv_bias=c.qkv_bias,
            out_bias=c.out_bias,
            mask_kind=c.mask_kind,
            window=c.window,
        )

    def attention_layers(self) -> list[MultiHeadSelfAttention]:
        """The attention blocks in forward order: ``[self.attn]``, or each ``blocks[i].attn``."""
        if self.config.n_layers == 1:
            return [self.attn]
        return [block.attn for block in self.blocks]

    def forward(
        self, idx: torch.Tensor, return_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """(B, T) int64 ids -> (B, T, vocab) logits, and the weights if asked:
        (B, H, T, T) with one layer, (B, L, H, T, T) with L > 1."""
        check_token_ids(idx, self.vocab_size, self.context_length, "TinyLM")  # one host sync
        x = self.tok_emb(idx)  # (B, T, D)
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(idx.shape[1], device=idx.device))  # (B, T, D)
        if self.config.n_layers == 1:
            if return_weights:
                x, weights = _apply(self.attn, x, self.residual, True)  # (B, T, D), (B, H, T, T)
                return self.lm_head(x), weights  # (B, T, vocab)
            return self.lm_head(_apply(self.attn, x, self.residual, False))  # (B, T, vocab)
        if return_weights:
            x, weights = run_blocks(self.blocks, x, True)  # (B, T, D), (B, L, H, T, T)
            return self.lm_head(x), weights  # (B, T, vocab)
        return self.lm_head(run_blocks(self.blocks, x))  # (B, T, vocab)

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
