"""The op log every gitswarm log is: a job's (store/jobs.py) and the memory's (store/memory.py).

Operations are recorded in commit messages: a title line, a blank line, one
canonical JSON operation per line. A merge commit records none (its tree is
the replay of its parents' operations). Merging two histories takes every
operation reachable from either tip once, by id, and replays them in the
canonical order (model/ops.py, `canonical`); the rules of each replay live
with its model (model/replay.py, model/memory.py).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeVar

from gitswarm.model import codec
from gitswarm.model.errors import CorruptRecord
from gitswarm.model.ops import OpBase
from gitswarm.store.gitrepo import CommitInfo, GitRepo

OpT = TypeVar("OpT", bound=OpBase)
#: Commit id -> the (line, operation) pairs it records, for commits a caller already decoded.
Parsed = Mapping[str, list[tuple[str, Any]]]
NOTHING_PARSED: Parsed = MappingProxyType({})  # the default: no commit parsed already


def op_message(ops: Sequence[OpBase], title_of: Callable[[Any], str]) -> str:
    """Title line(s) joined by '; ', a blank line, then one canonical JSON op per line."""
    titles = "; ".join(title_of(op) for op in ops)
    return f"{titles}\n\n" + "".join(codec.encode(op).decode() + "\n" for op in ops)


def parse_op_lines(commit: CommitInfo, where: str, kind: Any) -> list[tuple[str, Any]]:
    """The (line, operation) pairs a commit records, in the order they were applied, each line
    decoded as `kind` (the log's union of operations); none for a merge commit."""
    if len(commit.parents) > 1:
        return []
    _, _, body = commit.message.partition("\n\n")
    lines = [line for line in body.splitlines() if line.strip()]
    if not lines:
        raise CorruptRecord(f"{where}@{commit.oid[:12]}: commit records no operation")
    return [(line, codec.decode(line.encode(), kind, f"{where}@{commit.oid[:12]}")) for line in lines]


def unique_ops(
    commits: Iterable[CommitInfo], where: str, kind: Any, parsed: Parsed = NOTHING_PARSED,
    check: Callable[[Any, str], None] | None = None,
) -> list[Any]:
    """The operations the commits record, each once (by id). An op id that comes with two different
    bodies is refused: merging would silently drop one of them. `check`: called on each op with
    where it was found, to refuse one as hostile input (a pull's)."""
    found: Found = {}
    add_ops(found, commits, where, kind, parsed, check)
    return [op for _, op in found.values()]


#: Op id -> (its line, the operation): the operations of a history, each once.
Found = dict[str, tuple[str, Any]]


def add_ops(
    found: Found, commits: Iterable[CommitInfo], where: str, kind: Any, parsed: Parsed = NOTHING_PARSED,
    check: Callable[[Any, str], None] | None = None,
) -> None:
    """Add to `found` the operations the commits record (unique_ops, into a dict the caller holds)."""
    for commit in commits:
        for line, op in parsed[commit.oid] if commit.oid in parsed else parse_op_lines(commit, where, kind):
            if check is not None:
                check(op, f"{where}@{commit.oid[:12]}:{op.id}")
            seen = found.get(op.id)
            if seen is None:
                found[op.id] = (line, op)
            elif seen[0] != line:
                raise CorruptRecord(f"{where}: operation {op.id} is recorded with two different bodies")


class HistoryOps:
    """The operations of local histories as of their tips, kept by this process and brought forward as a
    tip moves: a merge then reads the commits made since the last one, not the whole history again (a job
    merged with every machine's claims many times a second on a shared remote).

    A history is kept by tip, and commits never change: what is kept for a tip is right for as long as the
    process lives. A tip that does not descend from the one kept (a ref set back by hand) is walked anew."""

    def __init__(self, kind: Any, keep: int = 16) -> None:
        self.kind = kind
        self.keep = keep  # histories kept at most (the least recently used go first)
        self._kept: dict[tuple[str, str], tuple[str, Found]] = {}  # (repository, log) -> (tip, its ops)

    def at(self, repo: GitRepo, log: str, tip: str) -> Found:
        """Every operation reachable from `tip` of the log `log` (its ref, as errors name it), each once (the
        caller copies before adding to it)."""
        key = (str(repo.common_dir), log)
        kept = self._kept.pop(key, None)
        if kept is not None and kept[0] == tip:
            self._kept[key] = kept
            return kept[1]
        found: Found | None = None
        if kept is not None:
            try:
                new = list(repo.walk(tip, hide=kept[0]))
            except CorruptRecord:  # the kept tip pruned since (a ref set back, then a gc): walked anew below
                new = []
            # The kept tip is in this history exactly when one of the commits since names it as a parent.
            if any(kept[0] in commit.parents for commit in new):
                found = dict(kept[1])
                add_ops(found, new, log, self.kind)
        if found is None:
            found = {}
            add_ops(found, repo.walk(tip), log, self.kind)
        self._kept[key] = (tip, found)
        while len(self._kept) > self.keep:
            self._kept.pop(next(iter(self._kept)))
        return found


def commits_beyond(repo: GitRepo, tip: str, held: Container[str]) -> tuple[list[CommitInfo], set[str]]:
    """The commits reachable from `tip` without passing through one in `held` (parents before children),
    and the commits of `held` where the walk stopped. Reads only what `held` lacks: a history this process
    already knows costs what was added to it, where a merge base or a hiding walk reads back through it.
    CorruptRecord when a commit of it is missing."""
    found: dict[str, CommitInfo] = {}
    frontier: set[str] = set()
    order: list[CommitInfo] = []
    stack: list[tuple[str, bool]] = [(tip, False)]
    while stack:
        oid, parents_done = stack.pop()
        if parents_done:
            order.append(found[oid])
            continue
        if oid in found:
            continue
        if oid in held:
            frontier.add(oid)
            continue
        commit = found[oid] = repo.commit_info(oid)
        stack.append((oid, True))
        stack.extend((parent, False) for parent in reversed(commit.parents) if parent not in found)
    return order, frontier


def both_histories(repo: GitRepo, local: str, remote: str, remote_only: list[CommitInfo] | None = None) -> list[CommitInfo]:
    """Every commit reachable from either tip, the shared ones once: the local history, then what
    only the remote has (`remote_only`, when the caller walked it already)."""
    theirs = remote_only if remote_only is not None else list(repo.walk(remote, hide=local))
    return [*repo.walk(local), *theirs]
