"""What the parts of the Chinese edition's tooling share: names, paths, catalogues, errors."""

from __future__ import annotations

from pathlib import Path

import polib

from tools.notebook_io import NotebookError
from tools.notebook_io import read_notebook as _read_notebook

ROOT = Path(__file__).resolve().parents[2]
LANG_DIR = "zh-CN"  # notebooks/zh-CN/
LOCALE = "zh_CN"  # i18n/zh_CN/
FUZZY_RATIO = 0.6
MARKDOWN, COMMENT, CODE_STRING = "markdown", "code-comment", "code-string"
HEADER = {
    "Project-Id-Version": "attention-lab",
    "Language": LOCALE,
    "MIME-Version": "1.0",
    "Content-Type": "text/plain; charset=UTF-8",
    "Content-Transfer-Encoding": "8bit",
    "Plural-Forms": "nplurals=1; plural=0;",
}


class TranslationError(Exception):
    """A problem the user must fix; the message says what and how."""


# ---------------------------------------------------------------- paths


def english_notebooks(root: Path, paths: list[str] | None = None) -> list[Path]:
    if paths:
        out = [Path(p).resolve() for p in paths]
        for p in out:
            if not p.is_file():
                raise TranslationError(f"{p}: no such notebook")
            if p.parent.name == LANG_DIR:
                raise TranslationError(f"{p}: pass the English notebook, not the {LANG_DIR} one")
        return out
    return sorted((root / "notebooks").glob("*.ipynb"))


def catalogue_path(root: Path, notebook: Path) -> Path:
    return root / "i18n" / LOCALE / f"{notebook.stem}.po"


def translated_path(root: Path, notebook: Path) -> Path:
    return root / "notebooks" / LANG_DIR / notebook.name


def read_notebook(path: Path) -> dict:
    """The notebook as plain JSON (tools/notebook_io.py), a TranslationError if not nbformat 4."""
    try:
        return _read_notebook(path)
    except NotebookError as err:
        raise TranslationError(str(err)) from err


# ---------------------------------------------------------------- catalogues


def new_catalogue() -> polib.POFile:
    po = polib.POFile(wrapwidth=0)
    po.header = (
        "Simplified Chinese text of one Attention Lab notebook (see tools/translations.py).\n"
        "Translate msgstr only, following i18n/glossary.tsv; then `make translations`.\n"
        "In occurrences, the number after the notebook is a cell index."
    )
    po.metadata = dict(HEADER)
    return po


def load_catalogue(path: Path) -> polib.POFile:
    if not path.exists():
        return new_catalogue()
    try:
        return polib.pofile(str(path), wrapwidth=0)
    except (OSError, ValueError) as err:
        raise TranslationError(
            f"{path}: not a readable PO file ({err}); fix it in a PO editor"
        ) from err
