"""Diffs between commits, as the git CLI writes them: binary-safe patches and per-file line counts."""

from __future__ import annotations

from pathlib import Path

from gitswarm.model.artifacts import FileChange
from gitswarm.model.paths import quote_path
from gitswarm.store.gitcli import git


def binary_diff(repo_dir: Path, base: str, head: str, full_index: bool = False) -> bytes:
    """`git diff --binary base head` (with full object ids on its index lines when `full_index`)."""
    return git(["diff", "--binary", *(["--full-index"] if full_index else []), base, head], repo_dir)


def root_diff(repo_dir: Path, commit: str) -> bytes:
    """What a commit with no parent adds, as a binary-safe diff (`git show --binary --format=`)."""
    return git(["show", "--binary", "--format=", commit], repo_dir)


def numstat(repo_dir: Path, base: str, head: str) -> tuple[FileChange, ...]:
    """Files changed base..head with added/deleted line counts (binary files count 0).

    A path is text: a name that is not UTF-8 (or that git would escape) is
    kept in git's quoted form (model/paths.py), never as a lone surrogate
    no JSON encoder accepts.
    """
    out = git(["diff", "--numstat", "-z", "--no-renames", base, head], repo_dir)
    changes = []
    for record in out.split(b"\0"):
        if not record:
            continue
        added, deleted, path = record.split(b"\t", 2)
        counts = [int(count) if count != b"-" else 0 for count in (added, deleted)]
        changes.append(FileChange(path=quote_path(path), added=counts[0], deleted=counts[1]))
    return tuple(changes)
