"""The pygit2 implementation of GitRepo: the only module that imports pygit2."""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TypeVar, cast

import pygit2

from gitswarm.model.errors import CorruptRecord, NotARepository, RefConflict
from gitswarm.store.diskspace import full
from gitswarm.store.gitrepo import CommitInfo
from gitswarm.store.locks import held
from gitswarm.store.loose import BLOB_MODE, TREE_MODE, LooseObjects, TreeEntries, format_tree, is_tree, parse_tree

_TREE = pygit2.enums.FileMode.TREE
# A ref's lock file older than this is left by a writer that died (kill -9
# inside an update); git's own writers hold one for milliseconds. A held lock
# is waited out a little longer than that, then the error is raised.
STALE_LOCK_SECONDS = 2.0
_LOCK_WAIT_SECONDS = STALE_LOCK_SECONDS + 1.0
_TREE_CACHE = 1024
_BLOB_CACHE = 2048
_BLOB_CACHE_MAX_SIZE = 64 * 1024
_ENTRIES_CACHE = 256
_ObjectT = TypeVar("_ObjectT", bound=pygit2.Object | pygit2.Commit)  # (a Commit is no Object to the stubs)

# gitswarm only builds trees and commits from objects it has just written, so
# libgit2's check that each referenced object exists is pure cost (~15% of a
# transition). The setting is process-wide.
pygit2.settings.enable_strict_object_creation(False)


def _is_lock_error(exc: Exception) -> bool:
    return "lock" in str(exc)


