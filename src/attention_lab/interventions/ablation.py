"""Ablating heads: a head's output zeroed or set to its mean (``attention_lab.interventions``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn as nn

from ..fused import MultiHeadSelfAttention
from ..i18n import error_text
from .layers import active, attention_layers, head_outputs, head_pairs


@contextlib.contextmanager
def ablate_heads(
    model: nn.Module, heads, *, how: str = "zero", reference: torch.Tensor | None = None
) -> Iterator[nn.Module]:
    """Inside the ``with``, the chosen heads hand zeros or their mean output to ``out_proj``.

    ``heads``: head indices (one-layer model) or (layer, head) pairs. ``how="mean"`` replaces
    a head's output by its mean over batch and positions of ``reference`` (model inputs, e.g.
    a (B, T) batch of ids), computed once on entry with the unablated model in its current
    mode. Both forward paths (with and without weights) see the change; the weights returned
    are the layer's own. On exit the hooks are removed, even after an exception.
    """
    pairs = head_pairs(model, heads)
    if how not in ("zero", "mean"):
        raise ValueError(
            error_text(
                "how={how} is not known; use how='zero' or how='mean' (with reference=ids)"
            ).format(how=repr(how))
        )
    if how == "mean" and reference is None:
        raise ValueError(
            error_text(
                "how='mean' needs a reference batch to average over; pass reference=ids "
                "(inputs the model was trained on, e.g. make_batch(...)[0])"
            )
        )
    layers = attention_layers(model)
    replace: dict[int, dict[int, torch.Tensor | None]] = {}
    for layer, head in pairs:
        replace.setdefault(layer, {})[head] = None
    if how == "mean":
        for layer, chosen in replace.items():
            means = head_outputs(model, reference, layer).mean(dim=(0, 1))  # (H, d_head)
            for head in chosen:
                chosen[head] = means[head]

    def hook_for(block: MultiHeadSelfAttention, chosen: dict[int, torch.Tensor | None]):
        def hook(_module, args):
            merged = args[0].clone()  # (B, T, D): the heads side by side
            for head, value in chosen.items():
                part = merged[..., head * block.d_head : (head + 1) * block.d_head]
                part.copy_(torch.zeros_like(part) if value is None else value.expand_as(part))
            return (merged, *args[1:])

        return hook

    handles = []
    try:
        for layer, chosen in replace.items():
            block = layers[layer]
            handles.append(block.out_proj.register_forward_pre_hook(hook_for(block, chosen)))
        with active([layers[layer] for layer in replace]):
            yield model
    finally:
        for handle in handles:
            handle.remove()
