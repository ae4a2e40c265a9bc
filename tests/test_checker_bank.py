"""A bank of wrong answers to the skeleton exercises of notebooks 02, 05 and 06, run through their
checkers (issue 40, item 6c).

The bank was written from the notebooks' skeleton and solution cells alone, before reading the
checkers, as the edits a learner makes to the right answer: each mistake is a list of
replacements applied to the solution's source (``SOLUTIONS``), so the line a learner got wrong is
the line the bank shows. Each replacement must match the stated number of times, so an entry
cannot silently stop applying when the solution text changes.

``python tests/test_checker_bank.py`` prints every mistake with the first line of its verdict.
"""

from __future__ import annotations

import contextlib
import io
import linecache
import math
from dataclasses import dataclass, field

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from attention_lab import causal_mask
from attention_lab.exercises.modules import (
    check_causal_attention_class,
    check_multi_head_class,
    check_single_head_class,
)

# The right answers, as the notebooks' solution cells write them (02 cell 29, 05 cell 9, 06 cell
# 32).
SOLUTIONS = {
    "02": """
class SingleHeadAttention(nn.Module):
    def __init__(self, d_in, d_out):  # d_out is the head width, d_head
        super().__init__()
        self.W_q = nn.Linear(d_in, d_out, bias=False)
        self.W_k = nn.Linear(d_in, d_out, bias=False)
        self.W_v = nn.Linear(d_in, d_out, bias=False)

    def forward(self, x):  # x: (B, T, d_in)
        Q = self.W_q(x)  # (B, T, d_head)
        K = self.W_k(x)  # (B, T, d_head)
        V = self.W_v(x)  # (B, T, d_head)
        scores = Q @ K.transpose(-2, -1)  # (B, T, T)
        scores = scores / K.size(-1) ** 0.5  # (B, T, T)  divide by sqrt(d_head)
        weights = torch.softmax(scores, dim=-1)  # (B, T, T)  each row sums to 1
        return weights @ V  # (B, T, d_head)
""",
    "05": """
class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout=0.0):
        super().__init__()
        self.W_q = nn.Linear(d_in, d_out, bias=False)
        self.W_k = nn.Linear(d_in, d_out, bias=False)
        self.W_v = nn.Linear(d_in, d_out, bias=False)
        self.dropout = nn.Dropout(dropout)
        mask = causal_mask(context_length)  # (ctx, ctx), True = blocked
        self.register_buffer("mask", mask, persistent=False)  # moves with .to(), never saved

    def forward(self, x, return_weights=False):
        B, T, _ = x.shape
        q = self.W_q(x)  # (B, T, d_head)
        k = self.W_k(x)  # (B, T, d_head)
        v = self.W_v(x)  # (B, T, d_head)
        scores = q @ k.transpose(-2, -1) / k.shape[-1] ** 0.5  # (B, T, T)
        scores = scores.masked_fill(self.mask[:T, :T], float("-inf"))  # (B, T, T)
        weights = torch.softmax(scores, dim=-1)  # (B, T, T)
        out = self.dropout(weights) @ v  # (B, T, d_head)
        return (out, weights) if return_weights else out
""",
    "06": """
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, context_length, dropout=0.0):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(
                f"d_model={d_model} is not divisible by n_heads={n_heads}; "
                "pick d_model as a multiple of n_heads"
            )
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        self.W_q, self.W_k, self.W_v = (nn.Linear(d_model, d_model, bias=False) for _ in "qkv")
        self.W_o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", causal_mask(context_length), persistent=False)  # (ctx, ctx)

    def forward(self, x, return_weights=False):
        B, T, D = x.shape
        H, d_head = self.n_heads, self.d_head
        q = self.W_q(x).view(B, T, H, d_head).transpose(1, 2)  # (B, H, T, d_head)
        k = self.W_k(x).view(B, T, H, d_head).transpose(1, 2)  # (B, H, T, d_head)
        v = self.W_v(x).view(B, T, H, d_head).transpose(1, 2)  # (B, H, T, d_head)
        scores = q @ k.transpose(-2, -1) / d_head**0.5  # (B, H, T, T)
        scores = scores.masked_fill(self.mask[:T, :T], float("-inf"))  # (B, H, T, T)
        weights = torch.softmax(scores, dim=-1)  # (B, H, T, T)
        context = self.dropout(weights) @ v  # (B, H, T, d_head)
        merged = context.transpose(1, 2).contiguous().view(B, T, D)  # (B, T, D)
        out = self.W_o(merged)  # (B, T, D)
        return (out, weights) if return_weights else out
""",
}
CLASS_NAMES = {"02": "SingleHeadAttention", "05": "CausalAttention", "06": "MultiHeadAttention"}
CHECKERS = {
    "02": check_single_head_class,
    "05": check_causal_attention_class,
    "06": check_multi_head_class,
}
I8 = "\n        "  # a new line inside forward
# 02-k-dot-T writes K.T on a 3-d tensor, as learners do; torch warns that it is deprecated.
pytestmark = pytest.mark.filterwarnings("ignore:The use of `x.T`:UserWarning")


