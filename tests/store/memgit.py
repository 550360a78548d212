"""An in-memory fake of the store's git interfaces: `GitRepo` (MemRepo) and `Transport` (MemTransport).

Objects are hashed as git hashes them (`blob <size>\\0...`, trees in git's
order, commits with `+0000` signatures as store/git.py writes them), so a
fake repository gives the ids a real one gives. tests/store/
test_gitrepo_conformance.py runs one suite against both; what it does not
cover, the fake does not promise. Known limits: `merge_in_memory` merges
whole files (a file both sides changed conflicts, where libgit2 would merge
their lines), and `resolve` knows ref names, `HEAD`, ids and id prefixes,
`~N` and `^` only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gitswarm.model.errors import CorruptRecord, RefConflict
from gitswarm.store.gitrepo import CommitInfo, GitCommandError, PushResult

BLOB_MODE, TREE_MODE = "100644", "40000"
Entries = dict[str, tuple[str, str]]  # name -> (mode, oid)


def _hash(kind: str, body: bytes) -> str:
    return hashlib.sha1(f"{kind} {len(body)}\0".encode() + body).hexdigest()


def _tree_order(item: tuple[str, tuple[str, str]]) -> bytes:
    """git sorts a tree's entries by name, a subtree's name as if it ended in '/'."""
    name, (mode, _) = item
    return name.encode() + (b"/" if mode == TREE_MODE else b"")


@dataclass
class MemRepo:
    """A repository held in dicts: objects by id, refs by name, HEAD as a branch name or a detached id."""

    common_dir: Path = Path("/nonexistent/memgit.git")
    workdir: Path | None = None
    head: str = "refs/heads/main"  # a full branch name, or a commit id when detached
    refs: dict[str, str] = field(default_factory=dict)
    objects: dict[str, tuple[str, object]] = field(default_factory=dict)  # id -> (kind, bytes | Entries | CommitInfo)

    # refs

    def list_refs(self, prefix: str) -> dict[str, str]:
        return {name: oid for name, oid in sorted(self.refs.items()) if name.startswith(prefix)}

    def read_ref(self, name: str) -> str | None:
        return self.refs.get(name)

    def cas_ref(self, name: str, new: str, expected: str | None, message: str = "") -> None:
        current = self.refs.get(name)
        if expected is None and current is not None:
            raise RefConflict(f"{name} already exists")
        if expected is not None and current != expected:
            raise RefConflict(f"{name} moved (expected {expected[:12]})")
        self.refs[name] = new

    def head_branch(self) -> str | None:
        return self.head if self.head.startswith("refs/") and self.head in self.refs else None

    # objects

    def _object(self, oid: str, kind: str) -> object:
        found = self.objects.get(oid)
        if found is None:
            raise CorruptRecord(f"object {oid[:12]} is missing")
        if found[0] != kind:
            raise CorruptRecord(f"object {oid[:12]} is a {found[0]}, not a {kind}")
        return found[1]

    def has_object(self, oid: str) -> bool:
        return oid in self.objects

    def blob_id(self, data: bytes) -> str:
        return _hash("blob", data)

    def write_blob(self, data: bytes) -> str:
        oid = self.blob_id(data)
        self.objects[oid] = ("blob", bytes(data))
        return oid

    def read_blob(self, oid: str) -> bytes:
        found = self._object(oid, "blob")
        assert isinstance(found, bytes)
        return found

    def _entries(self, tree: str) -> Entries:
        found = self._object(tree, "tree")
        assert isinstance(found, dict)
        return found

    def _write_tree(self, entries: Entries) -> str:
        ordered = sorted(entries.items(), key=_tree_order)
        body = b"".join(f"{mode} {name}".encode() + b"\0" + bytes.fromhex(oid) for name, (mode, oid) in ordered)
        oid = _hash("tree", body)
        self.objects[oid] = ("tree", dict(ordered))
        return oid

    def tree_entry(self, tree: str, path: str) -> str | None:
        oid = tree
        for name in path.split("/"):
            found = self.objects.get(oid)
            if found is None or found[0] != "tree":
                return None
            entry = self._entries(oid).get(name)
            if entry is None:
                return None
            oid = entry[1]
        return oid

    def tree_items(self, tree: str, path: str = "") -> Iterator[tuple[str, str, bool]]:
        oid = self.tree_entry(tree, path) if path else tree
        if oid is None:
            return
        for name, (mode, entry) in self._entries(oid).items():
            yield name, entry, mode == TREE_MODE

    def update_tree(self, tree: str | None, changes: Mapping[str, str | None]) -> str:
        entries = dict(self._entries(tree)) if tree else {}
        below: dict[str, dict[str, str | None]] = {}
        for path, oid in changes.items():
            head, sep, rest = path.partition("/")
            if sep:
                below.setdefault(head, {})[rest] = oid
            elif oid is None:
                entries.pop(head, None)
            else:
                entries[head] = (BLOB_MODE, oid)
        for name, sub_changes in below.items():
            existing = entries.get(name)
            sub = existing[1] if existing is not None and existing[0] == TREE_MODE else None
            new_sub = self.update_tree(sub, sub_changes)
            if self._entries(new_sub):
                entries[name] = (TREE_MODE, new_sub)
            elif existing is not None and new_sub != sub:
                entries.pop(name)
        return self._write_tree(entries)

    def commit(self, tree: str, parents: list[str], message: str, who: tuple[str, str], when: float) -> str:
        signature = f"{who[0]} <{who[1]}> {int(when)} +0000"
        lines = [f"tree {tree}", *(f"parent {p}" for p in parents), f"author {signature}", f"committer {signature}"]
        body = ("\n".join(lines) + "\n\n" + message).encode()
        oid = _hash("commit", body)
        self.objects[oid] = ("commit", CommitInfo(oid, tree, tuple(parents), message, int(when)))
        return oid

    def commit_info(self, oid: str) -> CommitInfo:
        found = self._object(oid, "commit")
        assert isinstance(found, CommitInfo)
        return found

    # history

    def _ancestry(self, tip: str) -> set[str]:
        """`tip` and every commit reachable from it."""
        seen: set[str] = set()
        todo = [tip]
        while todo:
            oid = todo.pop()
            if oid not in seen:
                seen.add(oid)
                todo.extend(self.commit_info(oid).parents)
        return seen

    def walk(self, tip: str, hide: str | None = None) -> Iterator[CommitInfo]:
        hidden = self._ancestry(hide) if hide is not None else set()
        order: list[str] = []
        done: set[str] = set()
        stack = [(tip, False)]
        while stack:  # depth-first, a commit after all its parents
            oid, expanded = stack.pop()
            if oid in done or oid in hidden:
                continue
            if expanded:
                done.add(oid)
                order.append(oid)
                continue
            stack.append((oid, True))
            stack.extend((parent, False) for parent in reversed(self.commit_info(oid).parents))
        yield from (self.commit_info(oid) for oid in order)

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        return ancestor in self._ancestry(descendant)

    def merge_base(self, a: str, b: str) -> str | None:
        common = self._ancestry(a) & self._ancestry(b)
        best = [c for c in common if not any(c != other and c in self._ancestry(other) for other in common)]
        return min(best) if best else None

    def _files(self, tree: str | None, prefix: str = "") -> dict[str, str]:
        found: dict[str, str] = {}
        for name, oid, is_tree in self.tree_items(tree) if tree else ():
            if is_tree:
                found.update(self._files(oid, f"{prefix}{name}/"))
            else:
                found[f"{prefix}{name}"] = oid
        return found

    def merge_in_memory(self, ours: str, theirs: str) -> tuple[str | None, list[str]]:
        """Three-way merge of whole files: a file changed on one side takes that side; changed on both, differently,
        conflicts."""
        base = self.merge_base(ours, theirs)
        trees = [self.commit_info(c).tree if c else None for c in (base, ours, theirs)]
        old, mine, other = (self._files(t) for t in trees)
        merged: dict[str, str | None] = {}
        conflicts = []
        for path in sorted(set(old) | set(mine) | set(other)):
            b, o, t = old.get(path), mine.get(path), other.get(path)
            if o == t or b == t:
                merged[path] = o
            elif b == o:
                merged[path] = t
            else:
                conflicts.append(path)
        if conflicts:
            return None, conflicts
        return self.update_tree(None, {path: oid for path, oid in merged.items() if oid is not None}), []

    def resolve(self, rev: str) -> str | None:
        base, _, steps = rev.partition("~")
        back = 0
        while base.endswith("^"):
            base, back = base[:-1], back + 1
        if steps:
            if not steps.isdigit():
                return None
            back += int(steps)
        oid = self._named(base)
        while oid is not None and back:
            parents = self.commit_info(oid).parents
            oid, back = (parents[0] if parents else None), back - 1
        return oid

    def _named(self, name: str) -> str | None:
        """The commit a ref name, HEAD or an (abbreviated) id names."""
        if name == "HEAD":
            name = self.head
        for candidate in (name, f"refs/{name}", f"refs/tags/{name}", f"refs/heads/{name}", f"refs/remotes/{name}"):
            if candidate in self.refs:
                oid = self.refs[candidate]
                return oid if self.objects.get(oid, ("",))[0] == "commit" else None
        if 4 <= len(name) <= 40 and all(c in "0123456789abcdef" for c in name):
            found = [oid for oid in self.objects if oid.startswith(name)]
            if len(found) == 1 and self.objects[found[0]][0] == "commit":
                return found[0]
        return None

    def copy_from(self, other: MemRepo, tip: str) -> None:
        """Every object reachable from commit `tip` of `other`, as a fetch or a push brings them."""
        todo = [tip]
        while todo:
            oid = todo.pop()
            if oid in self.objects:
                continue
            kind, body = other.objects[oid]
            self.objects[oid] = (kind, body)
            if isinstance(body, CommitInfo):
                todo += [body.tree, *body.parents]
            elif isinstance(body, dict):
                todo += [entry for _, entry in body.values()]


def _expand(spec: str, names: Sequence[str]) -> list[tuple[str, str]]:
    """(source, destination) for each name a `src:dst` refspec (one `*` a side at most) matches."""
    src, _, dst = spec.partition(":")
    if "*" not in src:
        return [(src, dst)] if src in names else []
    head, _, tail = src.partition("*")
    found = []
    for name in names:
        if name.startswith(head) and name.endswith(tail) and len(name) >= len(head) + len(tail):
            middle = name[len(head) : len(name) - len(tail)]
            found.append((name, dst.replace("*", middle, 1)))
    return found


# The status `git push --atomic` names in "atomic push failed for ref R. status: N", by the reason R was refused.
_REFUSAL_STATUS = {"non-fast-forward": 2, "fetch first": 5, "needs force": 6, "stale info": 7}


@dataclass
class MemTransport:
    """Fetch and push between a MemRepo and the MemRepos it names as its remotes."""

    local: MemRepo
    remotes: dict[str, MemRepo]

    def remote_names(self) -> list[str]:
        return sorted(self.remotes)

    def _remote(self, remote: str) -> MemRepo | None:
        return self.remotes.get(remote)

    def fetch(self, remote: str, refspecs: Sequence[str], one_round_trip: bool = False) -> None:
        there = self._remote(remote)
        if there is None:
            raise GitCommandError(f"git fetch failed: fatal: '{remote}' does not appear to be a git repository")
        for spec in refspecs:
            if not spec.startswith("+"):
                raise ValueError(f"the fake fetches forced refspecs only, not {spec!r}")
            src, _, dst = spec[1:].partition(":")
            fetched = dict(_expand(f"{src}:{dst}", sorted(there.refs)))
            for name, into in fetched.items():
                self.local.copy_from(there, there.refs[name])
                self.local.refs[into] = there.refs[name]
            kept = set(fetched.values())
            for name, _ in _expand(f"{dst}:{dst}", sorted(self.local.refs)):
                if name not in kept:
                    del self.local.refs[name]  # pruned: the remote has it no more

    def push(self, remote: str, refspecs: Sequence[str]) -> PushResult:
        there = self._remote(remote)
        if there is None:
            return PushResult(False, (), (), f"fatal: '{remote}' does not appear to be a git repository")
        updates, lines, refused = [], [], None
        for spec in refspecs:
            if spec.startswith("+"):
                raise ValueError("a push is never forced")
            for src, dst in _expand(spec, sorted(self.local.refs)):
                new, old = self.local.refs[src], there.refs.get(dst)
                if old == new:
                    lines.append(("=", src, dst, "[up to date]"))
                    continue
                if old is not None and not (self.local.has_object(old) and self.local.is_ancestor(old, new)):
                    reason = "non-fast-forward" if self.local.has_object(old) else "fetch first"
                    lines.append(("!", src, dst, f"[rejected] ({reason})"))
                    refused = refused or dst
                    continue
                lines.append(("*" if old is None else " ", src, dst, "[new reference]" if old is None else f"{old[:7]}..{new[:7]}"))
                updates.append((dst, new))
        if refused is not None:
            rejected = tuple(
                f"!\t{src}:{dst}\t{summary if flag == '!' else '[rejected] (atomic push failed)'}"
                for flag, src, dst, summary in lines
                if flag != "="
            )
            return PushResult(False, (), rejected, f"error: atomic push failed for ref {refused}. status: 2")
        for dst, new in updates:
            there.copy_from(self.local, new)
            there.refs[dst] = new
        pushed = tuple(src for flag, src, _, _ in lines if flag in ("*", " "))
        return PushResult(True, pushed, (), "")

    def offer(
        self, remote: str, updates: Mapping[str, str], expect: Mapping[str, str | None] | None = None
    ) -> PushResult:
        """As GitTransport.offer: commits by id, all or none; a ref in `expect` by compare-and-swap, any other
        only as a fast-forward. The `!` lines come in git's order: the refs the remote has, by name, then the
        new ones as given."""
        if any(not ref.startswith("refs/swarm/") for ref in updates):
            raise ValueError("only refs under refs/swarm/ are offered")
        there = self._remote(remote)
        if there is None:
            return PushResult(False, (), (), f"fatal: '{remote}' does not appear to be a git repository")
        leases = expect or {}
        new_refs = [ref for ref in updates if ref not in there.refs]
        order = [*sorted(ref for ref in updates if ref in there.refs), *new_refs]
        moving = [ref for ref in order if there.refs.get(ref) != updates[ref]]  # a ref already there is up to date
        refused: dict[str, str] = {}
        for ref in moving:
            reason = self._refusal(there.refs.get(ref), updates[ref], ref in leases, leases.get(ref))
            if reason is not None:
                refused[ref] = reason
        if refused:
            first = next(iter(refused))
            summaries = {ref: f"[rejected] ({refused.get(ref, 'atomic push failed')})" for ref in moving}
            said = f"error: atomic push failed for ref {first}. status: {_REFUSAL_STATUS[refused[first]]}"
            return PushResult(False, (), tuple(f"!\t{updates[ref]}:{ref}\t{summaries[ref]}" for ref in moving), said)
        missing = [updates[ref] for ref in moving if not self.local.has_object(updates[ref])]
        if missing:  # git refuses it only once it packs the objects: the remote unpacks nothing
            rejected = tuple(f"!\t{updates[ref]}:{ref}\t[remote rejected] (unpacker error)" for ref in moving)
            return PushResult(False, (), rejected, f"fatal: bad object {missing[0]}")
        for ref in moving:
            there.copy_from(self.local, updates[ref])
            there.refs[ref] = updates[ref]
        return PushResult(True, tuple(updates), (), "")

    def _refusal(self, old: str | None, new: str, leased: bool, lease: str | None) -> str | None:
        """Why git refuses to move a remote ref from `old` to `new` before it sends anything, or None."""
        if leased:
            return None if old == lease else "stale info"
        if old is None:
            return None
        if not self.local.has_object(old):
            return "fetch first"
        if not all(self.local.objects.get(oid, ("",))[0] == "commit" for oid in (old, new)):
            return "needs force"
        return None if self.local.is_ancestor(old, new) else "non-fast-forward"
