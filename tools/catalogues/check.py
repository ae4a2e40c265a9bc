"""`check`: every reason the Chinese edition is not what `update` + `build` would give."""

from __future__ import annotations

from pathlib import Path

from .build import literal_problems, problems, translate_notebook
from .common import (
    LANG_DIR,
    TranslationError,
    catalogue_path,
    load_catalogue,
    read_notebook,
    translated_path,
)
from .extract import extract

# ---------------------------------------------------------------- check

_VOLATILE_METADATA = {"execution", "collapsed", "scrolled", "ExecuteTime"}


def _sources(nb) -> list[tuple]:
    return [
        (
            c["cell_type"],
            c["source"],
            {k: v for k, v in c.get("metadata", {}).items() if k not in _VOLATILE_METADATA},
        )
        for c in nb["cells"]
    ]


def check(root: Path, notebooks: list[Path], allow_pending: bool = False) -> list[str]:
    """Every reason the Chinese edition is not what `update` + `build` would give.

    ``allow_pending``: entries marked for retranslation (fuzzy, untranslated) are not
    reasons; everything else still is (see ``pending`` for the list of those entries)."""
    found = []
    names = {p.name for p in (root / "notebooks").glob("*.ipynb")}
    for path in notebooks:
        cat = catalogue_path(root, path)
        if not cat.exists():
            found.append(f"{path.name}: no catalogue {cat.relative_to(root)} (run `update`)")
            continue
        nb = read_notebook(path)
        po = load_catalogue(cat)
        messages = extract(nb)
        bad = problems(po, messages)
        broken = literal_problems(po, messages, path.name)
        found += broken
        for line in bad["missing"]:
            found.append(f"{path.name}: English changed after its translation, {line}")
        if not allow_pending:
            for kind in ("fuzzy", "untranslated"):
                found += [f"{path.name}: {kind} {line}" for line in bad[kind]]
        current = {(m.msgctxt, m.msgid) for m in messages}
        stale = [e for e in po if not e.obsolete and (e.msgctxt, e.msgid) not in current]
        if stale:
            found.append(
                f"{path.name}: catalogue has {len(stale)} entries the English no longer has "
                "(run `update`)"
            )
        target = translated_path(root, path)
        if not target.exists():
            found.append(f"{path.name}: {target.relative_to(root)} missing (run `build`)")
            continue
        if broken:
            continue
        try:
            want = _sources(translate_notebook(nb, po, path.name, names))
        except TranslationError as err:
            found.append(str(err))
            continue
        have = _sources(read_notebook(target))
        if want != have:
            if len(want) != len(have):
                where = f"{len(have)} cells, expected {len(want)}"
            else:
                first = next(i for i, (a, b) in enumerate(zip(want, have)) if a != b)
                where = f"first difference in cell {first}"
            found.append(f"{LANG_DIR}/{path.name} is not what `build` writes ({where})")
    if {p.name for p in notebooks} == names and (root / "notebooks" / LANG_DIR).is_dir():
        for extra in sorted((root / "notebooks" / LANG_DIR).glob("*.ipynb")):
            if extra.name not in names:
                found.append(f"{LANG_DIR}/{extra.name} has no English notebook (delete it)")
    return found


def pending(root: Path, notebooks: list[Path]) -> dict[str, int]:
    """Per notebook, the entries marked for retranslation (fuzzy or untranslated)."""
    out = {}
    for path in notebooks:
        cat = catalogue_path(root, path)
        if cat.exists():
            bad = problems(load_catalogue(cat), extract(read_notebook(path)))
            if bad["fuzzy"] or bad["untranslated"]:
                out[path.name] = len(bad["fuzzy"]) + len(bad["untranslated"])
    return out
