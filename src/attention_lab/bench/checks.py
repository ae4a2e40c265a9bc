"""The gates of ``make bench``: nothing is timed until it gives the reference output and is causal.

A fast implementation that is wrong is worse than a slow one; an inverted boolean mask
(ours: True = blocked; SDPA's: True = may attend) gives plausible numbers at full speed.
``tests/library/test_bench.py`` proves such a block is rejected by both gates.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from ..fused import MultiHeadSelfAttention


class ImplementationCheckError(AssertionError):
    """An implementation gave a wrong output or let a position see its future."""


def check_matches_reference(
    name: str,
    module: nn.Module,
    ref: MultiHeadSelfAttention,
    x: torch.Tensor,
    expected: torch.Tensor | None = None,
) -> None:
    """``module(x)`` must equal the explicit maths of the reference block (``expected``,
    if given, is that output computed once for many modules)."""
    with torch.no_grad():
        if expected is None:
            expected = ref(x, return_weights=True)[0]  # (B, T, D)
        out = module(x)  # (B, T, D)
    try:
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
    except AssertionError as error:
        raise ImplementationCheckError(
            f"{name} does not give the reference output: {str(error).splitlines()[1:3]}"
        ) from None


def check_causal(name: str, module: nn.Module, x: torch.Tensor) -> None:
    """Changing the tokens from position t0 on must leave every output before t0 unchanged
    (and must change the output at t0, so the check cannot pass on a module that ignores x)."""
    T = x.shape[1]
    t0 = T // 2
    changed = x.clone()  # (B, T, D)
    changed[:, t0:] = torch.randn_like(changed[:, t0:])
    with torch.no_grad():
        before = module(x)  # (B, T, D)
        after = module(changed)  # (B, T, D)
    if not torch.isfinite(before).all():
        raise ImplementationCheckError(f"{name} gives NaN or inf outputs")
    leak = (after[:, :t0] - before[:, :t0]).abs().max().item()
    if leak > 1e-5:
        raise ImplementationCheckError(
            f"{name} is not causal: changing tokens {t0}.. moved earlier outputs by {leak:.3g}"
        )
    if torch.allclose(after[:, t0], before[:, t0]):
        raise ImplementationCheckError(f"{name} ignores its input at position {t0}")


def check_all(impls: dict[str, nn.Module], ref: MultiHeadSelfAttention, x: torch.Tensor) -> None:
    """Every module gives the reference output on the whole batch ``x`` and is causal
    (checked on its first two sequences, which is as strict and four times cheaper)."""
    with torch.no_grad():
        expected = ref(x, return_weights=True)[0]  # (B, T, D)
    for name, module in impls.items():
        check_matches_reference(name, module, ref, x, expected)
        check_causal(name, module, x[:2])
