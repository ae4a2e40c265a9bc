"""Lesson 03 · scaling (notebooks/03_scaling.ipynb): measure the variance of the scores from
samples, then predict it for queries and keys whose entries do not have variance 1 (as a
freshly initialised ``nn.Linear`` makes them)."""

from __future__ import annotations

import math

import torch

from ..i18n import N_, _
from .core import Wrong, call, checker

# --- exercise 3.1: measure Var(q·k) and Var(q·k / √d_head) -----------------------------------


def _pair(answer, what: str) -> tuple[float, float]:
    parts = answer if isinstance(answer, (tuple, list)) else [answer]
    big = [t for t in parts if isinstance(t, torch.Tensor) and t.numel() > 1]
    if big or (isinstance(answer, torch.Tensor) and answer.numel() > 2):
        answer = big[0] if big else answer
        raise Wrong(
            _("{what}: your function returned a tensor of shape {shape}, not two numbers").format(
                what=what, shape=tuple(answer.shape)
            ),
            _("one score per pair: (q * k).sum(dim=-1) is (N,); its .var() is one number"),
        )
    if not (isinstance(answer, (tuple, list)) and len(answer) == 2):
        raise Wrong(
            _("{what}: your function returned a {type}, not two numbers").format(
                what=what, type=type(answer).__name__
            ),
            _("return raw_variance, scaled_variance"),
        )
    try:
        return float(answer[0]), float(answer[1])
    except (TypeError, ValueError, RuntimeError):
        raise Wrong(
            _("{what}: the two values are not numbers").format(what=what),
            _("turn a one-number tensor into a float with .item()"),
        ) from None


@checker("03", N_("return two floats: the variance of q·k and of q·k / √d_head"))
def check_score_variances(fn) -> str:
    """``fn(q, k) -> (var_raw, var_scaled)``: q, k are (N, d_head) samples, row n is one pair;
    the scores are q_n · k_n, the scaled scores q_n · k_n / √d_head."""
    measured = {}
    for N, d_head, scale in ((500, 4, 1.0), (300, 16, 0.5), (4000, 64, 1.0), (200, 1, 2.0)):
        q = torch.randn(N, d_head) * scale  # (N, d_head)
        k = torch.randn(N, d_head)  # (N, d_head)
        raw = (q.double() * k.double()).sum(dim=-1)  # (N,)
        want = (raw.var().item(), (raw / math.sqrt(d_head)).var().item())
        got = _pair(
            call(fn, q.clone(), k.clone()),
            _("for N={N}, d_head={d_head}").format(N=N, d_head=d_head),
        )
        if all(math.isclose(g, w, rel_tol=1e-3) for g, w in zip(got, want)):
            if d_head == 64:
                measured = dict(zip(("raw", "scaled"), got))
            continue
        where = _("for {N} pairs of width d_head={d_head}").format(N=N, d_head=d_head)
        g_raw, g_scaled = got
        if math.isclose(g_raw, math.sqrt(want[0]), rel_tol=1e-3):
            raise Wrong(
                _("{where} you return {got:.3g}: that is the standard deviation").format(
                    where=where, got=g_raw
                ),
                _("the variance is the square of the standard deviation: use .var(), not .std()"),
            )
        all_pairs = (q.double() @ k.double().T).var().item()  # every q against every k
        if math.isclose(g_raw, all_pairs, rel_tol=1e-3) and N > 1:
            raise Wrong(
                _("{where} you scored every query against every key ({N} x {N} scores)").format(
                    where=where, N=N
                ),
                _("a pair is one row of q with the same row of k: (q * k).sum(dim=-1)"),
            )
        if math.isclose(g_raw, want[0], rel_tol=1e-3):
            if math.isclose(g_scaled, want[0] / d_head**2, rel_tol=1e-3) and d_head > 1:
                raise Wrong(
                    _("{where} the scaled variance is divided by d_head² = {square}").format(
                        where=where, square=d_head**2
                    ),
                    _("divide the scores by √d_head, not by d_head"),
                )
            if math.isclose(g_scaled, want[0] / math.sqrt(d_head), rel_tol=1e-3) and d_head > 1:
                raise Wrong(
                    _("{where} you divided the variance by √d_head").format(where=where),
                    _(
                        "scale the scores, then take their variance: a constant c multiplies a "
                        "variance by c²"
                    ),
                )
            raise Wrong(
                _(
                    "{where} the raw variance is right ({raw:.3g}), the scaled one is not "
                    "({scaled:.3g}, expected {want:.3g})"
                ).format(where=where, raw=g_raw, scaled=g_scaled, want=want[1]),
                _("scaled scores: (q * k).sum(dim=-1) / math.sqrt(d_head), then .var()"),
            )
        raise Wrong(
            _("{where} you measure {got:.3g}; the variance of the scores is {want:.3g}").format(
                where=where, got=g_raw, want=want[0]
            ),
            _("score each pair, (q * k).sum(dim=-1) of shape (N,), then take .var()"),
        )
    return _(
        "on 4000 pairs at d_head=64 your function measures Var(q·k) = {raw:.1f} "
        "and {scaled:.2f} scaled (section 1 predicts 64 and 1)"
    ).format(raw=measured["raw"], scaled=measured["scaled"])


