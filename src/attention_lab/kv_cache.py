"""The KV cache: what generation keeps from earlier tokens (notebook 12_attention_in_todays_llms).

Without a cache, every new token runs the whole prefix through the model again, and every
layer recomputes the keys and values of tokens it has already seen. With one, each layer
keeps them: a new token computes only its own q, k and v, appends k and v, and attends over
everything kept. The logits are the same (the tests hold them equal to 1e-5 for every
variant); only the work and the memory change.

* ``LayerCache``: one layer's tensors -- keys and values (B, n_kv_heads, T_cached, d_head)
  for ``MultiHeadSelfAttention``, the latent (B, T_cached, d_latent) for ``LatentAttention``
  -- and ``position``, the absolute position of the next token (RoPE and the mask need it).
  A sliding-window layer keeps only its last ``window`` positions, so its size stays flat.
* ``KVCache``: one ``LayerCache`` per layer. Hugging Face's design: the model is handed the
  cache and each layer updates its own entry (there by a layer index, here ``cache[i]``).
* ``cache_bytes(config, T)``: the formula, layers x 2 x n_kv_heads x d_head x T x bytes per
  element (MLA: layers x (d_latent + d_rope) x T x bytes); ``CacheShape`` describes a
  published model by the sizes of its config file. ``KVCache.nbytes()`` measures a real one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ._checks import check_positive
from .i18n import error_text


def _own(t: torch.Tensor) -> torch.Tensor:
    """``t`` in memory of its own: a view into a larger tensor (the qkv output, a longer
    cache) would keep all of that alive, and the cache's bytes would hide it."""
    if t.is_contiguous() and t.untyped_storage().nbytes() == t.nbytes:
        return t
    return t.clone(memory_format=torch.contiguous_format)


class LayerCache:
    """One layer's cache: its tensors (time on dim -2) and the position of the next token.

    ``tensors`` is (keys, values), each (B, n_kv_heads, T_cached, d_head), or (latent,) of
    (B, T_cached, d_latent) for latent attention; empty before the first token.
    ``position`` counts the tokens seen, so it is the absolute position of the next one;
    it differs from T_cached once a sliding window has dropped old positions.
    """

    def __init__(self, context_length: int):
        self.context_length = check_positive("context_length", context_length)
        self.tensors: tuple[torch.Tensor, ...] = ()
        self.position = 0

    def start(self, T: int) -> int:
        """The absolute position of the first of ``T`` new tokens (the cache's ``position``);
        a ValueError if they would pass ``context_length``."""
        if self.position + T > self.context_length:
            raise ValueError(
                error_text(
                    "the cache holds {position} positions and {T} more would pass "
                    "context_length={context_length}; build the model with "
                    "context_length>={needed}, or start a new cache (generate with "
                    "use_cache=False slides over the last context_length tokens instead)"
                ).format(
                    position=self.position,
                    T=T,
                    context_length=self.context_length,
                    needed=self.position + T,
                )
            )
        return self.position

    def update(self, *new: torch.Tensor, window: int | None = None) -> tuple[torch.Tensor, ...]:
        """Append ``new`` (each (..., T, d), time on dim -2) and return what the T new
        queries attend over: everything kept, or with a ``window`` the last window - 1
        positions before them and the T new ones. Keeps at most ``window`` positions."""
        T = new[0].shape[-2]
        if self.tensors:
            full = tuple(torch.cat([old, n], dim=-2) for old, n in zip(self.tensors, new))
        else:
            full = new  # (..., T, d) each
        self.position += T
        if window is None:
            self.tensors = tuple(_own(t) for t in full)
            return full
        self.tensors = tuple(_own(t[..., -window:, :]) for t in full)  # (..., <= window, d)
        return tuple(t[..., -(window - 1 + T) :, :] for t in full)  # (..., <= window-1+T, d)

    @property
    def keys(self) -> torch.Tensor:
        return self.tensors[0]  # (B, n_kv_heads, T_cached, d_head)

    @property
    def values(self) -> torch.Tensor:
        return self.tensors[1]  # (B, n_kv_heads, T_cached, d_head)

    def nbytes(self) -> int:
        """Bytes of memory the kept tensors hold (their storage, so a view cannot hide any)."""
        return sum(t.untyped_storage().nbytes() for t in self.tensors)

    def reset(self) -> None:
        """Forget everything: the next token is at position 0 again."""
        self.tensors, self.position = (), 0

    def __repr__(self) -> str:
        shapes = ", ".join(str(tuple(t.shape)) for t in self.tensors)
        return f"LayerCache(position={self.position}, tensors=[{shapes}])"


