"""Checkers for the classes a learner writes inside the lessons themselves: the skeletons of
``SingleHeadAttention`` (notebook 02), ``CausalAttention`` (05) and ``MultiHeadAttention`` (06).

Each one builds the learner's class, copies its weights into the library's class of the same
name (the parameter names are the same, so ``load_state_dict`` works), and compares the two on
random batches. The causal ones also change a future token and check that no earlier output
moves, and check dropout in training and in eval mode (``_dropout``). A wrong answer is run
against the typical wrong answers (``_variants``): the one it matches is named in the first
line of the verdict; "differs by up to x" is left for mistakes nobody has catalogued.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from ..heads import CausalAttention, SingleHeadAttention
from ..i18n import N_, _
from ..multihead import MultiHeadAttention
from ._dropout import check_dropout
from ._variants import (
    Option,
    attend,
    mask_options,
    name_the_mistake,
    scale_options,
    softmax_options,
    values_options,
)
from .core import LearnerError, Wrong, answer_tensor, call, checker, close


def _build(cls, *args):
    """An instance of the learner's class, in eval mode, or a Wrong that says why not."""
    if not isinstance(cls, type) or not issubclass(cls, nn.Module):
        raise Wrong(
            _("expected a class derived from nn.Module, got {type}").format(
                type=type(cls).__name__
            ),
            _("pass the class itself, e.g. check(SingleHeadAttention), not an instance"),
        )
    module = call(cls, *args)
    return module.eval()


def _copy_weights(learner: nn.Module, reference: nn.Module) -> None:
    """Give ``reference`` the learner's weights; a Wrong if the parameter names differ."""
    want = sorted(name for name, _param in reference.named_parameters())
    got = sorted(name for name, _param in learner.named_parameters())
    if got != want:
        raise Wrong(
            _("your parameters are {got}, the library's are {want}").format(got=got, want=want),
            _("keep the layers of the skeleton: self.W_q, self.W_k, self.W_v (and self.W_o)"),
        )
    try:
        reference.load_state_dict(learner.state_dict(), strict=False)
    except RuntimeError as error:
        raise Wrong(
            _("the shapes of your weights differ from the library's: {detail}").format(
                detail=str(error).splitlines()[-1]
            ),
            _(
                "each nn.Linear takes (in_features, out_features): "
                "nn.Linear(d_in, d_out, bias=False)"
            ),
        ) from None


