"""Is a translated literal still the same code? One literal of the same kind, with the same
placeholders (``literal_problem``), checked by `build` and `check`."""

from __future__ import annotations

import ast
from collections import Counter

from .literals import _format_fields, _is_text


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
