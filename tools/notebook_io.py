"""Reading and writing notebooks: the one writer every tool in tools/ uses.

    from notebook_io import read_notebook, dumps_notebook, write_notebook

``write_notebook(nb, path)`` stores a notebook the way the repository keeps them: without
nbclient's per-cell execution timestamps (``metadata.execution``), with neighbouring prints of
one stream joined into one output, and as JSON byte for byte what ``nbformat.write`` gives
(indent 1, sorted keys, multi-line strings split into lines, transient keys dropped, a final
newline; tests/test_translations.py checks every notebook). It takes an ``nbformat``
NotebookNode or the plain dict ``read_notebook`` returns.

Plain ``json``, no ``import nbformat``: that import costs seconds (jsonschema's format
checkers), longer than all the work of tools/translations.py. Nothing here validates a
notebook against the schema; the tests and nbval do.
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path

__all__ = ["NotebookError", "read_notebook", "dumps_notebook", "write_notebook", "clean"]

# What nbformat's split_lines() splits (nbformat/v4/rwbase.py): text/* and these two.
_SPLIT_MIMES = {"application/javascript", "image/svg+xml"}


class NotebookError(ValueError):
    """A file that is not a version-4 notebook."""


def read_notebook(path: Path) -> dict:
    """The notebook at ``path`` as plain JSON, each cell's ``source`` one string."""
    path = Path(path)
    nb = json.loads(path.read_text(encoding="utf-8"))
    if nb.get("nbformat") != 4:
        raise NotebookError(f"{path}: nbformat {nb.get('nbformat')}, expected 4")
    for cell in nb["cells"]:
        if isinstance(cell.get("source"), list):
            cell["source"] = "".join(cell["source"])
    return nb


def _split_bundle(data: dict) -> None:
    for key, value in list(data.items()):
        if isinstance(value, str) and (key.startswith("text/") or key in _SPLIT_MIMES):
            data[key] = value.splitlines(True)


def _bytes_as_base64(value):
    if isinstance(value, bytes):  # as nbformat's BytesEncoder
        return base64.encodebytes(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def dumps_notebook(nb: dict) -> str:
    """The file text of ``nb``, as ``nbformat.write`` writes it (``nb`` is not changed)."""
    nb = copy.deepcopy(nb)
    for key in ("orig_nbformat", "orig_nbformat_minor", "signature"):
        nb.get("metadata", {}).pop(key, None)
    for cell in nb["cells"]:
        cell.get("metadata", {}).pop("trusted", None)
        if isinstance(cell.get("source"), str):
            cell["source"] = cell["source"].splitlines(True)
        for attachment in cell.get("attachments", {}).values():
            _split_bundle(attachment)
        if cell.get("cell_type") != "code":
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") in ("execute_result", "display_data"):
                _split_bundle(output.get("data", {}))
            elif output.get("output_type") == "stream" and isinstance(output.get("text"), str):
                output["text"] = output["text"].splitlines(True)
    text = json.dumps(
        nb,
        indent=1,
        sort_keys=True,
        separators=(",", ": "),
        ensure_ascii=False,
        default=_bytes_as_base64,
    )
    return text if text.endswith("\n") else text + "\n"


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else value


def clean(nb: dict) -> None:
    """Drop execution timestamps and join neighbouring outputs of one stream, in place.

    How a cell's prints arrive in pieces depends on the machine's load; joined, the stored
    notebook is the same from run to run (nbval joins them too before comparing).
    """
    for cell in nb["cells"]:
        cell.get("metadata", {}).pop("execution", None)
        if cell.get("cell_type") != "code":
            continue
        merged: list = []
        for out in cell.get("outputs", []):
            last = merged[-1] if merged else None
            if (
                last is not None
                and out.get("output_type") == last.get("output_type") == "stream"
                and out.get("name") == last.get("name")
            ):
                last["text"] = _text(last["text"]) + _text(out["text"])
            else:
                merged.append(out)
        cell["outputs"] = merged


def write_notebook(nb: dict, path: Path, *, cleaned: bool = True) -> None:
    """Save ``nb`` in the repository's format, cleaned first (``clean``, in place) unless
    ``cleaned=False`` (tools/translations.py build: outputs exactly as the English has them)."""
    if cleaned:
        clean(nb)
    Path(path).write_text(dumps_notebook(nb), encoding="utf-8")
