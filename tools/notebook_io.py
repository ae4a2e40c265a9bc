"""Reading and writing notebooks: the one writer every tool in tools/ uses.

    from tools.notebook_io import read_notebook, dumps_notebook, write_notebook

``write_notebook(nb, path)`` stores a notebook the way the repository keeps them: without
nbclient's per-cell execution timestamps (``metadata.execution``), with neighbouring prints of
one stream joined into one output (``clean``), then written by ``nbformat.write``. It takes an
``nbformat`` NotebookNode or the plain dict ``read_notebook`` returns.

What stays hand-written, and why. Writing is nbformat's (``dumps_notebook`` is
``nbformat.writes`` plus the final newline ``nbformat.write`` adds); it was a copy of nbformat's
JSON layout until issue 29. ``clean`` is ours: nbformat has no notion of joining a cell's
prints. Reading stays plain ``json`` (each cell's ``source`` one string): ``import nbformat``
costs 1.6-1.8 s here (jsonschema's format checkers: rfc3987_syntax alone 1.1 s), longer than
all of ``tools/translations.py update`` on 15 notebooks (1.3 s), which only reads; so nbformat
is imported when a notebook is written, not before. Nothing here validates a notebook against
the schema on reading; ``nbformat.writes`` validates what it writes, the tests and nbval the rest.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["NotebookError", "read_notebook", "dumps_notebook", "write_notebook", "clean"]


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


def dumps_notebook(nb: dict) -> str:
    """The file text of ``nb`` as ``nbformat.write`` writes it (``nb`` is not changed)."""
    import nbformat  # 1.6 s: only the tools that write a notebook pay it

    text = nbformat.writes(nbformat.from_dict(nb))
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
