"""`glossary-check`: the glossary's terms (i18n/glossary.tsv) used in the Chinese prose.

It reads the notebooks' catalogues and, unless ``documents=False``, the Chinese text read in
a browser: the catalogues of i18n/zh_CN/teaching/ (README.po -> README.zh-CN.md, the summary
sheet), whose entries are checked like a notebook's, and the hand-written Chinese teaching
files (teaching/zh-CN/*.md), checked paragraph by paragraph for English terms left in the
Chinese (there is no English beside them to compare with).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .common import (
    CODE_STRING,
    LANG_DIR,
    LOCALE,
    TranslationError,
    catalogue_path,
    load_catalogue,
)
from .extract import literal_prose

DOCUMENT_CATALOGUES = f"i18n/{LOCALE}/teaching/*.po"
# the library's own text (checker feedback, figure labels, the explorer, printed tables)
LIBRARY_CATALOGUES = f"i18n/{LOCALE}/library/*.po"
DOCUMENT_FILES = (f"teaching/{LANG_DIR}/*.md",)

# ---------------------------------------------------------------- glossary


@dataclass
class Term:
    english: str
    chinese: str
    note: str

    @property
    def kept(self) -> bool:
        return self.chinese == self.english


def load_glossary(root: Path) -> list[Term]:
    path = root / "i18n" / "glossary.tsv"
    terms = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) < 2 or not cols[0].strip() or not cols[1].strip():
            raise TranslationError(f"{path}:{n}: want 'english<TAB>chinese<TAB>note', got {line!r}")
        terms.append(
            Term(cols[0].strip(), cols[1].strip(), cols[2].strip() if len(cols) > 2 else "")
        )
    return terms


_NOT_PROSE = [
    re.compile(r"```.*?```", re.DOTALL),  # fenced code
    re.compile(r"\$\$.*?\$\$", re.DOTALL),  # display maths
    re.compile(r"(?<!\\)\$[^$\n]+\$"),  # inline maths
    re.compile(r"`[^`\n]+`"),  # inline code
    re.compile(r"\]\([^)]*\)"),  # link targets
    re.compile(r"<code>.*?</code>", re.DOTALL),  # HTML code (the summary sheet)
    re.compile(r"<su[bp]>[^<]*</su[bp]>"),  # sub- and superscripts: d<sub>head</sub>
    re.compile(r"%\(\w+\)[sd]"),  # a template's fields: %(attention)s
    re.compile(r"<[^>]+>"),  # HTML tags and their attributes
    re.compile(r"https?://\S+"),  # bare URLs
]


# In the library's messages code is plain text: a run of ASCII holding a code character
# (``scores.masked_fill(mask, ...)``, ``blocked = (j > i)``, ``{placeholder}``) is code.
_CODE_RUN = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")
_CODE_CHARS = re.compile(r"[()\[\]=_.@*{}<>|&'\"/:]")


def _without_code(text: str) -> str:
    return _CODE_RUN.sub(lambda m: " " if _CODE_CHARS.search(m.group(0)) else m.group(0), text)


def prose_of(text: str) -> str:
    for pattern in _NOT_PROSE:
        text = pattern.sub(" ", text)
    return text


def _term_pattern(english: str) -> re.Pattern:
    words = [re.escape(w) for w in re.split(r"[\s-]+", english)]
    if words[-1].endswith("y") and len(words[-1]) > 2:  # query -> queries
        words[-1] = words[-1][:-1] + "(?:y|ie)"
    # ASCII boundaries: in Chinese the neighbours of an English word are letters to \\w.
    edge_before, edge_after = r"(?<![A-Za-z0-9_-])", r"(?![A-Za-z0-9_-])"
    body = r"[\s-]+".join(words)
    return re.compile(edge_before + body + r"(?:e?s)?" + edge_after, re.IGNORECASE)


def document_sources(root: Path) -> tuple[list[Path], list[Path]]:
    """The catalogues and the hand-written files of the Chinese teaching text and README,
    and the library's catalogues."""
    catalogues = sorted(root.glob(DOCUMENT_CATALOGUES)) + sorted(root.glob(LIBRARY_CATALOGUES))
    files = sorted(p for pattern in DOCUMENT_FILES for p in root.glob(pattern))
    return catalogues, files


