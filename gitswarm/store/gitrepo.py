"""The narrow interfaces the store is written against: a repository's objects and refs, and a transport.

Object ids cross them as hex strings, so nothing above the git layer needs
pygit2. `store.git` holds the implementation of `GitRepo`, `store.remote`
the one of `Transport` (the git CLI). tests/store/memgit.py holds an
in-memory fake of both, and tests/store/test_gitrepo_conformance.py runs
one suite against each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple, Protocol

from gitswarm.model.errors import GitswarmError


class GitCommandError(GitswarmError):
    """A git operation of the store failed; the message names the command and what git said."""


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

    def commit(
        self, tree: str, parents: list[str], message: str, who: tuple[str, str], when: float,
        sign: Callable[[bytes], str] | None = None,
    ) -> str:
        """A new commit (signed in git's `gpgsig` header by `sign`, given the commit's bytes, when set)."""
        ...

    def commit_signature(self, oid: str) -> tuple[str, bytes] | None:
        """A signed commit's `gpgsig` and the bytes it signs; None for an unsigned one."""
        ...

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


# What a push refusal says when the remote moved on (the local side must fetch and merge).
REMOTE_MOVED = ("non-fast-forward", "fetch first", "stale info")


class PushResult(NamedTuple):
    ok: bool
    pushed: tuple[str, ...]  # the local refs whose remote ref was created or moved
    rejected: tuple[str, ...]  # one line per refused ref, as `git push --porcelain` prints it
    said: str  # what went wrong otherwise (git's first error line), "" when nothing did

    @property
    def remote_moved(self) -> bool:
        """Refused because the remote holds commits the pushed tips do not contain."""
        return any(reason in line for line in self.rejected for reason in REMOTE_MOVED)


class Transport(Protocol):
    """Moving refs and their objects between this repository and a remote."""

    def remote_names(self) -> list[str]:
        """The remotes configured here, by name."""

    def fetch(self, remote: str, refspecs: Sequence[str], one_round_trip: bool = False) -> None:
        """Fetch each `+src:dst` refspec (forced: the destination is overwritten whatever it held; one
        `*` on each side at most), and delete the refs under a destination pattern that the remote
        no longer has (prune). No tags. GitCommandError when it fails (an unknown remote, say).
        `one_round_trip`: a fetch repeated between pushes, where a round trip more costs more than
        the remote's whole ref advertisement."""

    def push(self, remote: str, refspecs: Sequence[str]) -> PushResult:
        """Push each `src:dst` refspec, never forced, all or none (atomic): a ref that is not a
        fast-forward of the remote's refuses the whole push and moves nothing."""

    def offer(
        self, remote: str, updates: Mapping[str, str], expect: Mapping[str, str | None] | None = None
    ) -> PushResult:
        """Push commits by id (`updates`: remote ref -> commit id), all or none (atomic), in one connection,
        with their objects; nothing local moves. ValueError, before anything is sent, when a ref of
        `updates` is not under refs/swarm/. A ref not in `expect` moves only as a fast-forward of the
        remote's; a ref in `expect` moves, fast-forward or not, only if the remote still holds the commit
        given there (None: only if the remote has no such ref), a compare-and-swap. A ref the remote holds
        at its commit already counts as accepted; an `expect` entry for a ref not in `updates` is ignored.
        Accepted: ok, `pushed` every ref of `updates`, `rejected` empty, `said` "". Refused: not ok,
        `pushed` empty, `rejected` one `!` line per ref as `git push --porcelain` prints it (a refused
        ref's reason, such as "non-fast-forward", "fetch first", "stale info"; "atomic push failed" for
        the refs refused with it), `said` git's first error line. A remote that cannot be reached:
        not ok, `rejected` empty, `said` what git said."""
