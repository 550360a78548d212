"""The index's tables, its format number, where its file lives, and how a connection is opened."""

from __future__ import annotations

import sqlite3
from pathlib import Path

INDEX_FORMAT = 6  # 2: tasks.not_before, leases without pgid; 3: tasks_queued_by_job; 4: runs; 5: jobs.needs_person;
# 6: leases.holder
BUSY_TIMEOUT_MS = 60_000
TABLES = ("jobs", "tasks", "leases", "artifacts", "runs")

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
    updated REAL NOT NULL,
    needs_person INTEGER NOT NULL,
    approval_ops TEXT
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
    holder TEXT,
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
CREATE TABLE runs (
    id TEXT NOT NULL,
    job TEXT NOT NULL,
    adapter TEXT NOT NULL,
    model TEXT,
    tier TEXT,
    created REAL NOT NULL,
    cost_usd REAL,
    cost_estimated INTEGER NOT NULL,
    input_tokens INTEGER,
    output_tokens INTEGER,
    PRIMARY KEY (id, job)
) WITHOUT ROWID;
CREATE INDEX runs_by_job ON runs (job);
"""


def index_path(common_dir: Path) -> Path:
    return common_dir / "gitswarm" / "index.sqlite"


def open_file(path: Path, fresh: bool = False) -> sqlite3.Connection:
    """A connection to the index file at `path` in WAL mode, waiting up to BUSY_TIMEOUT_MS for a lock.

    `fresh`: the file is new (or was just removed as damaged), and its tables are made next. The
    connection is then left with `synchronous = OFF`, for the caller to set NORMAL once they are made:
    the switch to WAL and the first write to the WAL go without their six fsyncs (of the journal, the
    file, the WAL and the directory). Should the machine go down before the OS writes them out, what is
    left is an empty or damaged index, made anew at the next open (connection.py), and no lease can have
    been lost with it, for none was taken yet.
    """
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
    db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    db.execute(f"PRAGMA synchronous = {'OFF' if fresh else 'NORMAL'}")
    db.execute("PRAGMA journal_mode = WAL")
    if not fresh:
        db.execute("PRAGMA synchronous = NORMAL")
    return db


def synced(db: sqlite3.Connection) -> sqlite3.Connection:
    """`db` with the index's durability: WAL, fsynced at each checkpoint (after open_file(fresh=True))."""
    db.execute("PRAGMA synchronous = NORMAL")
    return db


def open_memory() -> sqlite3.Connection:
    """An empty index in memory, for a read command in a clone that has none on disk."""
    db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    create_tables(db)
    return db


def create_tables(db: sqlite3.Connection) -> None:
    """The tables and indexes of INDEX_FORMAT, and the format number (inside the caller's transaction)."""
    for statement in SCHEMA.split(";"):
        if statement.strip():
            db.execute(statement)
    db.execute(f"PRAGMA user_version = {INDEX_FORMAT}")


def drop_tables(db: sqlite3.Connection) -> None:
    for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
        db.execute(f"DROP TABLE IF EXISTS {name}")


def is_current(db: sqlite3.Connection) -> bool:
    """The file holds the tables of INDEX_FORMAT (an empty or older one does not)."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    tables = db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'jobs'").fetchone()[0]
    return bool(version == INDEX_FORMAT and tables)


def scan_every_btree(db: sqlite3.Connection) -> None:
    """Walk each table and each index once (a few ms): damage shows here, not mid-command."""
    for table in TABLES:
        db.execute(f"SELECT count(*) FROM {table} NOT INDEXED").fetchone()
    indexes = db.execute("SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL").fetchall()
    for name, table, sql in indexes:
        where = sql.split(" WHERE ", 1)[1] if " WHERE " in sql else "1"
        db.execute(f"SELECT count(*) FROM {table} INDEXED BY {name} WHERE {where}").fetchone()