class KVCache:
    """The cache of a whole model: ``cache[i]`` is layer i's ``LayerCache``.

    Make one with ``model.new_cache()`` (or ``KVCache(n_layers, context_length)``), hand it
    to every call, ``model(ids, cache=cache)``, and each layer reads and extends its entry.
    """

    def __init__(self, n_layers: int, context_length: int):
        n = check_positive("n_layers", n_layers)
        self.layers = [LayerCache(context_length) for _ in range(n)]

    def __getitem__(self, i: int) -> LayerCache:
        return self.layers[i]

    def __len__(self) -> int:
        return len(self.layers)

    @property
    def context_length(self) -> int:
        return self.layers[0].context_length

    @property
    def position(self) -> int:
        """The absolute position of the next token (the tokens the model has seen)."""
        return self.layers[0].position

    def start(self, T: int) -> int:
        """The position of the first of ``T`` new tokens; a ValueError past context_length."""
        return self.layers[0].start(T)

    def nbytes(self) -> int:
        """Bytes the cache holds now: the sum over layers of ``LayerCache.nbytes``."""
        return sum(layer.nbytes() for layer in self.layers)

    def reset(self) -> None:
        for layer in self.layers:
            layer.reset()

    def __repr__(self) -> str:
        return f"KVCache(n_layers={len(self)}, position={self.position}, nbytes={self.nbytes()})"


# --- the formula ----------------------------------------------------------------------


@dataclass(frozen=True)
class CacheShape:
    """What a model keeps per token in its cache: the sizes its config file gives (the field
    names of ``published.PublishedModel``, which ``cache_bytes`` takes as well).

    Attributes:
        n_layers: layers, each with its own cache (``num_hidden_layers``).
        n_kv_heads: key/value heads (``num_key_value_heads``); n_heads for plain
            multi-head attention, 1 for multi-query.
        d_head: the width of one head (``head_dim``, else hidden_size // num_attention_heads).
        window: the sliding window of the layers that have one (``sliding_window``).
        sliding_layers: the indices of the layers that slide (Gemma mixes local and global
            layers); None: every layer, when ``window`` is set.
        d_latent: latent attention (MLA) only: the latent's width (``kv_lora_rank``); the
            cache then holds the latent, not keys and values.
        d_rope: MLA only: the decoupled RoPE key's width (``qk_rope_head_dim``), cached
            beside the latent.
    """

    n_layers: int
    n_kv_heads: int = 0
    d_head: int = 0
    window: int | None = None
    sliding_layers: tuple[int, ...] | None = None
    d_latent: int | None = None
    d_rope: int = 0

    @classmethod
    def of(cls, config) -> CacheShape:
        """The shape of a ``CacheShape``, a ``published.PublishedModel`` or a ``TinyLMConfig``
        / ``CharLMConfig`` (read by attribute name)."""
        if isinstance(config, cls):
            return config
        if hasattr(config, "resolved_mask_kind"):  # this library's config
            sliding = config.resolved_mask_kind == "sliding"
            return cls(
                n_layers=config.n_layers,
                n_kv_heads=config.kv_heads,
                d_head=config.d_head,
                window=config.window if sliding else None,
                d_latent=config.d_latent,
            )
        return cls(
            n_layers=config.n_layers,
            n_kv_heads=config.n_kv_heads,
            d_head=config.d_head,
            window=config.window,
            sliding_layers=getattr(config, "sliding_layers", None) or None,
            d_latent=getattr(config, "d_latent", None),
            d_rope=getattr(config, "d_rope", None) or 0,
        )

    def per_token(self) -> int:
        """Numbers one token adds to one layer's cache: 2 x n_kv_heads x d_head (keys and
        values), or d_latent + d_rope with latent attention."""
        if self.d_latent is not None:
            return self.d_latent + self.d_rope
        return 2 * self.n_kv_heads * self.d_head


def cache_bytes(config, T: int, bytes_per_element: int = 4, batch_size: int = 1) -> int:
    """The bytes a cache holds after ``T`` tokens, by the formula.

    layers x 2 x n_kv_heads x d_head x T x bytes per element (x batch_size), where a
    sliding-window layer counts min(T, window) positions; with latent attention (MLA),
    layers x (d_latent + d_rope) x T x bytes. ``config``: a ``TinyLMConfig`` /
    ``CharLMConfig``, a ``published.PublishedModel`` or a ``CacheShape``.
    ``bytes_per_element``: 4 for float32 (this library's models), 2 for the bfloat16 that
    published models run in.
    """
    shape = CacheShape.of(config)
    T = check_positive("T", T)
    sliding = 0
    if shape.window is not None:
        sliding = shape.n_layers if shape.sliding_layers is None else len(shape.sliding_layers)
    positions = sliding * min(T, shape.window or T) + (shape.n_layers - sliding) * T
    return positions * shape.per_token() * bytes_per_element * batch_size
