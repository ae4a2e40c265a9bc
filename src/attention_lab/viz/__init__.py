"""Everything that draws: the heatmaps, the curves, the drawn diagrams and the explorer.

The chapter's layer and its models live above, in ``attention_lab``; nothing there imports
from here (tests/library/test_import_graph.py holds that). The pictures a notebook uses are
importable from ``attention_lab`` itself (``from attention_lab import plot_heads``), loaded
on first use, so ``import attention_lab`` does not import matplotlib.

One module per role:

* ``heatmaps``: ``plot_heads`` (notebooks 04-08), one heatmap per head on one shared 0..1
  square-root colour scale, blocked positions grey and striped, ``position:token`` labels;
  ``text_heatmap``, the same as text; ``looks_causal`` and ``CausalWithoutMaskWarning``.
* ``headgrid``: ``HeadGrid``, the grid ``plot_heads`` and the explorer draw on, built once
  and updated in place; its tick labels in ``heatmap_labels``; ``blit`` keeps what does
  not change between two updates.
* ``lines``: ``plot_loss`` and ``plot_lines``; ``induction_plots``: ``plot_runs`` (several
  seeds per model) and ``outline_block`` (notebook 10).
* ``canvas``: ``LabFigure`` and ``png_bytes`` -- figures with a white background, so they
  read the same in a light and a dark Jupyter theme, shown once as a PNG when a cell ends
  with one, not registered with pyplot (nothing to close); blocked-cell stripes.
* ``_mpl_fast`` and ``cells``: the fast Agg path (labels rasterised once, heatmap cells
  painted by numpy), checked once against plain Agg, which it falls back to.
* ``palette``: colours (head h has one colour everywhere), font sizes and dpi.
* ``diagrams``: every tensor operation of the chapter drawn from the real sizes
  (``from attention_lab.viz.diagrams import qkv_flow``).
* ``explorer``: ``AttentionExplorer``, the widget of notebooks 06, 08 and explorer.ipynb
  (``from attention_lab.viz.explorer import AttentionExplorer``; ipywidgets).
"""
