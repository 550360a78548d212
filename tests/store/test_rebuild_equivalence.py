"""The index is a cache: throwing it away must not change what any command prints.

Random jobs go through random events (claims, finishes ok and failed, lease
expiries, cancels, retries, renewals, artifacts); then the real CLI's output
is captured, the index is deleted (and, separately, rebuilt with `gitswarm
index rebuild`), and the output must be byte-identical. A corrupt index and
an old-format one must be rebuilt just as transparently.
"""

from __future__ import annotations

import gc
import os
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitswarm.engine.swarm import Swarm
from gitswarm.model.artifacts import Finding
from gitswarm.model.errors import InvalidTransition, LeaseLost
from gitswarm.store.index import index_path
from gitswarm.store.leases import Lease
from tests.conftest import cli
from tests.store.test_leases_stateful import dag_spec, dags

START = 1_700_000_000.0
WORKERS = ("w1", "w2")
TTLS = (10.0, 60.0)

# (kind, a, b, c): the small ints pick a job, task or lease by index, modulo how many there are.
events = st.tuples(
    st.sampled_from(
        ["work", "work", "work", "claim", "claim", "ok", "fail", "tick", "expire", "cancel", "cancel_job", "retry", "renew"]
    ),
    st.integers(0, 20),
    st.integers(0, 20),
    st.sampled_from([0, 1, 2]),
)


def new_repo() -> Path:
    path = Path(tempfile.mkdtemp(prefix="gitswarm-rebuild-"))
    subprocess.run(["git", "init", "-q", str(path)], check=True, capture_output=True)
    return path


def index_files(repo: Path) -> list[Path]:
    path = index_path(repo / ".git")
    return [Path(f"{path}{suffix}") for suffix in ("", "-wal", "-shm") if Path(f"{path}{suffix}").exists()]


def release_index() -> None:
    """Drop the connections that in-process CLI runs left for the garbage collector."""
    gc.collect()


def finding(lease: Lease, now: float, n: int) -> tuple[Finding]:
    return (Finding(job=lease.job, task=lease.task, attempt=lease.attempt, created=now, title=f"finding {n}"),)


def play(repo: Path, jobs: list[list[tuple[str, list[str], int, int]]], script: list[tuple[str, int, int, int]]) -> list[str]:
    """Submit `jobs` and run `script` against them through the Ledger; returns the job ids."""
    clock = [START]
    swarm = Swarm(repo, clock=lambda: clock[0])
    try:
        job_ids = []
        for n, dag in enumerate(jobs):
            job_ids.append(swarm.submit_text(dag_spec(dag, goal=f"job {n}")))
            clock[0] += 1
        leases: list[Lease] = []
        ledger = swarm.ledger
        for kind, a, b, c in script:
            now = clock[0]
            job = job_ids[a % len(job_ids)]
            task = f"t{b % len(jobs[a % len(job_ids)])}"
            try:
                if kind == "work":  # a worker claims a task and reports on it at once
                    lease = ledger.claim(WORKERS[b % 2], TTLS[0], now)
                    if lease is not None:
                        leases.append(lease)
                        ok = c != 0
                        ledger.finish(lease, ok, now, error=None if ok else f"error {b}",
                                      artifacts=finding(lease, now, b) if c == 2 else (), retryable=b % 3 != 0)
                elif kind == "claim":
                    lease = ledger.claim(WORKERS[b % 2], TTLS[c % 2], now, job_id=job if c else None)
                    if lease is not None:
                        leases.append(lease)
                elif kind in ("ok", "fail") and leases:
                    lease = leases[-1 - a % len(leases)]
                    ok = kind == "ok"
                    ledger.finish(lease, ok, now, error=None if ok else f"error {b}",
                                  artifacts=finding(lease, now, b) if ok and c else (), retryable=c != 2)
                elif kind == "renew" and leases:
                    ledger.renew(leases[-1 - a % len(leases)], TTLS[c % 2], now)
                elif kind == "tick":
                    clock[0] += (1, 15, 90)[c]
                elif kind == "expire":
                    ledger.expire(now)
                elif kind == "cancel":
                    ledger.cancel(job, task, now, reason="no" if c else None)
                elif kind == "cancel_job":
                    ledger.cancel(job, None, now, reason="stop" if c else None)
                elif kind == "retry":
                    ledger.retry(job, task, now)
            except (LeaseLost, InvalidTransition):
                pass
            clock[0] += 0.25
    finally:
        swarm.close()
    return job_ids


