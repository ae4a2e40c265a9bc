"""``TinyLMConfig``: the one place a tiny model's sizes and mask are written down (notebook 08).

nanoGPT's habit: one small dataclass describes the model, and everything that builds one
takes it -- ``TinyLM(config)``, ``train_tiny_lm(task, config)`` and the explorer
(``TinyLM(n_heads=8)`` is short for ``TinyLM(TinyLMConfig(n_heads=8))``). The
fields are checked when the config is made, so a wrong size fails with a clear message
before any tensor exists.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ._checks import as_size, check_dropout, check_heads, check_positive
from .i18n import error_text
from .masks import build_mask


@dataclass(frozen=True)
class TinyLMConfig:
    """Sizes and mask of a ``TinyLM``; the defaults are the chapter's copy-task setting.

    Attributes:
        vocab_size: how many token ids there are (64: chance loss is ln 64 = 4.16).
        d_model: D, the width of every token vector.
        n_heads: H; d_head = D // H.
        context_length: T, the longest sequence (the position table has this many rows).
        dropout: probability of dropping an attention weight in training.
        mask_kind: "causal", "sliding" (needs ``window``) or "none".
        window: with "sliding", each position sees itself and the ``window - 1`` before it.
        qkv_bias, out_bias: biases of the fused QKV projection and the output projection.
        positions: False leaves out the position table, so the model sees only which
            tokens there are (and, through the causal mask, which came before): the
            control that tells a positional task from a lookup by content (notebook 08).
        n_layers: L, how many attention layers are stacked (no MLP between them).
        residual: whether each layer *adds* its output to a residual stream (x + attn(x))
            instead of replacing it (attn(x)). None (the default) means "on when
            n_layers > 1": the chapter's one-layer model feeds attention straight to the
            LM head, and every one-layer result keeps that. ``n_layers=1, residual=True``
            is the one-layer control of the two-layer model (the same stream, one layer).
    """

    vocab_size: int = 64
    d_model: int = 32
    n_heads: int = 4
    context_length: int = 12
    dropout: float = 0.0
    mask_kind: str = "causal"
    window: int | None = None
    qkv_bias: bool = True
    out_bias: bool = True
    positions: bool = True
    n_layers: int = 1
    residual: bool | None = None

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
        check_heads(self.d_model, self.n_heads)
        object.__setattr__(self, "dropout", check_dropout(self.dropout))
        # a known kind, a window only with "sliding" and then >= 1: the library's messages
        build_mask(self.mask_kind, 1, self.window)

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def uses_residual(self) -> bool:
        """Whether the layers add to a residual stream: ``residual``, or n_layers > 1 if None."""
        return self.n_layers > 1 if self.residual is None else bool(self.residual)

    @classmethod
    def of(cls, config: TinyLMConfig | None = None, **fields) -> TinyLMConfig:
        """The config ``TinyLM(config)`` or ``TinyLM(**fields)`` is built from: ``config``
        itself, or ``TinyLMConfig(**fields)`` (unknown field names fail as in ``replace``).

        One or the other, not both: a changed copy of a config is
        ``TinyLM(config.replace(n_heads=2))``.
        """
        if config is None:
            _check_field_names(fields)
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

    def replace(self, **changes) -> TinyLMConfig:
        """A copy with some fields changed (checked again), e.g. ``config.replace(n_heads=8)``."""
        _check_field_names(changes)
        return dataclasses.replace(self, **changes)


FIELDS = tuple(f.name for f in dataclasses.fields(TinyLMConfig))


def _check_field_names(changes: dict) -> None:
    unknown = sorted(set(changes) - set(FIELDS))
    if unknown:
        raise TypeError(
            error_text("TinyLMConfig has no field {unknown}; its fields are {fields}").format(
                unknown=", ".join(map(repr, unknown)), fields=", ".join(FIELDS)
            )
        )


def _check_n_layers(n_layers) -> int:
    size = as_size(n_layers)
    if size is None or size < 1:
        raise ValueError(
            error_text(
                "n_layers={n_layers} must be a whole number >= 1: how many attention layers "
                "are stacked; use n_layers=1 (the chapter's model) or n_layers=2 (enough for "
                "an induction head)"
            ).format(n_layers=repr(n_layers))
        )
    return size
