"""README.zh-CN.md and docs/zh-CN/*.md from catalogues: each English page's Markdown blocks ->
its catalogue in i18n/zh_CN/teaching/ (README.po for README.md, docs_<name>.po for docs/<name>.md).

    update_readme(root)   # English blocks merged into the catalogue (fuzzy, like the notebooks)
    build_readme(root)    # catalogue -> README.zh-CN.md
    check_readme(root)    # every reason README.zh-CN.md is not what update + build would give

`translations.py update`, `build` and `check` run these when no notebook paths are given.

One entry per Markdown block of README.md, in order: a block is a heading line, a fenced code
block (blank lines inside it included), a table (consecutive lines starting with "|"), or
any other run of lines between blank lines (a paragraph, a list). A block's common indentation
(inside a list item) stays outside the entry and is put back by `build`. msgctxt says the kind:
"heading", "code" (a fenced block: translate its comments; one that is only commands keeps
msgstr = msgid) or "markdown" (the rest, tables included). In occurrences, the number after
README.md is the block's index.

The language switch line below the title ("[简体中文](README.zh-CN.md)") is not an entry:
`build` writes its Chinese counterpart pointing back to the English page (SWITCH for the
README). Relative links to an English notebook, teaching file or page of DOCUMENTS that has a
Chinese edition are pointed at that edition (notebooks/zh-CN/..., teaching/zh-CN/...,
docs/zh-CN/...), and every relative link is rebased when the Chinese page lives in another
folder than the English one, so the translator keeps the English target.

`check` also holds each translation to its English: a heading keeps its level, and the numbers
(every run of digits, "1,866" and "3.10" as one) are the same, in the same order.

Why not mdpo or translate-toolkit (issue 29, tried 2026-12-02 on README.md): they split it
into 164 (mdpo 2.1.4) or 168 (translate-toolkit 3.20.4) entries, a table cell or a list item
each, and reproduce 5 and 4 of the 45 msgids of README.po; a table row translated cell by cell
loses its context, and switching would retranslate 40 reviewed entries.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import polib

from .common import LANG_DIR, LOCALE, TranslationError, load_catalogue
from .extract import Message
from .merge import merge, save_catalogue

HEADING, CODE, PROSE = "heading", "code", "markdown"
HEADER_TEXT = (
    "Simplified Chinese text of README.md, built into README.zh-CN.md "
    "(tools/catalogues/readme.py).\n"
    "One entry per Markdown block; translate msgstr only, following i18n/glossary.tsv, and keep\n"
    "every number and the heading level; a code block that is only commands keeps its English.\n"
    "Then `make translations`. In occurrences, the number after README.md is a block index."
)


def _relative(target: str, page: str) -> str:
    """``target`` (from the repository root) as a link written in ``page``."""
    return Path(os.path.relpath(target, Path(page).parent)).as_posix()


@dataclass(frozen=True)
class Document:
    english: str  # relative to the repository root
    chinese: str
    catalogue: str

    @property
    def switch_en(self) -> str:
        """The English page's language line."""
        return f"[简体中文]({_relative(self.chinese, self.english)})"

    @property
    def switch(self) -> str:
        """The Chinese page's language line, pointing back to the English page."""
        return f"[English]({_relative(self.english, self.chinese)}) · 简体中文"


# In i18n/zh_CN/teaching/ with the other pages read in a browser: the figures' subset font
# (tools/catalogues/font.py) leaves those out, and i18n/zh_CN/*.po is one catalogue per notebook.
README = Document("README.md", "README.zh-CN.md", f"i18n/{LOCALE}/teaching/README.po")
DOCS = ("library", "install", "development", "measured")  # docs/<name>.md, linked from the README
DOCUMENTS = (README,) + tuple(
    Document(
        f"docs/{name}.md", f"docs/{LANG_DIR}/{name}.md", f"i18n/{LOCALE}/teaching/docs_{name}.po"
    )
    for name in DOCS
)


@dataclass
class Block:
    kind: str  # HEADING, CODE, PROSE, or "switch" (the language line, generated)
    text: str  # dedented
    indent: str = ""


