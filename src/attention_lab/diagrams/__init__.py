"""Drawn diagrams: every tensor operation of the chapter as a picture, from the real sizes.

Each function takes the sizes the code next to it uses (B, T, D, H, d_head, ...) and
draws boxes, arrows and labels with matplotlib, so a diagram can never disagree with
the code and can follow the explorer's sliders. Every function returns a ``LabFigure``
(shown as a PNG when it ends a notebook cell); ``draw_head_split`` draws into an
existing axes instead. One module per lesson, each read in one sitting:

====================================  ====================================  ==========  ===========
function                              what it shows                         notebook    module
====================================  ====================================  ==========  ===========
``weighted_average``                  tokens -> context vector, arrow       01          ``flow``
                                      width ~ weight
``qkv_flow``                          x -> W_q, W_k, W_v -> scores ->       02, 03      ``flow``
                                      softmax -> weights @ V, with shapes
``causal_mask_grid``                  the T x T causal mask, blocked cells  04          ``masks``
``mask_before_vs_after``              mask before softmax vs zero after,    04          ``masks``
                                      with row sums
``dropout_row``                       dropped entries and the 1/(1-p)       05          ``masks``
                                      rescale
``head_split`` / ``draw_head_split``  (B, T, D) -> (B, T, H, d_head) ->     06,         ``heads``
/ ``head_split_png`` (cached PNG)     (B, H, T, d_head) -> merged           explorer
``head_rows``                         the rows of W_q / qkv.weight each     06, 07      ``heads``
                                      head owns
``training_setup``                    tokens -> embeddings -> attention ->  08          ``training``
                                      LM head -> next token
``tiled_softmax``                     the online softmax worked with        bonus       ``training``
                                      numbers: m, rescale, l, acc per tile
``online_softmax_steps``              those numbers, per tile, as dicts     bonus       ``training``
====================================  ====================================  ==========  ===========

Shared boxes, arrows, labels and size checks are in ``_draw``. Colours, font sizes and
dpi come from ``palette``: head h has one colour everywhere.
"""

from ._draw import ARROW, EDGE, MAX_D, MAX_HEADS, NEUTRAL
from .flow import qkv_flow, weighted_average
from .heads import draw_head_split, head_rows, head_split, head_split_png
from .masks import causal_mask_grid, dropout_row, mask_before_vs_after
from .training import online_softmax_steps, tiled_softmax, training_setup

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
    "mask_before_vs_after",
    "online_softmax_steps",
    "qkv_flow",
    "tiled_softmax",
    "training_setup",
    "weighted_average",
]
