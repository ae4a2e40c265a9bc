"""Validate hub/z2jh/values.yaml against the Zero to JupyterHub chart's values schema.

    python -m tools.check_z2jh_values CHART_DIR

CHART_DIR is the chart's ``jupyterhub/`` folder, from a checkout of
zero-to-jupyterhub-k8s at the chart's tag (4.4.0) or from ``helm pull --untar
jupyterhub/jupyterhub --version 4.4.0``: it holds ``values.yaml`` (the defaults) and
``values.schema.yaml`` or ``values.schema.json``. As Helm does, the schema is checked on the
defaults merged with our values (maps merged, lists and scalars replaced). Two broken copies
(a misspelt key, a wrong type) must fail, so a schema that checks nothing is caught.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import jsonschema
import yaml

VALUES = Path(__file__).resolve().parents[1] / "hub" / "z2jh" / "values.yaml"


def merge(a: dict, b: dict) -> dict:
    out = copy.deepcopy(a)
    for k, v in b.items():
        both = isinstance(v, dict) and isinstance(out.get(k), dict)
        out[k] = merge(out[k], v) if both else v
    return out


def main(chart: Path) -> int:
    schema_path = chart / "values.schema.yaml"
    if not schema_path.exists():
        schema_path = chart / "values.schema.json"
    text = schema_path.read_text()
    schema = json.loads(text) if schema_path.suffix == ".json" else yaml.safe_load(text)
    defaults = yaml.safe_load((chart / "values.yaml").read_text())
    ours = yaml.safe_load(VALUES.read_text())
    validator = jsonschema.Draft7Validator(schema)
    errors = list(validator.iter_errors(merge(defaults, ours)))
    for e in errors:
        print(f"{'.'.join(map(str, e.path)) or '(top)'}: {e.message}")
    misspelt = copy.deepcopy(ours)
    misspelt["singleuser"]["memroy"] = {"limit": "1G"}
    wrong_type = copy.deepcopy(ours)
    wrong_type["singleuser"]["cpu"]["limit"] = "one"
    controls = [list(validator.iter_errors(merge(defaults, v))) for v in (misspelt, wrong_type)]
    if not all(controls):
        print("a broken copy passed: the schema checks nothing")
        return 1
    print(f"{VALUES.name}: {len(errors)} errors against {schema_path} (both broken copies fail)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
