"""Interventions on trained attention: controls that could fail (notebooks 08 and 09).

Each tool changes one thing inside a model and leaves everything else as it was:

* ``ablate_heads(model, heads, how="zero" | "mean", reference=ids)``: a head's output (its
  d_head slice of the merged context, the input of ``out_proj``) replaced by zeros or by its
  mean over a reference batch; a context manager, the model is restored on exit.
* ``freeze_attention(model, weights, layer=0)``: one layer uses the given weights instead of
  softmax(QKᵀ/√d_head); values, ``out_proj`` and everything after are unchanged. Weights to
  give it: ``even_weights(T)`` or a trained model's own ``mean_weights(model, ids)``.
* ``retrain_readout(model, task_or_data, steps=..., lr=...)``: trains only what reads the
  attention output (``readout_parameters``: ``out_proj`` of the frozen or ablated layers and
  ``lm_head``); every other parameter stays bitwise the same.
* ``source_shares(weights, offsets=1)`` or ``source_shares(weights, keys=rule)``: the mean
  weight each head puts on chosen keys; rules: ``last_match_keys``, ``after_previous_occurrence``.

The tools work on any model holding ``MultiHeadSelfAttention`` blocks (``attention_layers``):
``TinyLM``, ``CharLM``, or a bare block. Nothing in the models' code changes: ablation is a
forward pre-hook on ``out_proj``, freezing swaps one block instance's ``forward``.
"""

from __future__ import annotations

import contextlib
import math
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._checks import check_input, check_positive
from .device import cpu_threads
from .fused import MultiHeadSelfAttention
from .i18n import error_text
from .masks import build_mask
from .multihead import merge_heads, split_heads
from .tasks import make_batch
from .training import EVAL_ROWS, EVAL_SEED, _eval_batch, _loss_and_accuracy

# the layers inside an active freeze_attention or ablate_heads: retrain_readout's default
_ACTIVE: weakref.WeakKeyDictionary[MultiHeadSelfAttention, int] = weakref.WeakKeyDictionary()


def attention_layers(model: nn.Module) -> list[MultiHeadSelfAttention]:
    """Every ``MultiHeadSelfAttention`` inside ``model``, in registration (= forward) order."""
    layers = [m for m in model.modules() if isinstance(m, MultiHeadSelfAttention)]
    if not layers:
        raise ValueError(
            error_text(
                "{model} holds no MultiHeadSelfAttention block; pass a TinyLM, a CharLM or a block"
            ).format(model=type(model).__name__)
        )
    return layers


def _layer(model: nn.Module, layer: int) -> MultiHeadSelfAttention:
    layers = attention_layers(model)
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < len(layers):
        raise ValueError(
            error_text(
                "layer={layer} is out of range: this model has {n} attention layer(s); "
                "pass layer=0..{last}"
            ).format(layer=repr(layer), n=len(layers), last=len(layers) - 1)
        )
    return layers[layer]


def _head_pairs(model: nn.Module, heads) -> list[tuple[int, int]]:
    """``heads`` as (layer, head) pairs; a bare head index is allowed for a one-layer model."""
    layers = attention_layers(model)
    pairs = []
    for item in heads:
        if isinstance(item, int) and not isinstance(item, bool):
            if len(layers) > 1:
                raise ValueError(
                    error_text(
                        "head {head} is ambiguous: this model has {n} attention layers; "
                        "name heads as (layer, head) pairs, e.g. [(0, {head})]"
                    ).format(head=item, n=len(layers))
                )
            item = (0, item)
        layer, head = item
        n_heads = _layer(model, layer).n_heads
        if isinstance(head, bool) or not isinstance(head, int) or not 0 <= head < n_heads:
            raise ValueError(
                error_text(
                    "head {head} is out of range: layer {layer} has {n_heads} heads; "
                    "pass heads numbered 0..{last}"
                ).format(head=repr(head), layer=layer, n_heads=n_heads, last=n_heads - 1)
            )
        pairs.append((layer, head))
    return pairs


