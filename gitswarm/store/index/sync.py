"""Keeping the index in step with the refs: re-index the jobs whose ref moved, mirror each
written operation, rebuild after a failure."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from gitswarm.model.artifacts import Artifact, Run, artifact_id
from gitswarm.model.errors import BadInput, CorruptRecord, NewerFormat
from gitswarm.model.ids import check_job_id
from gitswarm.model.records import Job, JobState, Task, TaskState
from gitswarm.store.index.connection import IndexConnection
from gitswarm.store.jobs import JobRefs, Snapshot

TASK_ROW = f"({','.join('?' * 17)})"


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
            (task, token): (expires, heartbeat)
            for task, token, expires, heartbeat in db.execute(
                "SELECT task, token, expires, heartbeat FROM leases WHERE job = ?", (snapshot.job_id,)
            )
        }
        self._forget(snapshot.job_id)
        self._put_job(snapshot.job, snapshot.state, snapshot.tip)
        tasks = snapshot.tasks()
        db.executemany(f"INSERT INTO tasks VALUES {TASK_ROW}", [_task_row(snapshot.job_id, t) for t in tasks])
        for task in tasks:
            if task.state is TaskState.RUNNING:
                kept = leases.get((task.id, task.claims))
                expires, heartbeat = kept if kept else (task.lease_expires or 0.0, task.updated)
                self._put_lease(snapshot.job_id, task, max(expires, task.lease_expires or 0.0), heartbeat)
        rows, runs = [], []
        for artifact_id_ in snapshot.artifact_ids():
            artifact = snapshot.artifact(artifact_id_)
            rows.append((artifact_id_, snapshot.job_id, artifact.task, artifact.__struct_config__.tag))
            if isinstance(artifact, Run):
                runs.append(_run_row(artifact_id_, snapshot.job_id, artifact))
        db.executemany("INSERT OR IGNORE INTO artifacts VALUES (?, ?, ?, ?)", rows)
        db.executemany(f"INSERT OR IGNORE INTO runs VALUES {RUN_ROW}", runs)

    def record(
        self, job: Job, state: JobState, tip: str, tasks: Iterable[Task], artifacts: Iterable[Artifact] = ()
    ) -> None:
        """Mirror one written operation: the job row, every changed task, its lease, new artifacts."""
        self._put_job(job, state, tip)
        db = self.db
        for task in tasks:
            db.execute(f"INSERT OR REPLACE INTO tasks VALUES {TASK_ROW}", _task_row(job.id, task))
            if task.state is TaskState.RUNNING:
                self._put_lease(job.id, task, task.lease_expires or 0.0, task.updated)
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

    def _put_lease(self, job_id: str, task: Task, expires: float, heartbeat: float) -> None:
        # A new claim replaces the row; the same claim only ever moves its deadline later: a `renewed` in the
        # record (work --remote), while a local renewal, which lives in this row alone, is never undone.
        self.db.execute(
            "INSERT INTO leases VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (job, task) DO UPDATE SET"
            " owner = excluded.owner, token = excluded.token, expires = excluded.expires, heartbeat = excluded.heartbeat"
            " WHERE leases.token != excluded.token OR leases.owner != excluded.owner OR excluded.expires > leases.expires",
            (job_id, task.id, task.owner or "", task.claims, expires, heartbeat),
        )


RUN_ROW = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"


def _run_row(found: str, job_id: str, run: Run) -> tuple:
    """What `gitswarm cost` reads of a run, so that it reads no artifact (store/index/queries.py runs)."""
    return (found, job_id, run.adapter, run.model, run.tier, run.created, run.cost_usd, int(run.cost_estimated),
            run.input_tokens, run.output_tokens)
