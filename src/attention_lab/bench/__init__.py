"""``make bench`` / ``python -m attention_lab bench``: speed and memory of every implementation.

What it measures, and how to run it, is ``cli.DESCRIPTION`` (the ``--help`` text).

One module per role:

* ``implementations``: the blocks compared, all built from one reference's weights
* ``checks``: the gates (reference output, causality) every block passes before timing
* ``timing``: ``measure_shape`` -> one ``Row`` per implementation
* ``report``: the table, the goals, ``bench.csv``, ``bench.png``, the explorer's times
* ``explorer``: ``benchmark_explorer``, the explorer's redraw and retrain times (ipywidgets)
* ``cli``: ``run(argv)``, the command line
"""

from .checks import ImplementationCheckError, check_all, check_causal, check_matches_reference
from .cli import FULL_SHAPES, QUICK_SHAPES, run
from .implementations import COMPILED, FAST, REFERENCE, build_implementations
from .timing import Row, measure_shape

__all__ = [
    "COMPILED",
    "FAST",
    "FULL_SHAPES",
    "ImplementationCheckError",
    "QUICK_SHAPES",
    "REFERENCE",
    "Row",
    "build_implementations",
    "check_all",
    "check_causal",
    "check_matches_reference",
    "measure_shape",
    "run",
]
