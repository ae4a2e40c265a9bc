"""Checkers for the classes a learner writes inside the lessons themselves: the skeletons of
``SingleHeadAttention`` (notebook 02), ``CausalAttention`` (05) and ``MultiHeadAttention`` (06).

Each one builds the learner's class, copies its weights into the library's class of the same
name (the parameter names are the same, so ``load_state_dict`` works), and compares the two on
random batches. The causal ones also change a future token and check that no earlier output
moves, and check dropout in training and in eval mode (``_dropout``), then
``forward(x, return_weights=True)``: the pair (out, weights), the weights before dropout, as the
lessons draw them. A wrong answer is run against the typical wrong answers (``_variants``): the
one it matches is named in the first line of the verdict. When none matches, two probes give
the family of the mistake: with one-hot tokens and W_v the identity the output is the weights,
whose rows must sum to 1 ("check softmax's dim"), and a causal head must not look ahead;
"differs by up to x" is left for what gets past both. tests/library/test_checker_bank.py holds the
wrong answers each message is tested with.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from ..heads import CausalAttention, SingleHeadAttention
from ..i18n import N_, _
from ..multihead import MultiHeadAttention
from ._dropout import P, check_dropout, probe_input, probe_weights
from ._variants import (
    Option,
    across_options,
    attend,
    mask_options,
    name_the_mistake,
    output_options,
    product_options,
    scale_options,
    scores_options,
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
        if isinstance(raised.error, RuntimeError) and "view size is not compatible" in str(
            raised.error
        ):
            raise Wrong(
                _(
                    "view failed on a tensor that is not contiguous: after transpose(1, 2) the "
                    "numbers are no longer stored in the order view reads them"
                ),
                _("call .contiguous() before .view(B, T, D), or use .reshape(B, T, D)"),
            ) from None
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
        "scale": scale_options(d, d_in, "d_in", T=x.shape[1]),
        "scores": scores_options(),
        "softmax": softmax_options(),
        "mask": mask_options(causal),
        "values": values_options(),
        "product": product_options(),
        "output": output_options(),
    }
    if not causal:  # a batch flattened into one sequence (a causal mask would need B*T rows)
        steps["across"] = across_options()
    compute = lambda **c: attend(q, k, v, x=x, d_model=d_in, **c)  # noqa: E731
    name_the_mistake(out, steps, compute, where)


def _weights_probe(module: nn.Module, n_heads: int, T: int, where: str) -> None:
    """The family message when no variant explains the output: with one-hot tokens and W_v
    (and W_o) the identity, a head's output is its weights; raise ``Wrong`` if their rows do
    not sum to 1. ``module`` is the learner's, built with d_head = T."""
    x = torch.zeros(1, T, module.W_q.in_features)  # (1, T, D): token t is e_t in every head
    for h in range(n_heads):
        x[0, torch.arange(T), h * T + torch.arange(T)] = 1.0
    with torch.no_grad():
        for name, param in module.named_parameters():
            if name in ("W_v.weight", "W_o.weight"):
                param.copy_(torch.eye(*param.shape))
            elif name.endswith("bias"):
                param.zero_()
        out = _forward(module, x)  # (1, T, H * T): each head's weights
    sums = out.reshape(T, n_heads, T).double().sum(-1)  # (T, H)
    if torch.isnan(sums).any() or not torch.allclose(sums, torch.ones_like(sums), atol=1e-4):
        raise Wrong(
            _(
                "{where}: the weights don't sum to 1 over the keys (with V the identity the "
                "output is the weights; its rows sum to {low:.3g} to {high:.3g})"
            ).format(where=where, low=sums.min().item(), high=sums.max().item()),
            _(
                "check softmax's dim: torch.softmax(scores, dim=-1), after the mask, and "
                "nothing done to the weights between the softmax and @ v but dropout"
            ),
        )


