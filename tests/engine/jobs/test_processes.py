"""`gitswarm work` and `run` as real processes meeting hard ends: the supervisor killed
with -9, SIGTERM, and the index file damaged, truncated or deleted while they run."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gitswarm.engine.jobs.supervisor import EXIT_TERMINATED, WorkOptions, worker_main
from gitswarm.engine.jobs.worker import Worker, WorkerOptions
from gitswarm.engine.swarm import Swarm
from gitswarm.store.index import INDEX_FORMAT, index_path
from tests.conftest import cli, spec_text
from tests.proctools import children, finish, kill_quietly, read_pids, wait_for, wait_gone

# A shell task whose `sleep` is a grandchild of the worker, its pid appended to a file.
SLEEPER = "sleep 30 & echo $! >> {pids}; wait"


def start(repo: Path, tmp_path: Path, *args: str) -> tuple[subprocess.Popen, Path, Path]:
    """`python -m gitswarm ARGS` in its own session, stdout and stderr to files."""
    out, err = tmp_path / "gs.out", tmp_path / "gs.err"
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen([sys.executable, "-m", "gitswarm", *args], cwd=repo, stdout=o, stderr=e, start_new_session=True)
    return proc, out, err


def submit(repo: Path, *tasks: str) -> str:
    (repo / "spec.toml").write_text(spec_text(*tasks))
    result = cli(repo, "--json", "submit", "spec.toml")
    assert result.code == 0, result.err
    return result.json()["id"]


def ops(repo: Path, job: str) -> list[str]:
    return [e["op"] for e in cli(repo, "--json", "log", job).json()["events"]]


def tasks(repo: Path, job: str) -> dict[str, dict]:
    return {t["id"]: t for t in cli(repo, "--json", "status", job).json()["tasks"]}


def sleepers(tmp_path: Path, n: int) -> tuple[Path, list[str]]:
    pids = tmp_path / "pids"
    return pids, [f"id = \"s{i}\"\ncommand = '{SLEEPER.format(pids=pids)}'" for i in range(n)]


@pytest.mark.slow
def test_kill_9_of_the_supervisor_takes_its_workers_and_their_adapters_along(repo: Path, tmp_path: Path) -> None:
    pids, specs = sleepers(tmp_path, 2)
    job = submit(repo, *specs)
    proc, _out, _err = start(repo, tmp_path, "--json", "work", "--job", job, "-j", "2", "--lease", "2")
    try:
        spawned = wait_for(lambda: len(read_pids(pids)) == 2 and read_pids(pids), 10, "both sleeps")
        workers = children(proc.pid)
        adapters = [pid for worker in workers for pid in children(worker)]
        assert len(workers) == 2 and len(adapters) == 2
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(5)
        left = wait_gone([*workers, *adapters, *spawned], 5.0)
    finally:
        kill_quietly(read_pids(pids))
        kill_quietly(children(proc.pid))
    assert left == [], "workers or their adapters outlived the supervisor"
    # They wrote nothing: both tasks are held by their dead workers, and `recover` sees so at once,
    # without waiting for the leases to run out.
    assert ops(repo, job) == ["job_created", "claimed", "claimed"]
    recovered = cli(repo, "--json", "recover")
    assert recovered.code == 0, recovered.err
    assert sorted(recovered.json()["expired"]) == [f"{job}/s0", f"{job}/s1"]
    workers_pids = {f"pid {pid} on this host" for pid in workers}
    for task in recovered.json()["tasks"]:
        assert (task["state"], task["attempt_used"]) == ("queued", False)
        assert task["why"].endswith(" died") and any(p in task["why"] for p in workers_pids), task
    assert {(t["state"], t["attempts"]) for t in tasks(repo, job).values()} == {("queued", 0)}


@pytest.mark.slow
@pytest.mark.parametrize(("command", "to"), [("work", "supervisor"), ("run", "supervisor"), ("work", "group")])
def test_sigterm_stops_the_run_kills_the_adapters_and_requeues(repo: Path, tmp_path: Path, command: str, to: str) -> None:
    """SIGTERM to the supervisor alone, or to its whole process group (as a service manager may send it)."""
    pids, specs = sleepers(tmp_path, 2)
    if command == "work":
        job = submit(repo, *specs)
        args = ["work", "--job", job]
    else:
        (repo / "spec.toml").write_text(spec_text(*specs))
        args = ["run", "spec.toml"]
    proc, out, err = start(repo, tmp_path, "--json", *args, "-j", "2", "--lease", "5")
    try:
        spawned = wait_for(lambda: len(read_pids(pids)) == 2 and read_pids(pids), 10, "both sleeps")
        workers = children(proc.pid)
        started = time.monotonic()
        if to == "group":
            os.killpg(proc.pid, signal.SIGTERM)
        else:
            os.kill(proc.pid, signal.SIGTERM)
        code = finish(proc, 10)
        took = time.monotonic() - started
        left = wait_gone([*workers, *spawned], 2.0)
    finally:
        kill_quietly(read_pids(pids))
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    stderr = err.read_text()
    assert code == EXIT_TERMINATED == 143, stderr
    assert stderr.splitlines()[-1] == "gitswarm: terminated by SIGTERM: workers stopped, their tasks requeued"
    assert "Traceback" not in stderr
    assert took < 5 and left == []
    assert out.read_text() == ""
    if command == "run":
        (listed,) = cli(repo, "--json", "status").json()["jobs"]
        job = listed["id"]
    states = {name: (t["state"], t["owner"], t["attempts"]) for name, t in tasks(repo, job).items()}
    assert states == {"s0": ("queued", None, 0), "s1": ("queued", None, 0)}  # stopped: no attempt used
    assert ops(repo, job) == ["job_created", "claimed", "claimed", "expired", "expired"]
    events = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert {(e["task"], e["state"]) for e in events if e["event"] == "task" and e["state"] == "queued"} >= {("s0", "queued"), ("s1", "queued")}


def damage(path: Path, how: str) -> None:
    if how == "garbage":
        path.write_bytes(b"this is not an index " * 4096)
    elif how == "truncated":
        os.truncate(path, 0)
    else:
        path.unlink()


@pytest.mark.slow
@pytest.mark.parametrize("how", ["garbage", "truncated", "deleted"])
def test_a_damaged_index_mid_run_is_rebuilt_and_the_job_finishes(repo: Path, tmp_path: Path, how: str) -> None:
    started = tmp_path / "started"
    specs = [f"id = \"t{i}\"\ncommand = 'echo {i} >> {started}; sleep 0.3'" for i in range(8)]
    (repo / "spec.toml").write_text(spec_text(*specs))
    proc, out, err = start(repo, tmp_path, "--json", "run", "spec.toml", "-j", "2", "--lease", "3")
    path = index_path(repo / ".git")
    try:
        wait_for(lambda: len(read_pids(started)) >= 3, 10, "three tasks to start")
        damage(path, how)
        code = finish(proc, 30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    stderr = err.read_text()
    assert code == 0, stderr[-3000:]
    assert "Traceback" not in stderr and "internal error" not in stderr
    # The run itself rebuilt the file (nothing here has opened the index since it was damaged).
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == INDEX_FORMAT
    result = json.loads(out.read_text())
    assert result["status"] == "succeeded"
    assert {t["id"]: t["state"] for t in result["tasks"]} == {f"t{i}": "succeeded" for i in range(8)}


def test_a_worker_whose_supervisor_is_gone_kills_its_adapter_and_writes_nothing(swarm: Swarm, repo: Path, tmp_path: Path) -> None:
    """The check behind PR_SET_PDEATHSIG, and all there is where prctl is not: the heartbeat asks."""
    pids, specs = sleepers(tmp_path, 1)
    job = swarm.submit_text(spec_text(*specs))
    supervisor = threading.Event()
    supervisor.set()
    worker = Worker(swarm.ledger, repo, "w-orphan", WorkerOptions(lease=5), supervised=supervisor.is_set)
    threading.Timer(0.5, supervisor.clear).start()  # the supervisor dies half a second in
    began = time.monotonic()
    step = worker.step()
    spawned = read_pids(pids)
    kill_quietly(spawned)
    assert (step.accepted, step.error) == (False, "supervisor gone")
    assert time.monotonic() - began < 4
    assert len(spawned) == 1 and wait_gone(spawned, 1.0) == []
    swarm.index.refresh(swarm.refs)
    assert swarm.index.task_state(job, "s0") == "running"  # the lease runs out; the next run requeues it
    assert ops(repo, job) == ["job_created", "claimed"]


def test_a_worker_whose_supervisor_died_before_it_could_ask_does_nothing(repo: Path) -> None:
    """The race PR_SET_PDEATHSIG leaves open: the parent died before the worker asked to die with it."""
    job = submit(repo, 'id = "a"\ncommand = "true"')
    gone = subprocess.Popen(["true"])
    gone.wait()
    fork = multiprocessing.get_context("fork")
    options = WorkOptions(workers=1, job=job)
    worker = fork.Process(target=worker_main, args=(str(repo), "w-late", options, fork.Value("i", 0), fork.Event(), gone.pid))
    worker.start()
    worker.join(5)
    assert worker.exitcode == 0
    assert tasks(repo, job)["a"]["state"] == "queued"
