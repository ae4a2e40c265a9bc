"""The configs of the chapter's language models: one dataclass, two sets of defaults
(notebook 08; notebook 11; notebook 12_attention_in_todays_llms).

nanoGPT's habit: one small dataclass describes the model, and everything that builds one
takes it -- ``TinyLM(config)``, ``train_tiny_lm(task, config)``, ``CharLM(config)`` and the
explorer (``TinyLM(n_heads=8)`` is short for ``TinyLM(TinyLMConfig(n_heads=8))``). The
fields are checked when the config is made, so a wrong size fails with a clear message
before any tensor exists.

``DecoderConfig`` holds every switch of the one decoder stack (decoder.py); ``TinyLMConfig``
(notebooks 08-10: attention only, one layer) and ``CharLMConfig`` (notebook 11: GPT-2's
block, two layers) are the same fields with each model's defaults. Every field after
``vocab_size`` is keyword-only: the two models list their sizes in different orders.
"""

from __future__ import annotations

import dataclasses
from dataclasses import KW_ONLY, dataclass

from ._checks import (
    check_dropout,
    check_heads,
    check_kv_heads,
    check_positive,
    check_rope_base,
)
from .i18n import error_text
from .latent import check_latent_rope
from .masks import build_mask
from .rope import check_rope_width
from .smear import check_smear

POSITIONS = ("learned", "rope", "none")