@contextlib.contextmanager
def _active(layers: Sequence[MultiHeadSelfAttention]) -> Iterator[None]:
    for layer in layers:
        _ACTIVE[layer] = _ACTIVE.get(layer, 0) + 1
    try:
        yield
    finally:
        for layer in layers:
            _ACTIVE[layer] -= 1
            if not _ACTIVE[layer]:
                del _ACTIVE[layer]


@torch.no_grad()
def head_outputs(model: nn.Module, ids: torch.Tensor, layer: int = 0) -> torch.Tensor:
    """What each head of ``layer`` hands to ``out_proj`` on ``ids``: (B, T, H, d_head)."""
    block = _layer(model, layer)
    seen = []
    hook = block.out_proj.register_forward_pre_hook(lambda _m, args: seen.append(args[0]))
    try:
        model(ids)
    finally:
        hook.remove()
    B, T, _ = seen[-1].shape
    return seen[-1].view(B, T, block.n_heads, block.d_head)  # (B, T, H, d_head)


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
    pairs = _head_pairs(model, heads)
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
        with _active([layers[layer] for layer in replace]):
            yield model
    finally:
        for handle in handles:
            handle.remove()


def even_weights(T: int, mask_kind: str = "causal", window: int | None = None) -> torch.Tensor:
    """(T, T): each query spreads its weight evenly over the keys the mask lets it see."""
    allowed = (~build_mask(mask_kind, check_positive("T", T), window)).float()  # (T, T)
    return allowed / allowed.sum(dim=-1, keepdim=True)  # (T, T)


@torch.no_grad()
def attention_weights(model: nn.Module, ids: torch.Tensor, layer: int = 0) -> torch.Tensor:
    """The weights layer ``layer`` computes on ``ids``: (B, H, T, T), for any model."""
    block, seen = _layer(model, layer), []
    own = block.forward

    def forward(x, return_weights=False):
        out, weights = own(x, return_weights=True)
        seen.append(weights)
        return (out, weights) if return_weights else out

    with _swapped_forward(block, forward):
        model(ids)
    return seen[-1]


def mean_weights(model: nn.Module, ids: torch.Tensor, layer: int = 0) -> torch.Tensor:
    """The model's own weights at ``layer``, averaged over the batch ``ids``: (H, T, T)."""
    return attention_weights(model, ids, layer).mean(dim=0)


@contextlib.contextmanager
def _swapped_forward(block: nn.Module, forward: Callable) -> Iterator[None]:
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


def _check_weights(block: MultiHeadSelfAttention, weights: torch.Tensor) -> torch.Tensor:
    """Raise unless ``weights`` are (T, T), (H, T, T) or (B, H, T, T) rows of a softmax."""
    shape = tuple(getattr(weights, "shape", ()))
    ok = isinstance(weights, torch.Tensor) and torch.is_floating_point(weights)
    ok = ok and 2 <= len(shape) <= 4 and shape[-1] == shape[-2] <= block.context_length
    ok = ok and (len(shape) < 3 or shape[-3] in (1, block.n_heads))
    if not ok:
        raise ValueError(
            error_text(
                "weights have shape {shape}, but this layer takes float weights (T, T), "
                "(H, T, T) or (B, H, T, T) with H={n_heads} and T <= {context_length}; "
                "build them with even_weights(T) or mean_weights(model, ids)"
            ).format(shape=shape, n_heads=block.n_heads, context_length=block.context_length)
        )
    T = shape[-1]
    blocked = block.mask[:T, :T].to(weights.device)  # (T, T), True = blocked
    leak = weights.masked_fill(~blocked, 0).abs().max().item()
    sums = weights.sum(dim=-1)  # (..., T)
    worst = (sums - 1).abs().max().item()
    if weights.min().item() < 0 or leak > 1e-6 or worst > 1e-4:
        raise ValueError(
            error_text(
                "weights must be >= 0, zero on the keys the {mask_kind} mask blocks, and each "
                "row must sum to 1; got a minimum of {low:.3g}, {leak:.3g} on blocked keys and a "
                "row summing to {row:.4g}; mask, then normalise: w / w.sum(-1, keepdim=True)"
            ).format(
                mask_kind=block.mask_kind,
                low=weights.min().item(),
                leak=leak,
                row=sums.flatten()[(sums - 1).abs().flatten().argmax()].item(),
            )
        )
    return weights


