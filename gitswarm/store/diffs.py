"""Diffs between commits, as the git CLI writes them: binary-safe patches and per-file line counts."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from gitswarm.model.artifacts import FileChange
from gitswarm.model.paths import quote_path
from gitswarm.store.gitcli import git


def binary_diff(repo_dir: Path, base: str, head: str, full_index: bool = False, paths: Sequence[str] = ()) -> bytes:
    """`git diff --binary base head [-- paths]` (with full object ids on its index lines when `full_index`)."""
    limit = ["--", *paths] if paths else []
    return git(["diff", "--binary", *(["--full-index"] if full_index else []), base, head, *limit], repo_dir)


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


class RawChange(NamedTuple):
    """One file's change base..head: `kind` is "added", "modified" or "deleted" (a type change is a
    modification); the modes and blobs of both sides (0 and all zeros for the side it is absent from).
    `path` is text for records (git's quoted form where the name is not plain UTF-8, model/paths.py);
    `name` is the name on disk (undecodable bytes as surrogate escapes), for matching and for files."""

    kind: str
    path: str
    name: str
    old_mode: int
    new_mode: int
    old_blob: str
    new_blob: str


_KINDS = {b"A": "added", b"M": "modified", b"T": "modified", b"D": "deleted"}


def raw_changes(repo_dir: Path, base: str, head: str) -> list[RawChange]:
    """Every file changed base..head (`git diff --raw -z --no-renames`: a rename is a deletion and an addition)."""
    out = git(["diff", "--raw", "-z", "--no-renames", "--no-abbrev", base, head], repo_dir)
    fields = out.split(b"\0")
    changes = []
    for i in range(0, len(fields) - 1, 2):
        meta, path = fields[i], fields[i + 1]
        if not meta.startswith(b":"):
            continue
        old_mode, new_mode, old_blob, new_blob, status = meta[1:].split(b" ")[:5]
        kind = _KINDS.get(status[:1], "modified")
        changes.append(RawChange(
            kind, quote_path(path), os.fsdecode(path), int(old_mode, 8), int(new_mode, 8), old_blob.decode(), new_blob.decode()
        ))
    return changes
