#!/usr/bin/env bash
# Mutation testing of the attention core (issue 9): mutmut mutates masks.py, functional.py,
# heads.py, multihead.py, fused.py (with its converters) and _checks.py and runs the fast unit tests on each mutant.
# Not part of `make test`: a full run of the 993 mutants took 7 min (0.4 s each; 984 killed, 99.1 %)
# with 2 workers on a shared 2-core machine (load ~5-9); re-testing a list of survivors takes
# about a minute. The 9 survivors are equivalent on a CPU: float("-INF") for float("-inf"),
# register_buffer(persistent=None) for False, dropout at p=0 applied anyway, from_separate's
# .to(device=...) dropped (its weights are on the one device there is), fits=None for False.
#
#   tools/mutation.sh                  # run (or resume) and print killed / survived / score
#   tools/mutation.sh --max-children 1 # fewer workers (default 2)
#   tools/mutation.sh NAME...          # re-test these mutants only (names as `mutmut results`
#                                      # prints them; globs such as 'attention_lab.fused*' work)
#
# The configuration (modules, test selection) is the [mutmut] section of setup.cfg.
# Everything happens in a copy under build/mutation/ (gitignored), so the working tree never
# gets a mutants/ folder and edits made during a run do not leak into it. mutmut keeps its
# results there: a plain re-run skips mutants already decided, so after adding tests pass the
# survivors' names; `rm -rf build/mutation` starts from scratch. To inspect survivors:
#   cd build/mutation && ../../.venv/bin/mutmut results      # list the survivors
#   cd build/mutation && ../../.venv/bin/mutmut show NAME     # the diff of one mutant
# Needs `pip install mutmut==3.8.1` in .venv (it is not a project dependency).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MUTMUT="$ROOT/.venv/bin/mutmut"
PY="$ROOT/.venv/bin/python"
[ -x "$MUTMUT" ] || { echo "mutmut is not installed: $ROOT/.venv/bin/pip install mutmut==3.8.1" >&2; exit 1; }
WORK="$ROOT/build/mutation"
mkdir -p "$WORK"
rm -rf "$WORK/src" "$WORK/tests"
cp -rp "$ROOT/src" "$ROOT/tests" "$ROOT/pyproject.toml" "$ROOT/setup.cfg" "$WORK/"
find "$WORK/src" "$WORK/tests" -name __pycache__ -prune -exec rm -rf {} +
cd "$WORK"
children=2
if [ "${1:-}" = "--max-children" ]; then children="$2"; shift 2; fi
start=$(date +%s)
"$MUTMUT" run --max-children "$children" "$@" || true   # its exit code is not the verdict; the score is
"$MUTMUT" export-cicd-stats >/dev/null
"$PY" - "$(( $(date +%s) - start ))" <<'PY'
import json, sys
s = json.load(open("mutants/mutmut-cicd-stats.json"))
counted = s["total"] - s["skipped"]  # "no tests" counts as surviving: no test runs that code
print(f"mutants {s['total']}: killed {s['killed']}, survived {s['survived']}, timeout {s['timeout']}, "
      f"suspicious {s['suspicious']}, segfault {s['segfault']}, no tests {s['no_tests']}, "
      f"skipped {s['skipped']}")
print(f"killed share {100 * (s['killed'] + s['timeout']) / max(counted, 1):.1f} % (timeouts count as killed); "
      f"wall time {sys.argv[1]} s")
PY
