"""Rotary position embeddings, RoPE (notebook 12_attention_in_todays_llms).

Instead of adding a position vector to the token (a learned table, notebook 08), RoPE turns
each query and each key by an angle that grows with its position. Features are taken in
pairs, and pair i turns by ``position * base ** (-2i / d_head)``: the first pairs fast, the
last ones slowly. A query at position m and a key at position n then meet at the angle
``(m - n) * theta_i`` in every pair: the score depends on the offset m - n only, so shifting
every position by the same k leaves every score unchanged (a property test holds this).

Layout: Hugging Face's Llama code (``rotate_half``, ``apply_rotary_pos_emb``) pairs feature i
with feature i + d_head/2, not with its neighbour as the RoFormer paper writes it. The two
layouts differ only by a permutation of the q and k projection rows (tested), so a model
trained in one loads into the other by reordering rows.

RoPE is applied to q and k after the head split, never to v, at absolute positions: with a
KV cache, the new tokens sit at ``cache.position, cache.position + 1, ...`` (kv_cache.py).

    cos, sin = rope_cos_sin(torch.arange(T), d_head)  # (T, d_head) each
    q = apply_rope(q, cos, sin)  # (B, H, T, d_head)
"""

from __future__ import annotations

import torch

from .i18n import error_text


def check_rope_width(d_head: int, n_heads: int = 1) -> int:
    """``d_head`` if RoPE can turn it (an even number of features), else a ValueError that
    names a d_model that works with ``n_heads``."""
    if d_head % 2:
        raise ValueError(
            error_text(
                "d_head={d_head} is odd, but RoPE turns the features of a head in pairs; "
                "pick an even d_head = d_model // n_heads (for example d_model={d_model} "
                "with n_heads={n_heads})"
            ).format(d_head=d_head, d_model=n_heads * (d_head + 1), n_heads=n_heads)
        )
    return d_head


def rope_cos_sin(
    positions: torch.Tensor,
    d_head: int,
    base: float = 10_000.0,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of every position's angles, each (T, d_head), in the rotate-half layout.

    ``positions`` (T,) are absolute positions (ints). Pair i (features i and i + d_head/2)
    turns by ``positions * base ** (-2i / d_head)``, so both halves hold the same angles.
    Computed in ``dtype`` (float32, or float64 for float64 models), then cast by the caller.
    """
    check_rope_width(d_head)
    inv_freq = base ** (
        -torch.arange(0, d_head, 2, device=positions.device, dtype=dtype) / d_head
    )  # (d_head/2,)
    angles = positions.to(dtype)[:, None] * inv_freq[None, :]  # (T, d_head/2)
    angles = torch.cat([angles, angles], dim=-1)  # (T, d_head): pair i is (i, i + d_head/2)
    return angles.cos(), angles.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(..., d) -> (..., d): (x1, x2) -> (-x2, x1), the two halves of the last dimension."""
    x1, x2 = x.chunk(2, dim=-1)  # 2 x (..., d/2)
    return torch.cat([-x2, x1], dim=-1)  # (..., d)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Turn every pair of ``x`` (..., T, d_head) by its angle: x·cos + rotate_half(x)·sin.

    ``cos`` and ``sin`` are (T, d_head) from ``rope_cos_sin``; they are cast to x's dtype.
    Apply it to q and k (never to v): the values carry content, not position.
    """
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)  # (T, d_head) each
    return x * cos + rotate_half(x) * sin  # (..., T, d_head)
