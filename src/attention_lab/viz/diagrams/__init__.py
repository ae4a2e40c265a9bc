"""Drawn diagrams: every tensor operation of the chapter as a picture, from the real sizes.

Each function takes the sizes the code next to it uses (B, T, D, H, d_head, ...) and
draws boxes, arrows and labels with matplotlib, so a diagram can never disagree with
the code and can follow the explorer's sliders. Every function returns a ``LabFigure``
(shown as a PNG when it ends a notebook cell); ``draw_head_split`` draws into an
existing axes instead. One module per lesson, each read in one sitting:

====================================  ====================================  =========  =============
function                              what it shows                         notebook   module
====================================  ====================================  =========  =============
``roadmap(highlight=n)``              a GPT block as a stack, each          01-11      ``roadmap``
                                      notebook at the part it builds
``weighted_average``                  tokens -> context vector, arrow       01         ``flow``
                                      width ~ weight
``qkv_flow``                          x -> W_q, W_k, W_v -> scores ->       02, 03     ``flow``
                                      softmax -> weights @ V, with shapes
                                      (``scaled=False``: Q Kᵀ, for 02)
``causal_mask_grid``                  the T x T causal mask, blocked cells  04         ``masks``
``mask_before_vs_after``              mask before softmax vs zero after,    04         ``masks``
                                      with row sums
``dropout_row``                       dropped entries (white, orange ×,     05         ``masks``
                                      not blocked) and the 1/(1-p) rescale
``head_split`` / ``draw_head_split``  (B, T, D) -> view: each token an      06,        ``heads``
/ ``head_split_png`` (cached PNG)     (H, d_head) matrix -> transpose: one  explorer
                                      (T, d_head) block per head -> merged
``head_rows``                         the rows of W_q.weight / qkv.weight   06, 07     ``head_rows``
                                      each head owns, drawn to scale
``training_setup``                    tokens -> embeddings -> attention ->  08         ``training``
                                      LM head -> next token
``induction_circuit``                 a previous-token head writes the id   10         ``induction``
                                      before j at j; a layer-1 query
                                      matches it and copies the id at j
``llama_block(model)``                a Llama block with a real model's     12         ``llama``
                                      sizes: GQA, RoPE and the KV cache
                                      inside its attention
``tiled_softmax``                     the online softmax worked with        bonus      ``tiled``
                                      numbers: m, rescale, l, acc per tile
``online_softmax_steps``              those numbers, per tile, as dicts     bonus      ``_online``
====================================  ====================================  =========  =============

Shared boxes, arrows, labels and size checks are in ``_draw``; the roadmap's parts in
``_roadmap_parts``; figures, the numpy-painted cells and the blocked-cell stripes in
``attention_lab.viz.canvas``. Colours, font sizes and dpi come from ``palette``: head h has one
colour everywhere.
"""

from ._draw import ARROW, EDGE, MAX_D, MAX_HEADS, NEUTRAL
from ._online import online_softmax_steps
from .flow import qkv_flow, weighted_average
from .head_rows import head_rows
from .heads import draw_head_split, head_split, head_split_png
from .induction import induction_circuit
from .llama import llama_block
from .masks import causal_mask_grid, dropout_row, mask_before_vs_after
from .roadmap import roadmap
from .tiled import tiled_softmax
from .training import training_setup

__all__ = [
    "ARROW",
    "EDGE",
    "MAX_D",
    "MAX_HEADS",
    "NEUTRAL",
    "causal_mask_grid",
    "draw_head_split",
    "dropout_row",
    "head_rows",
    "head_split",
    "head_split_png",
    "induction_circuit",
    "llama_block",
    "mask_before_vs_after",
    "online_softmax_steps",
    "qkv_flow",
    "roadmap",
    "tiled_softmax",
    "training_setup",
    "weighted_average",
]
