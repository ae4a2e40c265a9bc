"""What is translated: one entry per markdown cell, one per prose comment of a code cell and
one per user-visible string literal of a code cell (see ``code_strings``)."""

from __future__ import annotations

import ast
import io
import re
import string
import tokenize
from collections import Counter
from dataclasses import dataclass, field

from .common import CODE_STRING, COMMENT, MARKDOWN, TranslationError

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


def _mask(source: str) -> str:
    """IPython magics and shell escapes are not Python: blank them (same length) for the
    tokenizer and the parser."""
    lines = source.splitlines(keepends=True)
    return "".join(
        re.sub(r"[^\n]", " ", ln) if ln.lstrip().startswith(("%", "!")) else ln for ln in lines
    )


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


def _line_starts(source: str) -> list[int]:
    starts, pos = [], 0
    for line in source.splitlines(keepends=True):
        starts.append(pos)
        pos += len(line)
    return starts + [pos]


# ---------------------------------------------------------------- string literals

# Keyword arguments whose strings a reader sees: figure titles, axis labels, legends.
VISIBLE_KEYWORDS = {
    "title", "titles", "suptitle", "label", "labels", "xlabel", "ylabel", "legend", "names",
    "description",
}  # fmt: skip
# Keyword arguments whose strings select behaviour (even with two words, loc="lower left").
LOGIC_KEYWORDS = {
    "loc", "task", "device", "dtype", "metric", "mode", "kind", "end", "sep", "cmap", "color",
    "colors", "ha", "va", "marker", "linestyle", "fmt", "layout", "reduction", "nonlinearity",
    "encoding", "errors", "style", "backend", "tokens", "key", "name", "which", "how",
}  # fmt: skip
# Calls whose positional string arguments are data or code, never prose: string and regex
# methods (a search string, a text to encode), lookups, einsum specs, the library's task names.
LOGIC_CALLS = {
    "replace", "split", "rsplit", "index", "rindex", "find", "rfind", "count", "startswith",
    "endswith", "strip", "lstrip", "rstrip", "removeprefix", "removesuffix", "partition",
    "rpartition", "encode", "decode", "get", "pop", "setdefault", "getattr", "setattr",
    "hasattr", "delattr", "register_buffer", "einsum", "compile", "match", "fullmatch", "search",
    "sub", "subn", "findall", "finditer", "open", "Path", "import_module", "__import__", "float",
    "int", "device", "dtype", "to", "make_batch", "token_labels", "train_tiny_lm",
    "compare_n_heads", "set_language", "environ", "is_space", "translate", "maketrans",
}  # fmt: skip
_IDENTIFIER = re.compile(r"[A-Za-z_][\w.\-]*|[\w\-./]*[/\\][\w\-./\\]*")
_PLAIN_WORD = re.compile(r"[A-Za-z]{2,}")


@dataclass
class CodeString:
    start: int  # character offsets in the cell's source
    end: int
    text: str  # the literal's source text, prefix and quotes included: the msgid
    docstring: bool = False


def _char_offsets(source: str):
    """(lineno, byte col) -> character offset in ``source`` (ast positions are UTF-8 bytes)."""
    starts = _line_starts(source)
    lines = source.splitlines(keepends=True)

    def at(lineno: int, col: int) -> int:
        line = lines[lineno - 1] if lineno - 1 < len(lines) else ""
        return starts[lineno - 1] + len(line.encode("utf-8")[:col].decode("utf-8"))

    return at


def parse_cell(source: str) -> ast.Module:
    """The cell's AST (magic lines blanked; top-level await allowed, as IPython does)."""
    flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    return compile(_mask(source), "<cell>", "exec", flags=flags, dont_inherit=True)