@dataclass(frozen=True)
class Mistake:
    """A learner's answer: the solution of ``lesson`` with ``edits`` applied.

    Each edit is ``(old, new)`` or ``(old, new, count)``: ``old`` must occur ``count`` times
    (default 1). ``family`` groups the bank (mask, mode, axes, shape, return); ``expect`` is the
    phrase the verdict's first line must hold (``None``: not yet named)."""

    lesson: str
    name: str
    family: str
    edits: tuple = ()
    expect: str | None = None
    note: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def id(self):
        return f"{self.lesson}-{self.name}"

    def source(self):
        src = SOLUTIONS[self.lesson]
        for edit in self.edits:
            old, new, count = (*edit, 1) if len(edit) == 2 else edit
            found = src.count(old)
            assert found == count, f"{self.id}: {old!r} occurs {found} times, not {count}"
            src = src.replace(old, new)
        return src

    def build(self):
        """The learner's class, compiled under a file name of its own (inspect can read it)."""
        src = self.source()
        filename = f"<bank {self.id}>"
        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
        namespace = {"torch": torch, "nn": nn, "F": F, "math": math, "causal_mask": causal_mask}
        exec(compile(src, filename, "exec"), namespace)
        return namespace[CLASS_NAMES[self.lesson]]


def M(lesson, name, family, *edits, expect=None, note=""):
    return Mistake(lesson, name, family, tuple(edits), expect, note)


# Recurring edits of 05's lines.
C_MASK = 'scores = scores.masked_fill(self.mask[:T, :T], float("-inf"))  # (B, T, T)'
C_SOFTMAX = "weights = torch.softmax(scores, dim=-1)  # (B, T, T)"
C_OUT = "out = self.dropout(weights) @ v  # (B, T, d_head)"
C_SCORES = "scores = q @ k.transpose(-2, -1) / k.shape[-1] ** 0.5  # (B, T, T)"
C_RETURN = "return (out, weights) if return_weights else out"
S_SCALE = "scores = scores / K.size(-1) ** 0.5  # (B, T, T)  divide by sqrt(d_head)"
S_SOFTMAX = "weights = torch.softmax(scores, dim=-1)  # (B, T, T)  each row sums to 1"
M_MASK = 'scores = scores.masked_fill(self.mask[:T, :T], float("-inf"))  # (B, H, T, T)'
M_SOFTMAX = "weights = torch.softmax(scores, dim=-1)  # (B, H, T, T)"
M_CONTEXT = "context = self.dropout(weights) @ v  # (B, H, T, d_head)"
M_SPLIT = ".view(B, T, H, d_head).transpose(1, 2)"
M_MERGE = "context.transpose(1, 2).contiguous().view(B, T, D)"

