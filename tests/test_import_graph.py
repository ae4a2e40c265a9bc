"""No import cycles between the modules of attention_lab.

Every ``import`` and ``from ... import`` in every ``src/attention_lab/**/*.py`` is read with
``ast`` -- at the top of a module and inside functions alike (a lazy import closes a cycle as
surely as a top-level one, only later) -- relative imports are resolved, and the graph of
module -> module it imports must have no cycle. A failure prints each cycle as a path.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "attention_lab"

# Cycles that exist today and are being removed: none (issue 20's canvas module broke the
# last one, headgrid <-> plotting).
KNOWN_CYCLES: set[frozenset[str]] = set()


def module_names() -> dict[str, Path]:
    """``{"attention_lab.bench.cli": path, "attention_lab.bench": .../__init__.py, ...}``."""
    names = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def imported_modules(name: str, path: Path, modules: set[str]) -> set[str]:
    """The modules of the package that module ``name`` imports anywhere in its code."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the package this module is in, level - 1 up
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # "from . import kernel" imports a module; "from .tasks import SEP" a name of one
            targets = [f"{source}.{alias.name}" for alias in node.names]
            targets = [t if t in modules else source for t in targets]
        else:
            continue
        for target in targets:
            while target and target not in modules:  # "attention_lab.x.y" -> the module x.y is in
                target = target.rpartition(".")[0]
            if target.startswith(PACKAGE) and target != name:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    names = module_names()
    return {name: imported_modules(name, path, set(names)) for name, path in names.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a path a -> ... -> a) per strongly connected group of modules (Tarjan)."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_path_through(group, graph) for group in groups]


def _path_through(group: set[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest cycle from the group's first module back to itself, inside the group."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & group):
                if w == start:
                    return paths[v] + [start]
                if w not in paths:
                    paths[w] = paths[v] + [w]
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle in {group}")  # a strongly connected group always has one


def test_the_package_has_no_import_cycle():
    graph = import_graph()
    found = cycles(graph)
    for cycle in found:
        print(" -> ".join(cycle))
    unknown = [c for c in found if frozenset(c) not in KNOWN_CYCLES]
    assert not unknown, "import cycles:\n" + "\n".join(" -> ".join(c) for c in unknown)


def test_the_graph_reads_relative_lazy_and_package_imports():
    graph = import_graph()
    assert "attention_lab.i18n" in graph["attention_lab.fused"]  # from .i18n import error_text
    assert "attention_lab.masks" in graph["attention_lab.fused"]  # from .masks import ...
    assert "attention_lab.fused" in graph["attention_lab.bench.cli"]  # from ..fused import
    assert "attention_lab.bench.explorer" in graph["attention_lab.bench.report"]  # in a function
    assert "attention_lab.diagrams" in graph["attention_lab.explorer_picture"]  # in a method
    assert "attention_lab.bench" in graph["attention_lab.__main__"]  # from .bench import run


def test_a_cycle_is_found_and_printed_as_a_path():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c", "a"]]
