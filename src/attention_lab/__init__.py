"""Attention Lab: multi-head self-attention built step by step, with tests.

The public API, in the order the chapter introduces it:

* masks (notebook 04): ``causal_mask``, ``sliding_window_mask``, ``no_mask``, ``to_sdpa_mask``
* the explicit maths (notebooks 02-04): ``attention(q, k, v, mask) -> (context, weights)``
* modules: ``SingleHeadAttention`` (02), ``CausalAttention`` (05), ``MultiHeadAttention`` (06),
  ``MultiHeadSelfAttention`` with a fused QKV projection (07)
* the toy tasks and their model (08): ``make_batch``, ``TinyLM``, ``train``, ``evaluate``
* pictures: ``plot_heads``, ``plot_loss``, ``text_heatmap``

Convention: a boolean mask is True where attention is **blocked**.
"""

from .device import pick_device
from .functional import attention
from .fused import MultiHeadSelfAttention
from .heads import CausalAttention, SingleHeadAttention
from .masks import build_mask, causal_mask, no_mask, sliding_window_mask, to_sdpa_mask
from .multihead import MultiHeadAttention, merge_heads, split_heads
from .plotting import HeadGrid, LabFigure, plot_heads, plot_lines, plot_loss, text_heatmap
from .tasks import IGNORE_INDEX, TASKS, make_batch
from .tiny_lm import TinyLM
from .training import TrainHistory, evaluate, train, train_tiny_lm

__version__ = "0.1.0"

__all__ = [
    "CausalAttention",
    "HeadGrid",
    "IGNORE_INDEX",
    "LabFigure",
    "MultiHeadAttention",
    "MultiHeadSelfAttention",
    "SingleHeadAttention",
    "TASKS",
    "TinyLM",
    "TrainHistory",
    "attention",
    "build_mask",
    "causal_mask",
    "evaluate",
    "make_batch",
    "merge_heads",
    "no_mask",
    "pick_device",
    "plot_heads",
    "plot_lines",
    "plot_loss",
    "sliding_window_mask",
    "split_heads",
    "text_heatmap",
    "to_sdpa_mask",
    "train",
    "train_tiny_lm",
]
