"""`extends = "NAME"`: a spec that adds to another instead of copying it whole.

The spec named is looked up like any adapter (repository, user folder,
shipped); a spec that extends its own name (a repository's `claude-code.toml`
extending `claude-code`) means the next one down the lookup order. Merging is
done on the TOML tables, base first, before the spec is decoded:

- tables are merged key by key, at every depth (`env`, `exit_codes`,
  `[analyze]`, `[home_json]`...), except that each field of `[output]` is one
  value (a selector table is replaced whole);
- lists are appended, the extending spec's items after the base's (`pass_env`,
  `capabilities`, `[implement] args`...);
- anything else (strings, numbers, booleans) is replaced;
- `replace = ["implement.args", ...]` names keys (dotted) whose value in the
  extending spec replaces the base's as it is, list or table;
- a spec that sets `model` and no `[models]` drops the base's tiers: its model
  is the one it runs (an endpoint of its own may know none of the base's).
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gitswarm.model.errors import BadInput
from gitswarm.model.ids import TASK_ID

EXTENDS = "extends"
REPLACE = "replace"
ATOMIC_TABLES = ("output",)  # their fields are values, not sections


def read_table(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise BadInput(f"{path}: {exc}") from None


def resolve(path: Path, dirs: Sequence[Path]) -> tuple[dict[str, Any], list[Path]]:
    """The spec at `path` merged over every spec it extends, and that chain of files (`path` first)."""
    chain = [path]
    layers = [read_table(path)]
    while EXTENDS in layers[-1]:
        current = chain[-1]
        name = layers[-1][EXTENDS]
        if not isinstance(name, str) or not TASK_ID.fullmatch(name):
            raise BadInput(f"{current}: extends: {name!r} is not an adapter name")
        if name == "shell":
            raise BadInput(f"{current}: extends: the built-in shell adapter has no spec to extend")
        base = _find(name, current, dirs)
        if any(_same(base, seen) for seen in chain):
            names = " -> ".join(str(p) for p in [*chain, base])
            raise BadInput(f"{path}: extends: a cycle: {names}")
        chain.append(base)
        layers.append(read_table(base))
    for layer, where in zip(layers, chain):
        _check_replace(layer, where)
    merged = _strip(layers[-1])
    for layer in reversed(layers[:-1]):
        merged = merge(merged, layer)
    return merged, chain


def merge(base: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """`child` over `base`, as the module docstring says; neither is changed."""
    replaced = set(child.get(REPLACE, ()))
    if "model" in child and "models" not in child:
        base = {key: value for key, value in base.items() if key != "models"}
    return _merge(base, _strip(child), (), replaced)


def _merge(base: dict[str, Any], child: dict[str, Any], at: tuple[str, ...], replaced: set[str]) -> dict[str, Any]:
    out = dict(base)
    for key, value in child.items():
        here = (*at, key)
        old = out.get(key)
        if key not in out or ".".join(here) in replaced:
            out[key] = value
        elif isinstance(old, dict) and isinstance(value, dict) and not (at and at[0] in ATOMIC_TABLES):
            out[key] = _merge(old, value, here, replaced)
        elif isinstance(old, list) and isinstance(value, list):
            out[key] = old + value
        else:
            out[key] = value
    return out


def _strip(table: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in table.items() if k not in (EXTENDS, REPLACE)}


def _check_replace(table: dict[str, Any], path: Path) -> None:
    keys = table.get(REPLACE)
    if keys is None:
        return
    if EXTENDS not in table:
        raise BadInput(f"{path}: replace: only a spec that extends another replaces its keys")
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise BadInput(f"{path}: replace: a list of dotted key names")
    for key in keys:
        node: Any = table
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                raise BadInput(f"{path}: replace: {key!r} is not set in this spec")
            node = node[part]


def _find(name: str, current: Path, dirs: Sequence[Path]) -> Path:
    """The spec `name` in lookup order; below `current` when `current` is itself `name`."""
    candidates = [d / f"{name}.toml" for d in dirs]
    if name == current.stem:
        position = next((n for n, c in enumerate(candidates) if _same(c, current)), None)
        candidates = candidates[position + 1:] if position is not None else [c for c in candidates if not _same(c, current)]
    found = next((c for c in candidates if c.is_file()), None)
    if found is None:
        where = ", ".join(str(c.parent) for c in candidates) or "nowhere"
        below = " below this one" if name == current.stem else ""
        raise BadInput(f"{current}: extends: no adapter spec {name!r}{below} (looked in: {where})")
    return found


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b
