"""What is translated: one entry per markdown cell, one per prose comment of a code cell and
one per user-visible string literal of a code cell (see ``code_strings``).

Why not mdpo or translate-toolkit (issue 29; both tried on the 15 notebooks' markdown cells,
2026-12-02, mdpo 2.1.4 and translate-toolkit 3.20.4): both split a cell into paragraphs,
headings and list items, one line each, so of today's 508 markdown msgids mdpo reproduces 46
and translate-toolkit 43; neither reads a notebook's code cells, which hold 867 of the 1,375
entries (348 comments, 519 string literals). Switching would turn 1,329 reviewed entries
into new ones to translate again, and the code cells would still need this module, literals.py
and build.py. Catalogue entries (and their ``glossary-ignore`` notes) are polib's.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field

from .common import CODE_STRING, COMMENT, MARKDOWN, TranslationError
from .literal_check import parse_literal
from .literals import (
    _WORD,
    _line_starts,
    _mask,
    code_strings,
    literal_text,
    logic_context,
    parse_cell,
)

# ---------------------------------------------------------------- comments

_SHAPE = r"\([\w\s,+\-*/.]*\)"
_SHAPE_PREFIX = re.compile(rf"^{_SHAPE}(?:\s*(?:@|->|→|\*|×)\s*{_SHAPE})*(?:\s*[,;:])?\s*")
_PRAGMA = re.compile(r"^(noqa|type:|fmt:|pragma|ruff:|pylint:|isort:)", re.IGNORECASE)


def split_comment(body: str) -> tuple[str, str] | None:
    """Split a comment's text (after "# ") into (kept prefix, prose) or None when not prose.

    >>> split_comment("(T, T)  1 on and below the diagonal")
    ('(T, T)  ', '1 on and below the diagonal')
    >>> split_comment("(T, T) @ (T, D) -> (T, D)") is None
    True
    """
    if _PRAGMA.match(body):
        return None
    match = _SHAPE_PREFIX.match(body)
    prefix = match.group(0) if match else ""
    prose = body[len(prefix) :]
    if len(_WORD.findall(prose)) < 2 or prose.startswith(("{", "[")):
        return None  # code, a shape, or a one-word label such as "cat"
    return prefix, prose


@dataclass
class Comment:
    row: int  # 0-based line in the cell
    col: int  # column of "#"
    text: str  # whole comment token, "# ..."
    prefix: str  # "# " + kept shape prefix
    prose: str  # the msgid


def code_comments(source: str) -> list[Comment]:
    """Prose comments of a code cell, found with the tokenizer (so '#' inside strings is safe)."""
    masked = _mask(source)
    found = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(masked).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError) as err:
        raise TranslationError(f"cannot tokenize a code cell ({err}):\n{source[:200]}") from err
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        raw = tok.string
        body = raw[1:].removeprefix(" ")
        if raw.startswith("#!") or raw.startswith("#|"):
            continue
        parts = split_comment(body)
        if parts is None:
            continue
        keep, prose = parts
        lead = raw[: len(raw) - len(body)]
        found.append(Comment(tok.start[0] - 1, tok.start[1], raw, lead + keep, prose))
    return found


def replace_comments(source: str, translate) -> str:
    """Source with each prose comment replaced by translate(prose); code bytes unchanged."""
    return replace_code(source, translate, None)


def replace_code(source: str, comment, literal, context=None) -> str:
    """Source with each prose comment replaced by ``comment(prose)`` and, unless ``literal``
    is None, each extracted string literal by ``literal(CodeString)`` (its new source text);
    every other character unchanged. ``context``: the notebook's, see ``notebook_context``."""
    comments = code_comments(source)
    strings = code_strings(source, context) if literal is not None else []
    if not comments and not strings:
        return source
    starts = _line_starts(source)
    edits = [
        (starts[c.row] + c.col, starts[c.row] + c.col + len(c.text), c.prefix + comment(c.prose))
        for c in comments
    ]
    edits += [(s.start, s.end, literal(s)) for s in strings]
    out = source
    for start, end, text in sorted(edits, reverse=True):
        out = out[:start] + text + out[end:]
    return out


# ---------------------------------------------------------------- extraction


@dataclass
class Message:
    msgctxt: str
    msgid: str
    cells: list[int] = field(default_factory=list)


def is_generated(cell) -> bool:
    return "colab-badge" in cell.get("metadata", {}).get("tags", [])


def notebook_context(nb) -> tuple[set[str], set[str]]:
    """The strings and variables a notebook's code uses in logic (see ``code_strings``)."""
    trees = []
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            try:
                trees.append(parse_cell(cell["source"]))
            except SyntaxError as err:
                raise TranslationError(f"cell {index}: cannot parse the code ({err})") from err
    return logic_context(trees)


def extract(nb) -> list[Message]:
    """Translatable strings of one notebook, in order, each (msgctxt, msgid) once."""
    found: dict[tuple[str, str], Message] = {}
    context = None
    for index, cell in enumerate(nb["cells"]):
        kind, source = cell["cell_type"], cell["source"]
        if kind == "markdown" and not is_generated(cell) and source.strip():
            keys = [(MARKDOWN, source)]
        elif kind == "code":
            context = context or notebook_context(nb)
            spans = [(c.row, c.col, (COMMENT, c.prose)) for c in code_comments(source)]
            starts = _line_starts(source)
            spans = [(starts[row] + col, key) for row, col, key in spans]
            spans += [(s.start, (CODE_STRING, s.text)) for s in code_strings(source, context)]
            keys = [key for _, key in sorted(spans)]
        else:
            keys = []
        for key in keys:
            found.setdefault(key, Message(*key)).cells.append(index)
    return list(found.values())


_CODE_IN_TEXT = re.compile(r"\w+\([^()]*\)|[A-Za-z_]\w*(?:\.\w+)+|\w*_\w*|'[^']*'|\"[^\"]*\"")


def literal_prose(text: str) -> str:
    """The prose of a code-string entry (its msgid or msgstr) for the glossary check: the
    literal's text without placeholders, calls, dotted or snake_case names and quoted
    words, which are code the translation keeps (f"mask {holder.mask.device}")."""
    node = parse_literal(text)
    if node is None:
        return text
    return _CODE_IN_TEXT.sub(" ", literal_text(node))
