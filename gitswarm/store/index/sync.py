"""Keeping the index in step with the refs: re-index the jobs whose ref moved, mirror each
written operation, rebuild after a failure."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from gitswarm.model import codec
from gitswarm.model.artifacts import Artifact, Run, artifact_id
from gitswarm.model.errors import BadInput, CorruptRecord, NewerFormat
from gitswarm.model.ids import check_job_id
from gitswarm.model.ops import Holder, TaskClaimed
from gitswarm.model.records import Job, JobState, Task, TaskState
from gitswarm.store.index.connection import IndexConnection
from gitswarm.store.jobs import JobRefs, Snapshot, parse_ops

TASK_ROW = f"({','.join('?' * 17)})"
HOLDER_LOOKBACK = 64  # commits read back from a tip for the claims of running tasks whose holder a rebuild lost
NO_HOLDERS: Mapping[str, Holder] = {}


def _task_row(job_id: str, task: Task) -> tuple:
    spec = task.spec
    return (
        job_id,
        task.id,
        spec.seq,
        task.state.value,
        spec.priority,
        task.attempts,
        spec.max_attempts,
        task.claims,
        task.owner,
        spec.adapter,
        spec.mode,
        json.dumps(list(spec.depends_on)),
        task.error,
        task.skipped_because,
        len(task.artifacts),
        task.not_before,
        task.updated,
    )


class IndexSync(IndexConnection):
    """The index as a cache of the refs: it records per job the ref tip it last indexed."""

    def __init__(self, common_dir: Path, create: bool = True) -> None:
        super().__init__(common_dir, create)
        self.invalid: dict[str, BadInput] = {}  # job id -> why its records cannot be read

    def tips(self) -> dict[str, str]:
        """The ref tip each job was last indexed at."""
        return dict(self.db.execute("SELECT id, tip FROM jobs").fetchall())

    def refresh(self, refs: JobRefs, only: Iterable[str] | None = None) -> list[str]:
        """Re-index every job whose ref tip differs from the one indexed; returns their ids.

        The tips are compared once without the lock (the common case: nothing
        moved) and again under it, because a writer may be between its ref CAS
        and its commit: re-indexing from a tip read before the lock would undo
        that writer's update (a claimed task back to queued, its lease gone).
        """
        moved, gone, _ = self._stale(refs, only)
        if not moved and not gone:
            return []
        with self.immediate():
            moved, gone, current = self._stale(refs, only)
            for job in gone:
                self._forget(job)
            for job in moved:
                try:
                    check_job_id(job)
                    self.reindex(refs.snapshot(job, current[job]))
                except (CorruptRecord, NewerFormat, BadInput) as exc:
                    # A bad job stays out of the index (and out of reach) but never blocks the others.
                    self._forget(job)
                    self.invalid[job] = exc
        return moved + gone

    def recover(self, refs: JobRefs) -> list[str]:
        """Rebuild the index from the refs after a query failed on it; the jobs re-indexed.

        For a process whose index was damaged, truncated, deleted or replaced
        under it. Leases come back from the claims in the refs; renewals since
        then are lost.
        """
        self.reopen_new_file()
        return self.refresh(refs)

    def _stale(self, refs: JobRefs, only: Iterable[str] | None) -> tuple[list[str], list[str], dict[str, str]]:
        """(jobs whose ref moved, jobs whose ref is gone, the current tips)."""
        current = refs.tips()
        indexed = self.tips()
        if only is not None:
            wanted = set(only)
            current = {job: tip for job, tip in current.items() if job in wanted}
            indexed = {job: tip for job, tip in indexed.items() if job in wanted}
        moved = [job for job, tip in current.items() if indexed.get(job) != tip]
        gone = [job for job in indexed if job not in current]
        return moved, gone, current

    def _forget(self, job_id: str) -> None:
        for table, column in (("jobs", "id"), ("tasks", "job"), ("leases", "job"), ("artifacts", "job"), ("runs", "job")):
            self.db.execute(f"DELETE FROM {table} WHERE {column} = ?", (job_id,))

    def reindex(self, snapshot: Snapshot) -> None:
        """Replace everything indexed about one job with what its snapshot holds (inside a transaction)."""
        db = self.db
        leases = {
            (task, token, owner): (expires, heartbeat, holder)
            for task, token, owner, expires, heartbeat, holder in db.execute(
                "SELECT task, token, owner, expires, heartbeat, holder FROM leases WHERE job = ?", (snapshot.job_id,)
            )
        }
        self._forget(snapshot.job_id)
        self._put_job(snapshot.job, snapshot.state, snapshot.tip)
        tasks = snapshot.tasks()
        db.executemany(f"INSERT INTO tasks VALUES {TASK_ROW}", [_task_row(snapshot.job_id, t) for t in tasks])
        running = [t for t in tasks if t.state is TaskState.RUNNING]
        kept = {t.id: leases.get((t.id, t.claims, t.owner or "")) for t in running}
        # A lease this index never held (rebuilt, or claimed in a write whose index update was lost): its claim
        # names its holder, looked for in the last commits.
        found = claim_holders(snapshot, {t.id: (t.claims, t.owner or "") for t in running if kept[t.id] is None})
        for task in running:
            row = kept[task.id]
            expires, heartbeat, holder = row if row else (task.lease_expires or 0.0, task.updated, None)
            self._put_lease(snapshot.job_id, task, max(expires, task.lease_expires or 0.0), heartbeat, holder or _holder_text(found.get(task.id)))
        rows, runs = [], []
        for artifact_id_ in snapshot.artifact_ids():
            artifact = snapshot.artifact(artifact_id_)
            rows.append((artifact_id_, snapshot.job_id, artifact.task, artifact.__struct_config__.tag))
            if isinstance(artifact, Run):
                runs.append(_run_row(artifact_id_, snapshot.job_id, artifact))
        db.executemany("INSERT OR IGNORE INTO artifacts VALUES (?, ?, ?, ?)", rows)
        db.executemany(f"INSERT OR IGNORE INTO runs VALUES {RUN_ROW}", runs)

    def record(
        self, job: Job, state: JobState, tip: str, tasks: Iterable[Task], artifacts: Iterable[Artifact] = (),
        holders: Mapping[str, Holder] = NO_HOLDERS,
    ) -> None:
        """Mirror one written operation: the job row, every changed task, its lease (held by `holders`' process
        when its claim named one), new artifacts."""
        self._put_job(job, state, tip)
        db = self.db
        for task in tasks:
            db.execute(f"INSERT OR REPLACE INTO tasks VALUES {TASK_ROW}", _task_row(job.id, task))
            if task.state is TaskState.RUNNING:
                self._put_lease(job.id, task, task.lease_expires or 0.0, task.updated, _holder_text(holders.get(task.id)))
            else:
                db.execute("DELETE FROM leases WHERE job = ? AND task = ?", (job.id, task.id))
        for artifact in artifacts:
            found = artifact_id(artifact)
            db.execute(
                "INSERT OR IGNORE INTO artifacts VALUES (?, ?, ?, ?)",
                (found, job.id, artifact.task, artifact.__struct_config__.tag),
            )
            if isinstance(artifact, Run):
                db.execute(f"INSERT OR IGNORE INTO runs VALUES {RUN_ROW}", _run_row(found, job.id, artifact))

    def _put_job(self, job: Job, state: JobState, tip: str) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO jobs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                job.id,
                job.goal,
                job.created,
                tip,
                state.status(),
                int(state.cancelled),
                json.dumps(state.counts, sort_keys=True),
                state.clock,
                state.updated,
                # Tasks a pilot asked to approve wait for a person: the approval that may free them (store/leases.py).
                int(bool(job.awaits_approval)),
                " ".join(a.op for a in state.approvals if a.op) or None,
            ),
        )

    def _put_lease(self, job_id: str, task: Task, expires: float, heartbeat: float, holder: str | None) -> None:
        # A new claim replaces the row, its holder with it; the same claim only ever moves its deadline later: a
        # `renewed` in the record (work --remote), while a local renewal, which lives in this row alone, is never
        # undone. Nor is its holder forgotten.
        new_claim = "(leases.token != excluded.token OR leases.owner != excluded.owner)"
        key = (job_id, task.id, task.owner or "", task.claims)
        self.db.execute(
            "INSERT INTO leases VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (job, task) DO UPDATE SET"
            " owner = excluded.owner, token = excluded.token, expires = excluded.expires, heartbeat = excluded.heartbeat,"
            f" holder = CASE WHEN {new_claim} THEN excluded.holder ELSE coalesce(excluded.holder, leases.holder) END"
            f" WHERE {new_claim} OR excluded.expires > leases.expires",
            (*key, expires, heartbeat, holder),
        )
        if holder is not None:
            self.db.execute(
                "UPDATE leases SET holder = ? WHERE job = ? AND task = ? AND owner = ? AND token = ? AND holder IS NULL", (holder, *key)
            )


RUN_ROW = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"


def _holder_text(holder: Holder | None) -> str | None:
    return None if holder is None else codec.encode(holder).decode()


def claim_holders(snapshot: Snapshot, wanted: Mapping[str, tuple[int, str]]) -> dict[str, Holder]:
    """The holders the claims of `wanted` ({task: (token, owner)}) name, read from the last HOLDER_LOOKBACK
    commits along the first parents of the tip. A claim further back, on a merged side, or that named no
    holder is simply not found: its lease then runs out by its deadline. Nor is the holder of a claim that
    names a machine key (`work --remote`'s name none): one there was copied, and a process of this machine
    it names, dead, must not end another machine's lease here."""
    found: dict[str, Holder] = {}
    commit: str | None = snapshot.tip
    for _ in range(HOLDER_LOOKBACK if wanted else 0):
        if commit is None or len(found) == len(wanted):
            break
        try:
            info = snapshot.repo.commit_info(commit)
            ops = parse_ops(info, snapshot.where)
        except CorruptRecord:  # the job's own checks say so elsewhere; a holder is not worth failing it for
            break
        for op in ops:
            if isinstance(op, TaskClaimed) and op.holder is not None and op.key is None and wanted.get(op.task) == (op.token, op.owner):
                found.setdefault(op.task, op.holder)
        commit = info.parents[0] if info.parents else None
    return found


def _run_row(found: str, job_id: str, run: Run) -> tuple:
    """What `gitswarm cost` reads of a run, so that it reads no artifact (store/index/queries.py runs)."""
    return (found, job_id, run.adapter, run.model, run.tier, run.created, run.cost_usd, int(run.cost_estimated),
            run.input_tokens, run.output_tokens)
