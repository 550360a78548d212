"""A working tree as git sees it: what `git status` lists, where HEAD is, and moving its files.

Functions of one checkout (the user's working tree, a task's worktree, a
pooled clean checkout), through the git CLI with its pinned environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from gitswarm.store.gitcli import IDENTITY, git


class StatusEntry(NamedTuple):
    code: bytes  # git's two status letters: b"??" untracked, b"!!" ignored, b" M" modified, ...
    path: bytes  # as git wrote it, relative to the working tree's top


class Head(NamedTuple):
    ref: str  # the branch HEAD is attached to (full name), "" when detached or no repository
    commit: str  # the commit HEAD names, "" when none


def has_tracked_changes(path: Path) -> bool:
    """Whether a tracked file differs from HEAD, in the index or the working tree (untracked files do not count)."""
    return bool(git(["status", "--porcelain", "--untracked-files=no"], path).strip())


def is_clean(path: Path) -> bool:
    """Whether `git status --porcelain` lists nothing: no change, no untracked file that is not ignored."""
    return not git(["status", "--porcelain"], path).strip()


def status_entries(path: Path, exclude: Path | None = None, refresh_index: bool = True) -> list[StatusEntry]:
    """Every path `git status` lists, untracked and ignored files included, renames as a delete and an add.

    `exclude` (relative to `path`) is left out, with whatever is under it.
    Without `refresh_index` git does not write the index (`--no-optional-locks`):
    a tree someone else is working in is only looked at.
    """
    args = ["status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignored", "--no-renames"]
    if not refresh_index:
        args.insert(0, "--no-optional-locks")
    if exclude is not None:
        args += ["--", ".", f":(exclude,literal){exclude}"]
    out = git(args, path)
    return [StatusEntry(entry[:2], entry[3:]) for entry in out.split(b"\0") if len(entry) > 3]


def head_of(path: Path) -> Head:
    """Where the checkout at `path` has HEAD: the branch it is on and the commit."""
    ref = git(["symbolic-ref", "-q", "HEAD"], path, check=False).decode().strip()
    commit = git(["rev-parse", "-q", "--verify", "HEAD"], path, check=False).decode().strip()
    return Head(ref, commit)


def move_files(path: Path, old: str, new: str) -> None:
    """Bring a clean checkout's index and files from commit `old` to commit `new` (`git read-tree -m -u`).

    Refuses (GitCommandError), changing nothing, when a file in the way would be lost (an untracked one).
    """
    git(["read-tree", "-m", "-u", old, new], path)


def commit_everything(path: Path, message: str) -> None:
    """Stage every file of the working tree (`git add -A`) and commit it on HEAD as gitswarm."""
    git(["add", "-A"], path)
    git(["commit", "-q", "-m", message], path, env=IDENTITY)
