"""The SQLite index: a rebuildable cache of the refs plus the leases.

It lives in the git common dir (shared by every worktree), in WAL mode. It
records per job the ref tip it last indexed; `refresh` re-indexes whatever
moved. A missing, corrupt or old-format index is rebuilt from the refs, and
so is one that fails or is deleted under a running process (`recover`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path

import msgspec

from gitswarm.model.artifacts import Artifact, artifact_id
from gitswarm.model.errors import BadInput, CorruptRecord, InternalError, NewerFormat
from gitswarm.model.ids import check_job_id
from gitswarm.model.records import Job, JobState, Task, TaskState
from gitswarm.store.jobs import JobRefs, Snapshot

INDEX_FORMAT = 3  # 2: tasks.not_before, leases without pgid; 3: tasks_queued_by_job
BUSY_TIMEOUT_MS = 60_000

SCHEMA = """
CREATE TABLE jobs (
    id TEXT PRIMARY KEY,
    goal TEXT NOT NULL,
    created REAL NOT NULL,
    tip TEXT NOT NULL,
    status TEXT NOT NULL,
    cancelled INTEGER NOT NULL,
    counts TEXT NOT NULL,
    clock INTEGER NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE tasks (
    job TEXT NOT NULL,
    id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    state TEXT NOT NULL,
    priority INTEGER NOT NULL,
    attempts INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    claims INTEGER NOT NULL,
    owner TEXT,
    adapter TEXT NOT NULL,
    mode TEXT NOT NULL,
    depends_on TEXT NOT NULL,
    error TEXT,
    skipped_because TEXT,
    artifacts INTEGER NOT NULL,
    not_before REAL NOT NULL,
    updated REAL NOT NULL,
    PRIMARY KEY (job, id)
) WITHOUT ROWID;
CREATE INDEX tasks_by_seq ON tasks (job, seq);
CREATE INDEX tasks_by_updated ON tasks (updated);
CREATE INDEX tasks_queued ON tasks (priority DESC, job, seq) WHERE state = 'queued';
CREATE INDEX tasks_queued_by_job ON tasks (job, priority DESC, seq) WHERE state = 'queued';
CREATE TABLE leases (
    job TEXT NOT NULL,
    task TEXT NOT NULL,
    owner TEXT NOT NULL,
    token INTEGER NOT NULL,
    expires REAL NOT NULL,
    heartbeat REAL NOT NULL,
    PRIMARY KEY (job, task)
) WITHOUT ROWID;
CREATE INDEX leases_by_expiry ON leases (expires);
CREATE TABLE artifacts (
    id TEXT NOT NULL,
    job TEXT NOT NULL,
    task TEXT,
    kind TEXT NOT NULL,
    PRIMARY KEY (id, job)
) WITHOUT ROWID;
CREATE INDEX artifacts_by_job ON artifacts (job);
"""

TASK_COLUMNS = (
    "id, seq, state, priority, attempts, max_attempts, claims, owner, adapter, mode,"
    " depends_on, error, skipped_because, artifacts, updated"
)


def _scan_every_btree(db: sqlite3.Connection) -> None:
    """Walk each table and each index once (a few ms): damage shows here, not mid-command."""
    for table in ("jobs", "tasks", "leases", "artifacts"):
        db.execute(f"SELECT count(*) FROM {table} NOT INDEXED").fetchone()
    indexes = db.execute("SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL").fetchall()
    for name, table, sql in indexes:
        where = sql.split(" WHERE ", 1)[1] if " WHERE " in sql else "1"
        db.execute(f"SELECT count(*) FROM {table} INDEXED BY {name} WHERE {where}").fetchone()


def index_path(common_dir: Path) -> Path:
    return common_dir / "gitswarm" / "index.sqlite"


class IndexReplaced(sqlite3.DatabaseError):
    """The index file was deleted or replaced under an open connection (which would
    otherwise go on reading the orphaned file without an error)."""


class IndexBroken(InternalError):
    """The index failed and could not be rebuilt from the refs."""


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file at `path`, or None when there is none."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino


JOB_COLUMNS = "id, goal, created, status, counts, updated"


def _job_view(row: tuple) -> dict:
    job_id, goal, created, status, counts, updated = row
    return {"id": job_id, "goal": goal, "status": status, "created": created, "updated": updated, "counts": json.loads(counts)}


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


class Index:
    """One connection to the index. Writers use `immediate()` for a short BEGIN IMMEDIATE transaction.

    With `create=False` and no index on disk yet, it is built in memory from
    the refs instead and nothing is written: read commands in a fresh clone
    leave `.git` as it was. Leases live only in the index, so whatever takes
    them opens it with `create=True`.
    """

    def __init__(self, common_dir: Path, create: bool = True) -> None:
        self.path = index_path(common_dir)
        self.rebuilt = False
        self.invalid: dict[str, BadInput] = {}  # job id -> why its records cannot be read
        self.in_memory = not create and not self.path.exists()
        self._lock: int | None = None  # nobody else can reach an index in memory: no lock to queue on
        if self.in_memory:
            self.db = self._connect_memory()
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = os.open(self.path.with_name("index.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self.db = self._connect()

    def _connect_memory(self) -> sqlite3.Connection:
        db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        for statement in SCHEMA.split(";"):
            if statement.strip():
                db.execute(statement)
        db.execute(f"PRAGMA user_version = {INDEX_FORMAT}")
        return db

    def _connect(self) -> sqlite3.Connection:
        try:
            db = self._open()
            version = db.execute("PRAGMA user_version").fetchone()[0]
            tables = db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'jobs'").fetchone()[0]
            if version == INDEX_FORMAT and tables:
                _scan_every_btree(db)
        except sqlite3.DatabaseError:
            self._remove_files()
            db, version, tables = self._open(), 0, 0
        if version != INDEX_FORMAT or not tables:
            db.close()
            self._create()
            db = self._open()
        self._file = _identity(self.path)
        return db

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        return db

    def _remove_files(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    def _create(self) -> None:
        """(Re)create the schema under an exclusive lock; another process may be racing us."""
        db = self._open()
        try:
            db.execute("BEGIN EXCLUSIVE")
            if db.execute("PRAGMA user_version").fetchone()[0] != INDEX_FORMAT:
                for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
                    db.execute(f"DROP TABLE IF EXISTS {name}")
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute(f"PRAGMA user_version = {INDEX_FORMAT}")
                self.rebuilt = True
            db.execute("COMMIT")
        finally:
            db.close()

    def close(self) -> None:
        self.db.close()
        if self._lock is not None:
            os.close(self._lock)

    def destroy(self) -> None:
        """Close and delete the index files; the next Index() rebuilds from the refs."""
        self.close()
        if not self.in_memory:
            self._remove_files()

    _file: tuple[int, int] | None = None  # (device, inode) of the file this connection opened

    def check_file(self) -> None:
        """Raise IndexReplaced if the index file was deleted or replaced since this connection opened it."""
        if self._file is not None and _identity(self.path) != self._file:
            raise IndexReplaced(f"{self.path} was deleted or replaced")

    def recover(self, refs: JobRefs) -> list[str]:
        """Rebuild the index from the refs after a query failed on it; the jobs re-indexed.

        For a process whose index was damaged, truncated, deleted or replaced
        under it. The file is replaced under the writers' flock, so that one
        process rebuilds it and the others, finding a new file, reopen that
        one instead of deleting it again. Leases come back from the claims in
        the refs; renewals since then are lost.
        """
        if self._file is None:
            raise IndexBroken("the index in memory failed")
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        try:
            with contextlib.suppress(sqlite3.Error):  # a connection to a damaged file is dropped either way
                self.db.close()
            if _identity(self.path) in (self._file, None):
                self._remove_files()  # still the file that failed, or the -wal and -shm of a deleted one
            self.db = self._connect()
        except (sqlite3.Error, OSError) as exc:
            raise IndexBroken(f"the index {self.path} failed and could not be rebuilt: {exc}") from exc
        finally:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
        return self.refresh(refs)

    @contextlib.contextmanager
    def immediate(self) -> Iterator[sqlite3.Connection]:
        """One short write transaction; every lease operation runs inside one.

        Writers queue on an flock first: the kernel wakes the next one the
        moment the lock is free, where SQLite's busy handler would sleep in
        steps of up to 100 ms. The lock dies with its process.
        """
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_EX)
        try:
            self.check_file()
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")
        finally:
            if self._lock is not None:
                fcntl.flock(self._lock, fcntl.LOCK_UN)

    # -- keeping in step with the refs ------------------------------------------------

    def tips(self) -> dict[str, str]:
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
        for table, column in (("jobs", "id"), ("tasks", "job"), ("leases", "job"), ("artifacts", "job")):
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
        db.executemany(f"INSERT INTO tasks VALUES ({','.join('?' * 17)})", [_task_row(snapshot.job_id, t) for t in tasks])
        for task in tasks:
            if task.state is TaskState.RUNNING:
                kept = leases.get((task.id, task.claims))
                expires, heartbeat = kept if kept else (task.lease_expires or 0.0, task.updated)
                self._put_lease(snapshot.job_id, task, max(expires, task.lease_expires or 0.0), heartbeat)
        rows = []
        for artifact_id_ in snapshot.artifact_ids():
            artifact = snapshot.artifact(artifact_id_)
            rows.append((artifact_id_, snapshot.job_id, artifact.task, artifact.__struct_config__.tag))
        db.executemany("INSERT OR IGNORE INTO artifacts VALUES (?, ?, ?, ?)", rows)

    def _put_job(self, job: Job, state: JobState, tip: str) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO jobs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
            ),
        )

    def _put_lease(self, job_id: str, task: Task, expires: float, heartbeat: float) -> None:
        self.db.execute(
            "INSERT INTO leases VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (job, task) DO UPDATE SET"
            " owner = excluded.owner, token = excluded.token, expires = excluded.expires,"
            " heartbeat = excluded.heartbeat WHERE leases.token != excluded.token OR leases.owner != excluded.owner",
            (job_id, task.id, task.owner or "", task.claims, expires, heartbeat),
        )

    def record(
        self, job: Job, state: JobState, tip: str, tasks: Iterable[Task], artifacts: Iterable[Artifact] = ()
    ) -> None:
        """Mirror one written operation: the job row, every changed task, its lease, new artifacts."""
        self._put_job(job, state, tip)
        db = self.db
        for task in tasks:
            db.execute(f"INSERT OR REPLACE INTO tasks VALUES ({','.join('?' * 17)})", _task_row(job.id, task))
            if task.state is TaskState.RUNNING:
                self._put_lease(job.id, task, task.lease_expires or 0.0, task.updated)
            else:
                db.execute("DELETE FROM leases WHERE job = ? AND task = ?", (job.id, task.id))
        for artifact in artifacts:
            db.execute(
                "INSERT OR IGNORE INTO artifacts VALUES (?, ?, ?, ?)",
                (artifact_id(artifact), job.id, artifact.task, artifact.__struct_config__.tag),
            )

    # -- queries ------------------------------------------------------------------------

    def job_ids(self) -> list[str]:
        return [row[0] for row in self.db.execute("SELECT id FROM jobs ORDER BY id")]

    def job_tip(self, job_id: str) -> str | None:
        row = self.db.execute("SELECT tip FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return row[0] if row else None

    def jobs(self) -> list[dict]:
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
        return self.db.execute("SELECT count(*) FROM tasks").fetchone()[0]

    def tasks(self, job_id: str) -> list[dict]:
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

    def artifact_ids(self, prefix: str) -> list[tuple[str, str]]:
        """(artifact id, job id) for artifacts whose id starts with prefix."""
        return self.db.execute(
            "SELECT id, job FROM artifacts WHERE id >= ? AND id < ? ORDER BY id", (prefix, prefix + "\uffff")
        ).fetchall()

    def artifacts(self, job_id: str) -> list[tuple[str, str | None, str]]:
        return self.db.execute(
            "SELECT id, task, kind FROM artifacts WHERE job = ? ORDER BY id", (job_id,)
        ).fetchall()

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

    def idle(self) -> bool:
        """Nothing queued or running in any job that is not cancelled."""
        row = self.db.execute(
            "SELECT 1 FROM tasks t JOIN jobs j ON j.id = t.job"
            " WHERE t.state IN ('queued', 'running') AND j.cancelled = 0 LIMIT 1"
        ).fetchone()
        return row is None

    def changed_tasks(self, since: float, job_id: str | None = None) -> list[tuple[str, str, str, int, str | None, float]]:
        """(job, task, state, attempts, error, updated) of tasks updated at or after `since`."""
        query = "SELECT job, id, state, attempts, error, updated FROM tasks WHERE updated >= ?"
        params: list[object] = [since]
        if job_id is not None:
            query += " AND job = ?"
            params.append(job_id)
        return self.db.execute(query + " ORDER BY updated", params).fetchall()

    def lease(self, job_id: str, task_id: str) -> tuple[str, int, float, float] | None:
        return self.db.execute(
            "SELECT owner, token, expires, heartbeat FROM leases WHERE job = ? AND task = ?", (job_id, task_id)
        ).fetchone()

    def leases(self) -> list[tuple[str, str, str, int, float]]:
        return self.db.execute("SELECT job, task, owner, token, expires FROM leases ORDER BY job, task").fetchall()