@contextlib.contextmanager
def freeze_attention(
    model: nn.Module, weights: torch.Tensor, *, layer: int = 0
) -> Iterator[nn.Module]:
    """Inside the ``with``, layer ``layer`` attends with ``weights`` instead of its softmax.

    ``weights``: (T, T), (H, T, T) or (B, H, T, T), broadcast over the batch and heads; each
    row sums to 1 over the keys the layer's mask allows. Inputs shorter than T use the top-left
    corner (causal and sliding masks only: their rows keep summing to 1). The values,
    ``out_proj`` and everything after are the model's own, and ``return_weights=True`` returns
    the frozen weights (B, H, T, T). On exit the layer's own ``forward`` is back.
    """
    block = _layer(model, layer)
    frozen = _check_weights(block, weights).detach()
    Tw = frozen.shape[-1]

    def forward(x: torch.Tensor, return_weights: bool = False):
        B, T = check_input(x, block.d_model, block.context_length)
        if T > Tw or (T < Tw and block.mask_kind == "none"):
            raise ValueError(
                error_text(
                    "the frozen weights are for T={Tw} positions, but the input has T={T}; "
                    "freeze with weights built for T={T}"
                ).format(Tw=Tw, T=T)
            )
        if frozen.dim() == 4 and frozen.shape[0] not in (1, B):
            raise ValueError(
                error_text(
                    "the frozen weights are for a batch of {Bw} rows, but the input has B={B}; "
                    "freeze with (T, T) or (H, T, T) weights, or with (B, H, T, T) for this batch"
                ).format(Bw=frozen.shape[0], B=B)
            )
        w = frozen[..., :T, :T].to(x.dtype).expand(B, block.n_heads, T, T)  # (B, H, T, T)
        v = split_heads(block.qkv(x)[..., 2 * block.d_model :], block.n_heads)  # (B, H, T, d_head)
        p = block.dropout.p if block.training else 0.0
        dropped = F.dropout(w, p=p) if p > 0 else w  # (B, H, T, T)
        out = block.out_proj(merge_heads(dropped @ v))  # (B, T, D)
        return (out, w) if return_weights else out

    with _swapped_forward(block, forward), _active([block]):
        yield model


def readout_parameters(model: nn.Module, layers: Sequence[int] | None = None) -> dict:
    """The parameters that read the attention output: ``{name: parameter}``.

    ``out_proj`` of ``layers`` (default: the layers inside an active ``freeze_attention`` or
    ``ablate_heads``) and the model's ``lm_head``.
    """
    all_layers = attention_layers(model)
    if layers is None:
        chosen = [b for b in all_layers if b in _ACTIVE]
        if not chosen:
            raise ValueError(
                error_text(
                    "no attention layer is frozen or ablated, so the readout is not defined; call "
                    "this inside freeze_attention(...) or ablate_heads(...), or pass layers=[0]"
                )
            )
    else:
        chosen = [_layer(model, i) for i in layers]
    wanted = {id(p) for b in chosen for p in b.out_proj.parameters()}
    head = getattr(model, "lm_head", None)
    wanted |= {id(p) for p in head.parameters()} if isinstance(head, nn.Module) else set()
    return {name: p for name, p in model.named_parameters() if id(p) in wanted}


@dataclass
class ReadoutHistory:
    """What ``retrain_readout`` measured; losses in nats, accuracy of the next token."""

    parameters: list[str]  # the names of the parameters that were trained
    step_losses: list[float] = field(default_factory=list)
    initial_loss: float = math.nan  # on the evaluation rows, before the first step
    final_loss: float = math.nan
    final_accuracy: float = math.nan


