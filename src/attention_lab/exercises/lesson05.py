"""Lesson 05 · a causal head (notebooks/05_causal_head.ipynb): dropout on the attention
weights, written by hand, keeps their expected value by rescaling the survivors."""

from __future__ import annotations

import torch

from ..i18n import N_, _
from ..masks import causal_mask
from .core import Wrong, answer_tensor, call, checker, close, masked_softmax

# --- new: dropout's 1 / (1 - p) --------------------------------------------------------------


@checker("05", N_("return the weights after dropout: same shape, survivors rescaled"))
def check_dropout_rescale(fn) -> str:
    """``fn(weights, keep, p) -> dropped``: ``keep`` is a bool tensor of weights' shape (True
    = this weight survives), ``p`` the probability of dropping; dropout zeroes the others and
    divides the survivors by (1 - p), as ``nn.Dropout`` does in training mode."""
    T = 6
    for p in (0.25, 0.5, 0.0):
        weights = masked_softmax(torch.randn(2, T, T) * 2, causal_mask(T))  # (B, T, T)
        keep = torch.rand(2, T, T) >= p  # (B, T, T), True = kept
        got = answer_tensor(
            call(fn, weights.clone(), keep.clone(), p), _("the result at p={p}").format(p=p)
        )
        if tuple(got.shape) != tuple(weights.shape):
            raise Wrong(
                _("at p={p} the result has shape {shape}, expected {expected}").format(
                    p=p, shape=tuple(got.shape), expected=tuple(weights.shape)
                ),
                _("multiply elementwise: the result has the shape of the weights"),
            )
        want = weights * keep / (1 - p)  # (B, T, T)
        if close(got, want):
            continue
        where = _("at p={p}").format(p=p)
        if close(got, weights * keep):
            raise Wrong(
                _(
                    "{where}, the survivors keep their old values, so on average a row now sums "
                    "to 1 - p = {mean:g}, not 1"
                ).format(where=where, mean=1 - p),
                _("divide the survivors by (1 - p): weights * keep / (1 - p)"),
            )
        if p > 0 and close(got, weights * keep / p):
            raise Wrong(
                _("{where}, the survivors are divided by p").format(where=where),
                _("divide by (1 - p), not p"),
            )
        if close(got, weights * keep * (1 - p)):
            raise Wrong(
                _(
                    "{where}, the survivors are multiplied by (1 - p): that shrinks them further"
                ).format(where=where),
                _("divide by (1 - p) so that the expected value stays the same"),
            )
        if close(got, weights * ~keep / (1 - p)) or close(got, weights * ~keep):
            raise Wrong(
                _("{where}, you kept the weights that should be dropped").format(where=where),
                _("keep is True where a weight survives: weights * keep"),
            )
        kept = weights * keep  # (B, T, T)
        renormalised = kept / kept.sum(dim=-1, keepdim=True)  # (B, T, T)
        if close(got, renormalised) or torch.isnan(got).any():
            raise Wrong(
                _(
                    "{where}, each row is renormalised to sum to 1 (a row where everything was "
                    "dropped gives NaN)"
                ).format(where=where),
                _(
                    "dropout divides every survivor by the same constant, 1 / (1 - p), whichever "
                    "weights survived; rows sum to 1 only on average"
                ),
            )
        raise Wrong(
            _(
                "{where}, the result differs from weights * keep / (1 - p) by up to {gap:.3f}"
            ).format(where=where, gap=(got - want).abs().max().item()),
            _("zero the dropped weights and divide the survivors by (1 - p)"),
        )
    p, n_draws = 0.5, 4000
    weights = masked_softmax(torch.randn(T, T) * 2, causal_mask(T))  # (T, T)
    keep = torch.rand(n_draws, T, T) >= p  # (n_draws, T, T): a fresh mask per draw
    mean = call(fn, weights.expand(n_draws, T, T), keep, p).mean(0)  # (T, T)
    gap = (mean - weights).abs().max().item()
    return _(
        "survivors are rescaled by 1 / (1 - p); over {draws} draws at p={p} the mean "
        "weights are within {gap:.2f} of the weights: the expected value is kept"
    ).format(draws=n_draws, p=p, gap=gap)
