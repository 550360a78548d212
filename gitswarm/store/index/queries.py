"""What the index answers: jobs, tasks, artifacts and leases, as named rows or views."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection
from typing import NamedTuple

import msgspec

from gitswarm.model import codec
from gitswarm.model.errors import CorruptRecord
from gitswarm.model.ops import Holder

JOB_COLUMNS = "id, goal, created, status, counts, updated"
TASK_COLUMNS = (
    "id, seq, state, priority, attempts, max_attempts, claims, owner, adapter, mode,"
    " depends_on, error, skipped_because, artifacts, updated"
)


class ChangedTask(NamedTuple):
    """A task as `changed_tasks` lists it: what a progress line needs."""

    job: str
    task: str
    state: str
    attempts: int
    error: str | None
    updated: float
    owner: str | None  # the worker whose lease it runs under, while running


class HeldLease(NamedTuple):
    """The lease on one task: who holds it, with which fencing token, until when."""

    owner: str
    token: int
    expires: float
    heartbeat: float


class LeaseRow(NamedTuple):
    """A lease as `leases` lists it."""

    job: str
    task: str
    owner: str
    token: int
    expires: float


class HolderRow(NamedTuple):
    """A lease whose claim named the process that holds it (store/holders.py judges it)."""

    job: str
    task: str
    owner: str
    token: int
    expires: float
    holder: Holder


class ArtifactRow(NamedTuple):
    """An artifact of a job: its id, the task that made it (None: the job's own), its kind."""

    id: str
    task: str | None
    kind: str


class RunRow(NamedTuple):
    """What a `run` artifact says of its cost (the runs table)."""

    id: str
    job: str
    adapter: str
    model: str | None
    tier: str | None
    created: float
    cost_usd: float | None
    cost_estimated: int
    input_tokens: int | None
    output_tokens: int | None


class ArtifactMatch(NamedTuple):
    """An artifact found by id prefix, and the job it belongs to."""

    id: str
    job: str


def _job_view(row: tuple) -> dict:
    job_id, goal, created, status, counts, updated = row
    return {"id": job_id, "goal": goal, "status": status, "created": created, "updated": updated, "counts": json.loads(counts)}


class IndexQueries:
    """The read queries; each is one SELECT on the connection `db`."""

    db: sqlite3.Connection

    def awaiting_person(self) -> dict[str, tuple[str, ...]]:
        """Jobs with tasks a pilot asked to approve: the `approved` ops each has (not yet judged)."""
        rows = self.db.execute("SELECT id, approval_ops FROM jobs WHERE needs_person = 1").fetchall()
        return {job: tuple((ops or "").split()) for job, ops in rows}

    def job_ids(self) -> list[str]:
        return [row[0] for row in self.db.execute("SELECT id FROM jobs ORDER BY id")]

    def job_tip(self, job_id: str) -> str | None:
        row = self.db.execute("SELECT tip FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return row[0] if row else None

    def jobs(self) -> list[dict]:
        """Every job as `status` shows it: id, goal, status, created, updated, counts by task state."""
        rows = self.db.execute(f"SELECT {JOB_COLUMNS} FROM jobs ORDER BY id").fetchall()
        return [_job_view(row) for row in rows]

    def job(self, job_id: str) -> dict | None:
        row = self.db.execute(f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return None if row is None else _job_view(row)

    def task_state(self, job_id: str, task_id: str) -> str | None:
        """One task's state, or None when the job has no such task."""
        row = self.db.execute("SELECT state FROM tasks WHERE job = ? AND id = ?", (job_id, task_id)).fetchone()
        return None if row is None else row[0]

    def task_count(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM tasks").fetchone()[0])

    def tasks(self, job_id: str) -> list[dict]:
        """A job's tasks in spec order, as `status JOB` shows them (the columns of TASK_COLUMNS)."""
        # In primary-key order, sorted here: ordering by seq in SQL costs a b-tree lookup per row.
        cursor = self.db.execute(f"SELECT {TASK_COLUMNS} FROM tasks WHERE job = ?", (job_id,))
        names = [d[0] for d in cursor.description]
        deps, seq = names.index("depends_on"), names.index("seq")
        decode = msgspec.json.decode
        out = []
        for row in sorted(cursor.fetchall(), key=lambda r: r[seq]):
            task = dict(zip(names, row))
            task["depends_on"] = decode(row[deps]) if row[deps] != "[]" else []
            out.append(task)
        return out

    def jobs_with_task(self, task_id: str, unfinished: bool) -> list[str]:
        query = "SELECT t.job FROM tasks t JOIN jobs j ON j.id = t.job WHERE t.id = ?"
        if unfinished:
            query += " AND j.status IN ('queued', 'running')"
        return [row[0] for row in self.db.execute(query, (task_id,))]

    def artifact_ids(self, prefix: str) -> list[ArtifactMatch]:
        """The artifacts whose id starts with prefix."""
        rows = self.db.execute(
            "SELECT id, job FROM artifacts WHERE id >= ? AND id < ? ORDER BY id", (prefix, prefix + "\uffff")
        )
        return list(map(ArtifactMatch._make, rows))

    def runs(self, since: float | None = None) -> list[RunRow]:
        """Every run artifact's cost row, oldest first; those made before `since` left out."""
        rows = self.db.execute(
            "SELECT * FROM runs WHERE created >= ? ORDER BY created, id", (since if since is not None else float("-inf"),)
        )
        return list(map(RunRow._make, rows))

    def patches(self) -> dict[str, list[str]]:
        """Every patch artifact's id, by job."""
        found: dict[str, list[str]] = {}
        for artifact, job in self.db.execute("SELECT id, job FROM artifacts WHERE kind = 'patch' ORDER BY job, id"):
            found.setdefault(job, []).append(artifact)
        return found

    def artifacts(self, job_id: str) -> list[ArtifactRow]:
        rows = self.db.execute("SELECT id, task, kind FROM artifacts WHERE job = ? ORDER BY id", (job_id,))
        return list(map(ArtifactRow._make, rows))

    def pending_adapters(self, job_id: str | None = None) -> list[str]:
        """The adapters of tasks still to run (queued or blocked), in jobs that are not cancelled."""
        query = (
            "SELECT DISTINCT t.adapter FROM tasks t JOIN jobs j ON j.id = t.job"
            " WHERE t.state IN ('queued', 'blocked') AND j.cancelled = 0"
        )
        params: list[object] = []
        if job_id is not None:
            query += " AND t.job = ?"
            params.append(job_id)
        return sorted(row[0] for row in self.db.execute(query, params))

    def stalled(self, job_id: str | None, exclude: frozenset[str], skip_jobs: frozenset[str] = frozenset()) -> bool:
        """Nothing runs, and everything queued waits for an excluded adapter (or is in a job
        that may not run here): no worker here can go on."""
        query = (
            "SELECT 1 FROM tasks t JOIN jobs j ON j.id = t.job WHERE j.cancelled = 0 AND (t.state = 'running'"
            f" OR (t.state = 'queued' AND t.adapter NOT IN ({','.join('?' * len(exclude))})"
            f" AND t.job NOT IN ({','.join('?' * len(skip_jobs))})))"
        )
        params: list[object] = [*sorted(exclude), *sorted(skip_jobs)]
        if job_id is not None:
            query += " AND t.job = ?"
            params.append(job_id)
        return self.db.execute(query + " LIMIT 1", params).fetchone() is None

    def busy(self, job_id: str | None = None) -> bool:
        """Something is queued or running (in `job_id`, or in any job that is not cancelled)."""
        query = "SELECT 1 FROM tasks t JOIN jobs j ON j.id = t.job WHERE t.state IN ('queued', 'running') AND j.cancelled = 0"
        params = [] if job_id is None else [job_id]
        return self.db.execute(query + (" AND t.job = ?" if job_id else "") + " LIMIT 1", params).fetchone() is not None

    def idle(self) -> bool:
        """Nothing queued or running in any job that is not cancelled."""
        row = self.db.execute(
            "SELECT 1 FROM tasks t JOIN jobs j ON j.id = t.job"
            " WHERE t.state IN ('queued', 'running') AND j.cancelled = 0 LIMIT 1"
        ).fetchone()
        return row is None

    def changed_tasks(self, since: float, job_id: str | None = None) -> list[ChangedTask]:
        """The tasks updated at or after `since`, oldest change first."""
        query = "SELECT job, id, state, attempts, error, updated, owner FROM tasks WHERE updated >= ?"
        params: list[object] = [since]
        if job_id is not None:
            query += " AND job = ?"
            params.append(job_id)
        return list(map(ChangedTask._make, self.db.execute(query + " ORDER BY updated", params)))

    def lease(self, job_id: str, task_id: str) -> HeldLease | None:
        row = self.db.execute(
            "SELECT owner, token, expires, heartbeat FROM leases WHERE job = ? AND task = ?", (job_id, task_id)
        ).fetchone()
        return None if row is None else HeldLease._make(row)

    def leases(self) -> list[LeaseRow]:
        rows = self.db.execute("SELECT job, task, owner, token, expires FROM leases ORDER BY job, task")
        return list(map(LeaseRow._make, rows))

    def owners_holding(self, owners: Collection[str]) -> set[str]:
        """Which of `owners` hold a lease now."""
        names = list(owners)
        query = f"SELECT DISTINCT owner FROM leases WHERE owner IN ({','.join('?' * len(names))})"
        return {row[0] for row in self.db.execute(query, names)} if names else set()

    def held_by_processes(self) -> list[HolderRow]:
        """Every lease whose holder process is known (a holder that does not decode is as good as unknown)."""
        found = []
        rows = self.db.execute("SELECT job, task, owner, token, expires, holder FROM leases WHERE holder IS NOT NULL ORDER BY job, task")
        for job, task, owner, token, expires, holder in rows:
            try:
                found.append(HolderRow(job, task, owner, token, expires, codec.decode(holder.encode(), Holder, "the index's lease holder")))
            except CorruptRecord:
                continue
        return found
