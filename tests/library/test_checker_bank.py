"""A bank of wrong answers to the skeleton exercises of notebooks 02, 05 and 06, run through their
checkers (issue 40, item 6c).

The bank was written from the notebooks' skeleton and solution cells alone, before reading the
checkers, as the edits a learner makes to the right answer: each mistake is a list of
replacements applied to the solution's source (``SOLUTIONS``), so the line a learner got wrong is
the line the bank shows. Each replacement must match the stated number of times, so an entry
cannot silently stop applying when the solution text changes.

Then the checkers were read and extended: ``NAMED`` holds the words of the verdict's first line
that name each mistake (or its family, where two mistakes give the same numbers), ``FIRST_RUN``
what the checkers said before (33 "differs by up to x", 6 passed), ``LATER`` the few entries added
afterwards to reach the fallbacks. ``RIGHT`` holds other right answers, which must pass.

``python tests/library/test_checker_bank.py`` prints every entry with the first line of its verdict.
"""

from __future__ import annotations

import contextlib
import io
import linecache
import math
from dataclasses import dataclass

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from attention_lab import causal_mask
from attention_lab.exercises._summary import FAILED, PASSED
from attention_lab.exercises.modules import (
    check_causal_attention_class,
    check_multi_head_class,
    check_single_head_class,
)
from tests.library.test_exercises_zh import (
    english_words,  # the Chinese edition's test of English words
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
    (default 1). ``family`` groups the bank: mask, mode (dropout, train and eval), axes (and
    scaling), shape, return. The words each verdict must hold are in ``NAMED`` below."""

    lesson: str
    name: str
    family: str
    edits: tuple = ()

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


def M(lesson, name, family, *edits):
    return Mistake(lesson, name, family, tuple(edits))


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
    return str(verdict).splitlines()[0]


def test_bank_ids_are_unique():
    ids = [m.id for m in BANK + RIGHT]
    assert len(ids) == len(set(ids))


# --- after reading the checkers ------------------------------------------------------------
# Entries added afterwards, to reach what no blind entry reaches: the options "W_o on the
# values only" and the family messages when no variant explains the output (rows that do not
# sum to 1, seen through V = the identity).
LATER = [
    M(
        "06",
        "W_o-on-values-only",
        "axes",
        ("v = self.W_v(x)", "v = self.W_o(self.W_v(x))"),
        ("out = self.W_o(merged)", "out = merged"),
    ),
    M(
        "02",
        "manual-softmax-sums-everything",
        "axes",
        ("torch.softmax(scores, dim=-1)", "scores.exp() / scores.exp().sum()"),
    ),
    M(
        "05",
        "manual-softmax-sums-everything",
        "axes",
        ("torch.softmax(scores, dim=-1)", "scores.exp() / scores.exp().sum()"),
    ),
    M(
        "06",
        "manual-softmax-sums-everything",
        "axes",
        ("torch.softmax(scores, dim=-1)", "scores.exp() / scores.exp().sum()"),
    ),
]

# The words of the verdict's first line that name each mistake. The first run of the blind bank
# (before the checkers were extended): 69 named, 33 "differs by up to x", 8 the learner's own
# exception, 6 passed (FIRST_RUN).
FAMILY_ROWS = "the weights don't sum to 1 over the keys"
LOOKS_AHEAD = "looks ahead: a new token at position"
NAMED = {
    "02-no-scale": "no scaling",
    "02-scale-sqrt-d_in": "scaled by √d_in = √6 instead of √d_head = √4",
    "02-scale-d_head-no-sqrt": "divided by d_head = 8, not by √d_head",
    "02-scale-precedence": "divided by 16, not by √d_head: ** binds tighter than /",
    "02-scale-sqrt-T": "scaled by √T = √5, the number of positions",
    "02-scale-twice": "divided by d_head = 8, not by √d_head",  # √d twice is d
    "02-scale-multiplied": "multiplied by √d_head instead of divided",
    "02-scale-torch-sqrt-int": "raised TypeError: sqrt(): argument 'input'",
    "02-scale-after-softmax": "divided by √d_head after the softmax",
    "02-softmax-dim-2": "softmax over the wrong axis (queries instead of keys)",
    "02-softmax-dim1": "softmax over the wrong axis (queries instead of keys)",
    "02-softmax-dim0": "softmax over dim=0, the batch",
    "02-no-softmax": "no softmax",
    "02-log-softmax": "log_softmax instead of softmax",
    "02-sigmoid": "sigmoid instead of softmax",
    "02-manual-softmax-no-keepdim": "raised RuntimeError: The size of tensor a",
    "02-keys-queries-swapped": "the scores are K @ Qᵀ, not Q @ Kᵀ",
    "02-layers-q-k-swapped": "the scores are K @ Qᵀ, not Q @ Kᵀ (or q and k come from each other's",
    "02-k-from-W_q": "the keys come from W_q",
    "02-v-from-W_k": "used the head's K where V belongs",
    "02-v-is-x": "the values are x itself",
    "02-k-dot-T": "raised RuntimeError: The size of tensor a",
    "02-weights-transposed": "the output is weightsᵀ @ v",
    "02-returns-weights": "returned the weights (2, 5, 5)",
    "02-returns-tuple": "returned a tuple",
    "02-output-scaled": "the output is divided by √d_head",
    "02-causal-mask-in-02": "your head masks the future",
    "02-batch-mixed": "the sequences of the batch attend to each other",
    "05-triu-diagonal-0": "the mask also blocks the diagonal",
    "05-triu-diagonal-2": "the mask lets each position see the next one (triu with diagonal=2)",
    "05-tril-as-blocked": "the causal mask is inverted (~self.mask, or tril where triu belongs)",
    "05-tril-strict-as-blocked": "the mask blocks the past and lets the future through",
    "05-mask-transposed": "the mask blocks the past and lets the future through",
    "05-mask-inverted": "the causal mask is inverted",
    "05-float-mask-in-masked_fill": "raised RuntimeError: masked_fill_ only supports boolean",
    "05-mask-not-sliced": "the mask was not sliced to (T, T)",
    "05-mask-rows-only-sliced": "the mask was not sliced to (T, T)",
    "05-mask-not-assigned": "forgot the causal mask (or masked_fill's result was never assigned)",
    "05-no-mask": "forgot the causal mask",
    "05-fill-zero": "set to 0, not to -inf",
    "05-fill-tiny-negative": "set to 0, not to -inf",  # -1e-9 is 0 to the softmax
    "05-fill-plus-inf": "the future scores are +inf, not -inf",
    "05-mask-after-softmax": "zeroed after the softmax",
    "05-tril-multiplied-after-softmax": "zeroed after the softmax",
    "05-bool-mask-added": "the bool mask was added to the scores",
    "05-float-mask-subtracted": "+inf, not -inf (masked_fill with +inf, or a -inf mask subtracted)",
    "05-large-mask-wrong-sign": LOOKS_AHEAD,  # depends on the constant: the family message
    "05-dropout-on-scores": "dropout was applied to the scores",
    "05-dropout-on-masked-scores": "dropout was applied to the scores",
    "05-dropout-on-output": "dropout acts on the output or on the values",
    "05-dropout-on-values": "dropout acts on the output or on the values",
    "05-dropout-on-input": "dropout changed the weights themselves, so it acted before",
    "05-no-dropout": "dropout never applied",
    "05-F-dropout-default-training": "dropout active in eval mode",
    "05-dropout-in-eval": "dropout active in eval mode",
    "05-dropout-module-made-in-forward": "dropout active in eval mode",
    "05-dropout-p-hardcoded": "dropout used p = 0.1, not the module's p = 0.25",
    "05-manual-dropout-no-rescale": "dropout not rescaled",
    "05-manual-dropout-keeps-p": "75% of the weights are dropped, not p = 25%",
    "05-manual-dropout-divides-by-p": "the survivors are divided by p",
    "05-manual-dropout-also-in-eval": "dropout active in eval mode",
    "05-dropout-then-renormalised": "renormalised after dropout",
    "05-dropout-twice": "dropout is applied twice",
    "05-returns-dropped-weights": "return_weights hands back the weights after dropout",
    "05-ignores-return_weights": "returned one tensor, (2, 6, 4), not the pair (out, weights)",
    "05-always-returns-tuple": "returned a tuple",
    "05-returns-weights-first": "returned (weights, out): the output comes first",
    "05-returns-scores": "returned the scores, before the softmax, not the weights",
    "05-softmax-dim-2": "softmax over the wrong axis (queries instead of keys)",
    "05-softmax-dim1": "softmax over the wrong axis (queries instead of keys)",
    "05-softmax-dim0": "softmax over dim=0, the batch",
    "05-no-scale": "no scaling",
    "05-scale-sqrt-d_in": "scaled by √d_in = √8 instead of √d_head = √4",
    "05-scale-d_head-no-sqrt": "divided by d_head = 4, not by √d_head",
    "05-scale-precedence": "divided by 8, not by √d_head: ** binds tighter than /",
    "05-scale-sqrt-T": "scaled by √T = √6, the number of positions",
    "05-scale-twice": "divided by d_head = 4, not by √d_head",
    "05-scale-after-softmax": "divided by √d_head after the softmax",
    "05-keys-queries-swapped": "the scores are K @ Qᵀ, not Q @ Kᵀ",
    "05-k-from-W_q": "the keys come from W_q",
    "05-v-from-W_k": "used the head's K where V belongs",
    "05-weights-transposed": "the output is weightsᵀ @ v",
    "05-manual-softmax-no-keepdim": "raised RuntimeError: The size of tensor a",
    "06-split-view-BHTd": "split with view(B, H, T, d_head), no transpose",
    "06-split-and-merge-plain-view": "split with view(B, H, T, d_head), no transpose",
    "06-merge-without-transpose": "merged the heads without transposing back",
    "06-merge-view-not-contiguous": "view failed on a tensor that is not contiguous",
    "06-split-strided-both-ways": "head h gets every H-th feature",
    "06-split-strided": "head h gets every H-th feature",
    "06-split-H-d_head-swapped": "that makes d_head = 4 heads of width 3, not n_heads = 3",
    "06-split-transpose-2-3": "raised RuntimeError: The size of tensor a",
    "06-keys-transposed-1-2": "raised RuntimeError: The size of tensor a",
    "06-heads-not-split": "the heads were never split",
    "06-scale-sqrt-D": "scaled by √d_model = √12 instead of √d_head = √4",
    "06-no-scale": "no scaling",
    "06-scale-sqrt-H": "scaled by √n_heads = √3 instead of √d_head = √4",
    "06-softmax-over-heads": "softmax over dim=1, the heads",
    "06-softmax-dim-2": "softmax over the wrong axis (queries instead of keys)",
    "06-keys-queries-swapped": "the scores are K @ Qᵀ, not Q @ Kᵀ",
    "06-v-from-W_k": "used the head's K where V belongs",
    "06-no-W_o": "out_proj missing",
    "06-W_o-per-head-bias-each": "W_o's bias is added once per head (3 times)",
    "06-W_o-on-values": "W_o is applied twice",
    "06-mask-not-assigned": "forgot the causal mask",
    "06-triu-diagonal-0": "the mask also blocks the diagonal",
    "06-tril-as-blocked": "the mask blocks the past and lets the future through",
    "06-fill-zero": "set to 0, not to -inf",
    "06-mask-not-sliced": "the mask was not sliced to (T, T)",
    "06-mask-after-softmax": "zeroed after the softmax",
    "06-no-dropout": "dropout never applied",
    "06-dropout-on-output": "dropout acts on the output or on the values",
    "06-dropout-on-context": "dropout acts on the output or on the values",
    "06-dropout-on-scores": "dropout was applied to the scores",
    "06-F-dropout-default-training": "dropout active in eval mode",
    "06-returns-head-average": "returned the weights averaged over the heads, (2, 5, 5)",
    "06-ignores-return_weights": "returned one tensor, (2, 5, 12), not the pair (out, weights)",
    # LATER
    "06-W_o-on-values-only": "W_o is applied to the values before the heads attend, not to",
    "02-manual-softmax-sums-everything": FAMILY_ROWS,
    "05-manual-softmax-sums-everything": FAMILY_ROWS,
    "06-manual-softmax-sums-everything": FAMILY_ROWS,
}
# The learner's own exception, shown as PyTorch words it (no variant can be computed from it).
RAISES = {m for m, words in NAMED.items() if words.startswith("raised ")}

# What the checkers said on the blind bank's first run, before they were extended.
FIRST_RUN = {
    "differs by up to": {
        "02-scale-precedence",
        "02-scale-sqrt-T",
        "02-softmax-dim0",
        "02-log-softmax",
        "02-sigmoid",
        "02-keys-queries-swapped",
        "02-layers-q-k-swapped",
        "02-k-from-W_q",
        "02-v-is-x",
        "02-weights-transposed",
        "02-output-scaled",
        "02-causal-mask-in-02",
        "02-batch-mixed",
        "05-triu-diagonal-2",
        "05-fill-plus-inf",
        "05-bool-mask-added",
        "05-float-mask-subtracted",
        "05-large-mask-wrong-sign",
        "05-softmax-dim0",
        "05-scale-precedence",
        "05-scale-sqrt-T",
        "05-keys-queries-swapped",
        "05-k-from-W_q",
        "05-weights-transposed",
        "06-split-strided-both-ways",
        "06-split-strided",
        "06-split-H-d_head-swapped",
        "06-heads-not-split",
        "06-scale-sqrt-H",
        "06-softmax-over-heads",
        "06-keys-queries-swapped",
        "06-W_o-per-head-bias-each",
        "06-W_o-on-values",
    },
    "raised": {  # the learner's own exception
        "02-scale-torch-sqrt-int",
        "02-manual-softmax-no-keepdim",
        "02-k-dot-T",
        "05-float-mask-in-masked_fill",
        "05-manual-softmax-no-keepdim",
        "06-merge-view-not-contiguous",
        "06-split-transpose-2-3",
        "06-keys-transposed-1-2",
    },
    "passed": {
        "05-returns-dropped-weights",
        "05-ignores-return_weights",
        "05-returns-weights-first",
        "05-returns-scores",
        "06-returns-head-average",
        "06-ignores-return_weights",
    },
}


def test_every_entry_has_its_words_and_the_first_run_adds_up():
    assert sorted(NAMED) == sorted(m.id for m in BANK + LATER)
    assert len(BANK) == 116 and len(FIRST_RUN["differs by up to"]) == 33
    assert len(FIRST_RUN["raised"]) == 8 and len(FIRST_RUN["passed"]) == 6
    assert RAISES == FIRST_RUN["raised"] - {"06-merge-view-not-contiguous"}  # now named


@pytest.mark.parametrize("mistake", BANK + LATER, ids=lambda m: m.id)
def test_a_wrong_answer_is_named_in_the_first_line(mistake):
    verdict = _quiet(mistake)
    line = first_line(verdict)
    assert verdict.status == FAILED, line
    assert NAMED[mistake.id] in line, line
    assert "differs by" not in line, line  # named, not only measured


def test_the_family_message_says_what_to_change():
    """The fallbacks' hints: the softmax's dim for rows that don't sum to 1, the mask for a
    head that looks ahead."""
    by_id = {m.id: m for m in BANK + LATER}
    rows = _quiet(by_id["05-manual-softmax-sums-everything"])
    assert "torch.softmax(scores, dim=-1)" in rows.hint, rows
    ahead = _quiet(by_id["05-large-mask-wrong-sign"])
    assert "block the future with the mask" in ahead.hint, ahead


def test_no_english_sentence_reaches_a_chinese_reader(zh):
    """Every verdict of the bank, in Chinese: message and hint translated."""
    for mistake in BANK + LATER:
        verdict = _quiet(mistake)
        text = f"{verdict.message}\n{verdict.hint}"
        if mistake.id in RAISES:  # PyTorch's own words stay English
            text = verdict.hint
        assert not english_words(text), (mistake.id, text)


@pytest.mark.parametrize("answer", RIGHT, ids=lambda m: m.id)
def test_right_answer_passes(answer):
    verdict = _quiet(answer)
    assert verdict.status == PASSED, first_line(verdict)


if __name__ == "__main__":
    torch.manual_seed(0)
    for m in BANK + LATER + RIGHT:
        print(f"{m.id:40} {first_line(_quiet(m))[:150]}")
