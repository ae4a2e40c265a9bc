"""Interventions on trained attention: controls that could fail (notebooks 08-11).

Each tool changes one thing inside a model and leaves everything else as it was:

* ``ablate_heads(model, heads, how="zero" | "mean", reference=ids)``: a head's output (its
  d_head slice of the merged context, the input of ``out_proj``) replaced by zeros or by its
  mean over a reference batch; a context manager, the model is restored on exit.
* ``freeze_attention(model, weights, layer=0)``: one layer uses the given weights instead of
  softmax(QKᵀ/√d_head); values, ``out_proj`` and everything after are unchanged. Weights to
  give it: ``even_weights(T)`` or a trained model's own ``mean_weights(model, ids)``.
* ``retrain_readout(model, task_or_data, steps=..., lr=...)``: trains only what reads the
  attention output (``readout_parameters``: ``out_proj`` of the frozen or ablated layers and
  ``lm_head``); every other parameter stays bitwise the same.
* ``source_shares(weights, offsets=1)`` or ``source_shares(weights, keys=rule)``: the mean
  weight each head puts on chosen keys; rules: ``last_match_keys``, ``after_previous_occurrence``.

The tools work on any model holding ``MultiHeadSelfAttention`` blocks (``attention_layers``):
``TinyLM``, ``CharLM``, or a bare block. Nothing in the models' code changes: ablation is a
forward pre-hook on ``out_proj``, freezing swaps one block instance's ``forward``.
One module per tool: ``layers``, ``ablation``, ``freezing``, ``readout``, ``sources``.
"""

from .ablation import ablate_heads
from .freezing import freeze_attention
from .layers import attention_layers, attention_weights, even_weights, head_outputs, mean_weights
from .readout import ReadoutHistory, readout_parameters, retrain_readout
from .sources import after_previous_occurrence, last_match_keys, source_shares

__all__ = [
    "ReadoutHistory",
    "ablate_heads",
    "after_previous_occurrence",
    "attention_layers",
    "attention_weights",
    "even_weights",
    "freeze_attention",
    "head_outputs",
    "last_match_keys",
    "mean_weights",
    "readout_parameters",
    "retrain_readout",
    "source_shares",
]
