"""`update`: the English notebooks' strings merged into their catalogues, as msgmerge does.

Why not Babel's ``Catalog.update`` (Babel is already a test dependency; measured for issue 29
on the 15 notebook catalogues, 2026-12-02): with nothing to merge, ``update`` then
``write_po`` changes all 15 files (19 to 103 lines each: a header of Babel's fields with a
POT-Creation-Date that changes on every run, a ``python-brace-format`` flag on each entry with
braces, cell 0's occurrence without its number); it has no compendium, which fills the 92
entries that more than one catalogue shares; and it does not look among obsolete entries, so
a cell removed and later restored comes back untranslated (here: back, with its reviewed
translation). GNU ``msgmerge`` is not on a reader's machine. What is ours is the matching
below (about 60 lines); reading and writing the files is polib's.
"""

from __future__ import annotations

import copy
import difflib
from pathlib import Path

import polib

from .common import (
    FUZZY_RATIO,
    HEADER,
    LOCALE,
    catalogue_path,
    load_catalogue,
    new_catalogue,
    read_notebook,
)
from .extract import Message, extract


def _closest(msg: Message, candidates: list[polib.POEntry]) -> polib.POEntry | None:
    best, best_ratio = None, FUZZY_RATIO
    for old in candidates:
        if old.msgctxt != msg.msgctxt or not old.msgstr:
            continue
        matcher = difflib.SequenceMatcher(None, old.msgid, msg.msgid, autojunk=False)
        if matcher.real_quick_ratio() < best_ratio or matcher.quick_ratio() < best_ratio:
            continue
        ratio = matcher.ratio()
        if ratio >= best_ratio:
            best, best_ratio = old, ratio
    return best


def merge(
    po: polib.POFile,
    messages: list[Message],
    source_name: str,
    compendium: dict[tuple[str, str], polib.POEntry] | None = None,
) -> polib.POFile:
    """A new catalogue for `messages`, carrying translations over from `po` like msgmerge.

    `compendium` (reviewed entries of the other catalogues) fills a new entry whose English is
    word for word the same elsewhere, e.g. the setup cell's comments or the exercises notebook,
    which make_exercises.py writes from the solutions; like `msgmerge --compendium`, not fuzzy.
    """
    compendium = compendium or {}
    active = {(e.msgctxt, e.msgid): e for e in po if not e.obsolete}
    obsolete = {(e.msgctxt, e.msgid): e for e in po if e.obsolete}
    out = new_catalogue()
    out.metadata.update({k: v for k, v in po.metadata.items() if k not in HEADER})
    out.header = po.header or out.header
    used: set[tuple[str, str]] = set()
    for msg in messages:
        key = (msg.msgctxt, msg.msgid)
        occurrences = [(source_name, str(i)) for i in msg.cells]
        old = active.get(key) or obsolete.get(key)
        if old is not None:
            entry = copy.deepcopy(old)
            entry.obsolete = False
            used.add(key)
        else:
            entry = polib.POEntry(msgctxt=msg.msgctxt, msgid=msg.msgid, msgstr="")
            candidates = list(active.values()) + list(obsolete.values())
            if key in compendium:
                entry.msgstr = compendium[key].msgstr
                entry.tcomment = compendium[key].tcomment
            elif (near := _closest(msg, candidates)) is not None:
                entry.msgstr = near.msgstr
                entry.flags = ["fuzzy"]
                entry.previous_msgctxt = None
                entry.previous_msgid = near.msgid
                entry.tcomment = near.tcomment
        entry.occurrences = occurrences
        out.append(entry)
    for key, old in list(active.items()) + list(obsolete.items()):
        if key in used or not old.msgstr or any(e.msgid == old.msgid for e in out if e.obsolete):
            continue
        gone = copy.deepcopy(old)
        gone.obsolete, gone.occurrences = True, []
        out.append(gone)
    return out


def save_catalogue(po: polib.POFile, target: Path, name) -> str:
    """Write ``po`` to ``target`` unless the file already holds it; one line of counts."""
    text = str(po)
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    active = [e for e in po if not e.obsolete]
    return (
        f"{name}: {len(active)} entries, "
        f"{sum(1 for e in active if e.msgstr and 'fuzzy' not in e.flags)} translated, "
        f"{sum(1 for e in active if 'fuzzy' in e.flags)} fuzzy, "
        f"{sum(1 for e in active if not e.msgstr)} untranslated, "
        f"{sum(1 for e in po if e.obsolete)} obsolete"
    )


def update(root: Path, notebooks: list[Path]) -> list[str]:
    report = []
    compendium: dict[tuple[str, str], polib.POEntry] = {}

    def remember(po: polib.POFile) -> None:
        for e in po:
            if not e.obsolete and e.msgstr and "fuzzy" not in e.flags:
                compendium.setdefault((e.msgctxt, e.msgid), e)

    for other in sorted((root / "i18n" / LOCALE).glob("*.po")):
        remember(load_catalogue(other))
    for path in notebooks:
        nb = read_notebook(path)
        target = catalogue_path(root, path)
        old = load_catalogue(target)
        merged = merge(old, extract(nb), f"notebooks/{path.name}", compendium)
        remember(merged)
        report.append(save_catalogue(merged, target, target.relative_to(root)))
    return report