def retrain_readout(
    model: nn.Module,
    data,
    *,
    steps: int = 300,
    lr: float = 1e-2,
    batch_size: int = 32,
    n_rows: int = 2048,
    layers: Sequence[int] | None = None,
    eval_data: tuple[torch.Tensor, torch.Tensor] | None = None,
    seed: int = 0,
    reinit: bool = False,
    threads: int | None = 1,
) -> ReadoutHistory:
    """Train only ``readout_parameters(model, layers)`` with Adam for ``steps`` steps, in place.

    ``data``: a task name (``n_rows`` rows of ``make_batch``; evaluated on notebook 08's
    held-out rows), an ``(x, y)`` pair of tensors to draw batches from, or a function
    ``generator -> (x, y)`` giving one batch. ``eval_data`` (x, y) replaces the evaluation rows
    (default for a pair: the pair itself). Every other parameter has ``requires_grad=False``
    meanwhile; the flags and the model's train/eval mode are restored afterwards. Deep-copy the
    model first to keep the original readout. ``reinit=True`` first draws the readout afresh
    (``reset_parameters`` of its modules, seeded with ``seed``), so it learns from scratch.
    """
    check_positive("steps", steps)
    params = readout_parameters(model, layers)
    g = torch.Generator().manual_seed(seed)
    if isinstance(data, str):
        x_all, y_all = make_batch(data, n_rows, model.context_length, model.vocab_size, generator=g)
        if eval_data is None:
            eval_data = _eval_batch(model, data, EVAL_ROWS, EVAL_SEED, exclude=x_all)[:2]
        data = (x_all, y_all)
    if isinstance(data, (tuple, list)):
        x_all, y_all = data
        eval_data = data if eval_data is None else eval_data

        def draw(gen):
            rows = torch.randint(len(x_all), (batch_size,), generator=gen)
            return x_all[rows], y_all[rows]
    elif callable(data):
        draw = data
    else:
        raise ValueError(
            error_text(
                "data is a {type}, not a task name, an (x, y) pair or a function "
                "generator -> (x, y); pass e.g. 'previous' or (x, y) from make_batch"
            ).format(type=type(data).__name__)
        )
    flags = {p: p.requires_grad for p in model.parameters()}
    was_training = model.training
    history = ReadoutHistory(parameters=list(params))
    device = next(iter(params.values())).device
    if reinit:
        chosen = {id(p) for p in params.values()}
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for module in model.modules():
                if any(id(p) in chosen for p in module.parameters(recurse=False)):
                    module.reset_parameters()
    try:
        for p in model.parameters():
            p.requires_grad_(False)
        for p in params.values():
            p.requires_grad_(True)
        optimiser = torch.optim.Adam(params.values(), lr=lr)
        with cpu_threads(threads):
            if eval_data is not None:
                history.initial_loss = _evaluate(model, *eval_data)[0]
            model.train()
            for _step in range(steps):
                x, y = draw(g)
                loss, _ = _loss_and_accuracy(model(x.to(device)), y.to(device))
                optimiser.zero_grad(set_to_none=True)
                loss.backward()
                optimiser.step()
                history.step_losses.append(loss.item())
            if eval_data is not None:
                history.final_loss, history.final_accuracy = _evaluate(model, *eval_data)
    finally:
        for p, flag in flags.items():
            p.requires_grad_(flag)
        model.train(was_training)
    return history


@torch.no_grad()
def _evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    model.eval()
    device = next(model.parameters()).device
    loss, accuracy = _loss_and_accuracy(model(x.to(device)), y.to(device))
    return loss.item(), accuracy


# ---------------------------------------------------------------- where the heads look


