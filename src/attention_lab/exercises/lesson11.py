"""Lesson 11 · attention on real text (notebooks/11_attention_on_real_text.ipynb): the loss of a
``CharLM`` with chosen heads replaced by their mean output, written with forward hooks and
checked against ``interventions.ablate_heads(..., how="mean")``.
"""

from __future__ import annotations

import math

import torch

from ..charlm import CharLM, CharLMConfig, evaluate_loss
from ..i18n import N_, _
from ..interventions import ablate_heads
from .core import Wrong, call, checker

_TOLERANCE = 1e-4  # nats: the same model, the same sums in another order


def _checker_model() -> CharLM:
    """A small CharLM (2 blocks of 4 heads), seeded by the checker, whose value vectors have a
    mean far from 0 (a zero and a mean ablation differ) and whose logits are sharp (a small
    change of one head moves the loss by more than the tolerance)."""
    model = CharLM(CharLMConfig(vocab_size=11, context_length=8, d_model=16, n_heads=4))
    with torch.no_grad():
        for block in model.blocks:
            D = block.attn.d_model
            block.attn.qkv.bias[2 * D :] += torch.randn(D)  # the V part of the fused bias
        model.lm_head.weight *= 10.0
    return model.eval()


def _variant_loss(
    model: CharLM,
    ids: torch.Tensor,
    reference: torch.Tensor,
    heads,
    *,
    how: str = "mean",
    means_from: str = "reference",
    place: str = "input",
    part: str = "head",
) -> float:
    """The loss over ``ids`` with ``heads`` replaced, with one of the checker's mistakes built
    in: ``how`` "mean", "zero", "position" (a mean per position) or "scalar" (one number per
    head); ``means_from`` "reference", "ids" (the evaluated text) or "ablated" (each layer's
    mean taken with the earlier layers already replaced); ``place`` "input" or "output" of
    out_proj; ``part`` "head" (columns h·d_head onwards) or "unscaled" (columns h onwards)."""
    attns = [block.attn for block in model.blocks]
    source = reference
    if means_from == "ids":
        T = model.context_length
        n = (len(ids) - 1) // T
        source = ids[: n * T].view(n, T)  # (n, T): the windows evaluate_loss reads
    chosen: dict[int, list[int]] = {}
    for layer, head in heads:
        chosen.setdefault(layer, []).append(head)

    def columns(layer: int, head: int) -> slice:
        d = attns[layer].d_head
        start = head * d if part == "head" else head
        return slice(start, start + d)

    def seen_by(layer: int) -> torch.Tensor:
        """(B, T, D): what out_proj of ``layer`` takes in (or gives out) on the source."""
        seen = []

        def grab(_module, args, output):
            seen.append(args[0] if place == "input" else output)

        handle = attns[layer].out_proj.register_forward_hook(grab)
        try:
            with torch.no_grad():
                model(source)
        finally:
            handle.remove()
        return seen[0]

    def hook_for(layer: int, value: torch.Tensor | None):
        def replace(merged: torch.Tensor) -> torch.Tensor:
            merged = merged.clone()  # (B, T, D)
            for head in chosen[layer]:
                cols = columns(layer, head)
                merged[..., cols] = 0.0 if value is None else value[..., cols]
            return merged

        if place == "input":
            return attns[layer].out_proj.register_forward_pre_hook(
                lambda _module, args: (replace(args[0]), *args[1:])
            )
        return attns[layer].out_proj.register_forward_hook(
            lambda _module, _args, output: replace(output)
        )

    handles = []
    try:
        values = {}
        for layer in sorted(chosen):
            if how == "zero":
                values[layer] = None
            else:
                merged = seen_by(layer)  # (B, T, D)
                if how == "mean":
                    values[layer] = merged.mean(dim=(0, 1))  # (D,)
                elif how == "position":
                    values[layer] = merged.mean(dim=0)  # (T, D)
                else:
                    d = attns[layer].d_head
                    per_head = merged.unflatten(-1, (-1, d)).mean(dim=(0, 1, 3))  # (H,)
                    values[layer] = per_head.repeat_interleave(d)  # (D,)
            if means_from == "ablated":  # the next layer's mean is taken with this one replaced
                handles.append(hook_for(layer, values[layer]))
        if means_from != "ablated":
            handles += [hook_for(layer, values[layer]) for layer in sorted(chosen)]
        return evaluate_loss(model, ids)
    finally:
        for handle in handles:
            handle.remove()


def _number(value, what: str) -> float:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value.detach())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise Wrong(
        _("{what} should be one number, but your function returned a {type}").format(
            what=what, type=type(value).__name__
        ),
        _("did you forget the `return` line?")
        if value is None
        else _("return the loss as a float: evaluate_loss(model, ids)"),
    )


def _hooks_left(model: CharLM) -> int:
    return sum(
        len(module._forward_pre_hooks) + len(module._forward_hooks) for module in model.modules()
    )


