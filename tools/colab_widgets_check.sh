#!/usr/bin/env bash
# The explorer and the figures under what Colab preinstalls, besides the pinned versions of
# .venv: ipywidgets 7.7.1 (with widgetsnbextension 3.x and jupyterlab_widgets 1.x), and the
# matplotlib and numpy Colab shipped when this was written (3.10.0, 2.0.2). Colab keeps its
# own torch; the CPU build pinned in constraints.txt stands in for it.
#
# A second small virtualenv, .venv-colab: it holds only those packages (installed with
# --no-deps) and finds everything else in .venv's site-packages, which a .pth file adds
# AFTER its own (`make test` builds .venv first). Its own packages come first on sys.path,
# so `import ipywidgets` is 7.7.1 there and 8.x in .venv. Building it takes seconds
# instead of the minutes a full second install of torch, Jupyter and friends took.
# It runs the widget, plotting and diagram unit tests, their Chinese editions (the explorer's
# option labels, the shipped font's fallback under matplotlib 3.10) and strict nbval of
# notebooks/explorer.ipynb.
#
#   bash tools/colab_widgets_check.sh    # PYTHON=python3.11 picks the interpreter,
#                                        # COLAB_VENV=/some/dir where the virtualenv lives,
#                                        # MAIN_VENV=.venv the environment it borrows from
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${COLAB_VENV:-.venv-colab}
MAIN_VENV=${MAIN_VENV:-.venv}
BIN=$VENV/bin
STAMP=$VENV/.installed
COLAB_PINS=(
    "ipywidgets==7.7.1" "widgetsnbextension==3.6.10" "jupyterlab_widgets==1.1.11"
    "ipython_genutils==0.2.0"  # a dependency of ipywidgets 7 that 8.x dropped
    "matplotlib==3.10.0" "numpy==2.0.2"
)
start=$(date +%s)

if [[ ! -x $MAIN_VENV/bin/python ]]; then
    echo "colab check: $MAIN_VENV is missing; run make test (or make unit) first" >&2
    exit 1
fi
if [[ ! -f $STAMP || $0 -nt $STAMP ]]; then
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    "$BIN/python" -m pip install --quiet --no-deps "${COLAB_PINS[@]}"
    touch "$STAMP"
    echo "colab check: built $VENV in $(($(date +%s) - start)) s"
fi
# .venv's packages (and its .pth files, e.g. this checkout's editable install) come after
# the Colab pins; written on every run, as COLAB_VENV may be kept between checkouts
main_site=$("$MAIN_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
own_site=$("$BIN/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "import site; site.addsitedir('$(cd "$main_site" && pwd)')" >"$own_site/zz_attention_lab_main_venv.pth"

"$BIN/python" - <<'EOF'
from pathlib import Path

import ipywidgets, matplotlib, numpy, torch, widgetsnbextension

import attention_lab

expected = {"ipywidgets": "7.7.1", "matplotlib": "3.10.0", "numpy": "2.0.2"}
found = {"ipywidgets": ipywidgets.__version__, "matplotlib": matplotlib.__version__,
         "numpy": numpy.__version__}
assert found == expected, f"the Colab pins did not win: {found}"
here = Path.cwd() / "src"
assert Path(attention_lab.__file__).resolve().is_relative_to(here), attention_lab.__file__
print(f"colab check: ipywidgets {ipywidgets.__version__}, widgetsnbextension "
      f"{widgetsnbextension.__version__}, matplotlib {matplotlib.__version__}, "
      f"numpy {numpy.__version__}, torch {torch.__version__}")
EOF
"$BIN/python" -m pytest -q -p no:cacheprovider -n auto tests/library/test_widgets.py tests/library/test_plotting.py \
    tests/library/test_diagrams.py tests/library/test_explorer_zh.py tests/library/test_figures_zh.py
"$BIN/python" -m pytest -q -p no:cacheprovider --nbval --nbval-current-env \
    --nbval-sanitize-with tests/sanitize.cfg notebooks/explorer.ipynb
echo "colab check: passed in $(($(date +%s) - start)) s"
