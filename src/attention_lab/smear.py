"""Smeared keys: Olsson et al.'s one-layer model that can form induction heads (notebook 10).

An induction head at position i, holding token A, looks for the key j whose *previous*
token was A. In the chapter's attention-only models a key is made from its own position's
residual stream, so "the token before me" can reach key j only through an earlier attention
layer: a previous-token head. Olsson et al. 2022 ("In-context Learning and Induction Heads",
the smeared-key architecture) give every head a second way: each key is a learned mix of its
own token's key and the previous token's,

    k'_j = σ(α_h) k_j + (1 - σ(α_h)) k_{j-1}        (j >= 1;  k'_0 = k_0)

with one learned number α_h per head (per key/value head with grouped-query attention).
σ(α) = 1 is the ordinary key; σ(α) = 0 is the previous token's key alone. The queries and
the values are untouched. k'_j reads positions j and j - 1 only, both <= j, so a query that
sees keys j <= i still sees nothing after i: the smear keeps attention causal.

``MultiHeadSelfAttention(..., smear_keys=True)`` (or ``TinyLMConfig(smear_keys=True)``)
adds the α's as the parameter ``smear_alpha``, initialised to 0 (an even mix); the default,
``smear_keys=False``, adds nothing, so every other model is exactly as before.
"""

from __future__ import annotations

import torch

from .i18n import error_text


def smear_keys(k: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """k (B, n_kv, T, d_head) and alpha (n_kv,) -> the smeared keys (B, n_kv, T, d_head).

    Key j becomes σ(α_h) k_j + (1 - σ(α_h)) k_{j-1}; key 0, which has no key before it,
    stays k_0. ``k`` must start at position 0 (the whole sequence, or a KV cache's keys).
    """
    if k.dim() != 4 or alpha.shape != (k.shape[1],):
        raise ValueError(
            error_text(
                "smear_keys needs keys (B, n_kv_heads, T, d_head) and one alpha per key head "
                "(n_kv_heads,), got keys {k} and alpha {alpha}"
            ).format(k=tuple(k.shape), alpha=tuple(alpha.shape))
        )
    own = torch.sigmoid(alpha).to(k.dtype)[:, None, None]  # (n_kv, 1, 1): σ(α_h)
    previous = torch.cat([k[..., :1, :], k[..., :-1, :]], dim=-2)  # (B, n_kv, T, d_head)
    return own * k + (1 - own) * previous  # (B, n_kv, T, d_head)


def check_smear(smear_keys) -> bool:
    """``smear_keys`` if it is True or False, else a ValueError that says what it switches."""
    if smear_keys is True or smear_keys is False:
        return smear_keys
    raise ValueError(
        error_text(
            "smear_keys={smear_keys} must be True (each key mixed with the previous token's, "
            "Olsson et al.'s one-layer induction model) or False (the chapter's block)"
        ).format(smear_keys=repr(smear_keys))
    )
