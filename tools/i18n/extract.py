"""What is translated: one entry per markdown cell, one per prose comment of a code cell."""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field

from .common import COMMENT, MARKDOWN, TranslationError

# ---------------------------------------------------------------- comments

_SHAPE = r"\([\w\s,+\-*/.]*\)"
_SHAPE_PREFIX = re.compile(rf"^{_SHAPE}(?:\s*(?:@|->|→|\*|×)\s*{_SHAPE})*(?:\s*[,;:])?\s*")
_WORD = re.compile(r"(?<![\w.])[A-Za-z]{2,}(?![\w(])")
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
    lines = source.splitlines(keepends=True)
    # IPython magics and shell escapes are not Python; blank them for the tokenizer.
    masked = "".join(
        re.sub(r"[^\n]", " ", ln) if ln.lstrip().startswith(("%", "!")) else ln for ln in lines
    )
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
    comments = code_comments(source)
    if not comments:
        return source
    lines = source.splitlines(keepends=True)
    for c in comments:
        line = lines[c.row]
        end = c.col + len(c.text)
        lines[c.row] = line[: c.col] + c.prefix + translate(c.prose) + line[end:]
    return "".join(lines)


# ---------------------------------------------------------------- extraction


@dataclass
class Message:
    msgctxt: str
    msgid: str
    cells: list[int] = field(default_factory=list)


def is_generated(cell) -> bool:
    return "colab-badge" in cell.get("metadata", {}).get("tags", [])


def extract(nb) -> list[Message]:
    """Translatable strings of one notebook, in order, each (msgctxt, msgid) once."""
    found: dict[tuple[str, str], Message] = {}
    for index, cell in enumerate(nb["cells"]):
        kind, source = cell["cell_type"], cell["source"]
        if kind == "markdown" and not is_generated(cell) and source.strip():
            keys = [(MARKDOWN, source)]
        elif kind == "code":
            keys = [(COMMENT, c.prose) for c in code_comments(source)]
        else:
            keys = []
        for key in keys:
            found.setdefault(key, Message(*key)).cells.append(index)
    return list(found.values())
