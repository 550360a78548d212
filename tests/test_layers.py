"""The layers of docs/architecture.md, checked on the imports themselves (deferred ones included).

cli → pilot → engine → store | adapters → model: nothing imports upward, the
store and the adapters runtime do not import each other, and inside the
engine each subpackage imports only the engine's base modules and the
subpackages below it (ENGINE_ORDER). No module imports another in a cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import gitswarm

PACKAGE = Path(gitswarm.__file__).parent

#: What each layer may import (besides itself).
LAYERS: dict[str, set[str]] = {
    "model": set(),
    "store": {"model"},
    "adapters": {"model"},
    "engine": {"model", "store", "adapters"},
    "pilot": {"model", "store", "adapters", "engine"},
    "cli": {"model", "store", "adapters", "engine", "pilot"},
}

#: The engine's subpackages, lowest first: each may import the base modules (engine/*.py) and those before it.
ENGINE_ORDER = ["knowledge", "routing", "notify", "delegation", "sharing", "machines", "jobs", "upkeep"]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> Iterator[str]:
    """The gitswarm modules a file imports, anywhere in it."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name.startswith("gitswarm"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gitswarm"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                yield candidate if (PACKAGE.parent / (candidate.replace(".", "/") + ".py")).exists() or (
                    PACKAGE.parent / candidate.replace(".", "/")
                ).is_dir() else node.module


def graph() -> dict[str, set[str]]:
    return {module_name(path): set(imports(path)) for path in PACKAGE.rglob("*.py")}


def layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()) else None


def engine_part(module: str) -> str | None:
    """The engine subpackage of a module; '' for the engine's base modules; None outside the engine."""
    parts = module.split(".")
    if parts[:2] != ["gitswarm", "engine"]:
        return None
    return parts[2] if len(parts) > 3 or (len(parts) == 3 and (PACKAGE / "engine" / parts[2]).is_dir()) else ""


def test_no_layer_imports_upward_or_sideways() -> None:
    wrong = sorted(
        f"{importer} imports {imported}"
        for importer, found in graph().items()
        for imported in found
        if (a := layer(importer)) in LAYERS and (b := layer(imported)) in LAYERS and a != b and b not in LAYERS[a]
    )
    assert wrong == []


def test_engine_subpackages_import_only_the_base_and_those_below_them() -> None:
    rank = {name: n for n, name in enumerate(ENGINE_ORDER)}
    wrong = []
    for importer, found in graph().items():
        mine = engine_part(importer)
        if mine is None:
            continue
        for imported in found:
            theirs = engine_part(imported)
            if theirs is None or theirs == mine or theirs == "":
                continue
            if mine == "" or rank[theirs] > rank[mine]:
                wrong.append(f"{importer} imports {imported}")
    assert sorted(wrong) == []


def test_every_engine_subpackage_is_placed_and_says_what_it_owns() -> None:
    found = sorted(p.name for p in (PACKAGE / "engine").iterdir() if (p / "__init__.py").exists())
    assert found == sorted(ENGINE_ORDER)
    for name in found:
        doc = ast.get_docstring(ast.parse((PACKAGE / "engine" / name / "__init__.py").read_text()))
        assert doc and len(doc) > 40, name


def test_no_module_imports_itself_through_a_cycle() -> None:
    edges = graph()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if nxt not in edges:
                continue
            if state.get(nxt) == 1:
                cycles.append(trail[trail.index(nxt):] + [nxt] if nxt in trail else [node, nxt])
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for start in sorted(edges):
        if start not in state:
            visit(start, [start])
    # a package's __init__ importing its own modules is not a cycle of concepts
    assert [c for c in cycles if not all(m.startswith(c[0] + ".") or m == c[0] for m in c[1:])] == []