def outputs(repo: Path, job_ids: list[str]) -> dict[tuple[str, ...], str]:
    """What the read commands print, JSON and text, for the listing and each job."""
    commands: list[tuple[str, ...]] = [("--json", "status"), ("status",)]
    for job in job_ids:
        commands += [("--json", "status", job), ("status", job), ("--json", "show", job), ("--json", "artifacts", job)]
    seen = {}
    for args in commands:
        result = cli(repo, *args)
        assert result.code == 0, f"gitswarm {' '.join(args)}: {result.err}"
        assert result.err == "", f"gitswarm {' '.join(args)}: {result.err}"
        seen[args] = result.out
    release_index()
    return seen


def assert_same(before: dict[tuple[str, ...], str], after: dict[tuple[str, ...], str], how: str) -> None:
    for args, out in before.items():
        assert after[args] == out, f"after {how}, `gitswarm {' '.join(args)}` differs"


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=st.lists(dags(min_tasks=1, max_tasks=6), min_size=1, max_size=3), script=st.lists(events, min_size=5, max_size=40))
def test_status_survives_deleting_and_rebuilding_the_index(jobs, script) -> None:
    repo = new_repo()
    try:
        job_ids = play(repo, jobs, script)
        before = outputs(repo, job_ids)

        for path in index_files(repo):
            path.unlink()
        assert index_files(repo) == []
        assert_same(before, outputs(repo, job_ids), "deleting the index")

        rebuilt = cli(repo, "--json", "index", "rebuild")
        assert rebuilt.code == 0, rebuilt.err
        assert rebuilt.json()["jobs"] == len(job_ids)
        release_index()
        assert_same(before, outputs(repo, job_ids), "gitswarm index rebuild")
    finally:
        release_index()
        shutil.rmtree(repo, ignore_errors=True)


# -- a damaged or outdated index ------------------------------------------------------------


def settle(repo: Path) -> Path:
    """Fold the WAL into the main file so the index file alone holds the data."""
    release_index()
    path = index_path(repo / ".git")
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return path


def garbage(repo: Path) -> None:
    path = settle(repo)
    size = path.stat().st_size
    path.write_bytes(os.urandom(max(size, 4096)))


def garbage_after_header(repo: Path) -> None:
    """The first page (header and schema) intact, every table page after it garbage."""
    path = settle(repo)
    data = path.read_bytes()
    page = sqlite3.connect(path).execute("PRAGMA page_size").fetchone()[0]
    release_index()
    assert len(data) > page, "the index should span more than one page"
    path.write_bytes(data[:page] + os.urandom(len(data) - page))


def garbage_in_index_pages(repo: Path) -> None:
    """Every table page intact; the root page of every SQLite index b-tree garbage."""
    path = settle(repo)
    db = sqlite3.connect(path)
    page = db.execute("PRAGMA page_size").fetchone()[0]
    roots = [r for (r,) in db.execute("SELECT rootpage FROM sqlite_master WHERE type = 'index' AND rootpage > 0")]
    db.close()
    release_index()
    assert roots, "the index should have SQLite indexes"
    data = bytearray(path.read_bytes())
    for root in roots:
        data[(root - 1) * page : root * page] = os.urandom(page)
    path.write_bytes(bytes(data))


def old_format(repo: Path) -> None:
    path = settle(repo)
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 0")
    db.close()