# --- exercise 3.2: predict the variance when q and k do not have variance 1 ------------------


@checker("03", N_("return a number computed from d_head, var_q, var_k and scaled"))
def check_projected_score_variance(fn) -> str:
    """``fn(d_head, var_q, var_k, scaled) -> float``: Var(q·k) (or of q·k / √d_head) when q and
    k are independent, with independent entries of mean 0 and variances var_q and var_k."""
    for d_head, var_q, var_k in ((16, 1.0, 1.0), (64, 1 / 3, 1 / 3), (8, 2.0, 0.5), (4, 4.0, 1.0)):
        for scaled in (False, True):
            want = var_q * var_k * (1 if scaled else d_head)
            answer = call(fn, d_head, var_q, var_k, scaled)
            try:
                got = float(answer)
            except (TypeError, ValueError, RuntimeError):
                raise Wrong(
                    _("your function returned a {type}, not a number").format(
                        type=type(answer).__name__
                    ),
                    _("return a float: a formula, no sampling"),
                ) from None
            if math.isclose(got, want, rel_tol=1e-6):
                continue
            if scaled:
                case = _("d_head={d_head}, var_q={var_q:.3g}, var_k={var_k:.3g}, scaled")
            else:
                case = _("d_head={d_head}, var_q={var_q:.3g}, var_k={var_k:.3g}, not scaled")
            case = case.format(d_head=d_head, var_q=var_q, var_k=var_k)
            base = 1 if scaled else d_head
            if math.isclose(got, (var_q + var_k) * base, rel_tol=1e-6) and var_q * var_k != (
                var_q + var_k
            ):
                raise Wrong(
                    _("for {case} you predict {got:.4g}: you added the variances").format(
                        case=case, got=got
                    ),
                    _("for independent q_m and k_m of mean 0, Var(q_m k_m) = Var(q_m) · Var(k_m)"),
                )
            if math.isclose(got, base, rel_tol=1e-6):
                raise Wrong(
                    _("for {case} you predict {got:.4g}, as if every entry had variance 1").format(
                        case=case, got=got
                    ),
                    _("each product q_m k_m now has variance var_q · var_k"),
                )
            if math.isclose(got, math.sqrt(var_q * var_k) * base, rel_tol=1e-6):
                raise Wrong(
                    _(
                        "for {case} you predict {got:.4g}: the product of standard deviations"
                    ).format(case=case, got=got),
                    _("Var(q_m k_m) = Var(q_m) · Var(k_m) when both have mean 0"),
                )
            raise Wrong(
                _("for {case} you predict {got:.4g}; the maths gives {want:.4g}").format(
                    case=case, got=got, want=want
                ),
                _(
                    "d_head independent terms, each of variance var_q · var_k; dividing the score "
                    "by √d_head divides the variance by d_head"
                ),
            )
    return _(
        "Var(q·k / √d_head) = var_q · var_k: with entries of variance 1/3, as a fresh "
        "nn.Linear gives, that is {value:.3f}, not 1"
    ).format(value=1 / 9)