@dataclass(frozen=True)
class DecoderConfig:
    """Sizes, mask and switches of a decoder (``TinyLM``, ``CharLM``).

    Attributes:
        vocab_size: how many token ids there are.
        d_model: D, the width of every token vector.
        n_heads: H; d_head = D // H.
        context_length: T, the longest sequence (the position table has this many rows).
        dropout: probability of dropping an attention weight in training.
        mask_kind: "causal", "sliding" (needs ``window``) or "none"; None (the default
            here and in ``CharLMConfig``) means "sliding" when ``window`` is set, else
            "causal". ``TinyLMConfig`` says "causal" and wants "sliding" spelled out.
        window: with "sliding", each position sees itself and the ``window - 1`` before it;
            with a KV cache, each layer keeps only its last ``window`` positions.
        qkv_bias, out_bias: biases of the Q/K/V projections and the output projection.
        positions: "learned" (a position table added to the tokens, GPT-2's way), "rope"
            (q and k rotated in every layer, Llama's way) or "none" (the control that
            tells a positional task from a lookup by content, notebook 08). True and False
            mean "learned" and "none" (what the field held before).
        n_layers: L, how many blocks are stacked.
        residual: attention-only blocks: whether each layer *adds* its output to a residual
            stream (x + attn(x)) instead of replacing it. None (the default) means "on when
            n_layers > 1": the chapter's one-layer model feeds attention straight to the LM
            head. GPT-2's block (``mlp``) always has the residual.
        n_kv_heads: key/value heads, a divisor of H (grouped-query attention; 1 is
            multi-query); None means H.
        rope_base: RoPE's base, with positions="rope".
        d_latent: None, or the latent width of DeepSeek's multi-head latent attention:
            every block is then a ``LatentAttention`` caching d_latent numbers per token.
        mlp: the block: False for attention only (``TinyLM``); True for GPT-2's pre-layer-norm
            block, x + attn(ln1(x)) then x + mlp(ln2(x)), with a final layer norm (``CharLM``).
        smear_keys: Olsson et al.'s smeared keys in every block: each key a learned mix of
            its own token's key and the previous one's (smear.py; notebook 10's one-layer
            model that can form an induction head). False (the default) changes nothing.
    """

    vocab_size: int
    _: KW_ONLY
    d_model: int = 32
    n_heads: int = 4
    context_length: int = 12
    dropout: float = 0.0
    mask_kind: str | None = None
    window: int | None = None
    qkv_bias: bool = True
    out_bias: bool = True
    positions: str = "learned"
    n_layers: int = 1
    residual: bool | None = None
    n_kv_heads: int | None = None
    rope_base: float = 10_000.0
    d_latent: int | None = None
    mlp: bool = False
    smear_keys: bool = False

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_heads", "context_length"):
            object.__setattr__(self, name, check_positive(name, getattr(self, name)))
        object.__setattr__(self, "n_layers", _check_n_layers(self.n_layers))
        if not (self.residual is None or isinstance(self.residual, bool)):
            raise ValueError(
                error_text(
                    "residual={residual} must be True, False or None (None: on when n_layers > 1)"
                ).format(residual=repr(self.residual))
            )
        if not isinstance(self.mlp, bool):
            raise ValueError(
                error_text(
                    "mlp={mlp} must be True (GPT-2's block, as in CharLM) or False "
                    "(attention only, as in TinyLM)"
                ).format(mlp=repr(self.mlp))
            )
        if self.mlp and self.residual is False:
            raise ValueError(
                error_text(
                    "residual=False does not apply with mlp=True: GPT-2's block always adds "
                    "to the residual stream; leave residual out"
                )
            )
        check_heads(self.d_model, self.n_heads)
        object.__setattr__(self, "dropout", check_dropout(self.dropout))
        if self.window is not None:
            object.__setattr__(self, "window", check_positive("window", self.window))
        # a known kind, a window only with "sliding" and then >= 1: the library's messages
        build_mask(self.resolved_mask_kind, 1, self.window)
        object.__setattr__(self, "positions", _check_positions(self.positions))
        if self.n_kv_heads is not None:
            object.__setattr__(self, "n_kv_heads", check_kv_heads(self.n_heads, self.n_kv_heads))
        object.__setattr__(self, "rope_base", check_rope_base(self.rope_base))
        if self.rope:
            check_rope_width(self.d_head, self.n_heads)
        if self.d_latent is not None:
            object.__setattr__(self, "d_latent", check_positive("d_latent", self.d_latent))
            check_latent_rope(self.rope)
            if self.n_kv_heads is not None:
                raise ValueError(
                    error_text(
                        "n_kv_heads={n_kv_heads} does not apply with d_latent: latent attention "
                        "caches one latent per token and makes every head's keys and values "
                        "from it; leave n_kv_heads out"
                    ).format(n_kv_heads=self.n_kv_heads)
                )
        object.__setattr__(self, "smear_keys", check_smear(self.smear_keys))
        if self.smear_keys and self.d_latent is not None:
            raise ValueError(
                error_text(
                    "smear_keys=True does not apply with d_latent: latent attention makes its "
                    "keys from a cached latent; leave one of them out"
                )
            )

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        """The key/value heads: ``n_kv_heads``, or n_heads if None (and with d_latent)."""
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def rope(self) -> bool:
        """Whether the blocks rotate q and k (positions="rope")."""
        return self.positions == "rope"

    @property
    def resolved_mask_kind(self) -> str:
        """``mask_kind``, or if None: "sliding" with a window, else "causal"."""
        if self.mask_kind is not None:
            return self.mask_kind
        return "causal" if self.window is None else "sliding"

    @property
    def uses_residual(self) -> bool:
        """Whether the layers add to a residual stream: always with ``mlp``; else
        ``residual``, or n_layers > 1 if None."""
        if self.mlp:
            return True
        return self.n_layers > 1 if self.residual is None else bool(self.residual)

    def attention_options(self) -> dict:
        """The keywords that build one block's attention from this config."""
        return {
            "dropout": self.dropout,
            "qkv_bias": self.qkv_bias,
            "out_bias": self.out_bias,
            "mask_kind": self.resolved_mask_kind,
            "window": self.window,
            "n_kv_heads": self.n_kv_heads,
            "rope": self.rope,
            "rope_base": self.rope_base,
            "d_latent": self.d_latent,
            "smear_keys": self.smear_keys,
        }

    def replace(self, **changes) -> DecoderConfig:
        """A copy with some fields changed (checked again), e.g. ``config.replace(n_heads=8)``."""
        _check_field_names(type(self), changes)
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class TinyLMConfig(DecoderConfig):
    """Sizes and mask of a ``TinyLM``; the defaults are the chapter's copy-task setting.

    All of ``DecoderConfig``'s fields, with these defaults: vocab_size 64 (chance loss is
    ln 64 = 4.16), d_model 32, 4 heads, context_length 12, one attention-only layer,
    mask_kind "causal", learned positions. ``n_layers=2`` stacks two attention layers on a
    residual stream (notebook 10); ``n_layers=1, residual=True`` is the one-layer control
    of the two-layer model (the same stream, one layer).
    """

    vocab_size: int = 64
    _: KW_ONLY
    mask_kind: str | None = "causal"

    @classmethod
    def of(cls, config: TinyLMConfig | None = None, **fields) -> TinyLMConfig:
        """The config ``TinyLM(config)`` or ``TinyLM(**fields)`` is built from: ``config``
        itself, or ``TinyLMConfig(**fields)`` (unknown field names fail as in ``replace``).

        One or the other, not both: a changed copy of a config is
        ``TinyLM(config.replace(n_heads=2))``.
        """
        if config is None:
            _check_field_names(cls, fields)
            return cls(**fields)
        if not isinstance(config, cls):
            raise TypeError(
                error_text(
                    "TinyLM takes a TinyLMConfig (or keyword fields), got {type}; "
                    "use TinyLM(TinyLMConfig(...)) or TinyLM(n_heads=..., d_model=...)"
                ).format(type=type(config).__name__)
            )
        if fields:
            changes = ", ".join(f"{k}={v!r}" for k, v in fields.items())
            raise TypeError(
                error_text(
                    "TinyLM takes one config or keyword fields, not both; "
                    "for a changed copy write TinyLM(config.replace({changes}))"
                ).format(changes=changes)
            )
        return config


