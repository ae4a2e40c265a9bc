"""The string literals of a code cell a reader sees (``code_strings``), not those of logic."""

from __future__ import annotations

import ast
import re
import string
from collections import Counter
from dataclasses import dataclass

from .common import TranslationError

_WORD = re.compile(r"(?<![\w.])[A-Za-z]{2,}(?![\w(])")


def _mask(source: str) -> str:
    """IPython magics and shell escapes are not Python: blank them (same length) for the
    tokenizer and the parser."""
    lines = source.splitlines(keepends=True)
    return "".join(
        re.sub(r"[^\n]", " ", ln) if ln.lstrip().startswith(("%", "!")) else ln for ln in lines
    )


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


def _format_fields(text: str) -> Counter | None:
    try:
        return Counter(
            f"{{{name}{'!' + conv if conv else ''}{':' + spec if spec else ''}}}"
            for _, name, spec, conv in string.Formatter().parse(text)
            if name is not None
        )
    except ValueError:
        return None
