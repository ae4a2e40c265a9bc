"""Checkers for the exercises of lessons 02-08 (notebooks/exercises.ipynb; solutions in
exercises_solutions.ipynb), one module per lesson: ``lesson02`` ... ``lesson08``.

Each exercise asks for a function; its check cell hands that function to a checker::

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

Every checker records its latest verdict; ``summary("04")`` prints which exercises of
lesson 04 pass (``summary()``: every lesson), and ``reset()`` forgets the verdicts.
"""

from ._core import EXERCISES, LESSONS, RESULTS, Summary, Verdict, reset, summary
from .lesson02 import check_single_head_forward
from .lesson03 import check_einsum_attention, check_score_variance
from .lesson04 import (
    check_mask_then_softmax,
    check_padded_causal_mask,
    check_sliding_mask,
    check_softmax_then_renormalise,
    check_tril_then_softmax,
)
from .lesson05 import check_dropout_rescale
from .lesson06 import check_mha_from_causal, check_split_heads
from .lesson07 import check_fuse_qkv, check_param_count
from .lesson08 import check_previous_token_share, check_repeat_batch

__all__ = [
    "EXERCISES",
    "LESSONS",
    "RESULTS",
    "Summary",
    "Verdict",
    "check_dropout_rescale",
    "check_einsum_attention",
    "check_fuse_qkv",
    "check_mask_then_softmax",
    "check_mha_from_causal",
    "check_padded_causal_mask",
    "check_param_count",
    "check_previous_token_share",
    "check_repeat_batch",
    "check_score_variance",
    "check_single_head_forward",
    "check_sliding_mask",
    "check_softmax_then_renormalise",
    "check_split_heads",
    "check_tril_then_softmax",
    "reset",
    "summary",
]