def _check_return_weights(module, reference, x, n_heads: int) -> None:
    """``forward(x, return_weights=True)`` gives (out, weights), both the library's, in eval
    mode: the lessons draw the weights it hands back."""
    asked = "forward(x, return_weights=True)"
    with torch.no_grad():
        got = call(module, x.clone(), return_weights=True)
        want_out, want_w = reference(x, return_weights=True)  # (B, T, D), (B, [H,] T, T)
    pair = isinstance(got, (tuple, list)) and len(got) == 2
    if not pair or not all(isinstance(t, torch.Tensor) for t in got):
        if isinstance(got, torch.Tensor):
            what = _("{asked} returned one tensor, {shape}, not the pair (out, weights)").format(
                asked=asked, shape=tuple(got.shape)
            )
        else:
            what = _("{asked} returned a {type}, not the pair (out, weights)").format(
                asked=asked, type=type(got).__name__
            )
        raise Wrong(what, _("end forward with: return (out, weights) if return_weights else out"))
    out, weights = got
    if out.shape == want_w.shape and weights.shape == want_out.shape:
        raise Wrong(
            _("{asked} returned (weights, out): the output comes first").format(asked=asked),
            _("return (out, weights) if return_weights else out"),
        )
    if n_heads > 1 and weights.shape == want_w.mean(1).shape and close(weights, want_w.mean(1)):
        raise Wrong(
            _(
                "{asked} returned the weights averaged over the heads, {shape}: the lessons "
                "draw each head's own"
            ).format(asked=asked, shape=tuple(weights.shape)),
            _("return the weights as the softmax gives them: (B, H, T, T), one (T, T) per head"),
        )
    weights = answer_tensor(weights, _("the weights of {asked}").format(asked=asked), want_w.shape)
    out = answer_tensor(out, _("the output of {asked}").format(asked=asked), want_out.shape)
    if not close(out, want_out):
        raise Wrong(
            _("{asked}: the output differs from forward(x)'s by up to {gap:.3f}").format(
                asked=asked, gap=(out - want_out).abs().max().item()
            ),
            _("return_weights only adds the weights: the output must not change"),
        )
    if close(weights, want_w):
        return
    if close(torch.softmax(weights.double(), dim=-1), want_w):
        raise Wrong(
            _("{asked} returned the scores, before the softmax, not the weights").format(
                asked=asked
            ),
            _("return the weights: the softmax of the masked scores"),
        )
    raise Wrong(
        _("{asked}: the weights returned differ from the library's by up to {gap:.3f}").format(
            asked=asked, gap=(weights - want_w).abs().max().item()
        ),
        _("return the weights as the softmax gives them, before dropout"),
    )