class PygitRepo:
    """A git repository, reached through libgit2."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        try:
            found = pygit2.discover_repository(str(path))
        except pygit2.GitError:
            found = None
        if found is None:
            raise NotARepository(f"not a git repository (or any parent): {os.fspath(path)}")
        self.repo = pygit2.Repository(found)
        self._trees: dict[str, pygit2.Tree] = {}
        # Small blobs this process wrote or read, by id. Objects are immutable,
        # so a record blob written again (the same task record, say) needs no
        # I/O, and one read again needs no read.
        self._blobs: dict[str, bytes] = {}
        self._tree_entries: dict[str, TreeEntries] = {}
        gitdir = Path(self.repo.path)
        commondir = gitdir / "commondir"
        self._common = (gitdir / commondir.read_text().strip()).resolve() if commondir.exists() else gitdir.resolve()
        self._loose = LooseObjects(self._common / "objects")

    @property
    def common_dir(self) -> Path:
        return self._common

    @property
    def workdir(self) -> Path | None:
        return Path(self.repo.workdir) if self.repo.workdir else None

    def list_refs(self, prefix: str) -> dict[str, str]:
        found = {}
        for name in self.repo.references:
            if name.startswith(prefix):
                found[name] = str(self.repo.references[name].target)
        return found

    def read_ref(self, name: str) -> str | None:
        ref = self.repo.references.get(name)
        return None if ref is None else str(ref.target)

    def cas_ref(self, name: str, new: str, expected: str | None, message: str = "") -> None:
        """Compare-and-swap; a held lock is waited out briefly, a moved ref raises RefConflict.

        gitswarm's processes take turns on an flock (<git common dir>/gitswarm/refs.lock) for the
        read, the compare and the write: with libgit2's own check alone, writers in separate processes
        lost updates under contention (tests/store/test_notes.py's concurrency test).
        """
        with self._writing(), held(self._common / "gitswarm" / "refs.lock"):
            self._cas_ref(name, new, expected, message)

    def _cas_ref(self, name: str, new: str, expected: str | None, message: str) -> None:
        target = pygit2.Oid(hex=new)
        deadline = time.monotonic() + _LOCK_WAIT_SECONDS
        delay = 0.0005
        while True:
            try:
                if expected is None:
                    self.repo.create_reference_direct(name, target, False, message=message or None)
                    return
                ref = self.repo.references.get(name)
                if ref is None or str(ref.target) != expected:
                    raise RefConflict(f"{name} moved (expected {expected[:12]})")
                ref.set_target(target, message or "gitswarm")
                return
            except pygit2.AlreadyExistsError:
                raise RefConflict(f"{name} already exists") from None
            except (pygit2.GitError, OSError) as exc:
                if "does not match" in str(exc):
                    raise RefConflict(f"{name} moved (expected {expected and expected[:12]})") from None
                if not _is_lock_error(exc) or time.monotonic() > deadline:
                    raise
                self._remove_stale_lock(name)
                time.sleep(random.uniform(delay / 2, delay))
                delay = min(delay * 2, 0.05)

    def _remove_stale_lock(self, name: str) -> None:
        lock = self._common / f"{name}.lock"
        try:
            if time.time() - lock.stat().st_mtime > STALE_LOCK_SECONDS:
                lock.unlink()
        except FileNotFoundError:
            pass

    def blob_id(self, data: bytes) -> str:
        """The id git gives a blob of `data`, computed without writing it."""
        return str(pygit2.hash(data))

    @contextlib.contextmanager
    def _writing(self, need: int = 0) -> Iterator[None]:
        """A failed write of about `need` bytes to the object store or a ref: DiskFull when the disk is full."""
        try:
            yield
        except (pygit2.GitError, OSError) as exc:
            found = full(self._common, exc, need)
            if found is None:
                raise
            raise found from None

    def write_blob(self, data: bytes) -> str:
        with self._writing(len(data)):
            return self._write_blob(data)

    def _write_blob(self, data: bytes) -> str:
        found = pygit2.hash(data)  # the blob's id, computed without touching the disk
        oid = str(found)
        if oid not in self._blobs:
            # A record that is there already (say, one a pull brought in a pack: a merge makes the same
            # task records) is not written again. Trees and commits are new each time: not looked for.
            if found not in self.repo:
                self._loose.write(b"blob", data, oid)
            self._remember(oid, data)
        return oid

    def _remember(self, oid: str, data: bytes) -> None:
        if len(data) > _BLOB_CACHE_MAX_SIZE:
            return
        if len(self._blobs) >= _BLOB_CACHE:
            self._blobs.pop(next(iter(self._blobs)))
        self._blobs[oid] = data

    def _object(self, oid: str, kind: type[_ObjectT]) -> _ObjectT:
        try:
            found = self.repo[oid]
        except (KeyError, ValueError):
            raise CorruptRecord(f"object {oid[:12]} is missing") from None
        if not isinstance(found, kind):
            raise CorruptRecord(f"object {oid[:12]} is a {found.type_str}, not a {kind.__name__.lower()}")
        return found

    def read_blob(self, oid: str) -> bytes:
        found = self._blobs.get(oid)
        if found is None:
            found = self._object(oid, pygit2.Blob).data
            self._remember(oid, found)
        return found

    def commit_info(self, oid: str) -> CommitInfo:
        commit = self._object(oid, pygit2.Commit)
        return CommitInfo(
            oid=oid,
            tree=str(commit.tree_id),
            parents=tuple(str(p) for p in commit.parent_ids),
            message=commit.message,
            time=commit.commit_time,
        )

    def tree_entry(self, tree: str, path: str) -> str | None:
        try:
            return str(self._tree(tree)[path].id)
        except KeyError:
            return None

    def tree_items(self, tree: str, path: str = "") -> Iterator[tuple[str, str, bool]]:
        root = self._object(tree, pygit2.Tree)
        if path:
            try:
                found = root[path]
            except KeyError:
                return
            if not isinstance(found, pygit2.Tree):
                raise CorruptRecord(f"{path} in tree {tree[:12]} is a {found.type_str}, not a tree")
            root = found
        for entry in root:
            assert entry.name is not None  # an entry of a tree is named (an object found by its oid is not)
            yield entry.name, str(entry.id), entry.filemode == _TREE

    def _tree(self, oid: str) -> pygit2.Tree:
        """A tree object, from a small cache: trees are immutable, and a transition reads the same few."""
        found = self._trees.get(oid)
        if found is None:
            found = self._object(oid, pygit2.Tree)
            if len(self._trees) >= _TREE_CACHE:
                self._trees.pop(next(iter(self._trees)))
            self._trees[oid] = found
        return found

    def update_tree(self, tree: str | None, changes: Mapping[str, str | None]) -> str:
        with self._writing():
            return self._update_tree(tree, changes)[0]

    def _update_tree(self, tree: str | None, changes: Mapping[str, str | None]) -> tuple[str, int]:
        """(new tree oid, its number of entries)."""
        here: dict[str, str | None] = {}
        below: dict[str, dict[str, str | None]] = defaultdict(dict)
        for path, oid in changes.items():
            head, sep, rest = path.partition("/")
            if sep:
                below[head][rest] = oid
            else:
                here[head] = oid
        tree = tree or None
        base = self._entries(tree) if tree is not None else {}
        entries = dict(base)
        changed = tree is None  # (no base: a new tree, always written)
        for name, oid in here.items():
            key = name.encode()
            if oid is None:
                changed |= entries.pop(key, None) is not None
            elif entries.get(key) != (new := (BLOB_MODE, bytes.fromhex(oid))):
                entries[key] = new
                changed = True
        for name, sub_changes in below.items():
            key = name.encode()
            existing = entries.get(key)
            sub = existing[1].hex() if existing is not None and is_tree(existing[0]) else None
            new_sub, count = self._update_tree(sub, sub_changes)
            if new_sub == sub:
                continue
            changed = True
            if count == 0:
                entries.pop(key, None)
            else:
                entries[key] = (TREE_MODE, bytes.fromhex(new_sub))
        if not changed and tree is not None:
            return tree, len(base)
        oid = self._loose.write(b"tree", format_tree(entries))
        self._keep_entries(oid, entries)
        return oid, len(entries)

    def _entries(self, tree: str) -> TreeEntries:
        """A tree's entries, from a small cache: a transition derives the next tree from the last one."""
        found = self._tree_entries.get(tree)
        if found is None:
            found = parse_tree(self._object(tree, pygit2.Tree).read_raw(), tree)
            self._keep_entries(tree, found)
        return found

    def _keep_entries(self, tree: str, entries: TreeEntries) -> None:
        if len(self._tree_entries) >= _ENTRIES_CACHE:
            self._tree_entries.pop(next(iter(self._tree_entries)))
        self._tree_entries[tree] = entries

    def commit(
        self, tree: str, parents: list[str], message: str, who: tuple[str, str], when: float,
        sign: Callable[[bytes], str] | None = None,
    ) -> str:
        signature = pygit2.Signature(who[0], who[1], int(when), 0)
        parent_ids: list[str | pygit2.Oid] = [pygit2.Oid(hex=p) for p in parents]
        content = str(self.repo.create_commit_string(signature, signature, message, pygit2.Oid(hex=tree), parent_ids))
        with self._writing(len(message)):
            if sign is None:
                return self._loose.write(b"commit", content.encode())
            # git's own signed commit: the signature in a `gpgsig` header over the rest
            return str(self.repo.create_commit_with_signature(content, sign(content.encode()), "gpgsig"))

    def commit_signature(self, oid: str) -> tuple[str, bytes] | None:
        """A signed commit's `gpgsig` and the bytes it signs; None for an unsigned one."""
        signature, signed = cast(tuple[bytes | None, bytes | None], self._object(oid, pygit2.Commit).gpg_signature)
        if signature is None or signed is None:
            return None
        return signature.decode(errors="replace"), signed

    def walk(self, tip: str, hide: str | None = None) -> Iterator[CommitInfo]:
        """Commits reachable from `tip` (and not from `hide`), oldest first; CorruptRecord when either
        is not a commit (a ref anyone with push access pointed at a blob, say)."""
        self._object(tip, pygit2.Commit)
        if hide is not None:
            self._object(hide, pygit2.Commit)
        try:
            walker = self.repo.walk(pygit2.Oid(hex=tip), pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.REVERSE)
            if hide is not None:
                walker.hide(pygit2.Oid(hex=hide))
            for commit in walker:
                yield CommitInfo(
                    oid=str(commit.id),
                    tree=str(commit.tree_id),
                    parents=tuple(str(p) for p in commit.parent_ids),
                    message=commit.message,
                    time=commit.commit_time,
                )
        except (KeyError, pygit2.GitError) as exc:  # a commit of the history missing (pruned, or never fetched)
            raise CorruptRecord(f"the history of {tip[:12]} is incomplete: {exc}") from None

    def merge_base(self, a: str, b: str) -> str | None:
        self._object(a, pygit2.Commit)
        self._object(b, pygit2.Commit)
        found = self.repo.merge_base(pygit2.Oid(hex=a), pygit2.Oid(hex=b))
        return None if found is None else str(found)

    def has_object(self, oid: str) -> bool:
        return pygit2.Oid(hex=oid) in self.repo

    def resolve(self, rev: str) -> str | None:
        """The commit `rev` names, or None."""
        try:
            return str(self.repo.revparse_single(rev).peel(pygit2.Commit).id)
        except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
            return None

    def head_branch(self) -> str | None:
        """The full name of the branch checked out here, or None when detached or unborn."""
        if self.repo.head_is_detached or self.repo.head_is_unborn:
            return None
        return self.repo.head.name

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        if ancestor == descendant:
            return True
        self._object(ancestor, pygit2.Commit)
        self._object(descendant, pygit2.Commit)
        return self.repo.descendant_of(pygit2.Oid(hex=descendant), pygit2.Oid(hex=ancestor))

    def merge_in_memory(self, ours: str, theirs: str) -> tuple[str | None, list[str]]:
        """Three-way merge of two commits without touching any tree: (tree, []) or (None, conflicting paths)."""
        index = self.repo.merge_commits(pygit2.Oid(hex=ours), pygit2.Oid(hex=theirs))
        if index.conflicts is not None:
            paths = sorted({(entry or other or third).path for entry, other, third in index.conflicts})
            return None, paths
        with self._writing():
            return str(index.write_tree(self.repo)), []



def open_repo(path: str | os.PathLike[str] = ".") -> PygitRepo:
    return PygitRepo(path)


def init_repo(path: str | os.PathLike[str]) -> PygitRepo:
    """Create a new non-bare repository at `path` and open it."""
    pygit2.init_repository(os.fspath(path), bare=False, initial_head="main")
    return PygitRepo(path)
