"""Which of a patch's changes touch what judges it, and putting the base's judges back for the checks.

model/protected.py says what is protected; this module reads the patch's
changes from git, parses the sectioned files (`pyproject.toml`: only its
test sections are protected), and writes the base's version of every
changed judge into the checkout the checks run in (or removes a judge the
patch added), so the checks are the base's checks.
"""

from __future__ import annotations

import json
import os
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path

from gitswarm.model.protected import SECTIONED, ChangeKind, Protection, named_paths, runners, sections_changed
from gitswarm.store.diffs import RawChange, raw_changes
from gitswarm.store.gitrepo import GitRepo

_SYMLINK = 0o120000


@dataclass(frozen=True)
class JudgeChanges:
    """The protected files a patch changes (`files`, sorted) and, for the checks, what each becomes:
    the base's blob and mode, or None where the base has no such file."""

    files: tuple[str, ...]
    restore: dict[str, tuple[str, int] | None]


def protection(repo: GitRepo, base: str, checks: tuple[str, ...], extra: tuple[str, ...]) -> Protection:
    """The protected set for checks run on commits of `base`."""
    tree = repo.commit_info(base).tree
    return Protection(
        extra=extra,
        named=named_paths(checks, lambda path: repo.tree_entry(tree, path) is not None),
        runner_names=runners(checks),
    )


def judge_changes(repo: GitRepo, repo_dir: Path, base: str, head: str, guard: Protection) -> JudgeChanges:
    """The changes base..head that change what judges the patch."""
    files, restore = [], {}
    for change in raw_changes(repo_dir, base, head):
        if not _changes_judge(repo, change, guard):
            continue
        files.append(change.path)
        restore[change.path] = None if change.kind == "added" else (change.old_blob, change.old_mode)
    return JudgeChanges(tuple(sorted(files)), restore)


def _changes_judge(repo: GitRepo, change: RawChange, guard: Protection) -> bool:
    executable = bool(change.new_mode & stat.S_IXUSR) and change.new_mode != _SYMLINK
    kind: ChangeKind = "added" if change.kind == "added" else "deleted" if change.kind == "deleted" else "modified"
    if guard.judges_changed(change.path, kind, executable):
        return True
    name = change.path.rsplit("/", 1)[-1]
    if name not in SECTIONED or kind == "added":
        return False
    if kind == "deleted":
        return True
    return sections_changed(name, _parse(name, repo.read_blob(change.old_blob)), _parse(name, repo.read_blob(change.new_blob)))


def _parse(name: str, data: bytes) -> dict | None:
    try:
        parsed = tomllib.loads(data.decode()) if name.endswith(".toml") else json.loads(data)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, json.JSONDecodeError):
        return None
    return parsed if isinstance(parsed, dict) else None


def restore(repo: GitRepo, checkout: Path, plan: dict[str, tuple[str, int] | None]) -> None:
    """Make each planned path in `checkout` what the plan says: a blob with its mode, or absent."""
    for path, what in plan.items():
        target = checkout / path
        if target.is_symlink() or target.is_file():
            target.unlink()
        if what is None:
            continue
        blob, mode = what
        target.parent.mkdir(parents=True, exist_ok=True)
        data = repo.read_blob(blob)
        if mode == _SYMLINK:
            os.symlink(data, target)
            continue
        target.write_bytes(data)
        target.chmod(0o755 if mode & stat.S_IXUSR else 0o644)
