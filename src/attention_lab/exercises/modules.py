"""Checkers for the classes a learner writes inside the lessons themselves: the skeletons of
``SingleHeadAttention`` (notebook 02), ``CausalAttention`` (05) and ``MultiHeadAttention`` (06).

Each one builds the learner's class, copies its weights into the library's class of the same
name (the parameter names are the same, so ``load_state_dict`` works), and compares the two on
random batches. The causal ones also change a future token and check that no earlier output
moves. A wrong answer gets the most specific diagnosis the checker recognises.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from ..heads import CausalAttention, SingleHeadAttention
from ..i18n import N_, _
from ..multihead import MultiHeadAttention
from ._core import _call, _close, _tensor, _Wrong, checker


def _build(cls, *args):
    """An instance of the learner's class, in eval mode, or a _Wrong that says why not."""
    if not isinstance(cls, type) or not issubclass(cls, nn.Module):
        raise _Wrong(
            _("expected a class derived from nn.Module, got {type}").format(
                type=type(cls).__name__
            ),
            _("pass the class itself, e.g. check(SingleHeadAttention), not an instance"),
        )
    module = _call(cls, *args)
    return module.eval()


def _copy_weights(learner: nn.Module, reference: nn.Module) -> None:
    """Give ``reference`` the learner's weights; a _Wrong if the parameter names differ."""
    want = sorted(name for name, _param in reference.named_parameters())
    got = sorted(name for name, _param in learner.named_parameters())
    if got != want:
        raise _Wrong(
            _("your parameters are {got}, the library's are {want}").format(got=got, want=want),
            _("keep the layers of the skeleton: self.W_q, self.W_k, self.W_v (and self.W_o)"),
        )
    try:
        reference.load_state_dict(learner.state_dict(), strict=False)
    except RuntimeError as error:
        raise _Wrong(
            _("the shapes of your weights differ from the library's: {detail}").format(
                detail=str(error).splitlines()[-1]
            ),
            _(
                "each nn.Linear takes (in_features, out_features): "
                "nn.Linear(d_in, d_out, bias=False)"
            ),
        ) from None