# The index schema of the first gitswarm (commit 261cd75, "store format v1"), which
# marked it user_version 1. A later schema that adds columns is another schema version.
FIRST_SCHEMA = """
CREATE TABLE jobs (
    id TEXT PRIMARY KEY, goal TEXT NOT NULL, created REAL NOT NULL, tip TEXT NOT NULL, status TEXT NOT NULL,
    cancelled INTEGER NOT NULL, counts TEXT NOT NULL, clock INTEGER NOT NULL, updated REAL NOT NULL
);
CREATE TABLE tasks (
    job TEXT NOT NULL, id TEXT NOT NULL, seq INTEGER NOT NULL, state TEXT NOT NULL, priority INTEGER NOT NULL,
    attempts INTEGER NOT NULL, max_attempts INTEGER NOT NULL, claims INTEGER NOT NULL, owner TEXT,
    adapter TEXT NOT NULL, mode TEXT NOT NULL, depends_on TEXT NOT NULL, error TEXT, skipped_because TEXT,
    artifacts INTEGER NOT NULL, updated REAL NOT NULL,
    PRIMARY KEY (job, id)
) WITHOUT ROWID;
CREATE INDEX tasks_by_seq ON tasks (job, seq);
CREATE INDEX tasks_queued ON tasks (priority DESC, job, seq) WHERE state = 'queued';
CREATE TABLE leases (
    job TEXT NOT NULL, task TEXT NOT NULL, owner TEXT NOT NULL, token INTEGER NOT NULL,
    expires REAL NOT NULL, heartbeat REAL NOT NULL,
    PRIMARY KEY (job, task)
) WITHOUT ROWID;
CREATE INDEX leases_by_expiry ON leases (expires);
CREATE TABLE artifacts (
    id TEXT NOT NULL, job TEXT NOT NULL, task TEXT, kind TEXT NOT NULL,
    PRIMARY KEY (id, job)
) WITHOUT ROWID;
CREATE INDEX artifacts_by_job ON artifacts (job);
PRAGMA user_version = 1;
"""


def first_schema(repo: Path) -> None:
    """The index as the first gitswarm's `init` left it: its schema, no jobs indexed yet."""
    path = settle(repo)
    for old in index_files(repo):
        old.unlink()
    db = sqlite3.connect(path)
    db.executescript(FIRST_SCHEMA)
    db.close()


@pytest.mark.parametrize(
    "damage", [garbage, garbage_after_header, garbage_in_index_pages, old_format, first_schema], ids=lambda f: f.__name__
)
def test_damaged_index_is_rebuilt_transparently(damage, repo: Path) -> None:
    jobs = [
        [("t0", [], 2, 0), ("t1", ["t0"], 1, 1), ("t2", ["t0"], 3, 0), ("t3", ["t1", "t2"], 1, 0)],
        [("t0", [], 1, 0), ("t1", [], 1, 1)],
    ]
    script = [
        ("claim", 0, 0, 1), ("ok", 0, 0, 1), ("claim", 0, 0, 1), ("fail", 0, 1, 2),
        ("claim", 1, 1, 1), ("tick", 0, 0, 2), ("expire", 0, 0, 0), ("cancel", 0, 2, 1),
        ("retry", 0, 1, 0), ("claim", 1, 0, 0), ("claim", 1, 0, 1), ("renew", 0, 0, 1),
    ]
    job_ids = play(repo, jobs, script)
    before = outputs(repo, job_ids)
    assert '"running"' in before[("--json", "status", job_ids[1])], "the script should leave a task running"

    damage(repo)
    assert_same(before, outputs(repo, job_ids), damage.__name__)
    # The rebuilt index is a working one: its leases came back from the refs, so a late
    # recovery requeues exactly the tasks that were running.
    running = sorted(
        (job, t["id"]) for job in job_ids for t in cli(repo, "--json", "status", job).json()["tasks"] if t["state"] == "running"
    )
    swarm = Swarm(repo)
    try:
        assert sorted(swarm.ledger.expire(START + 100_000)) == running
    finally:
        swarm.close()
