"""Checkers for the exercises (notebooks/exercises.ipynb; solutions in exercises_solutions.ipynb).

Each exercise asks for a function; its check cell hands that function to a checker here::

    check_sliding_mask(sliding_mask)

The checker calls it on several inputs, compares the answers with a reference computed
independently (the library, or a different formulation of the same maths) and prints a
short verdict:

* ``✅ passed: ...``
* ``❌ not yet: what is wrong`` followed by ``hint: how to fix it``
* ``⏳ not attempted yet: ...`` while the function still raises ``NotImplementedError``

A checker never raises: an exception inside your function becomes a message naming it.
It returns a ``Verdict`` (truthy when passed) that Jupyter does not display, so the
printed lines are the whole output. The checkers run on their own random numbers and
leave the global random state as they found it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from .fused import MultiHeadSelfAttention
from .heads import CausalAttention
from .masks import causal_mask, sliding_window_mask
from .multihead import MultiHeadAttention, merge_heads

__all__ = [
    "Verdict",
    "check_einsum_attention",
    "check_fuse_qkv",
    "check_mask_then_softmax",
    "check_mha_from_causal",
    "check_padded_causal_mask",
    "check_previous_token_share",
    "check_param_count",
    "check_score_variance",
    "check_sliding_mask",
    "check_softmax_then_renormalise",
    "check_split_heads",
    "check_tril_then_softmax",
]

PASSED, FAILED, NOT_ATTEMPTED = "passed", "not yet", "not attempted yet"
_MARKS = {PASSED: "✅", FAILED: "❌", NOT_ATTEMPTED: "⏳"}


@dataclass
class Verdict:
    """What a checker found. ``bool(verdict)`` is True when the answer passed."""

    status: str  # "passed", "not yet" or "not attempted yet"
    message: str
    hint: str = ""

    def __bool__(self) -> bool:
        return self.status == PASSED

    def __str__(self) -> str:
        text = f"{_MARKS[self.status]} {self.status}: {self.message}"
        return f"{text}\n   hint: {self.hint}" if self.hint else text

    def _ipython_display_(self) -> None:
        """Show nothing when a cell ends with a check: the checker has printed already."""


# --- machinery --------------------------------------------------------------------------


class _NotAttempted(Exception):
    """The learner's function still raises NotImplementedError."""


class _LearnerError(Exception):
    """The learner's function raised; ``.error`` holds what it raised."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


class _Wrong(Exception):
    """The answer is wrong: ``message`` says what, ``hint`` says how to fix it."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.message, self.hint = message, hint


def _call(fn: Callable, *args, **kwargs) -> Any:
    """Call the learner's function, sorting its exceptions into 'not attempted' and 'raised'."""
    try:
        return fn(*args, **kwargs)
    except NotImplementedError as error:
        raise _NotAttempted from error
    except Exception as error:  # noqa: BLE001 - any learner error becomes a message
        raise _LearnerError(error) from error


def _short(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    first = text[0] if text else ""
    return first if len(first) <= 160 else first[:157] + "..."


def _name(fn: Any) -> str:
    return getattr(fn, "__name__", "your function")


def _checker(error_hint: str):
    """Turn ``grade(fn, ...) -> pass message`` into a checker that prints a Verdict."""

    def wrap(grade: Callable[..., str]) -> Callable[..., Verdict]:
        @functools.wraps(grade)
        def check(fn, *args, **kwargs) -> Verdict:
            verdict = _grade(grade, error_hint, fn, *args, **kwargs)
            print(f"{verdict}\n", end="", flush=True)  # one write: one stream output
            return verdict

        return check

    return wrap


def _grade(grade, error_hint: str, fn, *args, **kwargs) -> Verdict:
    name = _name(fn)
    if not callable(fn):
        return Verdict(
            FAILED,
            f"the checker needs your function itself, but got a {type(fn).__name__}",
            "pass the function's name without calling it, e.g. check_x(my_function)",
        )
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(1234)
            return Verdict(PASSED, grade(fn, *args, **kwargs))
    except _NotAttempted:
        return Verdict(
            NOT_ATTEMPTED, f"`{name}` still raises NotImplementedError; replace it with your code"
        )
    except _Wrong as wrong:
        return Verdict(FAILED, wrong.message, wrong.hint)
    except _LearnerError as raised:
        error = raised.error
        return Verdict(
            FAILED, f"`{name}` raised {type(error).__name__}: {_short(error)}", error_hint
        )
    except Exception as error:  # noqa: BLE001 - a checker never raises
        return Verdict(
            FAILED,
            f"your answer could not be checked ({type(error).__name__}: {_short(error)})",
            error_hint,
        )


def _tensor(value: Any, what: str, shape: tuple[int, ...] | None = None) -> torch.Tensor:
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], torch.Tensor):
        raise _Wrong(
            f"{what} should be one tensor, but your function returned a pair",
            "return only the tensor the exercise asks for",
        )
    if not isinstance(value, torch.Tensor):
        raise _Wrong(
            f"{what} should be a torch.Tensor, but your function returned a {type(value).__name__}",
            "did you forget the `return` line?" if value is None else "return a tensor",
        )
    if shape is not None and tuple(value.shape) != tuple(shape):
        raise _Wrong(
            f"{what}: the shape is {tuple(value.shape)}, expected {tuple(shape)}",
            "print the shape after each line to see where it changes",
        )
    return value