_FENCE = re.compile(r"^\s*(```|~~~)")
_NUMBER = re.compile(r"(?<![A-Za-z_])\d+(?:[.,]\d+)*(?![A-Za-z_])")  # not i18n, lesson01


def _dedent(lines: list[str]) -> tuple[str, str]:
    widths = [len(line) - len(line.lstrip(" ")) for line in lines if line.strip()]
    n = min(widths) if widths else 0
    return " " * n, "\n".join(line[n:] for line in lines)


def split_blocks(text: str, switch_en: str = "") -> list[Block]:
    """A page's blocks in order (see the module docstring for what one block is); the block
    that is ``switch_en`` (default: the README's language line) is the "switch"."""
    switch_en = switch_en or README.switch_en
    lines = text.splitlines()
    blocks: list[Block] = []
    run: list[str] = []

    def flush(kind: str = PROSE) -> None:
        if run:
            indent, body = _dedent(run)
            if body.strip() == switch_en:
                kind = "switch"
            blocks.append(Block(kind, body, indent))
            run.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        if _FENCE.match(line):
            flush()
            fence = _FENCE.match(line).group(1)
            run.append(line)
            i += 1
            while i < len(lines):
                run.append(lines[i])
                i += 1
                if lines[i - 1].strip().startswith(fence):
                    break
            flush(CODE)
            continue
        if not line.strip():
            flush()
        elif re.match(r"^#{1,6}\s", line):
            flush()
            run.append(line)
            flush(HEADING)
        elif line.lstrip().startswith("|") != bool(run and run[-1].lstrip().startswith("|")):
            flush()  # a table starts or ends without a blank line
            run.append(line)
        else:
            run.append(line)
        i += 1
    flush()
    return blocks


SWITCH_EN, SWITCH = README.switch_en, README.switch


def messages_of(blocks: list[Block]) -> list[Message]:
    """One message per block (the switch line excepted); identical blocks share one entry."""
    seen: dict[tuple[str, str], Message] = {}
    for i, block in enumerate(blocks):
        if block.kind == "switch":
            continue
        key = (block.kind, block.text)
        if key in seen:
            seen[key].cells.append(i)
        else:
            seen[key] = Message(block.kind, block.text, [i])
    return list(seen.values())


def localise_links(text: str, root: Path, doc: Document = README) -> str:
    """Relative links of ``doc``'s English -> the Chinese editions of English notebooks,
    teaching files and pages of DOCUMENTS, and rebased to the Chinese page's folder."""
    english_dir, chinese_dir = Path(doc.english).parent, Path(doc.chinese).parent
    pages = {d.english: d.chinese for d in DOCUMENTS}

    def repl(m: re.Match) -> str:
        target, anchor = m.group(1), m.group(2) or ""
        path = Path(os.path.normpath(english_dir / target))  # from the repository root
        zh = path.parent / LANG_DIR / path.name
        if path.as_posix() in pages:
            path = Path(pages[path.as_posix()])
        elif (
            path.parts
            and path.parts[0] in ("notebooks", "teaching", "docs")
            and (LANG_DIR not in path.parts and (root / zh).is_file())
        ):
            path = zh
        elif english_dir == chinese_dir:
            return m.group(0)  # the same link from the same folder
        slash = "/" if target.endswith("/") else ""
        return f"]({_relative(path.as_posix(), doc.chinese)}{slash}{anchor})"

    return re.sub(r"\]\(((?!https?:|#|/)[^)#\s]+)(#[^)\s]*)?\)", repl, text)


def _table(po: polib.POFile) -> dict[tuple[str, str], polib.POEntry]:
    return {(e.msgctxt, e.msgid): e for e in po if not e.obsolete}