def source_shares(
    weights: torch.Tensor,
    *,
    offsets=None,
    keys: torch.Tensor | None = None,
    per_query: bool = False,
):
    """Mean weight each head puts on chosen keys, over the queries where those keys exist.

    ``weights``: (T, T), (H, T, T), (B, H, T, T) or (B, L, H, T, T); the mean runs over the
    batch and the queries, so the result is (), (H,), (H,) or (L, H).
    ``offsets=k``: key i - k for query i (queries i >= k); a list of k's gives {k: shares}.
    ``keys``: a bool rule (T, T) or (B, T, T), True where a key counts for a query (for
    example ``last_match_keys(is_space)``); the weights on a query's True keys are summed,
    and queries with no True key are left out.
    ``per_query=True`` skips the mean: each query's share, ``weights.shape[:-1]``, NaN where
    the query has no such key.
    """
    if (offsets is None) == (keys is None):
        raise ValueError(
            error_text("pass exactly one of offsets=k (e.g. offsets=1) or keys=rule (B, T, T)")
        )
    if offsets is not None and not isinstance(offsets, int):
        return {k: source_shares(weights, offsets=k, per_query=per_query) for k in offsets}
    w = weights.reshape((1,) * max(0, 4 - weights.dim()) + tuple(weights.shape))  # (B, .., T, T)
    T = w.shape[-1]
    if offsets is not None:
        i = torch.arange(T, device=w.device)
        keys = (i[None, :] - i[:, None]) == -offsets  # (T, T): key j = i - k
    rule = keys if keys.dim() == 3 else keys[None]  # (B or 1, T, T)
    fits = rule.dim() == 3 and rule.shape[-2:] == (T, T) and rule.shape[0] in (1, w.shape[0])
    if rule.dtype != torch.bool or not fits:
        raise ValueError(
            error_text(
                "keys has shape {shape} and dtype {dtype}, but these weights need a bool rule "
                "({T}, {T}) or ({B}, {T}, {T}); build it with last_match_keys or "
                "after_previous_occurrence"
            ).format(shape=tuple(keys.shape), dtype=keys.dtype, T=T, B=w.shape[0])
        )
    rule = rule.view(rule.shape[0], *([1] * (w.dim() - 3)), T, T).to(w.device)  # (B, .., T, T)
    on_keys = (w * rule).sum(dim=-1)  # (B, ..., T): weight each query puts on its keys
    counted = rule.any(dim=-1).expand_as(on_keys)  # (B, ..., T)
    if per_query:
        return on_keys.masked_fill(~counted, math.nan).reshape(weights.shape[:-1])
    dims = (0, on_keys.dim() - 1)
    n = counted.to(w.dtype)
    shares = (on_keys * n).sum(dim=dims) / n.sum(dim=dims)  # (...,): NaN where no query counts
    return shares.reshape(weights.shape[-3:-2] if weights.dim() <= 4 else weights.shape[1:-2])


def last_match_keys(is_target: torch.Tensor) -> torch.Tensor:
    """(B, T) or (T,) bool -> (B, T, T) rule: for query i, the last key j < i with is_target."""
    t = is_target if is_target.dim() == 2 else is_target[None]  # (B, T)
    B, T = t.shape
    pos = torch.arange(T, device=t.device).expand(B, T)  # (B, T)
    last = torch.where(t, pos, -1).cummax(dim=1).values  # (B, T): last target at or before j
    before = torch.cat([torch.full((B, 1), -1, device=t.device), last[:, :-1]], dim=1)  # j < i
    return (pos[:, None, :] == before[:, :, None]) & (before[:, :, None] >= 0)  # (B, T, T)


def after_previous_occurrence(ids: torch.Tensor) -> torch.Tensor:
    """(B, T) or (T,) ids -> (B, T, T) rule: for query i, every key j <= i whose previous token
    ids[j - 1] equals ids[i] (the induction rule: look just after an earlier occurrence)."""
    x = ids if ids.dim() == 2 else ids[None]  # (B, T)
    B, T = x.shape
    same = x[:, None, :-1] == x[:, :, None]  # (B, T, T - 1): ids[j - 1] == ids[i], j = 1..T-1
    rule = torch.cat([torch.zeros(B, T, 1, dtype=torch.bool, device=x.device), same], dim=2)
    i = torch.arange(T, device=x.device)
    return rule & (i[None, :] <= i[:, None])  # (B, T, T): only keys j <= i
