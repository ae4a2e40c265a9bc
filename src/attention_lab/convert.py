"""The weight conversions of ``MultiHeadSelfAttention`` (fused.py; notebook 07), beside the
block so that fused.py holds the block alone: ``from_torch`` / ``to_torch``
(``torch.nn.MultiheadAttention``) and ``from_separate`` / ``to_separate`` (this library's
``MultiHeadAttention``, three projections, notebook 06). The block inherits them from
``WeightConversions``; call them on it: ``MultiHeadSelfAttention.from_torch(mha, T)``,
``block.to_separate()``. Every conversion keeps dtype, device, dropout and training mode.

The blocks built by from_torch and from_separate have n_kv_heads = H and no RoPE (the sources
have neither). to_torch and to_separate give the same function for any n_kv_heads: each
key/value head's rows are copied to every query head of its group (repeat_kv on the weights),
so the copy has H key/value heads and the memory of plain multi-head attention. A block with
RoPE or smeared keys converts to neither: they have no rotation and no smear.
"""

from __future__ import annotations

from typing import TypeVar

import torch
import torch.nn as nn

from .i18n import error_text
from .multihead import MultiHeadAttention

_Block = TypeVar("_Block", bound="WeightConversions")


class WeightConversions:
    """The conversions ``MultiHeadSelfAttention`` inherits; they read its ``qkv``,
    ``out_proj``, sizes, mask kind and switches, and build blocks with its constructor."""

    def _refuse_rope(self, method: str, target: str) -> None:
        if self.rope:
            raise ValueError(
                error_text(
                    "{method}() cannot convert a block with rope=True: {target} has no rotary "
                    "positions, so no weights give the same function; keep this block, or "
                    "build one with rope=False"
                ).format(method=method, target=target)
            )
        if self.smear_keys:
            raise ValueError(
                error_text(
                    "{method}() cannot convert a block with smear_keys=True: {target} makes "
                    "each key from its own token only, so no weights give the same function; "
                    "keep this block, or build one with smear_keys=False"
                ).format(method=method, target=target)
            )

    def _expanded_qkv(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``qkv``'s weight (3D, D) and bias (3D,) with each key/value head's rows repeated
        for the query heads of its group: plain multi-head attention, the same function."""
        w, b = self.qkv.weight, self.qkv.bias
        if self.n_kv_heads == self.n_heads:
            return w, b
        kv_dim, n_rep = self.n_kv_heads * self.d_head, self.n_heads // self.n_kv_heads

        def expand(t: torch.Tensor) -> torch.Tensor:  # (D + 2 kv_dim, ...) -> (3D, ...)
            q, k, v = t.split([self.d_model, kv_dim, kv_dim])
            k, v = (
                u.unflatten(0, (self.n_kv_heads, self.d_head))  # (n_kv, d_head, ...)
                .repeat_interleave(n_rep, dim=0)  # (H, d_head, ...): head h gets kv head h // g
                .flatten(0, 1)  # (D, ...)
                for u in (k, v)
            )
            return torch.cat([q, k, v])  # (3D, ...)

        return expand(w), None if b is None else expand(b)

    @classmethod
    def from_torch(
        cls: type[_Block],
        mha: nn.MultiheadAttention,
        context_length: int,
        mask_kind: str = "causal",
        window: int | None = None,
    ) -> _Block:
        """Build a block holding the weights of a ``torch.nn.MultiheadAttention`` (with
        n_kv_heads = H and no RoPE: the module has neither).

        ``nn.MultiheadAttention`` keeps no mask (it takes one per call), so say which mask
        the new block uses: ``mask_kind`` and ``window`` as in the constructor.
        PyTorch calls H ``num_heads``; this library calls it ``n_heads``.
        """
        if not isinstance(mha, nn.MultiheadAttention):
            raise TypeError(
                error_text("expected torch.nn.MultiheadAttention, got {type}").format(
                    type=type(mha).__name__
                )
            )
        if not mha._qkv_same_embed_dim or mha.bias_k is not None or mha.add_zero_attn:
            raise ValueError(
                error_text(
                    "only a plain nn.MultiheadAttention converts: kdim == vdim == embed_dim, "
                    "add_bias_kv=False and add_zero_attn=False"
                )
            )
        w = mha.in_proj_weight
        has_bias = mha.in_proj_bias is not None
        block = cls(
            mha.embed_dim,
            mha.num_heads,
            context_length,
            dropout=mha.dropout,
            qkv_bias=has_bias,
            out_bias=mha.out_proj.bias is not None,
            mask_kind=mask_kind,
            window=window,
        ).to(device=w.device, dtype=w.dtype)
        with torch.no_grad():
            block.qkv.weight.copy_(w)
            block.out_proj.weight.copy_(mha.out_proj.weight)
            if has_bias:
                block.qkv.bias.copy_(mha.in_proj_bias)
            if mha.out_proj.bias is not None:
                block.out_proj.bias.copy_(mha.out_proj.bias)
        return block.train(mha.training)  # same mode: same dropout behaviour

    def to_torch(self) -> nn.MultiheadAttention:
        """A ``torch.nn.MultiheadAttention(batch_first=True)`` with these weights.

        Call it with ``attn_mask=attention_lab.causal_mask(T)``: for a boolean mask it uses
        our convention, True = blocked. Only causal blocks convert (the mask is the one thing
        ``nn.MultiheadAttention`` does not keep), and only when ``qkv`` and ``out_proj``
        both have biases or both have none (it has one ``bias`` flag for the two). With
        n_kv_heads < H each key/value head's rows are repeated for its group (the same
        function, H key/value heads); a block with RoPE does not convert.
        """
        self._refuse_rope("to_torch", "nn.MultiheadAttention")
        if self.mask_kind != "causal":
            raise ValueError(
                error_text(
                    "to_torch() converts causal blocks only; this block has "
                    "mask_kind={kind}. nn.MultiheadAttention keeps no mask: copy the "
                    "weights yourself and pass attn_mask=block.mask[:T, :T] on every call"
                ).format(kind=repr(self.mask_kind))
            )
        has_bias = self.qkv.bias is not None
        if has_bias != (self.out_proj.bias is not None):
            raise ValueError(
                error_text(
                    "nn.MultiheadAttention has one bias flag for both projections, but this block "
                    "has qkv_bias={qkv_bias} and out_bias={out_bias}; build the block with "
                    "qkv_bias == out_bias to convert it"
                ).format(qkv_bias=has_bias, out_bias=not has_bias)
            )
        w, qkv_b = self._expanded_qkv()  # (3D, D), (3D,): H key/value heads
        mha = nn.MultiheadAttention(
            self.d_model,
            self.n_heads,
            dropout=self.dropout.p,
            bias=has_bias,
            batch_first=True,
            device=w.device,
            dtype=w.dtype,
        )
        with torch.no_grad():
            mha.in_proj_weight.copy_(w)
            mha.out_proj.weight.copy_(self.out_proj.weight)
            if has_bias:
                mha.in_proj_bias.copy_(qkv_b)
                mha.out_proj.bias.copy_(self.out_proj.bias)
        return mha.train(self.training)  # same mode: same dropout behaviour

    @classmethod
    def from_separate(cls: type[_Block], mha: MultiHeadAttention) -> _Block:
        """Stack the W_q, W_k, W_v of a ``MultiHeadAttention`` into one fused ``qkv`` weight.

        Biases are mirrored: ``qkv`` has one exactly when W_q, W_k, W_v have them, and
        ``out_proj`` exactly when W_o has one, so ``to_separate`` gives back the same keys.
        """
        if not isinstance(mha, MultiHeadAttention):
            raise TypeError(
                error_text("expected attention_lab.MultiHeadAttention, got {type}").format(
                    type=type(mha).__name__
                )
            )
        w = mha.W_q.weight
        layers = (mha.W_q, mha.W_k, mha.W_v)
        qkv_bias = mha.W_q.bias is not None
        block = cls(
            mha.d_model,
            mha.n_heads,
            mha.context_length,
            dropout=mha.dropout.p,
            qkv_bias=qkv_bias,
            out_bias=mha.W_o.bias is not None,
        ).to(device=w.device, dtype=w.dtype)
        with torch.no_grad():
            block.qkv.weight.copy_(torch.cat([layer.weight for layer in layers]))  # (3D, D)
            if qkv_bias:
                block.qkv.bias.copy_(torch.cat([layer.bias for layer in layers]))  # (3D,)
            block.out_proj.weight.copy_(mha.W_o.weight)
            if mha.W_o.bias is not None:
                block.out_proj.bias.copy_(mha.W_o.bias)
        return block.train(mha.training)  # same mode: same dropout behaviour

    def to_separate(self) -> MultiHeadAttention:
        """Cut ``qkv`` back into W_q, W_k, W_v of a ``MultiHeadAttention`` (causal blocks only;
        with n_kv_heads < H, W_k and W_v hold each key/value head once per query head)."""
        self._refuse_rope("to_separate", "MultiHeadAttention")
        if self.mask_kind != "causal":
            raise ValueError(
                error_text(
                    "MultiHeadAttention is always causal; this block has mask_kind={kind}"
                ).format(kind=repr(self.mask_kind))
            )
        w, qkv_b = self._expanded_qkv()  # (3D, D), (3D,): H key/value heads
        qkv_bias = qkv_b is not None
        mha = MultiHeadAttention(
            self.d_model,
            self.n_heads,
            self.context_length,
            dropout=self.dropout.p,
            qkv_bias=qkv_bias,
            out_bias=self.out_proj.bias is not None,
        ).to(device=w.device, dtype=w.dtype)
        D = self.d_model
        with torch.no_grad():
            for i, layer in enumerate((mha.W_q, mha.W_k, mha.W_v)):
                layer.weight.copy_(w[i * D : (i + 1) * D])
                if qkv_bias:
                    layer.bias.copy_(qkv_b[i * D : (i + 1) * D])
            mha.W_o.weight.copy_(self.out_proj.weight)
            if self.out_proj.bias is not None:
                mha.W_o.bias.copy_(self.out_proj.bias)
        return mha.train(self.training)  # same mode: same dropout behaviour
