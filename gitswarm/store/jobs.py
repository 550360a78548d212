"""Jobs as commit chains on refs: read a snapshot, append an operation.

Each commit records one operation (its canonical JSON is the commit message
body) and its tree is the materialized state after it, so reading a job is
one tree read and a write touches only the paths that changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar, overload

from gitswarm.model import codec
from gitswarm.model.artifacts import Artifact, ArtifactT, artifact_id, as_kind, blob_refs
from gitswarm.model.errors import CorruptRecord, NotFound
from gitswarm.model.ids import new_id
from gitswarm.model.ops import JobCreated, Op, OpT, title
from gitswarm.model.records import Job, JobState, Task
from gitswarm.model.reducer import Change, apply, apply_all
from gitswarm.store import layout
from gitswarm.store.gitrepo import CommitInfo, GitRepo
from gitswarm.store.oplog import op_message, parse_op_lines

COMMITTER = "gitswarm"
T = TypeVar("T")


class Snapshot:
    """A job as of one commit. Task records are read (and cached) on demand."""

    def __init__(self, repo: GitRepo, job_id: str, tip: str, job: Job | None = None) -> None:
        self.repo = repo
        self.job_id = job_id
        self.tip = tip
        self.where = layout.job_ref(job_id)
        try:
            self.tree = repo.commit_info(tip).tree
        except CorruptRecord as exc:
            raise CorruptRecord(f"{self.where}: {exc}") from None
        self.job: Job = job if job is not None else self._read(layout.JOB_PATH, Job)
        self.state: JobState = self._read(layout.STATE_PATH, JobState)
        if self.job.id != job_id:
            raise CorruptRecord(f"{self.where}: job record names {self.job.id!r}")
        self._tasks: dict[str, Task] = {}

    def _blob(self, path: str) -> bytes | None:
        oid = self.repo.tree_entry(self.tree, path)
        if oid is None:
            return None
        try:
            return self.repo.read_blob(oid)
        except CorruptRecord as exc:
            raise CorruptRecord(f"{self.where}:{path}: {exc}") from None

    def _read(self, path: str, kind: type[T]) -> T:
        data = self._blob(path)
        if data is None:
            raise CorruptRecord(f"{self.where}:{path}: missing")
        return codec.decode(data, kind, f"{self.where}:{path}")

    def task(self, task_id: str) -> Task:
        found = self._tasks.get(task_id)
        if found is None:
            path = layout.task_path(task_id)
            data = self._blob(path)
            if data is None:
                raise NotFound(f"job {self.job_id} has no task {task_id!r}")
            found = codec.decode(data, Task, f"{self.where}:{path}")
            if found.id != task_id:
                raise CorruptRecord(f"{self.where}:{path}: record names task {found.id!r}")
            self._tasks[task_id] = found
        return found

    def _fanned(self, prefix: str) -> list[str]:
        """Every name in the fan-out subtrees `<prefix><fan>/` of the root."""
        names: list[str] = []
        for fan, fan_oid, is_tree in self.repo.tree_items(self.tree):
            if is_tree and fan.startswith(prefix):
                names.extend(name for name, _, _ in self.repo.tree_items(fan_oid))
        return names

    def task_ids(self) -> list[str]:
        return self._fanned(layout.TASKS_FANS)

    def tasks(self) -> list[Task]:
        """Every task of the job, in spec order."""
        return sorted((self.task(t) for t in self.task_ids()), key=lambda t: t.spec.seq)

    def artifact_ids(self) -> list[str]:
        return self._fanned(layout.ARTIFACTS_FANS)

    @overload
    def artifact(self, artifact_id_: str) -> Artifact: ...
    @overload
    def artifact(self, artifact_id_: str, kind: type[ArtifactT]) -> ArtifactT: ...

    def artifact(self, artifact_id_: str, kind: type[ArtifactT] | None = None) -> Artifact:
        """An artifact of the job; with `kind`, as that kind (CorruptRecord if it is another)."""
        path = layout.artifact_path(artifact_id_)
        data = self._blob(path)
        if data is None:
            raise NotFound(f"job {self.job_id} has no artifact {artifact_id_}")
        where = f"{self.where}:{path}"
        artifact: Artifact = codec.decode(data, Artifact, where)
        return artifact if kind is None else as_kind(artifact, kind, where)


def parse_ops(commit: CommitInfo, where: str) -> list[Op]:
    """The operations a commit records, in the order they were applied; none for a merge
    commit (it records the replayed result of its parents' operations)."""
    return [op for _, op in parse_op_lines(commit, where, Op)]


class JobRefs:
    """Every job of a repository, one ref each."""

    def __init__(self, repo: GitRepo, actor: str) -> None:
        self.repo = repo
        self.actor = actor
        self._jobs: dict[str, Job] = {}  # Job records never change once written
        self._written: dict[str, str] = {}  # artifact id -> its record's blob, written ahead

    def write_artifacts(self, artifacts: Iterable[Artifact]) -> None:
        """Write artifact records now, before the caller takes the write lock.

        They are content-addressed and do not depend on the job's state, so
        the commit that records them later only links them: fewer files are
        created while every other writer waits.
        """
        # Only the next commit uses them: a finish that was refused leaves nothing behind.
        self._written = {artifact_id(a): self.repo.write_blob(codec.encode(a)) for a in artifacts}

    def tips(self) -> dict[str, str]:
        prefix = layout.JOBS_PREFIX
        return {name[len(prefix):]: tip for name, tip in self.repo.list_refs(prefix).items()}

    def snapshot(self, job_id: str, tip: str | None = None) -> Snapshot:
        if tip is None:
            tip = self.repo.read_ref(layout.job_ref(job_id))
            if tip is None:
                raise NotFound(f"no job {job_id}")
        snapshot = Snapshot(self.repo, job_id, tip, self._jobs.get(job_id))
        self._jobs[job_id] = snapshot.job
        return snapshot

    def next_op(self, kind: type[OpT], snapshot: Snapshot | None, now: float, after: int = 0, **fields: Any) -> OpT:
        """A new operation stamped with the next Lamport clock of the job (`after` ops later)."""
        clock = (snapshot.state.clock if snapshot else 0) + 1 + after
        return kind(id=new_id(now), clock=clock, at=now, actor=self.actor, **fields)

    def create(self, op: JobCreated) -> tuple[str, Change]:
        """Write a new job's first commit and create its ref (CAS against absence)."""
        change = apply(op, JobState(), _no_tasks)
        paths: dict[str, str | None] = {layout.JOB_PATH: self.repo.write_blob(codec.encode(op.job))}
        tip = self._commit(None, None, (op,), change, paths, ())
        self.repo.cas_ref(layout.job_ref(op.job.id), tip, None, "gitswarm: create job")
        return tip, change

    def append(
        self, snapshot: Snapshot, ops: Op | Sequence[Op], artifacts: Iterable[Artifact] = ()
    ) -> tuple[str, Change]:
        """Apply `ops` in order on `snapshot`, commit them, and CAS the ref from snapshot.tip.

        Several operations share one commit only when one writer makes them
        together (a finish and the worker's next claim, and the finishes the
        other workers of its supervisor posted: store/group_commit.py): one tree
        and one ref write instead of several. Raises InvalidTransition/LeaseLost (nothing
        written) when an op does not apply, RefConflict when the ref moved
        since the snapshot.
        """
        tip, change = self.commit_ops(snapshot, ops, artifacts)
        self.repo.cas_ref(layout.job_ref(snapshot.job_id), tip, snapshot.tip, "gitswarm")
        return tip, change

    def commit_ops(
        self, snapshot: Snapshot, ops: Op | Sequence[Op], artifacts: Iterable[Artifact] = (),
        sign: Callable[[bytes], str] | None = None,
    ) -> tuple[str, Change]:
        """append() without moving the ref: the commit a remote must accept first (`work --remote`),
        signed by `sign` (a machine key, store/machine_key.py) when given."""
        ops = (ops,) if not isinstance(ops, Sequence) else tuple(ops)
        change = apply_all(ops, snapshot.state, snapshot.task, snapshot.task_ids)
        return self._commit(snapshot.tree, snapshot.tip, ops, change, {}, artifacts, sign), change

    def _commit(
        self,
        tree: str | None,
        parent: str | None,
        ops: Sequence[Op],
        change: Change,
        paths: dict[str, str | None],
        artifacts: Iterable[Artifact],
        sign: Callable[[bytes], str] | None = None,
    ) -> str:
        write = self.repo.write_blob
        paths[layout.STATE_PATH] = write(codec.encode(change.state))
        for task in change.tasks.values():
            paths[layout.task_path(task.id)] = write(codec.encode(task))
        for artifact in artifacts:
            key = artifact_id(artifact)
            oid = self._written.pop(key, None)
            paths[layout.artifact_path(key)] = oid if oid is not None else write(codec.encode(artifact))
            for ref in blob_refs(artifact):
                paths[layout.blob_path(ref.oid)] = ref.oid
        new_tree = self.repo.update_tree(tree, paths)
        last = ops[-1]
        who = (COMMITTER, f"{last.actor}@gitswarm")
        return self.repo.commit(new_tree, [parent] if parent else [], op_message(ops, title), who, last.at, sign)

    def history(self, job_id: str) -> Iterator[tuple[CommitInfo, Op]]:
        """Every (commit, operation) of a job, oldest first."""
        tip = self.repo.read_ref(layout.job_ref(job_id))
        if tip is None:
            raise NotFound(f"no job {job_id}")
        where = layout.job_ref(job_id)
        for commit in self.repo.walk(tip):
            for op in parse_ops(commit, where):
                yield commit, op


def _no_tasks(task_id: str) -> Task:
    raise NotFound(f"no task {task_id!r}")
