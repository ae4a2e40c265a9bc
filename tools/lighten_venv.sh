#!/usr/bin/env bash
# Remove from a venv what costs every Jupyter process seconds and serves none of them:
#   tools/lighten_venv.sh VENV/bin/python
# (the Makefile after each install of .venv; tools/hub_env.sh for the class hub's venv).
#
# rfc3987-syntax is jsonschema's optional checker of the "iri" format, pulled in by
# jsonschema[format-nongpl] (jupyter-events, nbformat). It compiles about 35 Lark parsers when
# it is imported: 2 to 3 CPU-seconds in every process that loads nbformat's validator or
# jupyter_events, which is every student's server, the hub, nbgrader, JupyterLab and each
# pytest worker (jupyter_server issue 1559). No Jupyter schema uses the "iri" format, and
# jsonschema leaves that one checker out when the module is absent. Measured on this
# project's hub venv: a student's server starts on 1.2 CPU-seconds instead of 3.9. lark is
# installed only for it (constraints.txt says "via rfc3987-syntax").
set -euo pipefail
python=${1:?usage: tools/lighten_venv.sh VENV/bin/python}
if "$python" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("rfc3987_syntax") is None)'; then
    "$python" -m pip uninstall --yes --quiet rfc3987-syntax lark
fi