def _forward(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    try:
        with torch.no_grad():
            out = call(module, x.clone())
    except LearnerError as raised:
        T, ctx = x.shape[1], getattr(getattr(module, "mask", None), "shape", (0,))[0]
        if isinstance(raised.error, RuntimeError) and 0 < T < ctx:
            try:  # the same module on a sequence of the full context_length
                with torch.no_grad():
                    module(torch.randn(x.shape[0], ctx, x.shape[2]))
            except Exception:  # noqa: BLE001 - another mistake: report the first error
                raise raised from None
            raise Wrong(
                _(
                    "forward fails when T={T} is shorter than context_length={ctx}: the mask "
                    "was not sliced to (T, T)"
                ).format(T=T, ctx=ctx),
                _("slice the mask to the sequence: self.mask[:T, :T]"),
            ) from None
        raise
    if isinstance(out, tuple):
        raise Wrong(
            _("forward(x) returned a tuple"),
            _("forward(x) returns only the output; the weights come back only with return_weights"),
        )
    return out


def _compare(module: nn.Module, reference: nn.Module, x: torch.Tensor, shape: tuple):
    """The learner's output (checked for its shape) and the reference's, on the same x."""
    out = _forward(module, x)
    B, T = x.shape[:2]
    if isinstance(out, torch.Tensor) and out.shape[-2:] == (T, T) and tuple(shape[-2:]) != (T, T):
        raise Wrong(
            _("forward(x) returned the weights {shape}, not the output weights @ v").format(
                shape=tuple(out.shape)
            ),
            _("return weights @ v; the weights come back only with return_weights"),
        )
    out = answer_tensor(out, "forward(x)", shape)
    with torch.no_grad():
        want = reference(x)
    return out, want


def _diagnose_head(out, module, x, d: int, where: str, causal: bool) -> None:
    """Raise ``Wrong`` naming the typical mistakes that explain a single head's ``out``."""
    d_in = x.shape[-1]
    with torch.no_grad():
        q, k, v = module.W_q(x), module.W_k(x), module.W_v(x)  # (B, T, d) each
    steps = {
        "scale": scale_options(d, d_in, "d_in"),
        "softmax": softmax_options(),
        "mask": mask_options(causal),
        "values": values_options(),
    }
    name_the_mistake(out, steps, lambda **c: attend(q, k, v, d_model=d_in, **c), where)


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
        if close(out, want):
            continue
        where = _("with d_in={d_in}, d_out={d_out}").format(d_in=d_in, d_out=d_out)
        _diagnose_head(out, module, x, d_out, where, causal=False)
        raise Wrong(
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
        if not close(after[:, :j], before[:, :j]):
            raise Wrong(
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
        if not close(out, want):
            where = _("with d_in={d_in}, d_out={d_out}, T={T}").format(d_in=d_in, d_out=d_out, T=T)
            _diagnose_head(out, module, x, d_out, where, causal=True)
            raise Wrong(
                _("{where}, your output differs from CausalAttention's by up to {gap:.3f}").format(
                    where=where, gap=(out - want).abs().max().item()
                ),
                _("scores / √d_head, masked_fill(mask[:T, :T], -inf), softmax, dropout, @ V"),
            )
        _check_causal(module, x, _("your CausalAttention"))
    T = 4  # the dropout probe: d_in = T, d_out = 2T (see _dropout)
    check_dropout(
        lambda p: _build(cls, T, 2 * T, T, p),
        CausalAttention(T, 2 * T, T, dropout=0.25),
        _forward,
        1,
        T,
        _("your CausalAttention"),
    )
    return _(
        "your CausalAttention gives the library's numbers, never looks ahead, drops weights "
        "in training mode and rescales the rest by 1 / (1 - p), and is deterministic in "
        "eval mode"
    )


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
        if not close(out, want):
            where = _("with d_model={D}, n_heads={H}").format(D=D, H=H)
            _diagnose_multi_head(out, module, x, H, where)
            raise Wrong(
                _(
                    "{where}, your output differs from MultiHeadAttention's by up to {gap:.3f}"
                ).format(where=where, gap=(out - want).abs().max().item()),
                _("follow the mnemonic: split heads, swap axes, attend, swap back, merge, W_o"),
            )
        _check_causal(module, x, _("your MultiHeadAttention"))
    T, H = 4, 2  # the dropout probe: d_head = 2T (see _dropout)
    check_dropout(
        lambda p: _build(cls, H * 2 * T, H, T, p),
        MultiHeadAttention(H * 2 * T, H, T, dropout=0.25),
        _forward,
        H,
        T,
        _("your MultiHeadAttention"),
    )
    return _("your MultiHeadAttention gives the library's numbers and never looks ahead")


def _diagnose_multi_head(out, module, x, H: int, where: str) -> None:
    """Raise ``Wrong`` naming the typical mistakes that explain a multi-head ``out``."""
    B, T, D = x.shape
    d = D // H
    with torch.no_grad():
        projected = module.W_q(x), module.W_k(x), module.W_v(x)  # 3 x (B, T, D)

    def compute(split, merge, out_proj, **head):
        if split == "transpose":
            q, k, v = (t.view(B, T, H, d).transpose(1, 2) for t in projected)  # (B, H, T, d)
        else:
            q, k, v = (t.view(B, H, T, d) for t in projected)  # the rows of several positions
        context = attend(q, k, v, d_model=D, **head)  # (B, H, T, d)
        if merge == "transpose":
            merged = context.transpose(1, 2).reshape(B, T, D)  # (B, T, D)
        else:
            merged = context.reshape(B, T, D)  # heads' rows laid end to end
        return module.W_o(merged) if out_proj == "W_o" else merged  # (B, T, D)

    steps = {
        "split": [
            Option("transpose"),
            Option(
                "view",
                _(
                    "the heads were split with view(B, H, T, d_head), no transpose: each head "
                    "gets a mix of positions, not its own features"
                ),
                _("view(B, T, H, d_head).transpose(1, 2): each head must get its own features"),
            ),
        ],
        "merge": [
            Option("transpose"),
            Option(
                "view",
                _(
                    "merged the heads without transposing back: (B, H, T, d_head) was "
                    "reshaped straight to (B, T, D)"
                ),
                _("swap back first: context.transpose(1, 2).contiguous().view(B, T, D)"),
            ),
        ],
        "out_proj": [
            Option("W_o"),
            Option(
                "none",
                _("out_proj missing: W_o is never applied to the merged heads"),
                _("end with out = self.W_o(merged): W_o mixes what the heads found"),
            ),
        ],
        "scale": scale_options(d, D, "d_model"),
        "softmax": softmax_options()[:2],
        "mask": mask_options(causal=True),
        "values": values_options()[:2],
    }
    name_the_mistake(out, steps, compute, where)


__all__ = [
    "check_causal_attention_class",
    "check_multi_head_class",
    "check_single_head_class",
]
