"""Adapter names known in a repository, without loading any adapter (cheap enough for every command)."""

from __future__ import annotations

from pathlib import Path

from gitswarm.model.ids import TASK_ID

BUILTIN_NAMES = ("shell",)


def spec_dirs(workdir: Path | None) -> list[Path]:
    """Where adapter specs are looked up, first match wins: the repository's `.gitswarm/adapters/`."""
    return [workdir / ".gitswarm" / "adapters"] if workdir is not None else []


def adapter_names(dirs: list[Path]) -> list[str]:
    names = set(BUILTIN_NAMES)
    for directory in dirs:
        names.update(p.stem for p in directory.glob("*.toml") if TASK_ID.fullmatch(p.stem))
    return sorted(names)
