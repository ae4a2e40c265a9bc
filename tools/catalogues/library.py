"""The library's own text (gettext domain ``attention_lab``): extract, merge, compile, check.

Messages are found with Babel's Python extractor: the arguments of ``_``, ``gettext``,
``N_``, ``error_text`` and ``pgettext`` (context first) in ``src/attention_lab``. Each
message lives in one catalogue of ``i18n/zh_CN/library/``, chosen by the first file that
uses it (PARTS), so several people can translate different parts at once. ``compile``
writes every translated entry of all parts into one ``attention_lab.mo`` inside the
package; ``check`` fails when that file is not what ``compile`` would write.
"""

from __future__ import annotations

import fnmatch
import io
import re
from pathlib import Path

import polib

from .common import HEADER, LOCALE, TranslationError, load_catalogue
from .extract import Message
from .merge import merge, save_catalogue

PACKAGE = Path("src/attention_lab")
LIBRARY_DIR = Path("i18n") / LOCALE / "library"
MO_PATH = PACKAGE / "locale" / LOCALE / "LC_MESSAGES" / "attention_lab.mo"
KEYWORDS = {
    "_": None,
    "gettext": None,
    "N_": None,
    "error_text": None,
    "pgettext": ((1, "c"), 2),
}
# part -> file patterns (relative to src/attention_lab); the first match wins.
PARTS: list[tuple[str, tuple[str, ...]]] = [
    ("exercises", ("exercises/*",)),
    ("explorer", ("viz/explorer/*", "viz/headgrid.py")),
    ("figures", ("viz/*", "bench/figures.py")),
    (
        "errors",
        (
            "_checks.py",
            "masks.py",
            "functional.py",
            "heads.py",
            "multihead.py",
            "fused.py",
            "convert.py",
            "rope.py",
            "kv_cache.py",
            "latent.py",
            "config.py",
            "decoder.py",
            "tiny_lm.py",
            "device.py",
            "interventions/*",
        ),
    ),  # fmt: skip
    ("output", ("*",)),
]
_PLACEHOLDER = re.compile(r"\{[^{}]*\}|%\(?\w*\)?[sdfr]")


def part_of(relative: str) -> str:
    for part, patterns in PARTS:
        if any(fnmatch.fnmatch(relative, p) for p in patterns):
            return part
    raise AssertionError(relative)  # "*" matches everything


def part_path(root: Path, part: str) -> Path:
    return root / LIBRARY_DIR / f"{part}.po"


def extract_library(root: Path) -> dict[str, list[Message]]:
    """Per part, the library's messages in source order, each once (occurrences = lines)."""
    from babel.messages.extract import extract_from_file

    seen: dict[tuple[str | None, str], Message] = {}
    where: dict[tuple[str | None, str], list[tuple[str, int]]] = {}
    parts: dict[str, list[Message]] = {part: [] for part, _ in PARTS}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        relative = path.relative_to(root / PACKAGE).as_posix()
        for lineno, message, _comments, context in extract_from_file(
            "python", str(path), keywords=KEYWORDS, comment_tags=()
        ):
            if not isinstance(message, str) or not message:
                raise TranslationError(
                    f"{PACKAGE}/{relative}:{lineno}: translate one literal string per call "
                    f"(got {message!r}); build the variable part with .format() afterwards"
                )
            key = (context, message)
            if key not in seen:
                seen[key] = Message(context, message, [])
                parts[part_of(relative)].append(seen[key])
            where.setdefault(key, []).append((f"{PACKAGE}/{relative}", lineno))
    for messages in parts.values():
        for msg in messages:
            msg.cells = where[(msg.msgctxt, msg.msgid)]
    return parts


def _header(po: polib.POFile, part: str) -> None:
    po.header = (
        f"Simplified Chinese text of the attention_lab library: {part} "
        "(tools/catalogues/library.py).\n"
        "Translate msgstr only, following i18n/glossary.tsv; keep every {placeholder} as is;\n"
        "then `make translations`. Occurrences are file:line."
    )
    po.metadata = {**HEADER, **{k: v for k, v in po.metadata.items() if k not in HEADER}}


def update_library(root: Path, only: list[str] | None = None) -> list[str]:
    report = []
    for part, messages in extract_library(root).items():
        if only and part not in only:
            continue
        target = part_path(root, part)
        old = load_catalogue(target)
        merged = merge(old, messages, "library")
        for entry, msg in zip((e for e in merged if not e.obsolete), messages):
            entry.occurrences = [(f, str(n)) for f, n in msg.cells]
        _header(merged, part)
        report.append(save_catalogue(merged, target, target.relative_to(root)))
    return report


def _entries(root: Path) -> list[polib.POEntry]:
    out = []
    for part, _ in PARTS:
        path = part_path(root, part)
        if path.exists():
            out += [e for e in load_catalogue(path) if not e.obsolete]
    return out


def mo_bytes(root: Path) -> bytes:
    """The compiled catalogue: every translated, reviewed entry of every part."""
    mo = polib.MOFile()
    mo.metadata = dict(HEADER)
    for e in _entries(root):
        if e.msgstr and "fuzzy" not in e.flags:
            mo.append(polib.MOEntry(msgctxt=e.msgctxt, msgid=e.msgid, msgstr=e.msgstr))
    buffer = io.BytesIO(mo.to_binary())
    return buffer.getvalue()


def compile_library(root: Path) -> list[str]:
    target = root / MO_PATH
    data = mo_bytes(root)
    if target.exists() and target.read_bytes() == data:
        return [f"{MO_PATH}: already current"]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return [f"wrote {MO_PATH} ({len(data):,} bytes)"]


def placeholders(text: str) -> list[str]:
    return sorted(_PLACEHOLDER.findall(text))


def check_library(root: Path, allow_pending: bool = False) -> list[str]:
    """Every reason the library's Chinese is not complete and compiled."""
    found = []
    parts = extract_library(root)
    for part, messages in parts.items():
        path = part_path(root, part)
        if not path.exists():
            if messages:
                found.append(f"{path.relative_to(root)} missing (run `update`)")
            continue
        po = load_catalogue(path)
        table = {(e.msgctxt, e.msgid): e for e in po if not e.obsolete}
        for msg in messages:
            entry = table.get((msg.msgctxt, msg.msgid))
            file, line = msg.cells[0]
            if entry is None:
                found.append(f"{part}.po: not merged yet ({file}:{line}; run `update`)")
            elif not allow_pending and ("fuzzy" in entry.flags or not entry.msgstr):
                kind = "fuzzy" if entry.msgstr else "untranslated"
                found.append(f"{part}.po: {kind} {file}:{line}: {msg.msgid[:60]!r}")
            elif entry.msgstr and placeholders(entry.msgstr) != placeholders(entry.msgid):
                found.append(
                    f"{part}.po: {file}:{line}: the translation's placeholders "
                    f"{placeholders(entry.msgstr)} differ from the English "
                    f"{placeholders(entry.msgid)}"
                )
        stale = len(table) - len({(m.msgctxt, m.msgid) for m in messages} & set(table))
        if stale:
            found.append(f"{part}.po: {stale} entries the library no longer has (run `update`)")
    target = root / MO_PATH
    if not target.exists() or target.read_bytes() != mo_bytes(root):
        found.append(f"{MO_PATH} is not what `build` compiles (run `build`)")
    return found
