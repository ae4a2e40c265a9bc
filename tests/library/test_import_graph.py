"""No import cycles between the modules of attention_lab, and the layers point one way.

Every ``import`` and ``from ... import`` in every ``src/attention_lab/**/*.py`` is read with
``ast`` -- at the top of a module and inside functions alike (a lazy import closes a cycle as
surely as a top-level one, only later) -- relative imports are resolved, and the graph of
module -> module it imports must have no cycle. A failure prints each cycle as a path.

Layering (issue 29): the core -- the chapter's layer and its models, every module at the top of
the package and ``interventions`` -- imports nothing from the wings: the pictures and the
explorer (``viz``), the exercise checkers (``exercises``) or the benchmarks (``bench``). The
two commands, ``__main__`` and ``demo``, sit on top of everything (they run the benchmark
and draw a figure), and the package's ``__init__`` names pictures lazily, by string.
The picture modules do not import the explorer either: it sits on top of them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
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


WINGS = ("attention_lab.viz", "attention_lab.exercises", "attention_lab.bench")
COMMANDS = {"attention_lab.__main__", "attention_lab.demo"}
EXPLORER = "attention_lab.viz.explorer"


def in_package(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def layering_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every arrow that points the wrong way, as "module -> module it imports"."""
    wrong = []
    for name, targets in sorted(graph.items()):
        in_wing = any(in_package(name, wing) for wing in WINGS)
        for target in sorted(targets):
            if not in_wing and name not in COMMANDS and name != PACKAGE:
                if any(in_package(target, wing) for wing in WINGS):
                    wrong.append(f"{name} -> {target}")
            elif in_package(name, "attention_lab.viz") and not in_package(name, EXPLORER):
                if in_package(target, EXPLORER):
                    wrong.append(f"{name} -> {target}")
    return wrong


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
    assert (
        "attention_lab.viz.diagrams" in graph["attention_lab.viz.explorer.picture"]
    )  # in a method
    assert "attention_lab.bench" in graph["attention_lab.__main__"]  # from .bench import run


def test_the_core_imports_nothing_from_the_pictures_exercises_or_benchmarks():
    graph = import_graph()
    core = [n for n in graph if not any(in_package(n, w) for w in WINGS)]
    assert {"attention_lab.fused", "attention_lab.tiny_lm", "attention_lab.tasks"} <= set(core)
    assert "attention_lab.viz.explorer.widgets" in graph and "attention_lab.viz.heatmaps" in graph
    wrong = layering_violations(graph)
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_a_wrong_way_import_is_found():
    graph = {
        "attention_lab.tiny_lm": {"attention_lab.viz.heatmaps", "attention_lab.fused"},
        "attention_lab.training": {"attention_lab.exercises.core"},
        "attention_lab.cost": {"attention_lab.bench.timing"},
        "attention_lab.viz.heatmaps": {"attention_lab.viz.explorer.model", "attention_lab.masks"},
        "attention_lab.demo": {"attention_lab.viz.heatmaps"},  # a command: allowed
        "attention_lab.viz.explorer.widgets": {"attention_lab.viz.heatmaps"},  # allowed
        "attention_lab.bench.report": {"attention_lab.viz.explorer"},  # allowed
    }
    assert layering_violations(graph) == [
        "attention_lab.cost -> attention_lab.bench.timing",
        "attention_lab.tiny_lm -> attention_lab.viz.heatmaps",
        "attention_lab.training -> attention_lab.exercises.core",
        "attention_lab.viz.heatmaps -> attention_lab.viz.explorer.model",
    ]


def test_a_cycle_is_found_and_printed_as_a_path():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c", "a"]]


def readme_rooms() -> set[str]:
    """Every room the module table of docs/library.md names, as a path under src/attention_lab
    without ``.py`` ("masks", "viz/explorer/model", "viz/diagrams", "exercises")."""
    text = (SRC.parent / "docs" / "library.md").read_text(encoding="utf-8")
    table = text[text.index("| module | what it holds |") :].split("\n\n")[0].splitlines()[2:]
    rooms = set()
    for row in table:
        first = row.split(" | ")[0].removeprefix("| ")
        folder = re.match(r"`([\w/]+)/`(?::\s*(.*))?$", first)
        if folder:
            names = re.findall(r"`(\w+)`", folder.group(2) or "")
            rooms |= {f"{folder.group(1)}/{n}" for n in names} or {folder.group(1)}
        else:
            rooms |= set(re.findall(r"`(\w+)`", first))
    return rooms


def test_the_readme_module_table_matches_the_folders():
    root = SRC / PACKAGE
    listed = readme_rooms()
    missing = [r for r in sorted(listed) if not (root / f"{r}.py").is_file()
               and not (root / r / "__init__.py").is_file()]  # fmt: skip
    assert not missing, f"the README names rooms that do not exist: {missing}"
    rooms = {p.stem for p in root.glob("*.py") if p.stem != "__init__"}
    rooms |= {p.parent.name for p in root.glob("*/__init__.py") if p.parent.name != "viz"}
    for wing in ("viz", "viz/explorer"):
        rooms |= {f"{wing}/{p.stem}" for p in (root / wing).glob("*.py") if p.stem != "__init__"}
    rooms |= {"viz/diagrams"}
    unlisted = sorted(r for r in rooms if r not in listed)
    assert not unlisted, f"the README's module table leaves out: {unlisted}"
