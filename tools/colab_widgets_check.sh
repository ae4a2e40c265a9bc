#!/usr/bin/env bash
# The explorer under the widgets Colab ships: ipywidgets 7.7.1 (with widgetsnbextension 3.x and
# jupyterlab_widgets 1.x), besides the pinned 8.x of .venv.
#
# Builds a second small virtualenv, .venv-colab, on first use (and again when constraints.txt,
# pyproject.toml or this script change): every version pinned in constraints.txt except the
# three widget packages -- torch from its pin (2.13.0, the CPU build pip finds here; never an
# unpinned torch, which would pull a multi-GB CUDA build) -- then the project itself with
# --no-deps. It runs the widget unit tests and strict nbval of notebooks/explorer.ipynb there.
#
#   bash tools/colab_widgets_check.sh    # PYTHON=python3.11 picks the interpreter,
#                                        # COLAB_VENV=/some/dir where the virtualenv lives
# Measured here: building the virtualenv 24 min and the checks 12.5 min on a 2-core machine
# that other jobs kept at a load of ~10 (4 min of CPU in the checks).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${COLAB_VENV:-.venv-colab}
BIN=$VENV/bin
STAMP=$VENV/.installed
COLAB_WIDGETS=("ipywidgets==7.7.1" "widgetsnbextension>=3.6,<4" "jupyterlab_widgets>=1.0,<2")
start=$(date +%s)

if [[ ! -f $STAMP || constraints.txt -nt $STAMP || pyproject.toml -nt $STAMP || $0 -nt $STAMP ]]; then
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    grep -viE '^(ipywidgets|widgetsnbextension|jupyterlab[_-]widgets)==' constraints.txt \
        >"$VENV/constraints-colab.txt"
    # the library's own dependencies (pyproject.toml) and what the checks below run
    "$BIN/python" -m pip install --quiet -c "$VENV/constraints-colab.txt" \
        "${COLAB_WIDGETS[@]}" torch numpy matplotlib tqdm pillow \
        ipykernel pytest nbval nbformat nbclient
    "$BIN/python" -m ipykernel install --sys-prefix --name python3 >/dev/null
    touch "$STAMP"
    echo "colab check: built $VENV in $(($(date +%s) - start)) s"
fi
# this checkout's library (COLAB_VENV may live outside it, e.g. kept between CI runs)
"$BIN/python" -m pip install --quiet --no-deps -e .

"$BIN/python" - <<'EOF'
import ipywidgets, torch, widgetsnbextension
assert ipywidgets.__version__ == "7.7.1", ipywidgets.__version__
print(f"colab check: ipywidgets {ipywidgets.__version__}, widgetsnbextension "
      f"{widgetsnbextension.__version__}, torch {torch.__version__}")
EOF
"$BIN/python" -m pytest -q -p no:cacheprovider tests/test_widgets.py
"$BIN/python" -m pytest -q -p no:cacheprovider --nbval --nbval-current-env \
    --nbval-sanitize-with tests/sanitize.cfg notebooks/explorer.ipynb
echo "colab check: passed in $(($(date +%s) - start)) s"
