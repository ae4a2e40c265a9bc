"""`glossary-check`: the glossary's terms (i18n/glossary.tsv) used in the Chinese prose."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .common import TranslationError, catalogue_path, load_catalogue

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
    re.compile(r"<[^>]+>"),  # HTML tags and their attributes
    re.compile(r"https?://\S+"),  # bare URLs
]


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


def glossary_check(root: Path, notebooks: list[Path]) -> list[str]:
    """English glossary terms left in Chinese prose, and English terms whose Chinese is absent.

    A translator comment "glossary-ignore: <english term>" on an entry waives the second check
    for that term (an idiom such as "head start" that does not mean the glossary's sense).
    """
    terms = load_glossary(root)
    kept = sorted((t for t in terms if t.kept), key=lambda t: -len(t.english))
    translated = [t for t in terms if not t.kept]
    found = []
    for path in notebooks:
        cat = catalogue_path(root, path)
        if not cat.exists():
            continue
        for entry in load_catalogue(cat):
            if entry.obsolete or not entry.msgstr or "fuzzy" in entry.flags:
                continue
            text = prose_of(entry.msgstr)
            for t in translated:  # a first-mention gloss "因果掩码（causal mask）" is allowed
                text = re.sub(re.escape(t.chinese) + r"\s*[（(][^（）()]*[)）]", t.chinese, text)
            for t in kept:
                text = _term_pattern(t.english).sub(" ", text)
            cell = entry.occurrences[0][1] if entry.occurrences else "?"
            where = f"{cat.relative_to(root)} cell {cell}"
            source = prose_of(entry.msgid)
            for t in translated:
                hit = _term_pattern(t.english).search(text)
                if hit:
                    found.append(
                        f"{where}: English {hit.group(0)!r} left in Chinese; use {t.chinese}"
                    )
                elif (
                    _term_pattern(t.english).search(source)
                    and t.chinese not in entry.msgstr
                    and f"glossary-ignore: {t.english}" not in entry.tcomment
                ):
                    found.append(
                        f"{where}: English has {t.english!r} but the Chinese lacks {t.chinese}"
                    )
    return found
