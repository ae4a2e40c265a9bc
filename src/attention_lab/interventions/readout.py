"""Retraining only what reads the attention output (``attention_lab.interventions``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.nn as nn

from .._checks import check_positive
from ..device import cpu_threads
from ..i18n import error_text
from ..tasks import make_batch
from ..training import EVAL_ROWS, EVAL_SEED, _eval_batch, _loss_and_accuracy
from .layers import ACTIVE, attention_layers, layer_at


def readout_parameters(model: nn.Module, layers: Sequence[int] | None = None) -> dict:
    """The parameters that read the attention output: ``{name: parameter}``.

    ``out_proj`` of ``layers`` (default: the layers inside an active ``freeze_attention`` or
    ``ablate_heads``) and the model's ``lm_head``.
    """
    all_layers = attention_layers(model)
    if layers is None:
        chosen = [b for b in all_layers if b in ACTIVE]
        if not chosen:
            raise ValueError(
                error_text(
                    "no attention layer is frozen or ablated, so the readout is not defined; call "
                    "this inside freeze_attention(...) or ablate_heads(...), or pass layers=[0]"
                )
            )
    else:
        chosen = [layer_at(model, i) for i in layers]
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