BANK = [
    # ---- 02 SingleHeadAttention ---------------------------------------------------------
    M("02", "no-scale", "axes", (S_SCALE, "pass  # forgot to scale")),
    M("02", "scale-sqrt-d_in", "axes", ("K.size(-1) ** 0.5", "x.size(-1) ** 0.5")),
    M("02", "scale-d_head-no-sqrt", "axes", ("K.size(-1) ** 0.5", "K.size(-1)")),
    M("02", "scale-precedence", "axes", ("K.size(-1) ** 0.5", "K.size(-1) ** 1 / 2")),
    M("02", "scale-sqrt-T", "axes", ("K.size(-1) ** 0.5", "K.size(1) ** 0.5")),
    M(
        "02",
        "scale-twice",
        "axes",
        (S_SCALE, S_SCALE + I8 + "scores = scores / math.sqrt(K.size(-1))"),
    ),
    M("02", "scale-multiplied", "axes", ("scores / K.size(-1)", "scores * K.size(-1)")),
    M("02", "scale-torch-sqrt-int", "shape", ("K.size(-1) ** 0.5", "torch.sqrt(K.size(-1))")),
    M(
        "02",
        "scale-after-softmax",
        "axes",
        (S_SCALE, "pass"),
        ("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-1) / K.size(-1) ** 0.5"),
    ),
    M("02", "softmax-dim-2", "axes", ("dim=-1", "dim=-2")),
    M("02", "softmax-dim1", "axes", ("dim=-1", "dim=1")),
    M("02", "softmax-dim0", "axes", ("dim=-1", "dim=0")),
    M("02", "no-softmax", "axes", ("torch.softmax(scores, dim=-1)", "scores")),
    M("02", "log-softmax", "axes", ("torch.softmax", "torch.log_softmax")),
    M("02", "sigmoid", "axes", ("torch.softmax(scores, dim=-1)", "torch.sigmoid(scores)")),
    M(
        "02",
        "manual-softmax-no-keepdim",
        "axes",
        ("torch.softmax(scores, dim=-1)", "scores.exp() / scores.exp().sum(dim=-1)"),
    ),
    M("02", "keys-queries-swapped", "axes", ("Q @ K.transpose(-2, -1)", "K @ Q.transpose(-2, -1)")),
    M(
        "02",
        "layers-q-k-swapped",
        "axes",
        ("Q = self.W_q(x)", "Q = self.W_k(x)"),
        ("K = self.W_k(x)", "K = self.W_q(x)"),
    ),
    M("02", "k-from-W_q", "axes", ("K = self.W_k(x)", "K = self.W_q(x)")),
    M("02", "v-from-W_k", "axes", ("V = self.W_v(x)", "V = self.W_k(x)")),
    M("02", "v-is-x", "axes", ("V = self.W_v(x)", "V = x")),
    M("02", "k-dot-T", "shape", ("K.transpose(-2, -1)", "K.T")),
    M(
        "02",
        "weights-transposed",
        "axes",
        ("return weights @ V", "return weights.transpose(-2, -1) @ V"),
    ),
    M("02", "returns-weights", "return", ("return weights @ V", "return weights")),
    M("02", "returns-tuple", "return", ("return weights @ V", "return weights @ V, weights")),
    M(
        "02",
        "output-scaled",
        "axes",
        ("return weights @ V", "return weights @ V / K.size(-1) ** 0.5"),
    ),
    M(
        "02",
        "causal-mask-in-02",
        "mask",
        (
            S_SCALE,
            S_SCALE
            + I8
            + "T = x.shape[1]"
            + I8
            + "future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)"
            + I8
            + 'scores = scores.masked_fill(future, float("-inf"))',
        ),
    ),
    M(
        "02",
        "batch-mixed",
        "shape",
        (
            "scores = Q @ K.transpose(-2, -1)  # (B, T, T)",
            "B, T, d = Q.shape"
            + I8
            + "scores = Q.reshape(B * T, d) @ K.reshape(B * T, d).T  # (B*T, B*T): all rows",
        ),
        ("return weights @ V", "return (weights @ V.reshape(B * T, d)).reshape(B, T, d)"),
    ),
    # ---- 05 CausalAttention: masks --------------------------------------------------------
    M(
        "05",
        "triu-diagonal-0",
        "mask",
        ("self.mask[:T, :T]", "torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device))"),
    ),
    M(
        "05",
        "triu-diagonal-2",
        "mask",
        ("self.mask[:T, :T]", "torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=2)"),
    ),
    M(
        "05",
        "tril-as-blocked",
        "mask",
        ("self.mask[:T, :T]", "torch.tril(torch.ones(T, T, dtype=torch.bool))"),
    ),
    M(
        "05",
        "tril-strict-as-blocked",
        "mask",
        ("self.mask[:T, :T]", "torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)"),
    ),
    M("05", "mask-transposed", "mask", ("self.mask[:T, :T]", "self.mask[:T, :T].T")),
    M("05", "mask-inverted", "mask", ("self.mask[:T, :T]", "~self.mask[:T, :T]")),
    M(
        "05",
        "float-mask-in-masked_fill",
        "mask",
        ("self.mask[:T, :T]", "torch.triu(torch.ones(T, T), diagonal=1)"),
    ),
    M("05", "mask-not-sliced", "mask", ("self.mask[:T, :T]", "self.mask")),
    M("05", "mask-rows-only-sliced", "mask", ("self.mask[:T, :T]", "self.mask[:T]")),
    M("05", "mask-not-assigned", "mask", ("scores = scores.masked_fill(", "scores.masked_fill(")),
    M("05", "no-mask", "mask", (C_MASK, "pass  # forgot the mask")),
    M("05", "fill-zero", "mask", ('float("-inf")', "0.0")),
    M("05", "fill-tiny-negative", "mask", ('float("-inf")', "-1e-9")),
    M("05", "fill-plus-inf", "mask", ('float("-inf")', 'float("inf")')),
    M(
        "05",
        "mask-after-softmax",
        "mask",
        (C_MASK, "pass"),
        (C_SOFTMAX, "weights = torch.softmax(scores, dim=-1).masked_fill(self.mask[:T, :T], 0.0)"),
    ),
    M(
        "05",
        "tril-multiplied-after-softmax",
        "mask",
        (C_MASK, "pass"),
        (C_SOFTMAX, "weights = torch.softmax(scores, dim=-1) * torch.tril(torch.ones(T, T))"),
    ),
    M("05", "bool-mask-added", "mask", (C_MASK, "scores = scores + self.mask[:T, :T]")),
    M(
        "05",
        "float-mask-subtracted",
        "mask",
        (
            C_MASK,
            'M = torch.zeros(T, T).masked_fill(self.mask[:T, :T], float("-inf"))  # (T, T)'
            + I8
            + "scores = scores - M",
        ),
    ),
    M(
        "05",
        "large-mask-wrong-sign",
        "mask",
        (C_MASK, "scores = scores + self.mask[:T, :T].float() * 1e9"),
    ),
    # ---- 05: dropout and modes ------------------------------------------------------------
    M(
        "05",
        "dropout-on-scores",
        "mode",
        (C_SCORES, C_SCORES + I8 + "scores = self.dropout(scores)"),
        (C_OUT, "out = weights @ v"),
    ),
    M(
        "05",
        "dropout-on-masked-scores",
        "mode",
        (C_MASK, C_MASK + I8 + "scores = self.dropout(scores)"),
        (C_OUT, "out = weights @ v"),
    ),
    M("05", "dropout-on-output", "mode", (C_OUT, "out = self.dropout(weights @ v)")),
    M("05", "dropout-on-values", "mode", (C_OUT, "out = weights @ self.dropout(v)")),
    M(
        "05",
        "dropout-on-input",
        "mode",
        ("B, T, _ = x.shape", "B, T, _ = x.shape" + I8 + "x = self.dropout(x)"),
        (C_OUT, "out = weights @ v"),
    ),
    M("05", "no-dropout", "mode", (C_OUT, "out = weights @ v")),
    M(
        "05",
        "F-dropout-default-training",
        "mode",
        (C_OUT, "out = F.dropout(weights, self.dropout.p) @ v"),
    ),
    M(
        "05",
        "dropout-in-eval",
        "mode",
        (C_OUT, "out = F.dropout(weights, self.dropout.p, training=True) @ v"),
    ),
    M(
        "05",
        "dropout-module-made-in-forward",
        "mode",
        (C_OUT, "out = nn.Dropout(self.dropout.p)(weights) @ v"),
    ),
    M(
        "05",
        "dropout-p-hardcoded",
        "mode",
        (C_OUT, "out = F.dropout(weights, 0.1, training=self.training) @ v"),
    ),
    M(
        "05",
        "manual-dropout-no-rescale",
        "mode",
        (
            C_OUT,
            "if self.training:"
            + I8
            + "    weights = weights * (torch.rand_like(weights) >= self.dropout.p)"
            + I8
            + "out = weights @ v",
        ),
    ),
    M(
        "05",
        "manual-dropout-keeps-p",
        "mode",
        (
            C_OUT,
            "dropped = weights"
            + I8
            + "if self.training:"
            + I8
            + "    keep = torch.rand_like(weights) < self.dropout.p"
            + I8
            + "    dropped = weights * keep / (1 - self.dropout.p)"
            + I8
            + "out = dropped @ v",
        ),
    ),
    M(
        "05",
        "manual-dropout-divides-by-p",
        "mode",
        (
            C_OUT,
            "dropped = weights"
            + I8
            + "if self.training:"
            + I8
            + "    keep = torch.rand_like(weights) >= self.dropout.p"
            + I8
            + "    dropped = weights * keep / self.dropout.p"
            + I8
            + "out = dropped @ v",
        ),
    ),
    M(
        "05",
        "manual-dropout-also-in-eval",
        "mode",
        (
            C_OUT,
            "keep = torch.rand_like(weights) >= self.dropout.p"
            + I8
            + "out = (weights * keep / (1 - self.dropout.p)) @ v",
        ),
    ),
    M(
        "05",
        "dropout-then-renormalised",
        "mode",
        (
            C_OUT,
            "dropped = self.dropout(weights)"
            + I8
            + "dropped = dropped / dropped.sum(dim=-1, keepdim=True)"
            + I8
            + "out = dropped @ v",
        ),
    ),
    M("05", "dropout-twice", "mode", (C_OUT, "out = self.dropout(self.dropout(weights)) @ v")),
    M(
        "05",
        "returns-dropped-weights",
        "mode",
        (C_OUT, "weights = self.dropout(weights)" + I8 + "out = weights @ v"),
    ),
    # ---- 05: return value -----------------------------------------------------------------
    M("05", "ignores-return_weights", "return", (C_RETURN, "return out")),
    M("05", "always-returns-tuple", "return", (C_RETURN, "return out, weights")),
    M(
        "05",
        "returns-weights-first",
        "return",
        (C_RETURN, "return (weights, out) if return_weights else out"),
    ),
    M(
        "05",
        "returns-scores",
        "return",
        (C_RETURN, "return (out, scores) if return_weights else out"),
    ),
    # ---- 05: axes and scaling -------------------------------------------------------------
    M("05", "softmax-dim-2", "axes", ("dim=-1", "dim=-2")),
    M("05", "softmax-dim1", "axes", ("dim=-1", "dim=1")),
    M("05", "softmax-dim0", "axes", ("dim=-1", "dim=0")),
    M("05", "no-scale", "axes", (" / k.shape[-1] ** 0.5", "")),
    M("05", "scale-sqrt-d_in", "axes", ("k.shape[-1] ** 0.5", "x.shape[-1] ** 0.5")),
    M("05", "scale-d_head-no-sqrt", "axes", ("k.shape[-1] ** 0.5", "k.shape[-1]")),
    M("05", "scale-precedence", "axes", ("k.shape[-1] ** 0.5", "k.shape[-1] ** 1 / 2")),
    M("05", "scale-sqrt-T", "axes", ("k.shape[-1] ** 0.5", "k.shape[1] ** 0.5")),
    M(
        "05",
        "scale-twice",
        "axes",
        (C_SCORES, C_SCORES + I8 + "scores = scores / math.sqrt(k.shape[-1])"),
    ),
    M(
        "05",
        "scale-after-softmax",
        "axes",
        (" / k.shape[-1] ** 0.5", ""),
        ("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-1) / k.shape[-1] ** 0.5"),
    ),
    M("05", "keys-queries-swapped", "axes", ("q @ k.transpose(-2, -1)", "k @ q.transpose(-2, -1)")),
    M("05", "k-from-W_q", "axes", ("k = self.W_k(x)", "k = self.W_q(x)")),
    M("05", "v-from-W_k", "axes", ("v = self.W_v(x)", "v = self.W_k(x)")),
    M(
        "05",
        "weights-transposed",
        "axes",
        (C_OUT, "out = self.dropout(weights).transpose(-2, -1) @ v"),
    ),
    M(
        "05",
        "manual-softmax-no-keepdim",
        "axes",
        ("torch.softmax(scores, dim=-1)", "scores.exp() / scores.exp().sum(dim=-1)"),
    ),
    # ---- 06 MultiHeadAttention: splitting and merging heads ---------------------------------
    M("06", "split-view-BHTd", "shape", (M_SPLIT, ".view(B, H, T, d_head)", 3)),
    M(
        "06",
        "split-and-merge-plain-view",
        "shape",
        (M_SPLIT, ".view(B, H, T, d_head)", 3),
        (M_MERGE, "context.contiguous().view(B, T, D)"),
    ),
    M("06", "merge-without-transpose", "shape", (M_MERGE, "context.reshape(B, T, D)")),
    M(
        "06",
        "merge-view-not-contiguous",
        "shape",
        (M_MERGE, "context.transpose(1, 2).view(B, T, D)"),
    ),
    M(
        "06",
        "split-strided-both-ways",
        "shape",
        (M_SPLIT, ".view(B, T, d_head, H).permute(0, 3, 1, 2)", 3),
        (M_MERGE, "context.permute(0, 2, 3, 1).reshape(B, T, D)"),
    ),
    M("06", "split-strided", "shape", (M_SPLIT, ".view(B, T, d_head, H).permute(0, 3, 1, 2)", 3)),
    M(
        "06",
        "split-H-d_head-swapped",
        "shape",
        (M_SPLIT, ".view(B, T, d_head, H).transpose(1, 2)", 3),
    ),
    M("06", "split-transpose-2-3", "shape", (M_SPLIT, ".view(B, T, H, d_head).transpose(2, 3)", 3)),
    M("06", "keys-transposed-1-2", "shape", ("q @ k.transpose(-2, -1)", "q @ k.transpose(1, 2)")),
    M(
        "06",
        "heads-not-split",
        "shape",
        (M_SPLIT, "", 3),
        (M_MERGE, "context"),
        ("(B, H, T, T)", "(B, T, T)", 3),
    ),
    # ---- 06: scaling and softmax ----------------------------------------------------------
    M("06", "scale-sqrt-D", "axes", ("d_head**0.5", "D**0.5")),
    M("06", "no-scale", "axes", (" / d_head**0.5", "")),
    M("06", "scale-sqrt-H", "axes", ("d_head**0.5", "H**0.5")),
    M("06", "softmax-over-heads", "axes", ("dim=-1", "dim=1")),
    M("06", "softmax-dim-2", "axes", ("dim=-1", "dim=-2")),
    M("06", "keys-queries-swapped", "axes", ("q @ k.transpose(-2, -1)", "k @ q.transpose(-2, -1)")),
    M("06", "v-from-W_k", "axes", ("v = self.W_v(x)", "v = self.W_k(x)")),
    # ---- 06: W_o --------------------------------------------------------------------------
    M("06", "no-W_o", "axes", ("out = self.W_o(merged)", "out = merged")),
    M(
        "06",
        "W_o-per-head-bias-each",
        "axes",
        (
            "out = self.W_o(merged)",
            "W, b = self.W_o.weight, self.W_o.bias"
            + I8
            + "out = sum("
            + I8
            + "    F.linear(context[:, h], W[:, h * d_head : (h + 1) * d_head], b)  # (B, T, D)"
            + I8
            + "    for h in range(H)"
            + I8
            + ")",
        ),
    ),
    M("06", "W_o-on-values", "axes", ("v = self.W_v(x)", "v = self.W_o(self.W_v(x))")),
    # ---- 06: masks ------------------------------------------------------------------------
    M("06", "mask-not-assigned", "mask", ("scores = scores.masked_fill(", "scores.masked_fill(")),
    M(
        "06",
        "triu-diagonal-0",
        "mask",
        ("self.mask[:T, :T]", "torch.triu(torch.ones(T, T, dtype=torch.bool))"),
    ),
    M(
        "06",
        "tril-as-blocked",
        "mask",
        ("self.mask[:T, :T]", "torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)"),
    ),
    M("06", "fill-zero", "mask", ('float("-inf")', "0")),
    M("06", "mask-not-sliced", "mask", ("self.mask[:T, :T]", "self.mask")),
    M(
        "06",
        "mask-after-softmax",
        "mask",
        (M_MASK, "pass"),
        (M_SOFTMAX, "weights = torch.softmax(scores, dim=-1).masked_fill(self.mask[:T, :T], 0)"),
    ),
    # ---- 06: dropout and return -----------------------------------------------------------
    M("06", "no-dropout", "mode", (M_CONTEXT, "context = weights @ v")),
    M(
        "06",
        "dropout-on-output",
        "mode",
        ("out = self.W_o(merged)", "out = self.dropout(self.W_o(merged))"),
    ),
    M("06", "dropout-on-context", "mode", (M_CONTEXT, "context = self.dropout(weights @ v)")),
    M(
        "06",
        "dropout-on-scores",
        "mode",
        (M_MASK, "scores = self.dropout(scores)" + I8 + M_MASK),
        (M_CONTEXT, "context = weights @ v"),
    ),
    M(
        "06",
        "F-dropout-default-training",
        "mode",
        (M_CONTEXT, "context = F.dropout(weights, self.dropout.p) @ v"),
    ),
    M(
        "06",
        "returns-head-average",
        "return",
        (
            "return (out, weights) if return_weights else out",
            "return (out, weights.mean(dim=1)) if return_weights else out",
        ),
    ),
    M(
        "06",
        "ignores-return_weights",
        "return",
        ("return (out, weights) if return_weights else out", "return out"),
    ),
]

