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
them in forward order either way. The stack is the one ``CharLM`` uses (decoder.py), with
every switch of notebook 12_attention_in_todays_llms: ``n_kv_heads``, ``positions="rope"``,
``window``, ``d_latent``, and ``generate(..., use_cache=True)``.
"""

from __future__ import annotations

import torch

from .config import TinyLMConfig
from .decoder import AttentionLayer, Decoder

__all__ = ["AttentionLayer", "TinyLM"]


class TinyLM(Decoder):
    """Token ids (B, T) -> next-token logits (B, T, vocab_size).

    One way to configure it: a ``TinyLMConfig``. ``TinyLM(config)`` takes one;
    ``TinyLM(n_heads=8)`` is short for ``TinyLM(TinyLMConfig(n_heads=8))``
    (see ``TinyLMConfig.of``).

    ``forward(idx, return_weights=True)`` also returns the attention weights: (B, H, T, T) with
    one layer, as always; (B, L, H, T, T) with L = ``n_layers`` > 1, layer ``l`` at ``[:, l]``
    (as ``CharLM`` returns them).
    """

    def __init__(self, config: TinyLMConfig | None = None, **fields):
        super().__init__(TinyLMConfig.of(config, **fields))

    def generate(
        self, idx: torch.Tensor, max_new_tokens: int, use_cache: bool = False
    ) -> torch.Tensor:
        """Greedy decoding: append the most likely next id ``max_new_tokens`` times.

        ``idx`` is (B, T0) ids; returns (B, T0 + max_new_tokens). Without a cache the model
        sees at most the last ``context_length`` ids at each step. ``use_cache=True`` runs
        the prompt once and then one token per step from a KV cache: the same ids, while
        they fit in ``context_length`` (False by default: the chapter's outputs were made so).
        """
        return self._generate(
            idx, max_new_tokens, lambda logits: logits.argmax(dim=-1, keepdim=True), use_cache
        )
