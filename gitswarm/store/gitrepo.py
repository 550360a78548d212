"""The narrow repository interface the store is written against.

Object ids cross it as hex strings, so nothing above the git layer needs
pygit2. `store.git` holds the one implementation.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NamedTuple, Protocol


class CommitInfo(NamedTuple):
    oid: str
    tree: str
    parents: tuple[str, ...]
    message: str
    time: int


class GitRepo(Protocol):
    @property
    def common_dir(self) -> Path: ...

    @property
    def workdir(self) -> Path | None: ...

    def list_refs(self, prefix: str) -> dict[str, str]:
        """Every ref under `prefix` (e.g. 'refs/swarm/jobs/') and its target."""

    def read_ref(self, name: str) -> str | None: ...

    def cas_ref(self, name: str, new: str, expected: str | None, message: str = "") -> None:
        """Point `name` at `new` only if it still points at `expected` (None: absent); else RefConflict."""

    def blob_id(self, data: bytes) -> str: ...

    def write_blob(self, data: bytes) -> str: ...

    def read_blob(self, oid: str) -> bytes: ...

    def commit_info(self, oid: str) -> CommitInfo: ...

    def tree_entry(self, tree: str, path: str) -> str | None:
        """The oid at `path` below `tree`, or None."""

    def tree_items(self, tree: str, path: str = "") -> Iterator[tuple[str, str, bool]]:
        """(name, oid, is_tree) for each entry of the tree at `path`."""

    def update_tree(self, tree: str | None, changes: Mapping[str, str | None]) -> str:
        """A new tree: `tree` with each path set to a blob oid, or removed when None."""

    def commit(self, tree: str, parents: list[str], message: str, who: tuple[str, str], when: float) -> str: ...

    def merge_base(self, a: str, b: str) -> str | None: ...

    def has_object(self, oid: str) -> bool: ...

    def walk(self, tip: str, hide: str | None = None) -> Iterator[CommitInfo]:
        """Commits reachable from `tip`, oldest first (topological)."""

    def is_ancestor(self, ancestor: str, descendant: str) -> bool: ...

    def merge_in_memory(self, ours: str, theirs: str) -> tuple[str | None, list[str]]:
        """Three-way merge of two commits in memory: (tree, []) or (None, conflicting paths)."""

    def resolve(self, rev: str) -> str | None:
        """The commit `rev` names, or None."""

    def head_branch(self) -> str | None:
        """The full name of the checked-out branch, or None when detached or unborn."""
