"""The op log every gitswarm log is: a job's (store/jobs.py) and the memory's (store/memory.py).

Operations are recorded in commit messages: a title line, a blank line, one
canonical JSON operation per line. A merge commit records none (its tree is
the replay of its parents' operations). Merging two histories takes every
operation reachable from either tip once, by id, and replays them in the
canonical order (model/ops.py, `canonical`); the rules of each replay live
with its model (model/replay.py, model/memory.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
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
    found: dict[str, tuple[str, Any]] = {}
    for commit in commits:
        for line, op in parsed[commit.oid] if commit.oid in parsed else parse_op_lines(commit, where, kind):
            if check is not None:
                check(op, f"{where}@{commit.oid[:12]}:{op.id}")
            seen = found.get(op.id)
            if seen is None:
                found[op.id] = (line, op)
            elif seen[0] != line:
                raise CorruptRecord(f"{where}: operation {op.id} is recorded with two different bodies")
    return [op for _, op in found.values()]


def both_histories(repo: GitRepo, local: str, remote: str, remote_only: list[CommitInfo] | None = None) -> list[CommitInfo]:
    """Every commit reachable from either tip, the shared ones once: the local history, then what
    only the remote has (`remote_only`, when the caller walked it already)."""
    theirs = remote_only if remote_only is not None else list(repo.walk(remote, hide=local))
    return [*repo.walk(local), *theirs]