# Other right answers: each must pass.
RIGHT = [
    M("02", "solution", "right"),
    M(
        "02",
        "sdpa",
        "right",
        (
            "return weights @ V",
            "return F.scaled_dot_product_attention(Q, K, V)",
        ),
    ),
    M(
        "02",
        "scale-queries-first",
        "right",
        ("Q = self.W_q(x)", "Q = self.W_q(x) / self.W_q.out_features**0.5"),
        (S_SCALE, "pass"),
    ),
    M("02", "einsum", "right", ("Q @ K.transpose(-2, -1)", 'torch.einsum("bid,bjd->bij", Q, K)')),
    M("05", "solution", "right"),
    M("05", "fill-large-negative", "right", ('float("-inf")', "-1e9")),
    M(
        "05",
        "masked_fill-in-place",
        "right",
        ("scores = scores.masked_fill(", "scores.masked_fill_("),
    ),
    M(
        "05",
        "additive-mask",
        "right",
        (
            C_MASK,
            'M = torch.zeros(T, T).masked_fill(self.mask[:T, :T], float("-inf"))  # (T, T)'
            + I8
            + "scores = scores + M  # (B, T, T)",
        ),
    ),
    M(
        "05",
        "F-dropout-training-flag",
        "right",
        (C_OUT, "out = F.dropout(weights, self.dropout.p, training=self.training) @ v"),
    ),
    M(
        "05",
        "manual-dropout",
        "right",
        (
            C_OUT,
            "dropped = weights"
            + I8
            + "if self.training and self.dropout.p > 0:"
            + I8
            + "    keep = torch.rand_like(weights) >= self.dropout.p"
            + I8
            + "    dropped = weights * keep / (1 - self.dropout.p)"
            + I8
            + "out = dropped @ v",
        ),
    ),
    M("05", "mask-bottom-right-slice", "right", ("self.mask[:T, :T]", "self.mask[-T:, -T:]")),
    M("06", "solution", "right"),
    M(
        "06",
        "reshape-permute",
        "right",
        (M_SPLIT, ".reshape(B, T, H, d_head).permute(0, 2, 1, 3)", 3),
    ),
    M("06", "merge-reshape", "right", (M_MERGE, "context.transpose(1, 2).reshape(B, T, D)")),
    M("06", "scale-sqrt-d_head-from-k", "right", ("d_head**0.5", "k.size(-1) ** 0.5")),
]