def translate_document(
    english: str, po: polib.POFile, root: Path, allow_pending: bool = False, doc: Document = README
):
    """The Chinese document; a TranslationError naming the blocks without a usable entry."""
    table = _table(po)
    out, missing = [], []
    for i, block in enumerate(split_blocks(english, doc.switch_en)):
        if block.kind == "switch":
            text = doc.switch
        else:
            entry = table.get((block.kind, block.text))
            usable = entry is not None and entry.msgstr and "fuzzy" not in entry.flags
            if not usable and not (allow_pending and entry is not None):
                missing.append(f"block {i} ({block.text.splitlines()[0][:50]!r})")
                continue
            text = entry.msgstr if usable else block.text
            text = localise_links(text, root, doc)
        out.append("\n".join(block.indent + line if line else line for line in text.split("\n")))
    if missing:
        raise TranslationError(
            f"{len(missing)} {doc.english} blocks untranslated, fuzzy or not merged (run "
            f"`python -m tools.translations update`, then translate them): " + "; ".join(missing)
        )
    return "\n\n".join(out) + "\n"


def entry_problems(entry: polib.POEntry) -> list[str]:
    """What a translated entry breaks of its English: the heading level, the numbers."""
    found = []
    first = entry.msgstr.splitlines()[0] if entry.msgstr else ""
    if entry.msgctxt == HEADING:
        level = len(entry.msgid) - len(entry.msgid.lstrip("#"))
        if len(first) - len(first.lstrip("#")) != level or "\n" in entry.msgstr.strip():
            found.append(f"heading {entry.msgid!r} must stay one level-{level} heading")
    if _NUMBER.findall(entry.msgid) != _NUMBER.findall(entry.msgstr):
        want, got = _NUMBER.findall(entry.msgid), _NUMBER.findall(entry.msgstr)
        found.append(f"numbers differ in {entry.msgid[:50]!r}: English {want}, Chinese {got}")
    return found


def update_readme(root: Path) -> list[str]:
    report = []
    for doc in DOCUMENTS:
        target = root / doc.catalogue
        old = load_catalogue(target)
        if not target.exists():
            old.header = HEADER_TEXT
        english = (root / doc.english).read_text(encoding="utf-8")
        merged = merge(old, messages_of(split_blocks(english, doc.switch_en)), doc.english)
        report.append(save_catalogue(merged, target, doc.catalogue))
    return report


def build_readme(root: Path, allow_pending: bool = False) -> list[str]:
    lines = []
    for doc in DOCUMENTS:
        po = load_catalogue(root / doc.catalogue)
        english = (root / doc.english).read_text(encoding="utf-8")
        text = translate_document(english, po, root, allow_pending, doc)
        target = root / doc.chinese
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        lines.append(f"{doc.chinese}: written from {doc.catalogue}")
    return lines


def check_readme(root: Path, allow_pending: bool = False) -> list[str]:
    found = []
    for doc in DOCUMENTS:
        cat = root / doc.catalogue
        if not cat.exists():
            found.append(f"{doc.english}: no catalogue {doc.catalogue} (run `update`)")
            continue
        po = load_catalogue(cat)
        english = (root / doc.english).read_text(encoding="utf-8")
        messages = messages_of(split_blocks(english, doc.switch_en))
        table = _table(po)
        current = {(m.msgctxt, m.msgid) for m in messages}
        for m in messages:
            entry = table.get((m.msgctxt, m.msgid))
            where = f"{doc.catalogue} block {m.cells[0]} ({m.msgid.splitlines()[0][:50]!r})"
            if entry is None:
                found.append(f"{where}: English changed after its translation (run `update`)")
            elif not entry.msgstr or "fuzzy" in entry.flags:
                if not allow_pending:
                    kind = "fuzzy" if "fuzzy" in entry.flags else "untranslated"
                    found.append(f"{where}: {kind}")
            else:
                found += [f"{where}: {p}" for p in entry_problems(entry)]
        stale = [key for key in table if key not in current]
        if stale:
            found.append(
                f"{doc.catalogue}: {len(stale)} entries {doc.english} no longer has (run `update`)"
            )
        try:
            want = translate_document(english, po, root, allow_pending, doc)
        except TranslationError:
            continue  # already reported entry by entry
        target = root / doc.chinese
        if not target.exists() or target.read_text(encoding="utf-8") != want:
            found.append(f"{doc.chinese} is not what `build` writes (run `build`)")
    return found
