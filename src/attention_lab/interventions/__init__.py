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
* ``ov_circuit``, ``qk_circuit``, ``copying_scores``, ``composition_scores`` (K-, Q- and
  V-composition) and their random baselines (``copying_baseline``, ``composition_baseline``):
  the induction circuit read from the weights of a ``TinyLM`` (no MLP, no layer norm).

The tools work on any model holding ``MultiHeadSelfAttention`` blocks (``attention_layers``):
``TinyLM``, ``CharLM``, or a bare block. Nothing in the models' code changes: ablation is a
forward pre-hook on ``out_proj``, freezing swaps one block instance's ``forward``.
One module per tool: ``layers``, ``ablation``, ``freezing``, ``readout``, ``sources``,
``circuits``.
"""

from .ablation import ablate_heads
from .circuits import (
    Baseline,
    CopyingScores,
    HeadWeights,
    composition_baseline,
    composition_matrix,
    composition_scores,
    copying_baseline,
    copying_scores,
    head_weights,
    ov_circuit,
    qk_circuit,
)
from .freezing import freeze_attention
from .layers import attention_layers, attention_weights, even_weights, head_outputs, mean_weights
from .readout import ReadoutHistory, readout_parameters, retrain_readout
from .sources import after_previous_occurrence, last_match_keys, source_shares

__all__ = [
    "Baseline",
    "CopyingScores",
    "HeadWeights",
    "ReadoutHistory",
    "ablate_heads",
    "after_previous_occurrence",
    "attention_layers",
    "attention_weights",
    "composition_baseline",
    "composition_matrix",
    "composition_scores",
    "copying_baseline",
    "copying_scores",
    "even_weights",
    "freeze_attention",
    "head_outputs",
    "head_weights",
    "last_match_keys",
    "mean_weights",
    "ov_circuit",
    "qk_circuit",
    "readout_parameters",
    "retrain_readout",
    "source_shares",
]
