#!/usr/bin/env bash
# Build the classroom hub's own environment (`make hub-env`; `make hub` and tests/hub/test_hub.py
# call it too):
#   $HUB_VENV  a virtualenv that every student's system user can execute: JupyterHub,
#              NativeAuthenticator, JupyterLab and this package (not editable), pinned by
#              constraints.txt. The repository's .venv will not do: its interpreter, and often
#              the clone itself, sit under a mode-700 home (/root), which a student cannot enter.
#   $(dirname $HUB_VENV)/chapter  the notebooks a student's first spawn copies to ~/attention-lab
#              (never the solutions).
#   hub/node_modules  configurable-http-proxy from hub/package-lock.json (`npm ci`).
# Re-running it is cheap: pip runs over the dependencies only when pyproject.toml or
# constraints.txt changed, and over the package only when a file of src/ changed.
set -euo pipefail
cd "$(dirname "$0")/.."
HUB_VENV=${HUB_VENV:-/opt/attention-lab-hub/venv}
umask 022   # everything written here must be readable by the students

runs_as_nobody() {  # can an unprivileged user execute this interpreter (and its stdlib)?
    if [ "$(id -u)" != 0 ]; then "$1" -c 'import venv' 2>/dev/null; return; fi
    runuser -u nobody -- "$1" -c 'import venv, ensurepip' >/dev/null 2>&1
}

if [ -z "${HUB_PYTHON:-}" ]; then
    for py in /usr/bin/python3.12 /usr/bin/python3.11 /usr/bin/python3 /usr/local/bin/python3 "$(command -v python3)"; do
        if [ -x "$py" ] && "$py" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
            && runs_as_nobody "$py"; then HUB_PYTHON=$py; break; fi
    done
fi
if [ -z "${HUB_PYTHON:-}" ]; then
    echo "hub_env: no Python >= 3.10 with venv that other users can execute (set HUB_PYTHON)" >&2
    exit 1
fi

# Rebuilt from scratch only for another interpreter; when pyproject.toml or constraints.txt
# change, pip brings the venv to the new pins (only what changed is installed).
py_id=$("$HUB_PYTHON" -c 'import sys; print(sys.executable, sys.version.split()[0])')
pins=$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)
if [ ! -x "$HUB_VENV/bin/python" ] || [ "$(cat "$HUB_VENV/.python" 2>/dev/null)" != "$py_id" ]; then
    echo "hub_env: building $HUB_VENV with $HUB_PYTHON"
    rm -rf "$HUB_VENV"
    mkdir -p "$(dirname "$HUB_VENV")"
    chmod 755 "$(dirname "$HUB_VENV")"
    "$HUB_PYTHON" -m venv "$HUB_VENV"
    echo "$py_id" > "$HUB_VENV/.python"
fi
quiet_pip() {  # (the grep drops pip's notes about this machine's empty local indexes)
    "$HUB_VENV/bin/python" -m pip install --quiet -c constraints.txt "$@" 2>&1 \
        | { grep -v "is ignored: it is neither a file nor a directory" || true; }
}
if [ "$(cat "$HUB_VENV/.installed" 2>/dev/null)" != "$pins" ]; then
    echo "hub_env: installing the pinned .[lab,hub] into $HUB_VENV"
    quiet_pip ".[lab,hub]"
    "$HUB_VENV/bin/python" -m ipykernel install --sys-prefix --name python3 >/dev/null
    echo "$pins" > "$HUB_VENV/.installed"
fi
# The package as it is now, reinstalled when its files changed since the last install (10 to
# 40 s on a busy 2-core machine; the hub's tests call this script at the start of every run).
package=$(find pyproject.toml src -type f -not -path '*/__pycache__/*' -print0 | sort -z \
    | xargs -0 sha256sum | sha256sum | cut -c1-16)
if [ "$(cat "$HUB_VENV/.package" 2>/dev/null)" != "$package-$pins" ]; then
    quiet_pip --no-deps --force-reinstall .
    chmod -R a+rX "$HUB_VENV"
    if [ "$(id -u)" = 0 ]; then
        runuser -u nobody -- "$HUB_VENV/bin/python" -c 'import attention_lab, jupyterhub, torch' \
            || { echo "hub_env: $HUB_VENV is not usable by other users" >&2; exit 1; }
    fi
    echo "$package-$pins" > "$HUB_VENV/.package"
fi

# What costs every Jupyter process seconds and serves none of them (tools/lighten_venv.sh):
# without it a student's server starts on 1.2 CPU-seconds instead of 3.9.
bash tools/lighten_venv.sh "$HUB_VENV/bin/python"

# The chapter that each student's first spawn copies into ~/attention-lab (the English
# edition), world-readable beside the venv: the hub copies it as the student. Never the
# solutions (exercises_solutions.ipynb, in any edition): they stay with the teacher, whose
# checkout must be out of the students' reach (chmod 700; hub/README.md).
CHAPTER=$(dirname "$HUB_VENV")/chapter
rm -rf "$CHAPTER.new" && mkdir -p "$CHAPTER.new"
for nb in notebooks/*.ipynb; do
    case "$(basename "$nb")" in *solutions*) continue ;; esac
    cp "$nb" "$CHAPTER.new/"
done
chmod -R a+rX "$CHAPTER.new" && rm -rf "$CHAPTER" && mv "$CHAPTER.new" "$CHAPTER"
leaked=$(find "$HUB_VENV" "$CHAPTER" -iname '*solutions*.ipynb' | head -1)
if [ -n "$leaked" ]; then
    echo "hub_env: $leaked would be readable by every student; remove it" >&2
    exit 1
fi

if [ ! -x hub/node_modules/.bin/configurable-http-proxy ] \
    || ! cmp -s hub/package-lock.json hub/node_modules/.installed-from-lock.json; then
    (cd hub && npm ci --no-audit --no-fund --loglevel=error && cp package-lock.json node_modules/.installed-from-lock.json)
fi
echo "hub_env: $HUB_VENV ready ($("$HUB_VENV/bin/python" --version)), $(hub/node_modules/.bin/configurable-http-proxy --version 2>/dev/null | head -1 || echo 'configurable-http-proxy') in hub/node_modules"
