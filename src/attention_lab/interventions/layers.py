"""Finding a model's attention layers and reading them (``attention_lab.interventions``).

``attention_layers`` lists every ``MultiHeadSelfAttention`` of a model; ``head_outputs``,
``attention_weights`` and ``mean_weights`` read what one layer computes; ``even_weights`` is the
control's weights. The rest is shared by the interventions: a layer or a head named by index,
the layers an intervention is active on (``retrain_readout``'s default), and swapping one
block instance's ``forward`` for the length of a ``with``.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator, Sequence

import torch
import torch.nn as nn

from .._checks import as_size, check_positive
from ..fused import MultiHeadSelfAttention
from ..i18n import error_text
from ..latent import LatentAttention
from ..masks import build_mask

ATTENTION_BLOCKS = (MultiHeadSelfAttention, LatentAttention)  # the blocks the tools act on

# the layers inside an active freeze_attention or ablate_heads: retrain_readout's default
ACTIVE: weakref.WeakKeyDictionary[MultiHeadSelfAttention, int] = weakref.WeakKeyDictionary()


def attention_layers(model: nn.Module) -> list[MultiHeadSelfAttention]:
    """Every ``MultiHeadSelfAttention`` (or ``LatentAttention``) inside ``model``, in
    registration (= forward) order."""
    layers = [m for m in model.modules() if isinstance(m, ATTENTION_BLOCKS)]
    if not layers:
        raise ValueError(
            error_text(
                "{model} holds no MultiHeadSelfAttention block; pass a TinyLM, a CharLM or a block"
            ).format(model=type(model).__name__)
        )
    return layers


def layer_at(model: nn.Module, layer: int) -> MultiHeadSelfAttention:
    """Layer number ``layer`` of ``attention_layers(model)``, or a ValueError naming the range."""
    layers, index = attention_layers(model), as_size(layer)
    if index is None or not 0 <= index < len(layers):
        raise ValueError(
            error_text(
                "layer={layer} is out of range: this model has {n} attention layer(s); "
                "pass layer=0..{last}"
            ).format(layer=repr(layer), n=len(layers), last=len(layers) - 1)
        )
    return layers[index]


def head_pairs(model: nn.Module, heads) -> list[tuple[int, int]]:
    """``heads`` as (layer, head) pairs; a bare head index is allowed for a one-layer model."""
    layers = attention_layers(model)
    if as_size(heads) is not None or not isinstance(heads, (list, tuple, range)):
        raise ValueError(
            error_text(
                "heads={heads} must be a list of heads, e.g. heads=[1] or heads=[(0, 1)] "
                "for head 1 of layer 0; pass heads=[] to ablate none"
            ).format(heads=repr(heads))
        )
    pairs = []
    for item in heads:
        if as_size(item) is not None:
            if len(layers) > 1:
                raise ValueError(
                    error_text(
                        "head {head} is ambiguous: this model has {n} attention layers; "
                        "name heads as (layer, head) pairs, e.g. [(0, {head})]"
                    ).format(head=item, n=len(layers))
                )
            item = (0, item)
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise ValueError(
                error_text(
                    "{item} is not a head: name a head by its index (one-layer model) "
                    "or by a (layer, head) pair, e.g. (0, 1)"
                ).format(item=repr(item))
            )
        n_heads = layer_at(model, item[0]).n_heads  # checks the layer number
        layer, head = as_size(item[0]), as_size(item[1])
        if head is None or not 0 <= head < n_heads:
            raise ValueError(
                error_text(
                    "head {head} is out of range: layer {layer} has {n_heads} heads; "
                    "pass heads numbered 0..{last}"
                ).format(head=repr(item[1]), layer=layer, n_heads=n_heads, last=n_heads - 1)
            )
        pairs.append((layer, head))
    return pairs


@contextlib.contextmanager
def active(layers: Sequence[MultiHeadSelfAttention]) -> Iterator[None]:
    for layer in layers:
        ACTIVE[layer] = ACTIVE.get(layer, 0) + 1
    try:
        yield
    finally:
        for layer in layers:
            ACTIVE[layer] -= 1
            if not ACTIVE[layer]:
                del ACTIVE[layer]


@torch.no_grad()
def head_outputs(model: nn.Module, ids: torch.Tensor, layer: int = 0) -> torch.Tensor:
    """What each head of ``layer`` hands to ``out_proj`` on ``ids``: (B, T, H, d_head)."""
    block = layer_at(model, layer)
    seen = []
    hook = block.out_proj.register_forward_pre_hook(lambda _m, args: seen.append(args[0]))
    try:
        model(ids)
    finally:
        hook.remove()
    B, T, _ = seen[-1].shape
    return seen[-1].reshape(B, T, block.n_heads, block.d_head)  # (B, T, H, d_head)


def even_weights(T: int, mask_kind: str = "causal", window: int | None = None) -> torch.Tensor:
    """(T, T): each query spreads its weight evenly over the keys the mask lets it see."""
    allowed = (~build_mask(mask_kind, check_positive("T", T), window)).float()  # (T, T)
    return allowed / allowed.sum(dim=-1, keepdim=True)  # (T, T)


@torch.no_grad()
def attention_weights(model: nn.Module, ids: torch.Tensor, layer: int = 0) -> torch.Tensor:
    """The weights layer ``layer`` computes on ``ids``: (B, H, T, T), for any model."""
    block, seen = layer_at(model, layer), []
    own = block.forward

    def forward(x, return_weights=False):
        out, weights = own(x, return_weights=True)
        seen.append(weights)
        return (out, weights) if return_weights else out

    with swapped_forward(block, forward):
        model(ids)
    return seen[-1]


def mean_weights(model: nn.Module, ids: torch.Tensor, layer: int = 0) -> torch.Tensor:
    """The model's own weights at ``layer``, averaged over the batch ``ids``: (H, T, T)."""
    return attention_weights(model, ids, layer).mean(dim=0)


@contextlib.contextmanager
def swapped_forward(block: nn.Module, forward: Callable) -> Iterator[None]:
    had_own = "forward" in block.__dict__
    before = block.__dict__.get("forward")
    block.forward = forward
    try:
        yield
    finally:
        if had_own:
            block.forward = before
        else:
            del block.forward
