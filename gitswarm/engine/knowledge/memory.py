"""Memory from accepted results: `remember`, `memory list|show|forget`, and automatic promotion.

Only a result a counted verdict accepted becomes memory (engine/knowledge/accepted.py).
A record is believed only while it still follows from its artifact and a
counted, clean acceptance here: one pulled from elsewhere (or forged) that
does not is listed with `counted: false` and never reaches a packet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gitswarm.engine.config import load_config
from gitswarm.engine.knowledge.accepted import Rememberable, acceptance, record_of
from gitswarm.engine.swarm import Swarm
from gitswarm.model import codec
from gitswarm.model.artifacts import Decision, Finding, Patch, kind_of
from gitswarm.model.errors import CorruptRecord, NotFound, RefConflict, WorkFailed
from gitswarm.model.ids import resolve_prefix
from gitswarm.model.memory import Forget, MemoryRecord, Remember
from gitswarm.store.gitrepo import GitRepo
from gitswarm.store.jobs import JobRefs, Snapshot
from gitswarm.store.memory import Memory, MemoryLog
from gitswarm.store.verdicts import VerdictNotes


def memory_log(repo: GitRepo, refs: JobRefs) -> MemoryLog:
    return MemoryLog(repo, lambda: refs.actor)


def notes_of(repo: GitRepo) -> VerdictNotes:
    return VerdictNotes(repo, repo.workdir or repo.common_dir)


@dataclass
class Believer:
    """Whether records count here: each still follows from its artifact and a counted, clean
    acceptance on its commit. Snapshots and weighings are kept for the checks that follow."""

    repo: GitRepo
    refs: JobRefs
    notes: VerdictNotes
    _snapshots: dict[str, Snapshot | None] = field(default_factory=dict)

    def snapshot(self, job_id: str) -> Snapshot | None:
        if job_id not in self._snapshots:
            try:
                self._snapshots[job_id] = self.refs.snapshot(job_id)
            except (NotFound, CorruptRecord):
                self._snapshots[job_id] = None
        return self._snapshots[job_id]

    def counts(self, record: MemoryRecord) -> bool:
        snapshot = self.snapshot(record.job)
        if snapshot is None or not self.repo.has_object(record.commit):
            return False
        try:
            artifact = snapshot.artifact(record.id)
        except (NotFound, CorruptRecord):
            return False
        if not isinstance(artifact, (Finding, Decision, Patch)):
            return False
        accepted = acceptance(self.notes, snapshot, record.id, artifact, record.commit)
        if accepted is None or record.verdict not in accepted.accepting:
            return False
        return record_of(self.repo, snapshot, record.id, artifact, accepted, record.verdict) == record


def _resolve_artifact(swarm: Swarm, prefix: str) -> tuple[str, Snapshot, Rememberable]:
    found = swarm.artifact(prefix)
    snapshot = swarm.refs.snapshot(found["job"], swarm.index.job_tip(found["job"]))
    artifact = snapshot.artifact(found["id"])
    if not isinstance(artifact, (Finding, Decision, Patch)):
        raise WorkFailed(
            f"artifact {found['id'][:12]} is a {kind_of(artifact)}: only findings, decisions and patches become memory"
        )
    return found["id"], snapshot, artifact


def remember(swarm: Swarm, artifact_id: str) -> dict:
    """Promote one accepted artifact (a finding, a decision, a patch) to memory. Refused
    (WorkFailed, nothing written) unless a counted verdict accepted its result."""
    found_id, snapshot, artifact = _resolve_artifact(swarm, artifact_id)
    repo = swarm.repo
    accepted = acceptance(notes_of(repo), snapshot, found_id, artifact)
    if accepted is None:
        how = "review it first (gitswarm review ID --accept)" if not isinstance(artifact, Patch) else "verify it first"
        raise WorkFailed(
            f"{kind_of(artifact)} {found_id[:12]} was not accepted by a verdict that counts here "
            f"(complete, clean, aligned); only accepted results become memory: {how}"
        )
    record = record_of(repo, snapshot, found_id, artifact, accepted, accepted.verdict)
    written = _remember_records(repo, swarm.refs, [record], swarm.clock())
    return {"id": found_id, "remembered": bool(written), "record": codec.to_builtins(record)}


def _remember_records(repo: GitRepo, refs: JobRefs, records: list[MemoryRecord], now: float) -> list[str]:
    log = memory_log(repo, refs)

    def make(memory: Memory) -> list[Remember]:
        fresh = [r for r in records if r.id not in memory.records]
        return [Remember(record=r, **log.new_op_fields(memory, now, n)) for n, r in enumerate(fresh)]

    _, applied = log.write(make, now)
    return [op.record.id for op in applied if isinstance(op, Remember)]


def promote_task(repo: GitRepo, refs: JobRefs, job_id: str, task_id: str, now: float) -> list[str]:
    """Remember every finding, decision and patch of a task that a counted verdict accepted;
    the ids newly remembered."""
    snapshot = refs.snapshot(job_id)
    notes = notes_of(repo)
    records = []
    for artifact_id in snapshot.task(task_id).artifacts:
        artifact = snapshot.artifact(artifact_id)
        if isinstance(artifact, (Finding, Decision, Patch)):
            accepted = acceptance(notes, snapshot, artifact_id, artifact)
            if accepted is not None:
                records.append(record_of(repo, snapshot, artifact_id, artifact, accepted, accepted.verdict))
    return _remember_records(repo, refs, records, now) if records else []


def auto_promote(repo: GitRepo, refs: JobRefs, job_id: str, task_id: str | None, now: Callable[[], float]) -> list[str]:
    """promote_task when `[memory] auto` is on; else nothing."""
    if task_id is None or not load_config(repo.workdir).memory.auto:
        return []
    try:
        return promote_task(repo, refs, job_id, task_id, now())
    except (RefConflict, CorruptRecord):  # the memory ref kept moving, or cannot be read: the verdict stands
        return []


def _view(record: MemoryRecord, counted: bool) -> dict:
    return {
        "id": record.id, "kind": record.kind, "title": record.title, "job": record.job, "task": record.task,
        "commit": record.commit, "paths": list(record.paths), "created": record.created, "counted": counted,
    }


def memory_list(swarm: Swarm) -> dict:
    """Every memory record, newest first, and whether it counts here."""
    memory = memory_log(swarm.repo, swarm.refs).read()
    believer = Believer(swarm.repo, swarm.refs, notes_of(swarm.repo))
    records = sorted(memory.records.values(), key=lambda r: (-r.created, r.id))
    return {"tip": memory.tip, "records": [_view(r, believer.counts(r)) for r in records]}


def _find(memory: Memory, prefix: str) -> MemoryRecord:
    return memory.records[resolve_prefix(prefix, sorted(memory.records), "memory record")]


def memory_show(swarm: Swarm, record_id: str) -> dict:
    """One record whole, whether it counts here, and which of its paths changed since its commit (to HEAD)."""
    memory = memory_log(swarm.repo, swarm.refs).read()
    record = _find(memory, record_id)
    believer = Believer(swarm.repo, swarm.refs, notes_of(swarm.repo))
    head = swarm.repo.resolve("HEAD")
    changed = changed_paths(swarm.repo, record, head) if head is not None else []
    return {**codec.to_builtins(record), "counted": believer.counts(record), "changed_since": changed}


def forget(swarm: Swarm, record_id: str, reason: str | None = None) -> dict:
    """Forget one record (a `forget` op: the history keeps it)."""
    log = memory_log(swarm.repo, swarm.refs)
    record = _find(log.read(), record_id)
    now = swarm.clock()

    def make(memory: Memory) -> list[Forget]:
        if record.id not in memory.records:
            return []
        return [Forget(record=record.id, reason=reason, **log.new_op_fields(memory, now))]

    _, applied = log.write(make, now)
    return {"id": record.id, "forgotten": bool(applied)}


def changed_paths(repo: GitRepo, record: MemoryRecord, commit: str) -> list[str]:
    """The record's paths that differ between its commit and `commit` (all of them when its
    commit is not in this repository)."""
    if not repo.has_object(record.commit):
        return list(record.paths)
    old, new = repo.commit_info(record.commit).tree, repo.commit_info(commit).tree
    return [p for p in record.paths if repo.tree_entry(old, p) != repo.tree_entry(new, p)]
