"""Checkers for the exercises of lessons 01-12 (notebooks/exercises.ipynb; solutions in
exercises_solutions.ipynb), one module per lesson: ``lesson01`` ... ``lesson12``.

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

The exercises, by lesson (exercise N.k is the k-th checker of lesson N):

* 01: ``check_stable_softmax``, ``check_decay_weights``
* 02: ``check_cross_attention``
* 03: ``check_score_variances``, ``check_projected_score_variance``
* 04: ``check_looks_ahead``, ``check_sliding_mask``
* 05: ``check_dropout_rescale``
* 06: ``check_head_as_causal``, ``check_einsum_attention``, ``check_padded_causal_mask``
* 07: ``check_head_rows_from_fused``, ``check_weights_outnumber_params``
* 08: ``check_lookback_distance``, ``check_repeat_batch``
* 09: ``check_offset_share``, ``check_offset_weights``, ``check_frozen_ceiling``
* 10: ``check_prefix_match_score``, ``check_k_composition``
* 11: ``check_mean_ablated_loss``, ``check_copy_gap``
* 12: ``check_grouped_kv``, ``check_rotary_qkv``, ``check_kv_cache_size``
"""

from ._summary import EXERCISES, LESSONS, RESULTS, Summary, Verdict, reset, summary
from .lesson01 import check_decay_weights, check_stable_softmax
from .lesson02 import check_cross_attention
from .lesson03 import check_projected_score_variance, check_score_variances
from .lesson04 import check_looks_ahead, check_sliding_mask
from .lesson05 import check_dropout_rescale
from .lesson06 import check_einsum_attention, check_head_as_causal, check_padded_causal_mask
from .lesson07 import check_head_rows_from_fused, check_weights_outnumber_params
from .lesson08 import check_lookback_distance, check_repeat_batch
from .lesson09 import check_frozen_ceiling, check_offset_share, check_offset_weights
from .lesson10 import check_k_composition, check_prefix_match_score
from .lesson11 import check_copy_gap, check_mean_ablated_loss
from .lesson12 import check_grouped_kv, check_kv_cache_size, check_rotary_qkv

__all__ = [
    "EXERCISES",
    "LESSONS",
    "RESULTS",
    "Summary",
    "Verdict",
    "check_copy_gap",
    "check_cross_attention",
    "check_decay_weights",
    "check_dropout_rescale",
    "check_einsum_attention",
    "check_frozen_ceiling",
    "check_grouped_kv",
    "check_head_as_causal",
    "check_head_rows_from_fused",
    "check_k_composition",
    "check_kv_cache_size",
    "check_looks_ahead",
    "check_lookback_distance",
    "check_mean_ablated_loss",
    "check_offset_share",
    "check_offset_weights",
    "check_padded_causal_mask",
    "check_prefix_match_score",
    "check_projected_score_variance",
    "check_repeat_batch",
    "check_rotary_qkv",
    "check_score_variances",
    "check_sliding_mask",
    "check_stable_softmax",
    "check_weights_outnumber_params",
    "reset",
    "summary",
]