def _quiet(mistake):
    """The checker's verdict on the learner's class, printing nothing."""
    with contextlib.redirect_stdout(io.StringIO()):
        return CHECKERS[mistake.lesson](mistake.build())


def first_line(verdict):
    return f"{verdict.status}: {verdict.message.splitlines()[0] if verdict.message else ''}"


def test_bank_ids_are_unique():
    ids = [m.id for m in BANK + RIGHT]
    assert len(ids) == len(set(ids))


# Wrong answers the checkers passed when the bank was first run (return_weights is not checked).
PASSED_BEFORE = {
    "05-returns-dropped-weights",
    "05-ignores-return_weights",
    "05-returns-weights-first",
    "05-returns-scores",
    "06-returns-head-average",
    "06-ignores-return_weights",
}


@pytest.mark.parametrize(
    "mistake",
    [
        pytest.param(m, marks=pytest.mark.xfail(strict=True, reason="passed by the checker"))
        if m.id in PASSED_BEFORE
        else m
        for m in BANK
    ],
    ids=lambda m: m.id,
)
def test_wrong_answer_is_not_passed(mistake):
    verdict = _quiet(mistake)
    assert verdict.status != "passed", first_line(verdict)


@pytest.mark.parametrize("answer", RIGHT, ids=lambda m: m.id)
def test_right_answer_passes(answer):
    verdict = _quiet(answer)
    assert verdict.status == "passed", first_line(verdict)


if __name__ == "__main__":
    torch.manual_seed(0)
    for m in BANK + RIGHT:
        print(f"{m.id:40} {first_line(_quiet(m))[:150]}")
