"""The package's import graph goes one way: layers, no cycle, no import inside a function."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "agent_threads"

LAYERS = {
    "errors": 0,
    "core": 1,
    "messages": 1,
    "state": 1,
    "stores": 2,
    "views": 3,
    "formats": 3,
    "timetravel": 4,
    "threads": 5,
    "workflows": 6,
    "integrations": 6,
    "server": 7,
    "cli": 8,
}
"""A module may import its own layer's modules and lower layers' ones, never a higher one.

The root `agent_threads/__init__.py` (the public API) sits above them all.
"""


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The package modules an import statement loads (the longest known prefix of each)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = module.split(".")
            if MODULES[module].name != "__init__.py":
                package = package[:-1]
            package = package[: len(package) - node.level + 1]
            base = ".".join([*package, *([base] if base else [])])
        names = [f"{base}.{alias.name}" for alias in node.names]
        names = [n if n in MODULES else base for n in names]
    for name in names:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name and name != module:
            yield name


def _imports(module: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement outside `if TYPE_CHECKING:`, and whether a function holds it."""

    def walk(
        node: ast.AST, in_function: bool
    ) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, in_function
            inside = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            yield from walk(child, inside)

    yield from walk(ast.parse(MODULES[module].read_text()), False)


GRAPH = {m: {t for node, _ in _imports(m) for t in _targets(m, node)} for m in MODULES}


def _layer(module: str) -> int:
    parts = module.split(".")
    return len(LAYERS) if len(parts) == 1 else LAYERS[parts[1]]


def test_every_subpackage_and_top_module_has_a_layer() -> None:
    tops = {m.split(".")[1] for m in MODULES if m != "agent_threads"}
    assert tops == set(LAYERS)


def test_no_import_sits_inside_a_function() -> None:
    found = [
        f"{m}:{node.lineno} {ast.unparse(node)}"
        for m in MODULES
        for node, in_function in _imports(m)
        if in_function and any(True for _ in _targets(m, node))
    ]
    assert found == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_imports_only_its_own_layer_and_lower_ones(module: str) -> None:
    higher = sorted(t for t in GRAPH[module] if _layer(t) > _layer(module))
    assert higher == [], f"{module} reaches up to {higher}"


def test_the_import_graph_has_no_cycle() -> None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(GRAPH[module]):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(MODULES):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_no_type_ignore_anywhere_in_the_package() -> None:
    marker = "type: " + "ignore"
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{number}"
        for path in MODULES.values()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if marker in line
    ]
    assert found == []