def _check_weights_before_dropout(build, reference, n_heads: int, T: int, what: str) -> None:
    """In training mode too, return_weights hands back the weights before dropout (the
    library's do, and notebook 05 says so): the probe of ``_dropout`` shows them."""
    module = build(P)
    probe_weights(module, n_heads, T)
    reference.load_state_dict(module.state_dict(), strict=False)
    x = probe_input(T, module.W_q.in_features)  # (N, T, d_in)
    with torch.no_grad():
        _out, want = reference.eval()(x, return_weights=True)  # (N, [H,] T, T)
        got = call(module.train(), x, return_weights=True)
    weights = got[1] if isinstance(got, (tuple, list)) and len(got) == 2 else None
    if isinstance(weights, torch.Tensor) and close(weights, want):
        return
    raise Wrong(
        _(
            "{what} in training mode with dropout={p}: return_weights hands back the weights "
            "after dropout, not the softmax's weights"
        ).format(what=what, p=P),
        _(
            "keep the softmax's weights and drop a copy: out = self.dropout(weights) @ v; "
            "return (out, weights)"
        ),
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
        if close(out, want):
            continue
        where = _("with d_in={d_in}, d_out={d_out}").format(d_in=d_in, d_out=d_out)
        _diagnose_head(out, module, x, d_out, where, causal=False)
        _weights_probe(_build(cls, T, T), 1, T, where)
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
    probed = []  # (module, reference, x) of each size, for return_weights at the end
    for B, T, d_in, d_out, ctx in ((2, 6, 8, 4, 10), (1, 5, 6, 6, 5)):
        module = _build(cls, d_in, d_out, ctx, 0.0)
        reference = CausalAttention(d_in, d_out, ctx).eval()
        _copy_weights(module, reference)
        x = torch.randn(B, T, d_in)  # (B, T, d_in)
        out, want = _compare(module, reference, x, (B, T, d_out))  # (B, T, d_out) each
        if not close(out, want):
            where = _("with d_in={d_in}, d_out={d_out}, T={T}").format(d_in=d_in, d_out=d_out, T=T)
            _diagnose_head(out, module, x, d_out, where, causal=True)
            _weights_probe(_build(cls, T, T, T, 0.0), 1, T, where)
            _check_causal(module, x, _("your CausalAttention"))
            raise Wrong(
                _("{where}, your output differs from CausalAttention's by up to {gap:.3f}").format(
                    where=where, gap=(out - want).abs().max().item()
                ),
                _("scores / √d_head, masked_fill(mask[:T, :T], -inf), softmax, dropout, @ V"),
            )
        _check_causal(module, x, _("your CausalAttention"))
        probed.append((module, reference, x))
    T = 4  # the dropout probe: d_in = T, d_out = 2T (see _dropout)
    check_dropout(
        lambda p: _build(cls, T, 2 * T, T, p),
        CausalAttention(T, 2 * T, T, dropout=P),
        _forward,
        1,
        T,
        _("your CausalAttention"),
    )
    for module, reference, x in probed:
        _check_return_weights(module, reference, x, 1)
    _check_weights_before_dropout(
        lambda p: _build(cls, T, 2 * T, T, p),
        CausalAttention(T, 2 * T, T, dropout=P),
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
    probed = []  # (module, reference, x, H) of each size, for return_weights at the end
    for B, T, D, H, ctx in ((2, 5, 12, 3, 8), (1, 6, 8, 2, 6)):
        module = _build(cls, D, H, ctx, 0.0)
        reference = MultiHeadAttention(D, H, ctx).eval()
        _copy_weights(module, reference)
        x = torch.randn(B, T, D)  # (B, T, D)
        out, want = _compare(module, reference, x, (B, T, D))  # (B, T, D) each
        if not close(out, want):
            where = _("with d_model={D}, n_heads={H}").format(D=D, H=H)
            _diagnose_multi_head(out, module, x, H, where)
            _weights_probe(_build(cls, H * T, H, T, 0.0), H, T, where)
            _check_causal(module, x, _("your MultiHeadAttention"))
            raise Wrong(
                _(
                    "{where}, your output differs from MultiHeadAttention's by up to {gap:.3f}"
                ).format(where=where, gap=(out - want).abs().max().item()),
                _("follow the mnemonic: split heads, swap axes, attend, swap back, merge, W_o"),
            )
        _check_causal(module, x, _("your MultiHeadAttention"))
        probed.append((module, reference, x, H))
    T, H = 4, 2  # the dropout probe: d_head = 2T (see _dropout)
    check_dropout(
        lambda p: _build(cls, H * 2 * T, H, T, p),
        MultiHeadAttention(H * 2 * T, H, T, dropout=P),
        _forward,
        H,
        T,
        _("your MultiHeadAttention"),
    )
    for module, reference, x, n_heads in probed:
        _check_return_weights(module, reference, x, n_heads)
    _check_weights_before_dropout(
        lambda p: _build(cls, H * 2 * T, H, T, p),
        MultiHeadAttention(H * 2 * T, H, T, dropout=P),
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
        q_, k_, v_ = module.W_q(x), module.W_k(x), module.W_v(x)  # 3 x (B, T, D)
        on_values = q_, k_, module.W_o(v_), x  # W_o before the heads attend
        projected = {"W_o": (q_, k_, v_, x), "on_values": on_values, "twice": on_values}
    bias = module.W_o.bias

    def split_heads(t, split):
        return {
            "transpose": lambda: t.view(B, T, H, d).transpose(1, 2),  # (B, H, T, d)
            "view": lambda: t.view(B, H, T, d),  # the rows of several positions
            "strided": lambda: t.view(B, T, d, H).permute(0, 3, 1, 2),  # every H-th feature
            "swapped": lambda: t.view(B, T, d, H).transpose(1, 2),  # d heads of width H
            "none": lambda: t,  # one head of width D
        }[split]()

    def compute(split, merge, out_proj, **head):
        if split == "none" and merge != "transpose":
            raise ValueError("nothing to merge")
        q, k, v, xs = (split_heads(t, split) for t in projected.get(out_proj, projected["W_o"]))
        context = attend(q, k, v, x=xs, d=d, n_heads=H, d_model=D, **head)  # (B, H, T, d)
        if split == "none":
            merged = context  # (B, T, D)
        elif merge == "transpose":
            merged = context.transpose(1, 2).reshape(B, T, D)  # (B, T, D)
        elif merge == "strided":
            merged = context.permute(0, 2, 3, 1).reshape(B, T, D)  # back every H-th
        else:
            merged = context.reshape(B, T, D)  # heads' rows laid end to end
        if out_proj in ("none", "on_values"):  # "twice": W_o on the values and here
            return merged
        out = module.W_o(merged)  # (B, T, D)
        if out_proj == "bias_per_head":
            if bias is None:
                raise ValueError("no bias")
            out = out + (H - 1) * bias
        return out

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
            Option(
                "strided",
                _(
                    "the heads were split with view(B, T, d_head, H): head h gets every H-th "
                    "feature, not its own block of d_head features"
                ),
                _(
                    "view(B, T, H, d_head).transpose(1, 2): head h owns the features "
                    "h * d_head to (h + 1) * d_head"
                ),
            ),
            Option(
                "swapped",
                _(
                    "the heads were split with view(B, T, d_head, H): that makes d_head = {d} "
                    "heads of width {H}, not n_heads = {H} heads of width {d}"
                ).format(d=d, H=H),
                _("view(B, T, H, d_head): the head axis comes before the head's width"),
            ),
            Option(
                "none",
                _("the heads were never split: one head of width d_model attends for all of them"),
                _("split q, k and v into heads: view(B, T, H, d_head).transpose(1, 2)"),
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
            Option(
                "strided",
                _(
                    "merged with permute(0, 2, 3, 1): each head's features land every H-th, "
                    "not side by side"
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
            Option(
                "bias_per_head",
                _(
                    "W_o's bias is added once per head ({H} times): W_o was applied to each "
                    "head's slice and the results summed"
                ).format(H=H),
                _("apply W_o once, to the merged heads: out = self.W_o(merged)"),
            ),
            Option(
                "on_values",
                _("W_o is applied to the values before the heads attend, not to the merged heads"),
                _("end with out = self.W_o(merged): W_o mixes what the heads found"),
            ),
            Option(
                "twice",
                _(
                    "W_o is applied twice: to the values before the heads attend, and to the "
                    "merged heads"
                ),
                _("apply W_o once, to the merged heads: out = self.W_o(merged)"),
            ),
        ],
        "scale": scale_options(d, D, "d_model", T=T, n_heads=H),
        "scores": scores_options(),
        "softmax": softmax_options(heads=True),
        "mask": mask_options(causal=True),
        "values": values_options(),
        "product": product_options(),
        "output": output_options(),
    }
    name_the_mistake(out, steps, compute, where)


__all__ = [
    "check_causal_attention_class",
    "check_multi_head_class",
    "check_single_head_class",
]