@checker("11", N_("return the validation loss as a float, and remove your hooks"))
def check_mean_ablated_loss(fn) -> str:
    """``fn(model, ids, reference, heads) -> float``: ``evaluate_loss(model, ids)`` with each
    (layer, head) of ``heads`` handing out_proj its mean output over the ``reference`` windows
    (mean over batch and positions, taken from the model as it is); the model unchanged after."""
    model = _checker_model()
    ids = torch.randint(0, 11, (8 * 16 + 1,))  # 16 windows of 8 characters, and one target
    reference = torch.randint(0, 11, (24, 8))  # (B, T): the windows the means come from
    state = {name: p.detach().clone() for name, p in model.state_dict().items()}
    base = evaluate_loss(model, ids)
    every = [(layer, head) for layer in range(2) for head in range(4)]
    for heads in ([(0, 1)], [(1, 2)], [(0, 3), (1, 0)], []):
        with ablate_heads(model, heads, how="mean", reference=reference):
            want = evaluate_loss(model, ids)
        got = call(fn, model, ids.clone(), reference.clone(), list(heads))
        where = _("with heads={heads}").format(heads=heads)
        got = _number(got, _("the loss {where}").format(where=where))
        left = _hooks_left(model)
        if left:
            raise Wrong(
                _("{where}, your function left {n} hook(s) on the model").format(
                    where=where, n=left
                ),
                _(
                    "keep the handle register_forward_pre_hook returns and call "
                    "handle.remove() once the loss is measured (try/finally)"
                ),
            )
        changed = [
            name for name, p in model.state_dict().items() if not torch.equal(p, state[name])
        ]
        if changed:
            raise Wrong(
                _("{where}, your function changed the model's {names}").format(
                    where=where, names=", ".join(changed[:3])
                ),
                _("change what out_proj receives with a hook, not the parameters"),
            )
        if math.isclose(got, want, abs_tol=_TOLERANCE):
            continue
        _diagnose(got, want, base, where, model, ids, reference, heads, every)
    return _(
        "the loss with chosen heads replaced by their mean output over the reference windows, "
        "the model left as it was"
    )


def _diagnose(got, want, base, where, model, ids, reference, heads, every) -> None:
    """Raise Wrong naming the variant whose loss matches ``got``, or the gap."""

    def matches(**options) -> bool:
        return math.isclose(
            got, _variant_loss(model, ids, reference, **options), abs_tol=_TOLERANCE
        )

    if heads and math.isclose(got, want - base, abs_tol=_TOLERANCE):
        raise Wrong(
            _("{where}, you returned the rise of the loss, {rise:.4f}, not the loss").format(
                where=where, rise=want - base
            ),
            _("return the loss itself; the rise is the loss minus evaluate_loss(model, ids)"),
        )
    if heads and math.isclose(got, base, abs_tol=_TOLERANCE):
        raise Wrong(
            _(
                "{where}, your loss is the model's own, {base:.4f}: nothing was replaced "
                "while the loss was measured"
            ).format(where=where, base=base),
            _(
                "register the hook on model.blocks[layer].attn.out_proj before evaluate_loss, "
                "and remove it only after"
            ),
        )
    mistakes = (
        (
            dict(how="zero"),
            _("the heads' outputs were set to zero, not to their mean"),
            _(
                "a zero output is a state the model never trained in; use the mean over the "
                "reference windows: .mean(dim=(0, 1))"
            ),
        ),
        (
            dict(how="position"),
            _("the mean was taken over the batch only, one per position, not over positions too"),
            _("average over the batch and the positions: merged.mean(dim=(0, 1))"),
        ),
        (
            dict(how="scalar"),
            _("each head was replaced by one number, the mean of all its d_head entries"),
            _("keep one mean per entry: a (d_head,) vector, averaged over batch and positions"),
        ),
        (
            dict(means_from="ids"),
            _("the means come from the evaluated text, not from the reference windows"),
            _("run the model on `reference` to record what out_proj receives, then average that"),
        ),
        (
            dict(means_from="ablated"),
            _(
                "a later block's mean was taken with an earlier block's head already replaced; "
                "every mean comes from the model as it is"
            ),
            _("record every mean first, with no replacement hook on, then install the hooks"),
        ),
        (
            dict(place="output"),
            _(
                "you replaced columns of out_proj's output; a head's slice is in out_proj's "
                "input, before W_o mixes the heads"
            ),
            _("use register_forward_pre_hook on out_proj: its args[0] is the heads side by side"),
        ),
        (
            dict(part="unscaled"),
            _("the slice starts at column h, not at h · d_head"),
            _("head h owns columns h * d_head to (h + 1) * d_head of out_proj's input"),
        ),
    )
    for options, label, hint in mistakes:
        if matches(heads=heads, **options):
            raise Wrong(_("{where}: {label}").format(where=where, label=label), hint)
    if len(heads) == 1:
        for other in every:
            if other != heads[0] and matches(heads=[other]):
                raise Wrong(
                    _("{where}: you replaced head {head} of block {layer} instead").format(
                        where=where, head=other[1], layer=other[0]
                    ),
                    _(
                        "heads are (layer, head) pairs: block `layer` of model.blocks, columns "
                        "head * d_head onwards"
                    ),
                )
    raise Wrong(
        _("{where}, your loss {got:.4f} differs from {want:.4f}").format(
            where=where, got=got, want=want
        ),
        _(
            "record out_proj's input on the reference windows, average it over dim=(0, 1), "
            "and hand each chosen head's slice of that mean to out_proj"
        ),
    )
