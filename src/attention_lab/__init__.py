"""Attention Lab: multi-head self-attention built step by step, with tests.

The public API, in the order the chapter introduces it:

* masks (notebook 04): ``causal_mask``, ``sliding_window_mask``, ``no_mask``, ``to_sdpa_mask``
* the explicit maths (notebooks 02-04): ``attention(q, k, v, mask) -> (context, weights)``
* modules: ``SingleHeadAttention`` (02), ``CausalAttention`` (05), ``MultiHeadAttention`` (06),
  ``MultiHeadSelfAttention`` with a fused QKV projection (07)
* the toy tasks and their model (08): ``make_batch``, ``TinyLMConfig``, ``TinyLM``,
  ``train``, ``evaluate``
* pictures (``attention_lab.viz``, everything that draws): ``plot_heads``, ``plot_loss``,
  ``text_heatmap``, the drawn diagrams in ``attention_lab.viz.diagrams`` and the explorer,
  ``attention_lab.viz.explorer.AttentionExplorer``
* two layers (10): ``TinyLMConfig(n_layers=2)``, the ``"induction"`` task and its helpers in
  ``attention_lab.induction`` (``copy_starts``, ``in_context_guess``, ``phase_change_step``,
  ``split_lookup_batch``); ``plot_runs`` (curves of several seeds) and ``outline_block`` (a
  box on heatmaps); ``viz.diagrams.induction_circuit``
* interventions (08-11): ``ablate_heads``, ``freeze_attention`` with ``even_weights`` or
  ``mean_weights``, ``retrain_readout``, ``source_shares``, ``attention_layers`` (the rest,
  such as the key rules, in ``attention_lab.interventions``)
* the reader's language: ``set_language("zh_CN")`` puts figures, checker feedback, the
  explorer and printed tables in Simplified Chinese (``attention_lab.i18n``)
* real text (11): ``attention_lab.text`` (the Shakespeare text shipped in the package, ``Vocab``,
  ``split``, ``get_batch``, the bigram baseline) and ``attention_lab.charlm`` (``CharLM``: the
  block with layer norm, residual connections and an MLP; ``train_charlm``, ``head_shares``)
* attention as today's LLMs run it (12_attention_in_todays_llms): ``MultiHeadSelfAttention``'s
  ``n_kv_heads`` (``repeat_kv``), ``rope=True`` (``rope_cos_sin``, ``rotate_half``,
  ``apply_rope``) and ``cache=``; ``LatentAttention`` (MLA); ``KVCache`` / ``LayerCache`` and
  the formula ``cache_bytes`` (``CacheShape``); both models' ``positions``, ``n_kv_heads``,
  ``window``, ``d_latent`` and ``generate(..., use_cache=True)`` (``DecoderConfig``)

Convention: a boolean mask is True where attention is **blocked**.

``import attention_lab`` loads the core (torch) only. The pictures (matplotlib) and the
widgets (ipywidgets) load the first time one of their names is used.
"""

from __future__ import annotations

import importlib

from .config import DecoderConfig, TinyLMConfig
from .device import pick_device
from .functional import attention
from .fused import MultiHeadSelfAttention, repeat_kv
from .heads import CausalAttention, SingleHeadAttention
from .i18n import get_language, set_language
from .interventions import (
    ablate_heads,
    attention_layers,
    even_weights,
    freeze_attention,
    mean_weights,
    retrain_readout,
    source_shares,
)
from .kv_cache import CacheShape, KVCache, LayerCache, cache_bytes
from .latent import LatentAttention
from .masks import build_mask, causal_mask, no_mask, sliding_window_mask, to_sdpa_mask
from .multihead import MultiHeadAttention, merge_heads, split_heads
from .rope import apply_rope, rope_cos_sin, rotate_half
from .tasks import IGNORE_INDEX, SEP, TASKS, make_batch
from .tiny_lm import TinyLM
from .training import TrainHistory, evaluate, parallel_map, train, train_tiny_lm, train_tiny_lms

__version__ = "0.2.0"

# name -> the submodule that defines it, imported on first use (PEP 562)
_LAZY = {
    "HEAD_COLORS": "viz.palette",
    "HeadGrid": "viz.headgrid",
    "head_color": "viz.palette",
    "LabFigure": "viz.canvas",
    "outline_block": "viz.induction_plots",
    "plot_heads": "viz.heatmaps",
    "plot_lines": "viz.lines",
    "plot_loss": "viz.lines",
    "plot_runs": "viz.induction_plots",
    "text_heatmap": "viz.heatmaps",
}
_SUBMODULES = (
    "charlm",
    "cost",
    "exercises",
    "text",
    "viz",
)


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'attention_lab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_SUBMODULES))


__all__ = [
    "CacheShape",
    "CausalAttention",
    "DecoderConfig",
    "HEAD_COLORS",
    "HeadGrid",
    "IGNORE_INDEX",
    "KVCache",
    "LabFigure",
    "LatentAttention",
    "LayerCache",
    "MultiHeadAttention",
    "MultiHeadSelfAttention",
    "SEP",
    "SingleHeadAttention",
    "TASKS",
    "TinyLM",
    "TinyLMConfig",
    "TrainHistory",
    "ablate_heads",
    "apply_rope",
    "attention",
    "attention_layers",
    "build_mask",
    "cache_bytes",
    "causal_mask",
    "even_weights",
    "evaluate",
    "freeze_attention",
    "get_language",
    "head_color",
    "make_batch",
    "mean_weights",
    "merge_heads",
    "no_mask",
    "outline_block",
    "parallel_map",
    "pick_device",
    "plot_heads",
    "plot_lines",
    "plot_loss",
    "plot_runs",
    "repeat_kv",
    "retrain_readout",
    "rope_cos_sin",
    "rotate_half",
    "set_language",
    "sliding_window_mask",
    "source_shares",
    "split_heads",
    "text_heatmap",
    "to_sdpa_mask",
    "train",
    "train_tiny_lm",
    "train_tiny_lms",
]
