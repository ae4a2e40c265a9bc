"""Dropout on the attention weights, checked in training mode and in eval mode.

The probe makes the dropped weights visible in the output. Its tokens are one-hot
(x[t] = e_t), and W_v copies each one-hot twice into every head's values, so a head's
values are [I, I]: its output is its weights after dropout, twice over. W_q and W_k are
random, so the weights are not uniform; W_o (when there is one) is the identity. Then:

* eval mode (``dropout=p``): two calls give the same output, equal to the library's;
* training mode: each weight of the output is either 0 (dropped) or the eval weight times
  1 / (1 - p), the two copies agree (the weights were dropped, not the output or the values),
  and the share of dropped weights is p, within 0.05 (about 7 standard deviations for the
  thousands of weights of the probe).

Each way this goes wrong has a message that names it: dropout never applied, not rescaled,
divided by p, active in eval mode, applied to the scores, to the output or the values.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn as nn

from ..i18n import _
from .core import Wrong

P = 0.25  # 1 / (1 - p) = 4/3, 1 / p = 4 and 1 - p = 3/4 are all different
N_DRAWS = 400  # sequences in the probe's batch, each with its own dropout draw


def probe_input(T: int, width: int) -> torch.Tensor:
    """(N_DRAWS, T, width): token t is the one-hot e_t."""
    x = torch.zeros(N_DRAWS, T, width)
    x[:, torch.arange(T), torch.arange(T)] = 1.0
    return x


def probe_weights(module: nn.Module, n_heads: int, T: int) -> None:
    """Set the module's parameters for the probe: random W_q, W_k; W_v gives each head the
    values [I, I] (d_head = 2T); W_o, if any, is the identity with zero bias."""
    with torch.no_grad():
        for name, param in module.named_parameters():
            if name.startswith(("W_q.", "W_k.")):
                param.copy_(torch.randn(param.shape) * 1.5)
            elif name == "W_v.weight":
                param.zero_()
                d = param.shape[0] // n_heads
                for h in range(n_heads):
                    for j in range(T):
                        param[h * d + j, j] = 1.0
                        param[h * d + T + j, j] = 1.0
            elif name == "W_o.weight":
                param.copy_(torch.eye(param.shape[0]))
            else:  # the biases
                param.zero_()


def check_dropout(
    build: Callable, reference: nn.Module, forward: Callable, n_heads: int, T: int, what: str
) -> None:
    """``build(p)`` is the learner's module with dropout=p, probe-sized; ``reference`` the
    library's, with dropout=p and the same shapes; ``forward(module, x)`` the learner's output.
    Raise ``Wrong`` naming the first thing about dropout that is wrong."""
    module = build(P)
    probe_weights(module, n_heads, T)
    reference.load_state_dict(module.state_dict(), strict=False)
    x = probe_input(T, module.W_q.in_features)  # (N, T, d_in)
    reference.eval()
    with torch.no_grad():
        want = reference(x)  # (N, T, width): each head's weights, twice
    _check_eval(module.eval(), forward, x, want, what)
    got = forward(module.train(), x)  # (N, T, width)
    _check_train(got, want, n_heads, T, what)


def _check_eval(module, forward, x, want, what) -> None:
    first, second = forward(module, x), forward(module, x)
    if _same(first, want) and _same(second, want):
        return
    where = _("{what} in eval mode with dropout={p}").format(what=what, p=P)
    if _same(first, want * (1 - P)):
        raise Wrong(
            _("{where}: the weights are multiplied by (1 - p)").format(where=where),
            _(
                "in eval mode dropout does nothing: the 1 / (1 - p) of training already "
                "keeps the expected value"
            ),
        )
    if not _same(first, second) or _dropped_some(first, want):
        raise Wrong(
            _("{where}: dropout active in eval mode, so two calls give different outputs").format(
                where=where
            ),
            _(
                "call self.dropout(weights): nn.Dropout knows train from eval mode "
                "(F.dropout needs training=self.training)"
            ),
        )
    raise Wrong(
        _("{where}: your output differs from the library's by up to {gap:.3f}").format(
            where=where, gap=(first - want).abs().max().item()
        ),
        _("in eval mode the head must give the same output whatever its dropout"),
    )


def _check_train(got, want, n_heads: int, T: int, what: str) -> None:
    where = _("{what} in training mode with dropout={p}").format(what=what, p=P)
    apply = _("out = self.dropout(weights) @ v: dropout acts on the weights, after the softmax")
    if _same(got, want):
        raise Wrong(
            _("{where}: dropout never applied, no weight was dropped").format(where=where),
            _(
                "call it: out = self.dropout(weights) @ v (nn.Dropout acts only in training "
                "mode, and the check runs your class in both modes)"
            ),
        )
    N = got.shape[0]
    halves = got.reshape(N, T, n_heads, 2, T)  # the two copies of each head's weights
    kept = want.abs() > 1e-4  # (N, T, width): the weights the mask lets through
    zero = got.abs() < 1e-7
    first = halves[..., 0, :]  # (N, T, H, T): each head's weights after dropout
    finite = ~first.isnan().any(-1)  # (N, T, H): the rows without NaN
    rows = first.sum(-1)[finite]  # each finite row's sum
    if torch.isnan(got).any() or _same(rows, torch.ones_like(rows)):
        if (zero & kept).any() and _same(rows, torch.ones_like(rows)):
            raise Wrong(
                _(
                    "{where}: the weights are renormalised after dropout (each row divided "
                    "by its sum; a row where everything was dropped gives NaN)"
                ).format(where=where),
                _(
                    "dropout divides every survivor by the same constant, 1 / (1 - p), "
                    "whichever weights survived; rows sum to 1 only on average"
                ),
            )
        raise Wrong(
            _("{where}: dropout was applied to the scores, before the softmax").format(where=where),
            apply,
        )
    if not _same(halves[..., 0, :], halves[..., 1, :]):
        raise Wrong(
            _(
                "{where}: dropout acts on the output or on the values, not on the attention weights"
            ).format(where=where),
            apply,
        )
    survivors = kept & ~zero
    ratio = got[survivors] / want[survivors]  # 1 / (1 - p) for each survivor
    for factor, message, hint in (
        (
            1.0,
            _("{where}: dropout not rescaled: the surviving weights are not divided by (1 - p)"),
            _("divide the survivors by (1 - p): nn.Dropout does it for you"),
        ),
        (
            1 / P,
            _("{where}: the survivors are divided by p, not by (1 - p)"),
            _("divide by (1 - p), not p"),
        ),
        (
            1 - P,
            _("{where}: the survivors are multiplied by (1 - p): that shrinks them further"),
            _("divide by (1 - p) so that the expected value stays the same"),
        ),
    ):
        if torch.allclose(ratio, torch.full_like(ratio, factor), rtol=1e-4, atol=1e-5):
            raise Wrong(message.format(where=where), hint)
    low, high = ratio.min().item(), ratio.max().item()
    if math.isclose(low, high, rel_tol=1e-4) and not math.isclose(low, 1 / (1 - P), rel_tol=1e-4):
        if math.isclose(low, 1 / (1 - P) ** 2, rel_tol=1e-4):
            raise Wrong(
                _(
                    "{where}: dropout is applied twice: the survivors are scaled by "
                    "1 / (1 - p)² = {ratio:.3g}"
                ).format(where=where, ratio=low),
                _("apply self.dropout once, to the weights: out = self.dropout(weights) @ v"),
            )
        if low > 1:
            raise Wrong(
                _(
                    "{where}: the survivors are scaled by {ratio:.3g} = 1 / (1 - {used:.2g}): "
                    "dropout used p = {used:.2g}, not the module's p = {p}"
                ).format(where=where, ratio=low, used=1 - 1 / low, p=P),
                _(
                    "use the module's own dropout, self.dropout(weights), or "
                    "F.dropout(weights, self.dropout.p, training=self.training)"
                ),
            )
    if not torch.allclose(ratio, torch.full_like(ratio, 1 / (1 - P)), rtol=1e-4, atol=1e-5):
        if not math.isclose(low, high, rel_tol=1e-4):
            raise Wrong(
                _(
                    "{where}: the surviving weights are scaled by {low:.3g} to {high:.3g}, not "
                    "all by 1 / (1 - p) = {want:.3g}: dropout changed the weights themselves, "
                    "so it acted before they were made (on x, q, k or v)"
                ).format(where=where, low=low, high=high, want=1 / (1 - P)),
                _("drop the attention weights, after the softmax: out = self.dropout(weights) @ v"),
            )
        raise Wrong(
            _(
                "{where}: the surviving weights are scaled by {low:.3g} to {high:.3g}, "
                "not by 1 / (1 - p) = {want:.3g}"
            ).format(
                where=where, low=ratio.min().item(), high=ratio.max().item(), want=1 / (1 - P)
            ),
            _("zero the dropped weights and divide the survivors by (1 - p)"),
        )
    share = (zero & kept).sum().item() / kept.sum().item()
    if abs(share - P) > 0.05:
        raise Wrong(
            _("{where}: {share:.0%} of the weights are dropped, not p = {p:.0%}").format(
                where=where, share=share, p=P
            ),
            _("nn.Dropout(p) drops each weight with probability p"),
        )


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), atol=1e-5, rtol=1e-4)


def _dropped_some(got: torch.Tensor, want: torch.Tensor) -> bool:
    return bool(((got.abs() < 1e-7) & (want.abs() > 1e-4)).any())
