"""The web side held to the engine's layout rules (tests/engine/test_layout.py), read from its source: no import
cycle between its modules, function-local imports included (a function-local import hides a cycle from Python,
not from a reader), and no file over 400 lines. Migrations are left out: they are frozen history."""
from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOT_WEB = {"inference_core", "tests", "scripts", "bench"}
MAX_FILE_LINES = 400


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@lru_cache(maxsize=1)
def modules() -> dict[str, Path]:
    """Every module of every web package (a top-level folder with an `__init__.py`), migrations aside."""
    found = {}
    for init in sorted(ROOT.glob("*/__init__.py")):
        if init.parent.name in NOT_WEB:
            continue
        for path in sorted(init.parent.rglob("*.py")):
            if "migrations" not in path.relative_to(ROOT).parts:
                found[_name(path)] = path
    return found


def _known(name: str) -> str:
    while name and name not in modules():
        name = name.rpartition(".")[0]
    return name


def _absolute(importer: str, level: int, module: str | None) -> str:
    if not level:
        return module or ""
    package = importer if modules()[importer].name == "__init__.py" else importer.rpartition(".")[0]
    for _ in range(level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{module}" if module else package


def imports_of(name: str) -> set[str]:
    """The web modules `name` imports anywhere in its file (top level and inside functions)."""
    edges = set()
    for node in ast.walk(ast.parse(modules()[name].read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            edges.update(_known(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(name, node.level, node.module)
            edges.update(_known(f"{base}.{alias.name}") or _known(base) for alias in node.names)
    return {edge for edge in edges if edge and edge != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
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
    return found


def test_the_web_import_graph_has_no_cycle():
    graph = {name: imports_of(name) for name in modules()}
    assert cycles(graph) == []


def test_no_web_file_is_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in modules().values()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_FILE_LINES}
    assert long == {}


def test_the_walk_sees_cycles_through_function_local_imports():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    assert "courseapp.rendering" in imports_of("courseapp.loader")
    assert "demos.registry" in imports_of("courseapp.demo_embeds")  # imported inside a function
