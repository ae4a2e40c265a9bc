"""Lesson 04 · the causal mask (notebooks/04_causal_mask.ipynb): a causality test of your own
(does an attention function let the future in?), and the sliding-window mask."""

from __future__ import annotations

import torch

from ..i18n import N_, _
from ..masks import causal_mask, sliding_window_mask
from .core import Wrong, answer_tensor, call, checker

# --- exercise 4.1: a test that catches a look into the future --------------------------------


def _attention_fn(blocked: torch.Tensor | None, D: int, leak: float = 0.0):
    """One fixed attention head over (B, T, D) inputs, masked by ``blocked`` (True = blocked);
    ``leak`` adds that much of the mean of all positions, the future included."""
    g = torch.Generator().manual_seed(D)
    W_q, W_k, W_v = (torch.randn(D, D, generator=g) / D**0.5 for _ in range(3))

    def attend(x):
        q, k, v = x @ W_q, x @ W_k, x @ W_v  # (B, T, D) each
        scores = q @ k.transpose(-2, -1) / D**0.5  # (B, T, T)
        if blocked is not None:
            T = x.shape[1]
            scores = scores.masked_fill(blocked[:T, :T], float("-inf"))  # (B, T, T)
        out = torch.softmax(scores, dim=-1) @ v  # (B, T, D)
        return out + leak * x.mean(dim=1, keepdim=True) if leak else out

    return attend


def _cases(T: int, D: int):
    """(name, attention function, does it look ahead?); the names are keys, ``_(name)`` the
    words the learner reads."""
    ones = torch.ones(T, T, dtype=torch.bool)
    last_to_first = causal_mask(T).clone()
    last_to_first[0, T - 1] = False  # query 0 may read the last key, nothing else leaks
    first_to_second = causal_mask(T).clone()
    first_to_second[0, 1] = False  # query 0 may read key 1: the last token changes nothing
    return [
        (N_("a correctly masked head"), _attention_fn(causal_mask(T), D), False),
        (N_("a head with no mask"), _attention_fn(None, D), True),
        (
            N_("a head that sees one step ahead"),
            _attention_fn(torch.triu(ones, diagonal=2), D),
            True,
        ),
        (N_("a head whose first query reads the last key"), _attention_fn(last_to_first, D), True),
        (N_("a head whose first query reads key 1"), _attention_fn(first_to_second, D), True),
        (
            N_("a causal head plus the mean of all positions"),
            _attention_fn(causal_mask(T), D, 0.5),
            True,
        ),
        (
            N_("a head that sees only itself"),
            _attention_fn(~torch.eye(T, dtype=torch.bool), D),
            False,
        ),
    ]


@checker("04", N_("return True or False: does some output change when a later token changes?"))
def check_looks_ahead(fn) -> str:
    """``fn(attend, x) -> bool``: ``attend`` maps x (B, T, D) to outputs (B, T, D); True if
    changing the token at some position j changes an output at a position i < j."""
    B, T, D = 2, 6, 8
    x = torch.randn(B, T, D)  # (B, T, D)
    for name, attend, leaks in _cases(T, D):
        answer = call(fn, attend, x.clone())
        if isinstance(answer, torch.Tensor) and answer.numel() == 1:
            answer = bool(answer)
        if not isinstance(answer, bool):
            raise Wrong(
                _("for {name} your function returned a {type}, not True or False").format(
                    name=_(name), type=type(answer).__name__
                ),
                _("return one bool, e.g. `return False` after the loop found nothing"),
            )
        if answer == leaks:
            continue
        if leaks:
            if name == "a head whose first query reads key 1":
                how = _("change every position j in turn, not only the last one")
            elif name == "a head whose first query reads the last key":
                how = _(
                    "compare every output before j, out[:, :j], not only the one just before it"
                )
            else:
                how = _("change one token j at a time and compare the outputs at i < j")
            raise Wrong(_("your test lets {name} pass as causal").format(name=_(name)), how)
        raise Wrong(
            _("your test flags {name}, which cannot see the future").format(name=_(name)),
            _(
                "the output at the changed position j itself may change; compare only "
                "out[:, :j], the positions before j"
            ),
        )
    return _("your test catches five kinds of leak and passes both causal heads")


# --- exercise 4.2: the sliding-window mask --------------------------------------------------


@checker("04", N_("return torch.triu(...) | torch.tril(...) as a (T, T) bool tensor"))
def check_sliding_mask(fn) -> str:
    """``fn(T, window) -> (T, T) bool``, True = blocked; checked against sliding_window_mask."""
    for T, window in ((12, 8), (10, 3), (6, 1), (5, 8), (8, 8)):
        got = answer_tensor(
            call(fn, T, window),
            _("the mask for T={T}, window={window}").format(T=T, window=window),
            (T, T),
        )
        want = sliding_window_mask(T, window)  # (T, T)
        if got.dtype != torch.bool:
            raise Wrong(
                _("the mask has dtype {dtype}, but masks are torch.bool (True = blocked)").format(
                    dtype=got.dtype
                ),
                _("build it from a bool tensor, or finish with .bool()"),
            )
        if torch.equal(got, want):
            continue
        where = _("with T={T}, window={window}").format(T=T, window=window)
        if torch.equal(got, ~want):
            raise Wrong(
                _(
                    "{where}, your mask is the exact opposite: it blocks the positions a token "
                    "may see and lets the future through"
                ).format(where=where),
                _(
                    "True means blocked: the future (torch.triu(..., diagonal=1)) and everything "
                    "`window` or more steps back (torch.tril(..., diagonal=-window))"
                ),
            )
        future = causal_mask(T)
        if not got[future].all():
            raise Wrong(
                _("{where}, some future positions are not blocked").format(where=where),
                _("every j > i must be True: torch.triu(ones, diagonal=1)"),
            )
        if got.diagonal().any():
            raise Wrong(
                _("{where}, the diagonal is blocked: a position cannot see itself").format(
                    where=where
                ),
                _("the diagonal must stay False; check the diagonal= offsets"),
            )
        seen, expected = (~got).sum(-1), (~want).sum(-1)  # (T,), (T,)
        row = int((seen != expected).nonzero()[0])
        raise Wrong(
            _(
                "{where}, row {row} sees {seen} positions; it should see "
                "{expected} (itself and the {before} before it)"
            ).format(
                where=where,
                row=row,
                seen=int(seen[row]),
                expected=int(expected[row]),
                before=window - 1,
            ),
            _("the old positions are j <= i - window: torch.tril(ones, diagonal=-window)"),
        )
    return _("equal to attention_lab.sliding_window_mask for 5 sizes, window >= T included")