def _is_text(node) -> bool:
    return isinstance(node, ast.JoinedStr) or (
        isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


def literal_text(node) -> str:
    """The words a reader sees: a str constant's value, an f-string's literal parts and its
    string-constant placeholders (f"{'uniform control':16}"), never its expressions."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else ""
    parts = []
    for value in node.values:
        if isinstance(value, ast.Constant):
            parts.append(str(value.value))
        elif isinstance(value.value, ast.Constant) and isinstance(value.value.value, str):
            parts.append(value.value.value)
        else:
            parts.append(" ")
    return "".join(parts)


def _call_name(call: ast.Call) -> str:
    func = call.func
    return getattr(func, "id", None) or getattr(func, "attr", None) or ""


def _targets(node) -> list:
    return node.targets if isinstance(node, ast.Assign) else [node.target]


def _name_of(node) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def _positions(tree: ast.Module):
    """Each text literal (not descending into f-strings) with its chain of parents."""
    out = []

    def walk(node, parents):
        if _is_text(node):
            out.append((node, parents))
            return
        for child in ast.iter_child_nodes(node):
            walk(child, parents + [node])

    walk(tree, [])
    return out


_CONTAINERS = (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.Starred)


def _role(node, parents) -> str:
    """'docstring', 'logic', 'print', 'visible' or 'other' (the two-word rule decides)."""
    parent = parents[-1] if parents else None
    if (
        isinstance(parent, ast.Expr)
        and len(parents) >= 2
        and isinstance(parents[-2], (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and parents[-2].body[0] is parent
    ):
        return "docstring"
    child = node
    for up in reversed(parents):
        if isinstance(up, ast.Subscript) and child is up.slice:
            return "logic"  # x["key"]
        if isinstance(up, ast.Compare):
            return "logic"  # == "causal", in ("a", "b")
        if isinstance(up, ast.keyword):
            if up.arg in VISIBLE_KEYWORDS:
                return "visible"
            return "logic" if up.arg in LOGIC_KEYWORDS else "other"
        if isinstance(up, ast.Call):
            if child is up.func:  # "...".format(...), ", ".join(...)
                return "other" if getattr(up.func, "attr", "") == "format" else "logic"
            name = _call_name(up)
            if name in LOGIC_CALLS:
                return "logic"
            if name == "join" and isinstance(up.func, ast.Attribute):
                child = up  # print("  ".join(f"head {h}" for h in ...)): print decides
                continue
            return "print" if name == "print" else "other"
        if isinstance(up, (ast.GeneratorExp, ast.ListComp)) and child is up.elt:
            child = up
            continue
        if isinstance(up, ast.Attribute):  # "...".format: the Call above decides
            child = up
            continue
        # a dict key too is text, unless the notebook looks it up (see code_strings)
        if not isinstance(up, (*_CONTAINERS, ast.BinOp, ast.IfExp)):
            return "other"
        child = up
    return "other"


def _logic_names(tree: ast.Module) -> set[str]:
    """Variables a notebook uses in logic (as a subscript key, compared, passed to a logic
    call): a string assigned to one of them is data, e.g. line = "It is, my lord." then
    text.index(line)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            names.update(n.id for n in ast.walk(node.slice) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                if isinstance(side, ast.Name):
                    names.add(side.id)
        elif isinstance(node, ast.Call) and _call_name(node) in LOGIC_CALLS:
            names.update(n for n in map(_name_of, node.args) if n)
    return names


_SEARCHES = {
    "replace", "startswith", "endswith", "find", "rfind", "index", "rindex", "count",
    "split", "rsplit", "partition", "rpartition", "removeprefix", "removesuffix",
}  # fmt: skip


def _searched(tree: ast.Module) -> set[str]:
    """What a cell looks for inside other strings: x.replace("median", …), "a" in text."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _call_name(node) in _SEARCHES and node.args:
            first = node.args[0]
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            first = node.left
        else:
            continue
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            out.add(first.value)
    return out


def logic_context(trees: list[ast.Module]) -> tuple[set[str], set[str]]:
    """For a whole notebook: (string values used in logic, variable names used in logic)."""
    values, names = set(), set()
    for tree in trees:
        for node, parents in _positions(tree):
            if _role(node, parents) == "logic":
                values.add(literal_text(node))
        names |= _logic_names(tree)
    return values, names


def _code_like(text: str) -> bool:
    stripped = text.strip()
    return (
        not re.search(r"[A-Za-z]", stripped)
        or _IDENTIFIER.fullmatch(text) is not None  # cpu, causal, W_q, d_head, a/b.txt
        or stripped.startswith(("{", "[", "<"))  # a template, a list, markup
        or bool(re.search(r"\\[dwsbDWSB]|\(\?|\[\^", stripped))  # a regex
        or (" " not in stripped and re.search(r"->|,|=|\(", stripped) is not None)  # einsum
    )


def code_strings(source: str, context: tuple[set[str], set[str]] | None = None) -> list[CodeString]:
    """The user-visible string literals of a code cell, in source order.

    A literal is extracted when it reads as text: two or more English words, or any word in
    a print() argument, in a figure's title/label keyword, in a docstring or around the values
    of an f-string (``f"{a:.2f} to {b:.2f}"``). Never: strings used
    in logic (subscript keys, comparison operands, arguments of string methods and lookups,
    behaviour keywords such as loc= or task=), strings equal to one used so elsewhere in the
    notebook (``context``), strings assigned to a variable used so, strings that look like
    code (identifiers, paths, templates, regexes, einsum specs)."""
    try:
        tree = parse_cell(source)
    except SyntaxError as err:
        raise TranslationError(f"cannot parse a code cell ({err}):\n{source[:200]}") from err
    values, names = context if context is not None else logic_context([tree])
    names = names | _logic_names(tree)
    assigned = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        and any(_name_of(t) in names for t in _targets(node))
    }
    searched = {s for s in _searched(tree) if re.search(r"[A-Za-z]", s)}
    at = _char_offsets(source)
    found = []
    for node, parents in _positions(tree):
        role = _role(node, parents)
        text = literal_text(node)
        words = len(_WORD.findall(text))
        if role == "logic" or text in values or id(node) in assigned or words == 0:
            continue
        if any(v in text for v in searched):
            continue  # holds what the cell searches for, e.g. a label later .replace("median", …)
        if role != "docstring" and _code_like(text):
            if not (role == "visible" and _PLAIN_WORD.fullmatch(text.strip())):
                continue
        formatted = (
            any(isinstance(v, ast.FormattedValue) for v in node.values)
            if isinstance(node, ast.JoinedStr)
            else _format_fields(text) not in (None, Counter())  # "{:.3f} to {:.3f}".format
        )
        if role == "other" and words < 2 and not formatted:
            continue  # one word is a label or a name, unless it is text around values
        start = at(node.lineno, node.col_offset)
        end = at(node.end_lineno, node.end_col_offset)
        found.append(CodeString(start, end, source[start:end], role == "docstring"))
    return sorted(found, key=lambda s: s.start)


def _placeholders(node) -> Counter:
    out = Counter()
    for value in node.values if isinstance(node, ast.JoinedStr) else []:
        if isinstance(value, ast.FormattedValue):
            expr = value.value
            if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
                continue  # f"{'uniform control':16}": text, translated with its width
            spec = ast.unparse(value.format_spec) if value.format_spec is not None else ""
            shown = ast.unparse(expr)
            out[
                f"{{{shown}{'!' + chr(value.conversion) if value.conversion > 0 else ''}"
                f"{':' if spec else ''}{spec[2:-1] if spec else ''}}}"
            ] += 1
    return out


def _format_fields(text: str) -> Counter | None:
    try:
        return Counter(
            f"{{{name}{'!' + conv if conv else ''}{':' + spec if spec else ''}}}"
            for _, name, spec, conv in string.Formatter().parse(text)
            if name is not None
        )
    except ValueError:
        return None


def parse_literal(text: str):
    """The single str or f-string expression ``text`` is, or None."""
    try:
        tree = ast.parse("(" + text + "\n)", mode="eval")
    except SyntaxError:
        return None
    return tree.body if _is_text(tree.body) else None


def literal_problem(msgid: str, msgstr: str) -> str | None:
    """Why ``msgstr`` cannot replace the literal ``msgid`` in code, or None when it can."""
    old, new = parse_literal(msgid), parse_literal(msgstr)
    if new is None:
        return (
            "the translation is not one Python string literal; write it with its quotes "
            'and prefix, e.g. f"{n} 步" for f"{n} steps"'
        )
    if type(new) is not type(old):
        kind = "an f-string" if isinstance(old, ast.JoinedStr) else "a plain string (no f)"
        return f"the translation must be {kind}, as the English is"
    if isinstance(old, ast.JoinedStr):
        want, have = _placeholders(old), _placeholders(new)
        if want != have:
            missing = ", ".join(sorted((want - have).elements())) or "none"
            extra = ", ".join(sorted((have - want).elements())) or "none"
            return (
                f"the f-string's placeholders differ (missing: {missing}; extra: {extra}); "
                "keep every {expression:format} of the English exactly once"
            )
    else:
        want, have = _format_fields(old.value), _format_fields(new.value)
        if want is not None and want and want != have:
            return (
                "the {}-fields differ from the English ones ("
                + ", ".join(sorted(want.elements()))
                + "); keep each of them"
            )
    return None


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