def _close(a: torch.Tensor, b: torch.Tensor, atol: float = 1e-5) -> bool:
    if a.shape != b.shape:
        return False
    return torch.allclose(
        a.detach().double(), b.detach().double(), atol=atol, rtol=1e-4, equal_nan=True
    )


def _masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The reference: add a float mask of -inf (a different formulation from masked_fill)."""
    minus_inf = torch.zeros(mask.shape, dtype=scores.dtype).masked_fill(mask, float("-inf"))
    return torch.softmax(scores + minus_inf, dim=-1)  # (..., T, T)


def _diagnose_causal_weights(got: torch.Tensor, scores: torch.Tensor, what: str) -> None:
    """Raise _Wrong with the most specific diagnosis of wrong causal attention weights."""
    T = scores.shape[-1]
    future = causal_mask(T)  # (T, T), True above the diagonal
    past = torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)
    w = got.detach().nan_to_num(0.0)
    future_mass = w.masked_select(future.expand_as(w)).abs().max().item() if T > 1 else 0.0
    past_mass = w.masked_select(past.expand_as(w)).abs().max().item() if T > 1 else 0.0
    if future_mass > 1e-6 and past_mass < 1e-6:
        raise _Wrong(
            f"{what}: your mask blocks the past and lets the future through",
            "True means blocked, and the future is above the diagonal: "
            "torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)",
        )
    if torch.isnan(got).any():
        raise _Wrong(
            f"{what} have NaN in some rows: every key of those rows was blocked",
            "block only the future, j > i, with torch.triu(..., diagonal=1); the diagonal "
            "(a position looking at itself) must stay open",
        )
    if _close(w, torch.softmax(scores.masked_fill(future, 0.0), dim=-1)):
        raise _Wrong(
            f"{what} give the future a weight of up to {future_mass:.2f}: the future scores "
            "were set to 0, not to -inf",
            "exp(0) = 1, so a zero score still gets weight; use "
            "scores.masked_fill(mask, float('-inf'))",
        )
    if _close(w, torch.softmax(scores, dim=-1)):
        raise _Wrong(
            f"{what} are a plain softmax: nothing was masked",
            "apply the causal mask before the softmax",
        )
    if future_mass > 1e-6:
        raise _Wrong(
            f"{what} give the future a weight of up to {future_mass:.2f}; it must be exactly 0",
            "every weight above the diagonal (key j > query i) must be 0",
        )
    sums = w.sum(dim=-1)
    if not torch.allclose(sums, torch.ones_like(sums), atol=1e-4):
        raise _Wrong(
            f"{what}: the rows sum to values between {sums.min().item():.2f} and "
            f"{sums.max().item():.2f}, not to 1",
            "each row is a weighted average over keys: softmax over dim=-1, or divide each "
            "row by its sum (keepdim=True)",
        )


def _example_scores(*shape: int, scale: float = 2.0) -> torch.Tensor:
    return torch.randn(*shape) * scale


# --- exercise 1: mask then softmax, or tril then softmax? ----------------------------------


@_checker("take `scores` of shape (..., T, T) and return weights of the same shape")
def check_mask_then_softmax(fn) -> str:
    """``fn(scores) -> weights``: the causal softmax, masking the future with -inf first."""
    for shape in ((6, 6), (2, 5, 5), (2, 3, 4, 4), (1, 1)):
        scores = _example_scores(*shape)
        got = _tensor(_call(fn, scores.clone()), "the weights", shape)
        want = _masked_softmax(scores, causal_mask(shape[-1]))  # (..., T, T)
        if not _close(got, want):
            _diagnose_causal_weights(got, scores, "the weights")
            raise _Wrong(
                f"for scores of shape {shape} the weights differ from mask-then-softmax by up "
                f"to {(got - want).abs().max().item():.3f}",
                "mask with -inf first, then softmax over the last dimension",
            )
    return "the future gets weight exactly 0 and every row sums to 1"


@_checker("take `scores` of shape (..., T, T) and return weights of the same shape")
def check_tril_then_softmax(fn) -> str:
    """``fn(scores) -> weights``: the shortcut of the exercise, tril of the scores then softmax."""
    worst = 0.0
    for shape in ((6, 6), (2, 5, 5)):
        scores = _example_scores(*shape)
        got = _tensor(_call(fn, scores.clone()), "the weights", shape)
        T = shape[-1]
        want = torch.softmax(scores.masked_fill(causal_mask(T), 0.0), dim=-1)  # (..., T, T)
        if _close(got, _masked_softmax(scores, causal_mask(T))):
            raise _Wrong(
                "this is the correct mask-then-softmax; this function is the shortcut to test",
                "keep the lower triangle with torch.tril(scores), then softmax it, no -inf",
            )
        if not _close(got, want):
            raise _Wrong(
                f"for scores of shape {shape} your weights are not softmax(tril(scores)); "
                f"they differ by up to {(got - want).abs().max().item():.3f}",
                "torch.tril keeps j <= i and writes 0 above the diagonal; then softmax over dim=-1",
            )
        worst = max(worst, got.masked_select(causal_mask(T).expand_as(got)).max().item())
    return (
        "this is the shortcut, and it is not causal: a future key still gets up to "
        f"{worst:.2f} of a row's weight"
    )


@_checker("take `scores` of shape (..., T, T) and return weights of the same shape")
def check_softmax_then_renormalise(fn) -> str:
    """``fn(scores) -> weights``: softmax over all keys, zero the future, renormalise."""
    for shape in ((6, 6), (2, 5, 5), (2, 3, 4, 4)):
        scores = _example_scores(*shape)
        got = _tensor(_call(fn, scores.clone()), "the weights", shape)
        T = shape[-1]
        want = _masked_softmax(scores, causal_mask(T))  # (..., T, T)
        if not _close(got, want):
            unnormalised = torch.softmax(scores, -1).masked_fill(causal_mask(T), 0.0)
            if _close(got, unnormalised):
                raise _Wrong(
                    "the future is zeroed, but the rows no longer sum to 1 "
                    f"(row 0 sums to {got.reshape(-1, T, T)[0, 0].sum().item():.2f})",
                    "divide each row by its sum: w / w.sum(dim=-1, keepdim=True)",
                )
            _diagnose_causal_weights(got, scores, "the weights")
            raise _Wrong(
                f"the weights differ from mask-then-softmax by up to "
                f"{(got - want).abs().max().item():.3f}",
                "softmax over dim=-1, then masked_fill(mask, 0.0), then divide by the row sums",
            )
    return "softmax, zero the future, renormalise: equal to mask-then-softmax"


# --- exercise 2: MultiHeadAttention with one head is CausalAttention -------------------------


@_checker("build MultiHeadAttention(d_model, 1, context_length) and copy the weights into it")
def check_mha_from_causal(fn) -> str:
    """``fn(ca: CausalAttention) -> MultiHeadAttention`` computing the same function."""
    for d, ctx, T in ((8, 6, 6), (16, 10, 7)):
        ca = CausalAttention(d, d, ctx).eval()
        x = torch.randn(2, T, d)  # (B, T, d)
        with torch.no_grad():
            want = ca(x)  # (B, T, d)
        mha = _call(fn, ca)
        if not isinstance(mha, MultiHeadAttention):
            raise _Wrong(
                f"your function returned a {type(mha).__name__}, not a MultiHeadAttention",
                "return the MultiHeadAttention you built",
            )
        if mha.n_heads != 1:
            raise _Wrong(
                f"your MultiHeadAttention has n_heads={mha.n_heads}",
                "the exercise compares one head with CausalAttention: n_heads=1",
            )
        mha.eval()
        with torch.no_grad():
            got = _tensor(_call(mha, x), "the output", tuple(want.shape))  # (B, T, d)
        if _close(got, want):
            continue
        pairs = ((mha.W_q, ca.W_q), (mha.W_k, ca.W_k), (mha.W_v, ca.W_v))
        if any(_close(m.weight, c.weight.T) and d > 1 for m, c in pairs):
            raise _Wrong(
                "some copied weights are transposed",
                "nn.Linear stores its weight as (out_features, in_features) in both classes: "
                "copy it as it is, m.weight.copy_(c.weight)",
            )
        if all(_close(m.weight, c.weight) for m, c in pairs):
            raise _Wrong(
                "W_q, W_k and W_v are copied, yet the outputs differ: same shape "
                f"{tuple(got.shape)}, values apart by up to {(got - want).abs().max().item():.2f}",
                "MultiHeadAttention also has an output projection W_o (with a bias) that "
                "CausalAttention lacks: set W_o.weight to the identity and W_o.bias to zero",
            )
        raise _Wrong(
            "the outputs have the same shape but different values",
            "copy W_q, W_k and W_v one by one under torch.no_grad(), and make W_o the identity",
        )
    return "same shape and same values as CausalAttention: one head with W_o = identity is it"


# --- exercise 3: the sliding-window mask --------------------------------------------------


@_checker("return torch.triu(...) | torch.tril(...) as a (T, T) bool tensor")
def check_sliding_mask(fn) -> str:
    """``fn(T, window) -> (T, T) bool``, True = blocked; checked against sliding_window_mask."""
    for T, window in ((12, 8), (10, 3), (6, 1), (5, 8), (8, 8)):
        got = _tensor(_call(fn, T, window), f"the mask for T={T}, window={window}", (T, T))
        want = sliding_window_mask(T, window)  # (T, T)
        if got.dtype != torch.bool:
            raise _Wrong(
                f"the mask has dtype {got.dtype}, but masks are torch.bool (True = blocked)",
                "build it from a bool tensor, or finish with .bool()",
            )
        if torch.equal(got, want):
            continue
        where = f"with T={T}, window={window}"
        if torch.equal(got, ~want):
            raise _Wrong(
                f"{where}, your mask is the exact opposite: it blocks the positions a token may "
                "see and lets the future through",
                "True means blocked: the future (torch.triu(..., diagonal=1)) and everything "
                "`window` or more steps back (torch.tril(..., diagonal=-window))",
            )
        future = causal_mask(T)
        if not got[future].all():
            raise _Wrong(
                f"{where}, some future positions are not blocked",
                "every j > i must be True: torch.triu(ones, diagonal=1)",
            )
        if got.diagonal().any():
            raise _Wrong(
                f"{where}, the diagonal is blocked: a position cannot see itself",
                "the diagonal must stay False; check the diagonal= offsets",
            )
        seen, expected = (~got).sum(-1), (~want).sum(-1)  # (T,), (T,)
        row = int((seen != expected).nonzero()[0])
        raise _Wrong(
            f"{where}, row {row} sees {int(seen[row])} positions; it should see "
            f"{int(expected[row])} (itself and the {window - 1} before it)",
            "the old positions are j <= i - window: torch.tril(ones, diagonal=-window)",
        )
    return "equal to attention_lab.sliding_window_mask for 5 sizes, window >= T included"


# --- exercise 4: 4 -> 8 heads at d_model 32: how much does each head look back? -----------


@_checker("return a (H,) tensor: one number per head")
def check_previous_token_share(fn) -> str:
    """``fn(weights (B, H, T, T)) -> (H,)``: the mean weight query i puts on key i - 1."""
    for B, H, T in ((2, 4, 6), (3, 8, 12), (1, 1, 3)):
        scores = _example_scores(B, H, T, T)
        weights = _masked_softmax(scores, causal_mask(T))  # (B, H, T, T)
        got = _call(fn, weights.clone())
        if isinstance(got, torch.Tensor) and got.dim() == 0:
            raise _Wrong(
                "you returned one number; the exercise wants one per head",
                "average over the batch and the positions only: .mean(dim=(0, -1))",
            )
        got = _tensor(got, f"the share for weights of shape {(B, H, T, T)}", (H,))
        rows = range(1, T)
        want = torch.stack([weights[:, :, i, i - 1] for i in rows], -1).mean(dim=(0, 2))  # (H,)
        if _close(got, want, 1e-5):
            continue
        for offset, why in ((0, "each query looking at itself"), (1, "key i + 1, the future")):
            other = weights.diagonal(offset=offset, dim1=-2, dim2=-1).mean(dim=(0, 2))  # (H,)
            if _close(got, other, 1e-5):
                raise _Wrong(
                    f"you read the diagonal with offset={offset}: that is {why}",
                    "the previous token of query i is key i - 1: diagonal(offset=-1, "
                    "dim1=-2, dim2=-1)",
                )
        raise _Wrong(
            f"with weights of shape {(B, H, T, T)} your shares differ by up to "
            f"{(got - want).abs().max().item():.3f}",
            "take weights.diagonal(offset=-1, dim1=-2, dim2=-1), (B, H, T - 1), then average "
            "over the batch and the positions",
        )
    return "one number per head: the mean weight on the previous token"


# --- exercise 5: predict the variance of q·k -------------------------------------------------


@_checker("return a number: the variance you predict for these d_head and scaled")
def check_score_variance(fn) -> str:
    """``fn(d_head, scaled) -> float``: Var(q·k) for q, k with independent N(0, 1) entries."""
    for d_head in (1, 4, 16, 64):
        for scaled in (False, True):
            want = 1.0 if scaled else float(d_head)
            answer = _call(fn, d_head, scaled)
            try:
                got = float(answer)
            except (TypeError, ValueError):
                raise _Wrong(
                    f"for d_head={d_head} your function returned a {type(answer).__name__}, "
                    "not a number",
                    "return a float (or an int)",
                ) from None
            if math.isclose(got, want, rel_tol=1e-6):
                continue
            case = f"d_head={d_head}, {'scaled' if scaled else 'not scaled'}"
            if math.isclose(got, math.sqrt(want), rel_tol=1e-6) and d_head > 1:
                raise _Wrong(
                    f"for {case} you predict {got:g}: that is the standard deviation",
                    "the variance of a sum of d_head independent terms, each of variance 1, "
                    "is d_head",
                )
            if scaled and math.isclose(got, 1 / math.sqrt(d_head), rel_tol=1e-6):
                raise _Wrong(
                    f"for {case} you predict {got:g}",
                    "dividing by √d_head divides the variance by (√d_head)² = d_head",
                )
            raise _Wrong(
                f"for {case} you predict {got:g}; the measurement says otherwise",
                "each product q_i·k_i has mean 0 and variance 1, and the d_head products are "
                "independent; a constant c multiplies a variance by c²",
            )
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 20_000, 64, generator=g)  # (N, 64) each
    measured = (q * k).sum(-1).var().item()
    return f"Var(q·k) = d_head, and 1 after scaling (measured at d_head=64: {measured:.0f})"


# --- exercise 6: attention with torch.einsum -------------------------------------------------


@_checker("return (context, weights) from q, k, v of shape (B, H, T, d_head)")
def check_einsum_attention(fn) -> str:
    """``fn(q, k, v, mask=None) -> (context, weights)``; against F.scaled_dot_product_attention."""
    B, H, T, d = 2, 3, 5, 8
    for kind in ("none", "causal", "sliding"):
        q, k, v = torch.randn(3, B, H, T, d)  # (B, H, T, d_head) each
        mask = {"none": None, "causal": causal_mask(T), "sliding": sliding_window_mask(T, 2)}[kind]
        result = _call(fn, q, k, v, mask)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise _Wrong(
                f"your function returned a {type(result).__name__}, not (context, weights)",
                "return context, weights",
            )
        context = _tensor(result[0], "context", (B, H, T, d))
        weights = _tensor(result[1], "weights", (B, H, T, T))
        sdpa_mask = None if mask is None else ~mask  # SDPA: True = may attend
        want_ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=sdpa_mask)  # (B, H, T, d)
        scores = torch.matmul(q, k.transpose(-2, -1))  # (B, H, T, T), unscaled
        blocked = torch.zeros(T, T, dtype=torch.bool) if mask is None else mask
        want_w = _masked_softmax(scores / math.sqrt(d), blocked)  # (B, H, T, T)
        if _close(weights, want_w, 1e-5) and _close(context, want_ctx, 1e-5):
            continue
        where = f"with mask={kind}"
        if _close(weights, _masked_softmax(scores, blocked)):
            raise _Wrong(
                f"{where}, the scores are not scaled",
                f"divide q·k by √d_head (here √{d}) before the softmax",
            )
        if _close(weights, _masked_softmax(scores / d, blocked)):
            raise _Wrong(
                f"{where}, the scores are divided by d_head", "divide by √d_head, not d_head"
            )
        if _close(weights, _masked_softmax(scores.transpose(-2, -1) / math.sqrt(d), blocked)):
            raise _Wrong(
                f"{where}, the scores are transposed: keys on the rows, queries on the columns",
                "the query index comes first: torch.einsum('bhqd,bhkd->bhqk', q, k)",
            )
        if mask is not None:
            if _close(weights, _masked_softmax(scores / math.sqrt(d), ~mask)):
                raise _Wrong(
                    f"{where}, your mask blocks the past and lets the future through",
                    "True means blocked: masked_fill(mask, float('-inf'))",
                )
            if _close(weights, _masked_softmax(scores / math.sqrt(d), torch.zeros_like(mask))):
                raise _Wrong(f"{where}, the mask was ignored", "apply it before the softmax")
        if not _close(weights, want_w, 1e-5):
            raise _Wrong(
                f"{where}, the weights differ from the reference by up to "
                f"{(weights - want_w).abs().max().item():.3f}",
                "softmax over the keys, dim=-1",
            )
        raise _Wrong(
            f"{where}, the weights are right but the context is not",
            "context = torch.einsum('bhqk,bhkd->bhqd', weights, v)",
        )
    return "equal to F.scaled_dot_product_attention, with no mask, causal and sliding masks"


# --- exercise 7: split the heads -------------------------------------------------------


@_checker("return x reshaped to (B, n_heads, T, d_head)")
def check_split_heads(fn) -> str:
    """``fn(x, n_heads) -> (B, H, T, d_head)``; head h owns features h*d_head:(h+1)*d_head."""
    for B, T, D, H in ((2, 5, 12, 3), (1, 4, 8, 2), (3, 6, 16, 4)):
        x = torch.randn(B, T, D)  # (B, T, D)
        d_head = D // H
        got = _call(fn, x, H)
        if isinstance(got, torch.Tensor) and tuple(got.shape) == (B, T, H, d_head):
            raise _Wrong(
                f"the shape is (B, T, H, d_head) = {tuple(got.shape)}: the heads are not "
                "next to the batch yet",
                "finish with .transpose(1, 2) to get (B, H, T, d_head)",
            )
        got = _tensor(got, "the result", (B, H, T, d_head))
        want = torch.stack(x.chunk(H, dim=-1), dim=1)  # (B, H, T, d_head)
        if torch.equal(got, want):
            if not torch.equal(merge_heads(got), x):
                raise _Wrong("merging your heads does not give x back", "use view and transpose")
            continue
        if torch.equal(got, x.reshape(B, H, T, d_head)):
            raise _Wrong(
                "right shape, scrambled values: the heads are transposed wrongly; viewing "
                "(B, T, D) straight as (B, H, T, d_head) mixes time steps into the heads",
                "view as (B, T, H, d_head) first, then .transpose(1, 2)",
            )
        if torch.equal(got, x.reshape(B, T, d_head, H).permute(0, 3, 1, 2)):
            raise _Wrong(
                "each head takes every H-th feature; a head must own one contiguous slice",
                "view as (B, T, H, d_head): head h gets features h*d_head:(h+1)*d_head",
            )
        raise _Wrong(
            f"with B={B}, T={T}, D={D}, H={H} the values are not where they belong",
            "result[b, h, t] must equal x[b, t, h*d_head:(h+1)*d_head]",
        )
    return "head h holds features h*d_head:(h+1)*d_head of every time step"


# --- exercise 8: pack W_q, W_k, W_v into one fused weight ------------------------------------


@_checker("return one (3D, D) tensor built from the three (D, D) weights")
def check_fuse_qkv(fn) -> str:
    """``fn(w_q, w_k, w_v) -> (3D, D)``: the fused block then matches MultiHeadAttention."""
    D, H, T = 16, 4, 6
    separate = MultiHeadAttention(D, H, T).eval()
    ws = [layer.weight.detach().clone() for layer in (separate.W_q, separate.W_k, separate.W_v)]
    fused = _call(fn, *[w.clone() for w in ws])
    if isinstance(fused, torch.Tensor) and tuple(fused.shape) == (D, 3 * D):
        raise _Wrong(
            f"the fused weight is ({D}, {3 * D}), expected ({3 * D}, {D})",
            "nn.Linear weights are (out_features, in_features): stack the three along the "
            "rows, torch.cat([...], dim=0)",
        )
    fused = _tensor(fused, "the fused weight", (3 * D, D))
    blocks = fused.detach().split(D, dim=0)  # 3 x (D, D)
    names = ("Q", "K", "V")
    order = [next((n for n, w in zip(names, ws) if torch.equal(b, w)), "?") for b in blocks]
    if order != list(names) and "?" not in order:
        raise _Wrong(
            f"the blocks are in the order {', '.join(order)}",
            "qkv(x).split(D, dim=-1) reads Q first, then K, then V",
        )
    if all(torch.equal(b, w.T) for b, w in zip(blocks, ws)):
        raise _Wrong("each block is transposed", "concatenate the weights as they are, no .T")
    block = MultiHeadSelfAttention(D, H, T).eval()
    with torch.no_grad():
        block.qkv.weight.copy_(fused)
        block.qkv.bias.zero_()
        block.out_proj.weight.copy_(separate.W_o.weight)
        block.out_proj.bias.copy_(separate.W_o.bias)
        x = torch.randn(2, T, D)  # (B, T, D)
        same = _close(block(x), separate(x))
    if not same:
        raise _Wrong(
            "the fused block does not compute what the three layers compute",
            "rows [0:D] make Q, rows [D:2D] make K, rows [2D:3D] make V",
        )
    return "the fused block gives the same output as the three separate layers"


# --- exercise 9: count the parameters ------------------------------------------------------


@_checker("return an int computed from d_model (and bias)")
def check_param_count(fn) -> str:
    """``fn(d_model, n_heads, bias) -> int``: the parameters of MultiHeadSelfAttention."""
    gpt2 = {}
    for D, H, bias in ((768, 12, True), (768, 12, False), (32, 4, True), (48, 3, False)):
        block = MultiHeadSelfAttention(D, H, context_length=4, bias=bias)
        want = sum(p.numel() for p in block.parameters())
        answer = _call(fn, D, H, bias)
        try:
            got = int(answer)
        except (TypeError, ValueError):
            raise _Wrong(
                f"your function returned a {type(answer).__name__}, not a number",
                "return an int such as 4 * d_model**2",
            ) from None
        if got == want:
            if D == 768:
                gpt2[bias] = got
            continue
        case = f"d_model={D}, n_heads={H}, bias={bias}"
        if bias and got == 4 * D * D:
            hint = "you left out the biases: qkv has 3D of them, out_proj has D"
        elif not bias and got == 4 * D * D + 4 * D:
            hint = "with bias=False neither layer has a bias"
        elif got in (3 * D * D, 3 * D * D + 3 * D * bias):
            hint = "you left out the output projection out_proj, a (D, D) layer"
        elif got == want * H or got * H == want:
            hint = "the heads split D among themselves; they add no parameters"
        else:
            hint = "two layers: qkv = Linear(D, 3D) and out_proj = Linear(D, D)"
        raise _Wrong(f"for {case} you count {got:,}; the block has {want:,}", hint)
    return (
        f"GPT-2 size (d_model 768, 12 heads): {gpt2[True]:,} with biases, {gpt2[False]:,} without"
    )


# --- exercise 10: padding mask combined with the causal mask --------------------------------


def _reference_padded_mask(lengths: list[int], T: int) -> torch.Tensor:
    """Loop version: left padding; key j is blocked if j > i, or if j is padding and j != i."""
    want = torch.zeros(len(lengths), 1, T, T, dtype=torch.bool)
    for b, n in enumerate(lengths):
        first_real = T - n
        for i in range(T):
            for j in range(T):
                want[b, 0, i, j] = j > i or (j < first_real and j != i)
    return want


@_checker("return a (B, 1, T, T) bool tensor, True = blocked")
def check_padded_causal_mask(fn) -> str:
    """``fn(lengths, T) -> (B, 1, T, T)`` for left-padded rows (padding first, then lengths[b]
    real tokens): key j is blocked if it is in the future (j > i) or padding (j < T - lengths[b]),
    except that every position may see itself, so no row is blocked entirely."""
    for lengths, T in (([5, 3, 1], 5), ([4, 4], 4), ([2, 6, 3], 6)):
        B = len(lengths)
        got = _call(fn, torch.tensor(lengths), T)
        if isinstance(got, torch.Tensor) and tuple(got.shape) == (B, T, T):
            raise _Wrong(
                f"the mask is (B, T, T) = {tuple(got.shape)}; it must broadcast over heads",
                "add a head axis: mask[:, None] gives (B, 1, T, T)",
            )
        got = _tensor(got, "the mask", (B, 1, T, T))
        if got.dtype != torch.bool:
            raise _Wrong(f"the mask has dtype {got.dtype}", "masks are torch.bool, True = blocked")
        want = _reference_padded_mask(lengths, T)  # (B, 1, T, T)
        if torch.equal(got, want):
            continue
        where = f"with lengths={lengths}, T={T}"
        j = torch.arange(T)  # (T,)
        future = causal_mask(T)  # (T, T)
        eye = torch.eye(T, dtype=torch.bool)  # (T, T)
        left = j[None, :] < T - torch.tensor(lengths)[:, None]  # (B, T), padding keys
        right = j[None, :] >= torch.tensor(lengths)[:, None]  # (B, T), padding at the end
        if torch.equal(got, ~want):
            raise _Wrong(
                f"{where}, your mask blocks exactly what should be seen",
                "True means blocked: future keys and padding keys",
            )
        if torch.equal(got, (future | left[:, None, :])[:, None]):
            raise _Wrong(
                f"{where}, rows made only of padding have every key blocked: their softmax "
                "would be NaN",
                "let every position see itself: (future | padding) & ~torch.eye(T, dtype=bool)",
            )
        if torch.equal(got[:, 0], (future | (right[:, None, :] & ~eye))) or torch.equal(
            got[:, 0], future | right[:, None, :]
        ):
            raise _Wrong(
                f"{where}, you blocked padding at the end of each row",
                "the padding is on the left: positions j < T - lengths[b]",
            )
        if torch.equal(got[:, 0], future & left[:, None, :]):
            raise _Wrong(
                f"{where}, a key is blocked only when it is both in the future and padding",
                "either reason is enough: combine the two masks with |, not &",
            )
        if torch.equal(got[:, 0], (future | left[:, :, None]) & ~eye):
            raise _Wrong(
                f"{where}, the padding blocks query rows, not key columns",
                "padding must be invisible as a key: padding[:, None, :] (B, 1, T) blocks columns",
            )
        if torch.equal(got[:, 0], future.expand(B, T, T)):
            raise _Wrong(
                f"{where}, only the future is blocked: real tokens still read the padding",
                "also block keys j < T - lengths[b]",
            )
        raise _Wrong(
            f"{where}, the mask differs from the expected one in {int((got != want).sum())} places",
            "blocked = ((j > i) | (j < T - lengths[b])) & (j != i), built with broadcasting",
        )
    return "future keys and padding keys are blocked, and no row is blocked entirely"
