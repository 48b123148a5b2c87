"""The package's import graph has no cycle and its imports point down the layers of STYLE.md (util → ops/norms →
model → data/loggers/checkpoint → training/config → entry points), so any module can be read, tested and imported
without the ones above it; the package root holds only the entry points (the config is a package of its own).

Every import statement counts, the lazy ones inside functions too (a cycle through a lazy import still ties the
two modules together: neither can change without the other), and those under ``if TYPE_CHECKING:`` as well.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "normtrain"

# The package's floors: a module may import its own floor or lower ones. Its floor is its top-level package's (or
# root module's); anything not named is an entry point (cli, commands, compare, reproduce, probe, export, prepare,
# catalog, the package's __init__ and __main__).
LAYERS = {
    "util": 0,  # leaf helpers: import nothing of normtrain
    "ops": 1, "norms": 1,  # pure torch/triton
    "model": 2,  # builds from plain values or a small model config
    "data": 3, "loggers": 3, "checkpoint": 3,  # each its own concern
    "training": 4, "config": 4,  # the loop and the schemas; training reads config, never the other way
}
ENTRY_POINTS = 5
SAME_FLOOR_ONE_WAY = {("config", "training")}  # (a, b): a must not import b, though they share a floor
ROOT = {"__init__", "__main__", "cli", "commands"}  # the root's modules: the entry points


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """{module: the normtrain modules it imports}, ``from pkg import name`` resolving to the submodule
    ``pkg.name`` when there is one, else to ``pkg``."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package, up level - 1
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            graph[name] |= {t for t in targets if t in modules and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif nxt not in index:
                index[nxt] = low[nxt] = len(index)
                stack.append(nxt)
                on_stack.add(nxt)
                work.append((nxt, iter(sorted(graph[nxt]))))
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
    return found


def test_the_import_graph_of_normtrain_has_no_cycle():
    graph = import_graph()
    assert len(graph) > 50 and "normtrain.model.config" in graph["normtrain.model.gpt"]  # the walk sees imports
    assert "normtrain.data.hub" in graph["normtrain.data.documents"]  # lazy or not, documents use the hub
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(" ↔ ".join(c) for c in found)


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def top(module: str) -> str:
    """The top-level package or root module of a module: ``training`` for normtrain.training.trainer."""
    return module.split(".")[1] if "." in module else "__init__"


def floor(module: str) -> int:
    return LAYERS.get(top(module), ENTRY_POINTS)


def test_the_package_root_holds_only_the_entry_points():
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    assert modules == ROOT, f"modules in normtrain/ beside the entry points: {sorted(modules - ROOT)}"
    assert set(LAYERS) <= {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()} | modules


def upward(graph: dict[str, set[str]]) -> list[str]:
    """The imports of ``graph`` that point up a floor, or across one the wrong way."""
    return [f"{a} (floor {floor(a)}) imports {b} (floor {floor(b)})" for a, targets in sorted(graph.items())
            for b in sorted(targets) if floor(b) > floor(a) or (top(a), top(b)) in SAME_FLOOR_ONE_WAY]


def test_imports_point_down_the_layers():
    found = upward(import_graph())
    assert not found, "imports pointing up:\n" + "\n".join(found)


def test_the_layer_check_finds_an_upward_import():
    assert floor("normtrain.util.atomic") == 0 and floor("normtrain.training.trainer") == 4
    assert floor("normtrain.compare.runs") == ENTRY_POINTS and floor("normtrain") == ENTRY_POINTS
    assert upward({"normtrain.loggers.csv": {"normtrain.training.rollback", "normtrain.util.events"},
                   "normtrain.config": {"normtrain.training.optim", "normtrain.model"},
                   "normtrain.training.trainer": {"normtrain.config"}, "normtrain.cli": {"normtrain.training"}}) == [
        "normtrain.config (floor 4) imports normtrain.training.optim (floor 4)",
        "normtrain.loggers.csv (floor 3) imports normtrain.training.rollback (floor 4)"]
