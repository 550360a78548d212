"""What the package imports: typer only in gitswarm/cli, and only typer's (and click's) public modules."""

from __future__ import annotations

import ast
from pathlib import Path

import gitswarm

PACKAGE = Path(gitswarm.__file__).parent


def imported_modules(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return found


def test_no_private_module_of_typer_or_click_is_imported() -> None:
    private = {
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in PACKAGE.rglob("*.py")
        for name in imported_modules(path)
        if name.split(".")[0] in ("typer", "click") and any(part.startswith("_") for part in name.split(".")[1:])
    }
    assert private == set()


def test_only_the_cli_imports_typer_or_click() -> None:
    outside = {
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.relative_to(PACKAGE).parts[0] != "cli"
        and any(name.split(".")[0] in ("typer", "click") for name in imported_modules(path))
    }
    assert outside == set()