def _paragraphs(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each blank-line-separated block, fenced code kept whole."""
    out, start, run, fenced = [], 1, [], False
    for n, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not line.strip() and not fenced:
            if run:
                out.append((start, "\n".join(run)))
            run = []
            continue
        if not run:
            start = n
        run.append(line)
    if run:
        out.append((start, "\n".join(run)))
    return out


def glossary_check(root: Path, notebooks: list[Path], documents: bool = True) -> list[str]:
    """English glossary terms left in Chinese prose, and English terms whose Chinese is absent.

    A translator comment "glossary-ignore: <english term>" on an entry waives the second check
    for that term (an idiom such as "head start" that does not mean the glossary's sense);
    "glossary-keep: <english term>" waives the first (a name in plain text that cannot be
    marked as code, e.g. the function ``attention`` in a table cell of the summary sheet).
    ``documents``: also the teaching text and README.zh-CN.md (see the module docstring).
    """
    terms = load_glossary(root)
    kept = sorted((t for t in terms if t.kept), key=lambda t: -len(t.english))
    translated = [t for t in terms if not t.kept]

    def findings(where: str, chinese: str, english: str | None, comment: str = "") -> list[str]:
        found = []
        text = prose_of(chinese)
        for t in translated:  # a first-mention gloss "因果掩码（causal mask）" is allowed
            text = re.sub(re.escape(t.chinese) + r"\s*[（(][^（）()]*[)）]", t.chinese, text)
        for t in kept:
            text = _term_pattern(t.english).sub(" ", text)
        source = prose_of(english) if english is not None else ""
        for t in kept:  # "Attention Lab" is a name, not the term "attention"
            source = _term_pattern(t.english).sub(" ", source)
        for t in translated:
            hit = _term_pattern(t.english).search(text)
            if hit and f"glossary-keep: {t.english}" not in comment:
                found.append(f"{where}: English {hit.group(0)!r} left in Chinese; use {t.chinese}")
            elif (
                not hit
                and english is not None
                and _term_pattern(t.english).search(source)
                and t.chinese not in chinese
                and f"glossary-ignore: {t.english}" not in comment
            ):
                found.append(
                    f"{where}: English has {t.english!r} but the Chinese lacks {t.chinese}"
                )
        return found

    def catalogue_findings(cat: Path, unit: str) -> list[str]:
        found = []
        library = cat.parent.name == "library"
        for entry in load_catalogue(cat):
            if entry.obsolete or not entry.msgstr or "fuzzy" in entry.flags:
                continue
            cell = entry.occurrences[0][1] if entry.occurrences else "?"
            where = f"{cat.relative_to(root)} {unit} {cell}"
            chinese, english = entry.msgstr, entry.msgid
            if library:  # plain text: code is not marked, so drop it
                where = f"{cat.relative_to(root)} {':'.join(entry.occurrences[0])}"
                chinese, english = _without_code(chinese), _without_code(english)
            elif entry.msgctxt == CODE_STRING:  # a literal: placeholders and names are code
                chinese, english = literal_prose(chinese), literal_prose(english)
            found += findings(where, chinese, english, entry.tcomment or "")
        return found

    found = []
    for path in notebooks:
        cat = catalogue_path(root, path)
        if cat.exists():
            found += catalogue_findings(cat, "cell")
    if documents:
        catalogues, files = document_sources(root)
        for cat in catalogues:
            found += catalogue_findings(cat, "at")
        for path in files:
            for line, block in _paragraphs(path.read_text(encoding="utf-8")):
                found += findings(f"{path.relative_to(root)}:{line}", block, None)
    return found