@dataclass(frozen=True)
class CharLMConfig(DecoderConfig):
    """Sizes of a ``CharLM`` (notebook 11). ``n_layers`` blocks of ``n_heads`` heads, each
    d_model wide: GPT-2's pre-layer-norm block (``mlp=True``), learned positions.

    ``window``: None (default) for causal attention over the whole context; k for a sliding
    window (notebook 04's mask), each position seeing itself and the k - 1 characters before
    it. ``window=1`` is the control of notebook 11: attention that sees only the current
    character, so nothing reaches a position from any other.
    """

    vocab_size: int
    _: KW_ONLY
    context_length: int = 32
    d_model: int = 64
    n_layers: int = 2
    mlp: bool = True


FIELDS = tuple(f.name for f in dataclasses.fields(TinyLMConfig))


def _check_field_names(cls: type, changes: dict) -> None:
    names = tuple(f.name for f in dataclasses.fields(cls))
    unknown = sorted(set(changes) - set(names))
    if unknown:
        raise TypeError(
            error_text("{config} has no field {unknown}; its fields are {fields}").format(
                config=cls.__name__, unknown=", ".join(map(repr, unknown)), fields=", ".join(names)
            )
        )


def _check_positions(positions) -> str:
    if positions is True or positions is False:
        return "learned" if positions else "none"
    if positions not in POSITIONS:
        raise ValueError(
            error_text(
                "positions={positions} is not known; use 'learned' (a position table), "
                "'rope' (rotary, in every layer) or 'none' (True and False also work: "
                "'learned' and 'none')"
            ).format(positions=repr(positions))
        )
    return positions


def _check_n_layers(n_layers) -> int:
    """n_layers as an int, if ``check_positive`` takes it; its message, worded for layers."""
    try:
        return check_positive("n_layers", n_layers)
    except ValueError:
        raise ValueError(
            error_text(
                "n_layers={n_layers} must be a whole number >= 1: how many attention layers "
                "are stacked; use n_layers=1 (the chapter's model) or n_layers=2 (enough for "
                "an induction head)"
            ).format(n_layers=repr(n_layers))
        ) from None
