"""The memory ref: records as a chain of remember / forget commits, merged by replay.

    refs/swarm/memory                   one ref for every clone's memory
      state                             MemoryState record
      records.<id[:2]>/<id>             MemoryRecord; id = the source artifact's id

Each commit records its operations in its message (a title line, a blank
line, one canonical JSON op per line) and its tree is the materialized state
after them. The ref moves by compare-and-swap only. Two clones' histories,
related or not (each clone may start its memory alone), merge by replaying
every operation of both in (clock, actor, id) order: model/memory.py.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from gitswarm.model import codec
from gitswarm.model.errors import CorruptRecord, RefConflict
from gitswarm.model.ids import ARTIFACT_ID, new_id
from gitswarm.model.memory import MemoryOp, MemoryRecord, MemoryState, Replayed, apply_op, op_title, replay
from gitswarm.model.memory_checks import check_memory_op
from gitswarm.store.gitrepo import CommitInfo, GitRepo
from gitswarm.store.layout import MEMORY_RECORDS_FANS as RECORDS_FANS
from gitswarm.store.memory_cache import RecordCache, cache_path
from gitswarm.store.oplog import both_histories, op_message, parse_op_lines, unique_ops

MEMORY_REF = "refs/swarm/memory"
STATE_PATH = "state"
COMMITTER = "gitswarm"
CAS_ATTEMPTS = 6
_HEX = frozenset("0123456789abcdef")


def record_path(record_id: str) -> str:
    return f"{RECORDS_FANS}{record_id[:2]}/{record_id}"


@dataclass(frozen=True)
class Memory:
    """The memory as of one tip (None: no memory yet)."""

    tip: str | None
    state: MemoryState
    records: dict[str, MemoryRecord]


def parse_ops(commit: CommitInfo, where: str) -> list[tuple[str, MemoryOp]]:
    """The (line, op) pairs a commit records; none for a merge commit (as a job's: store/jobs.py)."""
    return parse_op_lines(commit, where, MemoryOp)


def raw_records(repo: GitRepo, tip: str) -> list[bytes]:
    """Every record blob of a tip, undecoded (what a benchmark compares reading with)."""
    tree = repo.commit_info(tip).tree
    found: list[bytes] = []
    for fan, fan_oid, is_tree in repo.tree_items(tree):
        if is_tree and fan.startswith(RECORDS_FANS):
            found.extend(repo.read_blob(oid) for _, oid, _ in repo.tree_items(fan_oid))
    return found


class MemoryLog:
    """Reads and writes of the memory ref of one repository."""

    def __init__(self, repo: GitRepo, actor: Callable[[], str]) -> None:
        self.repo = repo
        self.actor = actor
        self.cache = RecordCache(cache_path(repo.common_dir))

    def read(self, tip: str | None = None) -> Memory:
        tip = tip if tip is not None else self.repo.read_ref(MEMORY_REF)
        if tip is None:
            return Memory(None, MemoryState(), {})
        where = MEMORY_REF
        tree = self.repo.commit_info(tip).tree
        state_oid = self.repo.tree_entry(tree, STATE_PATH)
        if state_oid is None:
            raise CorruptRecord(f"{where}:{STATE_PATH}: missing")
        state = codec.decode(self.repo.read_blob(state_oid), MemoryState, f"{where}:{STATE_PATH}")
        return Memory(tip, state, self.cache.records(self.repo, tree, where))

    def write(self, make: Callable[[Memory], Sequence[MemoryOp]], now: float) -> tuple[Memory, list[MemoryOp]]:
        """Apply the ops `make` builds on the current memory, commit them and move the ref by CAS;
        on a lost race, rebuild on the new tip (jittered, bounded). Ops that would not apply are
        left out; with none left nothing is written. Returns the new memory and the ops applied."""
        for attempt in range(CAS_ATTEMPTS):
            memory = self.read()
            state, records = memory.state, dict(memory.records)
            applied: list[MemoryOp] = []
            for op in make(memory):
                after = apply_op(op, state, records)
                if after is not None:
                    state = after
                    applied.append(op)
            if not applied:
                return memory, []
            tip = self._commit(memory, state, records, applied)
            try:
                self.repo.cas_ref(MEMORY_REF, tip, memory.tip, "gitswarm: memory")
            except RefConflict:
                time.sleep(random.uniform(0, 0.01 * 2**attempt))
                continue
            return Memory(tip, state, records), applied
        raise RefConflict(f"{MEMORY_REF} kept moving; nothing written")

    def next_clock(self, memory: Memory, after: int = 0) -> int:
        return memory.state.clock + 1 + after

    def new_op_fields(self, memory: Memory, now: float, after: int = 0) -> dict:
        return {"id": new_id(now), "clock": self.next_clock(memory, after), "at": now, "actor": self.actor()}

    def _commit(self, memory: Memory, state: MemoryState, records: dict[str, MemoryRecord], ops: Sequence[MemoryOp]) -> str:
        paths: dict[str, str | None] = {STATE_PATH: self.repo.write_blob(codec.encode(state))}
        for record_id in memory.records.keys() - records.keys():
            paths[record_path(record_id)] = None
        for record_id in records.keys() - memory.records.keys():
            paths[record_path(record_id)] = self.repo.write_blob(codec.encode(records[record_id]))
        parent = memory.tip
        tree = self.repo.update_tree(self.repo.commit_info(parent).tree if parent else None, paths)
        who = (COMMITTER, f"{ops[-1].actor}@gitswarm")
        return self.repo.commit(tree, [parent] if parent else [], op_message(ops, op_title), who, ops[-1].at)

    # -- merging and pulled history ---------------------------------------------------------

    def unique_ops(self, commits: Iterable[CommitInfo], where: str, check: bool = False) -> list[MemoryOp]:
        """The operations the commits record, each once (store/oplog.py); `check`: each op is
        checked as hostile input (a pull's)."""
        return unique_ops(commits, where, MemoryOp, check=check_memory_op if check else None)

    def merge(self, local: str, remote: str, now: float, brought: list[CommitInfo] | None = None) -> str:
        """Commit the merge of two tips (parents: local, remote): the replay of every op of both."""
        result = replay(self.unique_ops(both_histories(self.repo, local, remote, brought), MEMORY_REF))
        ours = self.read(local)
        paths: dict[str, str | None] = {STATE_PATH: self.repo.write_blob(codec.encode(result.state))}
        for record_id in ours.records.keys() - result.records.keys():
            paths[record_path(record_id)] = None
        for record_id, record in result.records.items():
            if ours.records.get(record_id) != record:
                paths[record_path(record_id)] = self.repo.write_blob(codec.encode(record))
        tree = self.repo.update_tree(self.repo.commit_info(local).tree, paths)
        message = f"merge {len(result.records)} records\n"
        return self.repo.commit(tree, [local, remote], message, (COMMITTER, f"{self.actor()}@gitswarm"), max(now, result.state.updated))

    def check_pulled(self, theirs: str, ours: str | None, charge: Callable[[int, str], None]) -> list[CommitInfo]:
        """Refuse (CorruptRecord) a pulled memory history that is not well formed: every commit it
        brings (at most two parents, its message within the caps), every op checked as hostile
        input, and its tip recording exactly the replay of all its operations, nothing else."""
        where = MEMORY_REF
        brought = list(self.repo.walk(theirs, hide=ours))
        for commit in brought:
            at = f"{where}@{commit.oid[:12]}"
            charge(len(commit.message.encode()), at)
            if len(commit.parents) > 2:
                raise CorruptRecord(f"{at}: a commit with {len(commit.parents)} parents")
        kept = list(self.repo.walk(theirs)) if ours is not None else brought
        ops = self.unique_ops(kept, where, check=True)
        self.check_tip(theirs, replay(ops))
        return brought

    def check_tip(self, tip: str, result: Replayed) -> None:
        where = MEMORY_REF
        tree = self.repo.commit_info(tip).tree
        if self.repo.tree_entry(tree, STATE_PATH) != self.repo.blob_id(codec.encode(result.state)):
            raise CorruptRecord(f"{where}:{STATE_PATH}: the record does not match the memory's operations")
        expected = {record_path(r.id): self.repo.blob_id(codec.encode(r)) for r in result.records.values()}
        seen = 0
        for name, oid, is_tree in self.repo.tree_items(tree):
            if name == STATE_PATH and not is_tree:
                continue
            fan = name[len(RECORDS_FANS):]
            if not is_tree or not name.startswith(RECORDS_FANS) or len(fan) != 2 or not _HEX.issuperset(fan):
                raise CorruptRecord(f"{where}:{name}: not an entry gitswarm writes")
            for entry, entry_oid, entry_is_tree in self.repo.tree_items(oid):
                path = f"{name}/{entry}"
                if entry_is_tree or not ARTIFACT_ID.fullmatch(entry) or expected.get(path) != entry_oid:
                    raise CorruptRecord(f"{where}:{path}: a record no operation made")
                seen += 1
        if seen != len(expected):
            raise CorruptRecord(f"{where}: records the operations made are missing from the tree")