def _forward(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        out = _call(module, x.clone())
    if isinstance(out, tuple):
        raise _Wrong(
            _("forward(x) returned a tuple"),
            _("forward(x) returns only the output; the weights come back only with return_weights"),
        )
    return out


def _compare(module: nn.Module, reference: nn.Module, x: torch.Tensor, shape: tuple):
    """The learner's output (checked for its shape) and the reference's, on the same x."""
    out = _tensor(_forward(module, x), "forward(x)", shape)
    with torch.no_grad():
        want = reference(x)
    return out, want


def _scores(module: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Unscaled single-head scores q kᵀ and the values, from the module's own layers."""
    with torch.no_grad():
        q, k, v = module.W_q(x), module.W_k(x), module.W_v(x)  # (B, T, d) each
    return q @ k.transpose(-2, -1), v  # (B, T, T), (B, T, d)


def _diagnose_head(out, module, x, d: int, where: str, causal: bool) -> None:
    """Raise the most specific _Wrong for a single head's output ``out``."""
    scores, v = _scores(module, x)  # (B, T, T), (B, T, d)
    T = x.shape[1]
    blocked = torch.ones(T, T, dtype=torch.bool).triu(1)  # (T, T), True = blocked

    def softmax(s, dim=-1, mask=causal):
        if mask:
            s = s.masked_fill(blocked, float("-inf"))
        return torch.softmax(s, dim=dim)

    if _close(out, softmax(scores) @ v):
        raise _Wrong(
            _("{where}, the scores are not scaled").format(where=where),
            _(
                "divide q @ k.transpose(-2, -1) by √d_head (here √{d_head}) before the softmax"
            ).format(d_head=d),
        )
    if d > 1 and _close(out, softmax(scores / d) @ v):
        raise _Wrong(
            _("{where}, the scores are divided by d_head").format(where=where),
            _("divide by √d_head"),
        )
    if _close(out, softmax(scores / math.sqrt(d), dim=-2) @ v):
        raise _Wrong(
            _("{where}, each column of the weights sums to 1, not each row").format(where=where),
            _("softmax over the keys, the last dimension: torch.softmax(scores, dim=-1)"),
        )
    if causal and _close(out, softmax(scores / math.sqrt(d), mask=False) @ v):
        raise _Wrong(
            _("{where}, the output is that of a head with no mask: the future leaks in").format(
                where=where
            ),
            _("scores.masked_fill(self.mask[:T, :T], float('-inf')) before the softmax"),
        )
    if causal:
        after = torch.softmax(scores / math.sqrt(d), dim=-1).masked_fill(blocked, 0.0)
        if _close(out, after @ v):
            raise _Wrong(
                _(
                    "{where}, the future is zeroed after the softmax, so rows no longer sum to 1"
                ).format(where=where),
                _("mask the scores with -inf before the softmax (notebook 04)"),
            )


@checker("02", N_("write forward(x): Q, K, V from the three layers, then the formula"))
def check_single_head_class(cls) -> str:
    """``cls(d_in, d_out)`` is the learner's ``SingleHeadAttention``: forward(x) for x of
    shape (B, T, d_in) must equal ``attention_lab.SingleHeadAttention``'s."""
    for B, T, d_in, d_out in ((2, 5, 8, 8), (1, 7, 6, 4)):
        module = _build(cls, d_in, d_out)
        reference = SingleHeadAttention(d_in, d_out).eval()
        _copy_weights(module, reference)
        x = torch.randn(B, T, d_in)  # (B, T, d_in)
        out, want = _compare(module, reference, x, (B, T, d_out))  # (B, T, d_out) each
        if _close(out, want):
            continue
        where = _("with d_in={d_in}, d_out={d_out}").format(d_in=d_in, d_out=d_out)
        _diagnose_head(out, module, x, d_out, where, causal=False)
        raise _Wrong(
            _("{where}, your output differs from SingleHeadAttention's by up to {gap:.3f}").format(
                where=where, gap=(out - want).abs().max().item()
            ),
            _("weights = softmax(Q @ K.transpose(-2, -1) / √d_head, dim=-1); return weights @ V"),
        )
    return _("your SingleHeadAttention gives the library's numbers, for square and narrow heads")


def _check_causal(module: nn.Module, x: torch.Tensor, what: str) -> None:
    """A new token at position j must not change any output before j."""
    before = _forward(module, x)
    for j in range(x.shape[1]):
        changed = x.clone()
        changed[:, j] = torch.randn(x.shape[0], x.shape[2])
        after = _forward(module, changed)
        if not _close(after[:, :j], before[:, :j]):
            raise _Wrong(
                _(
                    "{what} looks ahead: a new token at position {j} changed an earlier output"
                ).format(what=what, j=j),
                _("block the future with the mask before the softmax"),
            )


@checker("05", N_("write forward(x): the head of notebook 02 plus the causal mask and dropout"))
def check_causal_attention_class(cls) -> str:
    """``cls(d_in, d_out, context_length, dropout=0.0)`` is the learner's ``CausalAttention``."""
    for B, T, d_in, d_out, ctx in ((2, 6, 8, 4, 10), (1, 5, 6, 6, 5)):
        module = _build(cls, d_in, d_out, ctx, 0.0)
        reference = CausalAttention(d_in, d_out, ctx).eval()
        _copy_weights(module, reference)
        x = torch.randn(B, T, d_in)  # (B, T, d_in)
        out, want = _compare(module, reference, x, (B, T, d_out))  # (B, T, d_out) each
        if not _close(out, want):
            where = _("with d_in={d_in}, d_out={d_out}, T={T}").format(d_in=d_in, d_out=d_out, T=T)
            _diagnose_head(out, module, x, d_out, where, causal=True)
            raise _Wrong(
                _("{where}, your output differs from CausalAttention's by up to {gap:.3f}").format(
                    where=where, gap=(out - want).abs().max().item()
                ),
                _("scores / √d_head, masked_fill(mask[:T, :T], -inf), softmax, dropout, @ V"),
            )
        _check_causal(module, x, _("your CausalAttention"))
    return _("your CausalAttention gives the library's numbers and never looks ahead")


@checker("06", N_("write forward(x): split heads, swap axes, attend, swap back, merge heads, W_o"))
def check_multi_head_class(cls) -> str:
    """``cls(d_model, n_heads, context_length, dropout=0.0)`` is the learner's
    ``MultiHeadAttention``; the output must equal ``attention_lab.MultiHeadAttention``'s."""
    for B, T, D, H, ctx in ((2, 5, 12, 3, 8), (1, 6, 8, 2, 6)):
        module = _build(cls, D, H, ctx, 0.0)
        reference = MultiHeadAttention(D, H, ctx).eval()
        _copy_weights(module, reference)
        x = torch.randn(B, T, D)  # (B, T, D)
        out, want = _compare(module, reference, x, (B, T, D))  # (B, T, D) each
        if not _close(out, want):
            where = _("with d_model={D}, n_heads={H}").format(D=D, H=H)
            with torch.no_grad():
                unsplit = _no_transpose(module, x, H)  # (B, T, D)
            if _close(out, unsplit):
                raise _Wrong(
                    _(
                        "{where}, the heads were split with view(B, H, T, d_head), no transpose"
                    ).format(where=where),
                    _("view(B, T, H, d_head).transpose(1, 2): each head must get its own features"),
                )
            raise _Wrong(
                _(
                    "{where}, your output differs from MultiHeadAttention's by up to {gap:.3f}"
                ).format(where=where, gap=(out - want).abs().max().item()),
                _("follow the mnemonic: split heads, swap axes, attend, swap back, merge, W_o"),
            )
        _check_causal(module, x, _("your MultiHeadAttention"))
    return _("your MultiHeadAttention gives the library's numbers and never looks ahead")


def _no_transpose(module: nn.Module, x: torch.Tensor, H: int) -> torch.Tensor:
    """The typical mistake: split the heads with a plain view, without the transpose."""
    B, T, D = x.shape
    d = D // H
    q, k, v = (W(x).view(B, H, T, d) for W in (module.W_q, module.W_k, module.W_v))
    blocked = torch.ones(T, T, dtype=torch.bool).triu(1)  # (T, T)
    scores = (q @ k.transpose(-2, -1) / math.sqrt(d)).masked_fill(blocked, float("-inf"))
    context = torch.softmax(scores, dim=-1) @ v  # (B, H, T, d)
    return module.W_o(context.transpose(1, 2).reshape(B, T, D))


__all__ = [
    "check_causal_attention_class",
    "check_multi_head_class",
    "check_single_head_class",
]
