"""The package's plan holds: no import cycles, none hidden inside functions,
each module of one concept (small: the tests' modules too), packages whose
``__init__`` is empty."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGES = ("gateway", "sampler", "refengine")
ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 500


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(package: str) -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((ROOT / package).rglob("*.py"))}


def _imports(path: Path, known: dict[str, Path]) -> list[tuple[str, bool]]:
    """The project modules ``path`` imports, each with whether it is at the top level."""
    tree = ast.parse(path.read_text())
    top = {id(node) for node in tree.body}
    found: list[tuple[str, bool]] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                names.append(sub if sub in known else node.module)
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        found.extend((name, id(node) in top) for name in names if name in known)
    return found


def import_graph(package: str) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports (at any depth of code)."""
    modules = _modules(package)
    return {
        name: {target for target, _ in _imports(path, modules) if target != name}
        for name, path in modules.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_cycles_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycles(package: str) -> None:
    assert cycles(import_graph(package)) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_no_imports_inside_functions(package: str) -> None:
    # A function-level import of the project's own code hides a cycle or an
    # unclear dependency.
    modules = _modules(package)
    hidden = [
        f"{name} -> {target}"
        for name, path in modules.items()
        for target, at_top in _imports(path, modules)
        if not at_top
    ]
    assert hidden == []


@pytest.mark.parametrize("package", PACKAGES)
def test_init_modules_hold_no_code(package: str) -> None:
    for path in (ROOT / package).rglob("__init__.py"):
        tree = ast.parse(path.read_text())
        body = [n for n in tree.body if not isinstance(n, ast.Expr)]  # docstrings
        allowed = all(
            isinstance(n, (ast.ImportFrom, ast.Assign))
            and not (isinstance(n, ast.Assign) and not _is_metadata(n))
            for n in body
        )
        assert allowed, f"{path.relative_to(ROOT)} holds code"


def _is_metadata(node: ast.Assign) -> bool:
    names = [t.id for t in node.targets if isinstance(t, ast.Name)]
    return bool(names) and all(n in ("__version__", "__all__") for n in names)


@pytest.mark.parametrize("package", (*PACKAGES, "tests"))
def test_modules_are_small(package: str) -> None:
    large = {
        name: lines
        for name, path in _modules(package).items()
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert large == {}


def _package_of(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2])  # gateway.proxy.relay -> gateway.proxy; gateway.cli stays


def test_the_gateways_packages_form_no_cycle() -> None:
    # Stricter than modules: no package reaches back into one that depends on it
    # (serving runs the app, the app builds the proxy, the proxy uses upstream).
    graph: dict[str, set[str]] = {}
    for module, targets in import_graph("gateway").items():
        here = _package_of(module)
        graph.setdefault(here, set()).update(
            t for t in map(_package_of, targets) if t != here and t != "gateway"
        )
    assert cycles(graph) == []
