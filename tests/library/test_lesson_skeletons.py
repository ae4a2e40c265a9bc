"""The checkers of the classes a learner completes inside lessons 02, 05 and 06
(``attention_lab.exercises.modules``): each passes the finished class, reports the skeleton as
not attempted, and names the typical mistake with a hint that fixes it."""

from __future__ import annotations

import math

import torch
import torch.nn as nn

import attention_lab as lab
from attention_lab.exercises import modules
from attention_lab.exercises._summary import FAILED, NOT_ATTEMPTED, PASSED


class Head(nn.Module):
    """A single head whose forward is chosen by ``mistake``."""

    mistake = None

    def __init__(self, d_in, d_out, context_length=None, dropout=0.0):
        super().__init__()
        self.W_q = nn.Linear(d_in, d_out, bias=False)
        self.W_k = nn.Linear(d_in, d_out, bias=False)
        self.W_v = nn.Linear(d_in, d_out, bias=False)

    def forward(self, x):
        q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)
        scores = q @ k.transpose(-2, -1)
        T, d = x.shape[1], k.shape[-1]
        blocked = torch.ones(T, T, dtype=torch.bool).triu(1)
        if self.mistake == "skeleton":
            raise NotImplementedError
        if self.mistake == "unscaled":
            return torch.softmax(scores, -1) @ v
        if self.mistake == "no mask":
            return torch.softmax(scores / math.sqrt(d), -1) @ v
        if self.mistake == "zero after":
            w = torch.softmax(scores / math.sqrt(d), -1).masked_fill(blocked, 0.0)
            return w @ v
        if self.mistake == "columns":
            return torch.softmax(scores / math.sqrt(d), -2) @ v
        if self.mistake == "tuple":
            return torch.softmax(scores / math.sqrt(d), -1) @ v, None
        return torch.softmax(scores / math.sqrt(d), -1) @ v  # right, for a head with no mask


def make(mistake):
    return type(f"Head_{mistake}".replace(" ", "_"), (Head,), {"mistake": mistake})


def verdict(check, cls):
    return check(cls, record=False)


def test_the_finished_library_classes_pass():
    assert verdict(modules.check_single_head_class, lab.SingleHeadAttention).status == PASSED
    assert verdict(modules.check_causal_attention_class, lab.CausalAttention).status == PASSED
    assert verdict(modules.check_multi_head_class, lab.MultiHeadAttention).status == PASSED


def test_a_correct_single_head_written_by_hand_passes():
    assert verdict(modules.check_single_head_class, make(None)).status == PASSED


def test_the_skeleton_is_not_attempted_and_nothing_crashes(capsys):
    v = verdict(modules.check_single_head_class, make("skeleton"))
    assert v.status == NOT_ATTEMPTED
    assert "not attempted" in capsys.readouterr().out


def test_an_unscaled_head_is_told_to_divide_by_the_root_of_d_head():
    v = verdict(modules.check_single_head_class, make("unscaled"))
    assert v.status == FAILED and "not scaled" in v.message and "√d_head" in v.hint


def test_a_softmax_over_the_wrong_axis_is_named():
    v = verdict(modules.check_single_head_class, make("columns"))
    assert v.status == FAILED and "column" in v.message and "dim=-1" in v.hint


def test_returning_a_tuple_is_named():
    v = verdict(modules.check_single_head_class, make("tuple"))
    assert v.status == FAILED and "tuple" in v.message


def test_a_causal_head_without_its_mask_leaks_the_future():
    v = verdict(modules.check_causal_attention_class, make("no mask"))
    assert v.status == FAILED and "future leaks" in v.message and "masked_fill" in v.hint


def test_a_causal_head_that_zeroes_after_the_softmax_is_named():
    v = verdict(modules.check_causal_attention_class, make("zero after"))
    assert v.status == FAILED and "after the softmax" in v.message and "-inf" in v.hint


def test_wrong_parameter_names_are_reported():
    class Renamed(nn.Module):
        def __init__(self, d_in, d_out):
            super().__init__()
            self.query = nn.Linear(d_in, d_out, bias=False)

        def forward(self, x):
            return self.query(x)

    v = verdict(modules.check_single_head_class, Renamed)
    assert v.status == FAILED and "W_q" in v.hint


def test_an_instance_instead_of_a_class_is_reported():
    v = verdict(modules.check_single_head_class, lab.SingleHeadAttention(4, 4))
    assert v.status == FAILED and "class" in v.message


class SplitWithoutTranspose(lab.MultiHeadAttention):
    def forward(self, x, return_weights=False):
        B, T, D = x.shape
        H = self.n_heads
        d = D // H
        q, k, v = (W(x).view(B, H, T, d) for W in (self.W_q, self.W_k, self.W_v))
        blocked = torch.ones(T, T, dtype=torch.bool).triu(1)
        scores = (q @ k.transpose(-2, -1) / math.sqrt(d)).masked_fill(blocked, float("-inf"))
        return self.W_o((torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(B, T, D))


class LooksAhead(lab.MultiHeadAttention):
    def forward(self, x, return_weights=False):
        B, T, D = x.shape
        H, d = self.n_heads, self.d_head
        q, k, v = (W(x).view(B, T, H, d).transpose(1, 2) for W in (self.W_q, self.W_k, self.W_v))
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), -1)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, T, D))


def test_a_multi_head_split_without_the_transpose_is_named():
    v = verdict(modules.check_multi_head_class, SplitWithoutTranspose)
    assert v.status == FAILED and "no transpose" in v.message and "transpose(1, 2)" in v.hint


def test_a_multi_head_layer_without_the_mask_fails():
    v = verdict(modules.check_multi_head_class, LooksAhead)
    assert v.status == FAILED


def test_the_checkers_leave_the_global_random_state_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    verdict(modules.check_multi_head_class, lab.MultiHeadAttention)
    assert torch.equal(torch.rand(3), expected)
