"""The supervisor and its workers as real processes: crashes, late writers, process groups."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from gitswarm.engine.jobs.supervisor import WorkOptions, worker_main
from gitswarm.engine.jobs.worker import Worker
from gitswarm.engine.swarm import Swarm
from tests.conftest import cli, spec_text
from tests.proctools import alive, children, finish, interruptible, kill_quietly, read_pids, wait_for, wait_gone

GITSWARM = str(Path(sys.executable).with_name("gitswarm"))
SPAWN_TWO = "sleep 30 & echo $! >> {pids}; sleep 30 & echo $! >> {pids}; wait"


def start(repo: Path, tmp_path: Path, *args: str, name: str = "gs") -> tuple[subprocess.Popen, Path, Path]:
    """Start the real CLI in its own session, stdout and stderr to files."""
    out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen([GITSWARM, *args], cwd=repo, stdout=o, stderr=e, start_new_session=True, preexec_fn=interruptible)
    return proc, out, err


def events(err: Path) -> list[dict]:
    return [json.loads(line) for line in err.read_text().splitlines() if line.startswith("{")]


def log_records(repo: Path, job: str) -> list[dict]:
    result = cli(repo, "--json", "log", job)
    assert result.code == 0, result.err
    return [e["record"] for e in result.json()["events"]]


@pytest.mark.slow
def test_killing_workers_mid_run_loses_no_task(repo: Path, tmp_path: Path) -> None:
    tasks = [f'id = "t{n:02d}"\ncommand = "sleep 0.2"' for n in range(50)]
    # A worker killed mid-task is no failure of the task's: with one attempt each, every task still succeeds.
    (repo / "spec.toml").write_text(spec_text(*tasks, goal="crash test", defaults="max_attempts = 1"))
    proc, out, err = start(repo, tmp_path, "--json", "run", "spec.toml", "-j", "4", "--lease", "2")
    rng = random.Random(7)
    killed: list[int] = []
    orphaned_adapters: list[int] = []
    try:
        wait_for(lambda: len(children(proc.pid)) == 4, 10)
        time.sleep(0.3)
        while len(killed) < 3 and proc.poll() is None:
            # A busy worker: one with an adapter running, so it holds a lease.
            busy = [w for w in children(proc.pid) if w not in killed and children(w)]
            if not busy:
                time.sleep(0.02)
                continue
            victim = rng.choice(busy)
            adapters = children(victim)
            os.kill(victim, signal.SIGKILL)
            killed.append(victim)
            orphaned_adapters += adapters
            time.sleep(0.35)
        code = finish(proc, 60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert len(killed) == 3, "the run ended before three workers could be killed"
    assert code == 0, err.read_text()[-2000:]
    # The adapters the killed workers left running were killed by the supervisor.
    assert wait_gone(orphaned_adapters, 2.0) == []

    result = json.loads(out.read_text())
    job = result["id"]
    assert result["status"] == "succeeded"
    assert len(result["tasks"]) == 50 and {t["state"] for t in result["tasks"]} == {"succeeded"}

    records = log_records(repo, job)
    finished = [r for r in records if r["op"] == "finished"]
    assert all(r["ok"] is True for r in finished)
    assert Counter(r["task"] for r in finished) == {f"t{n:02d}": 1 for n in range(50)}
    expired = Counter(r["task"] for r in records if r["op"] == "expired")
    claimed = Counter(r["task"] for r in records if r["op"] == "claimed")
    assert sum(expired.values()) >= 1, "no kill cost a task its lease"
    for task in result["tasks"]:  # every expired lease shows as one more claim, and no more attempts
        assert (task["attempts"], task["claims"]) == (1, claimed[task["id"]]) and task["claims"] == 1 + expired[task["id"]]
    # Said by whichever saw the death first: the supervisor reaping its worker, or another worker finding its pid gone.
    assert all(r["attempt_used"] is False and ("was killed by SIGKILL" in r["why"] or r["why"].endswith(") died"))
               for r in records if r["op"] == "expired")
    # The accepted finish of each task carries its last claim's token.
    tokens = {r["task"]: r["token"] for r in finished}
    assert all(tokens[t] == claimed[t] for t in tokens)

    exits = [e for e in events(err) if e["event"] == "worker_exit"]
    assert sorted(e["code"] for e in exits) == [-9, -9, -9]
    assert all(e["attempt_used"] is False and e["why"].endswith("was killed by SIGKILL") for e in exits)
    requeued = Counter(t for e in exits for t in e["requeued"])
    assert requeued and requeued <= Counter(f"{job}/{t}" for t in expired.elements())
    assert events(err)[-1]["event"] == "done"


LATE_WRITER = """
import json, sys, time
from pathlib import Path
from gitswarm.engine.jobs.supervisor import WorkOptions, worker_main
from gitswarm.engine.swarm import Swarm
from gitswarm.engine.jobs.worker import Worker, WorkerOptions
from gitswarm.model.errors import LeaseLost

repo, job, mode = sys.argv[1:4]
swarm = Swarm(repo)
lease = swarm.ledger.claim("late", 1.0, time.time(), job_id=job)
print(json.dumps({"token": lease.token, "expires": lease.expires}), flush=True)
if mode == "finish":
    time.sleep(1.2)  # past the lease, even if the test is slow to stop us
    try:
        swarm.ledger.finish(lease, True, time.time())
        print(json.dumps({"accepted": True}), flush=True)
    except LeaseLost as exc:
        print(json.dumps({"accepted": False, "error": str(exc)}), flush=True)
else:
    def started(pgid):
        if pgid:
            print(json.dumps({"adapter": pgid}), flush=True)
    worker = Worker(swarm.ledger, Path(repo), "late", WorkerOptions(lease=1.0), on_adapter=started)
    step = worker.execute(lease)
    print(json.dumps({"accepted": step.accepted, "error": step.error}), flush=True)
swarm.close()
"""


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["finish", "execute"])
def test_late_writer_is_refused_and_the_successor_wins(repo: Path, tmp_path: Path, mode: str) -> None:
    swarm = Swarm(repo)
    try:
        # Run by the late writer, the command outlives its lease; run again by the successor, it is quick.
        command = "echo done" if mode == "finish" else "if [ -e late.flag ]; then echo done; else touch late.flag; sleep 2; fi"
        job = swarm.submit_text(spec_text(f"id = \"a\"\ncommand = '{command}'"))
        script = tmp_path / "late.py"
        script.write_text(LATE_WRITER)
        late = subprocess.Popen(
            [sys.executable, str(script), str(repo), job, mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            assert late.stdout is not None
            claim = json.loads(late.stdout.readline())
            if mode == "execute":
                json.loads(late.stdout.readline())  # its adapter has started: stop it mid-run
            os.kill(late.pid, signal.SIGSTOP)
            assert claim["token"] == 1
            wait_for(lambda: time.time() > claim["expires"], 5)
            expired = wait_for(lambda: swarm.ledger.expire(time.time()), 5, interval=0.05)
            assert expired == [(job, "a")]
            successor = Worker(swarm.ledger, repo, "successor").step()
            assert successor.lease is not None and successor.lease.token == 2
            assert successor.accepted and successor.ok
            os.kill(late.pid, signal.SIGCONT)
            out, err = late.communicate(timeout=20)
        finally:
            if late.poll() is None:
                late.kill()
                late.wait()
        assert late.returncode == 0, err
        verdict = json.loads(out.strip().splitlines()[-1])
        assert verdict["accepted"] is False
        assert "lease" in verdict["error"]

        swarm.index.refresh(swarm.refs)
        task = swarm.refs.snapshot(job).task("a")
        # The late writer's lease ran out: its attempt was given back, the successor's is attempt 1 again.
        assert (task.state.value, task.claims, task.attempts, task.owner) == ("succeeded", 2, 1, None)
        records = log_records(repo, job)
        assert [(r["op"], r.get("token"), r.get("owner")) for r in records[1:]] == [
            ("claimed", 1, "late"),
            ("expired", 1, None),
            ("claimed", 2, "successor"),
            ("finished", 2, None),
        ]
        (check,) = [swarm.artifact(a)["record"] for a in task.artifacts]
        assert check["attempt"] == 1 and check["exit_code"] == 0
        assert [a["task"] for a in swarm.artifacts(job)["artifacts"]] == ["a"]
    finally:
        swarm.close()


@pytest.mark.slow
def test_timeout_and_exit_leave_no_grandchild(repo: Path, tmp_path: Path) -> None:
    timed, left = tmp_path / "timed.pids", tmp_path / "left.pids"
    (repo / "spec.toml").write_text(
        spec_text(
            f"id = \"spawner\"\ncommand = '{SPAWN_TWO.format(pids=timed)}'\ntimeout = \"1s\"\nmax_attempts = 1",
            f"id = \"leaver\"\ncommand = 'sleep 30 & echo $! > {left}; echo bye'",
        )
    )
    started = time.monotonic()
    proc, out, err = start(repo, tmp_path, "--json", "run", "spec.toml", "-j", "2", "--lease", "2")
    code = finish(proc, 30)
    assert code == 1, err.read_text()
    assert time.monotonic() - started < 10
    spawned = read_pids(timed) + read_pids(left)
    assert len(spawned) == 3
    assert wait_gone(spawned, 1.0) == []
    result = json.loads(out.read_text())
    states = {t["id"]: (t["state"], t["error"]) for t in result["tasks"]}
    assert states["leaver"] == ("succeeded", None)
    assert states["spawner"][0] == "failed" and states["spawner"][1].startswith("timeout after ")


@pytest.mark.slow
def test_cancel_of_a_running_job_kills_its_grandchildren(repo: Path, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    (repo / "spec.toml").write_text(
        spec_text(f"id = \"spawner\"\ncommand = '{SPAWN_TWO.format(pids=pids)}'", 'id = "after"\ncommand = "true"\ndepends_on = ["spawner"]')
    )
    job = cli(repo, "--json", "submit", "spec.toml").json()["id"]
    proc, _out, err = start(repo, tmp_path, "--json", "work", "--job", job, "-j", "1", "--lease", "2")
    try:
        spawned = wait_for(lambda: len(read_pids(pids)) == 2 and read_pids(pids), 15)
        assert all(alive(p) for p in spawned)
        cancelled = cli(repo, "--json", "cancel", job, "--reason", "stop")
        assert cancelled.code == 0, cancelled.err
        assert cancelled.json()["changed"] == {"after": "cancelled", "spawner": "cancelled"}
        assert wait_gone(spawned, 2.0) == [], "grandchildren outlived the cancel"
        code = finish(proc, 10)
    finally:
        kill_quietly(read_pids(pids))
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert code == 0, err.read_text()
    status = cli(repo, "--json", "status", job).json()
    assert status["status"] == "cancelled"
    assert {t["id"]: t["state"] for t in status["tasks"]} == {"spawner": "cancelled", "after": "cancelled"}
    assert "finished" not in [r["op"] for r in log_records(repo, job)]


@pytest.mark.slow
def test_ctrl_c_stops_workers_kills_adapters_and_requeues(repo: Path, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    (repo / "spec.toml").write_text(spec_text(f"id = \"spawner\"\ncommand = '{SPAWN_TWO.format(pids=pids)}'"))
    job = cli(repo, "--json", "submit", "spec.toml").json()["id"]
    proc, _out, err = start(repo, tmp_path, "--json", "work", "--job", job, "-j", "2", "--lease", "2")
    try:
        spawned = wait_for(lambda: len(read_pids(pids)) == 2 and read_pids(pids), 15)
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
        code = finish(proc, 15)
        left = wait_gone(spawned, 2.0)
    finally:
        kill_quietly(read_pids(pids))
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert code == 130, err.read_text()
    assert left == []
    task = cli(repo, "--json", "status", job).json()["tasks"][0]
    assert (task["state"], task["attempts"], task["owner"], task["error"]) == ("queued", 0, None, "its worker was stopped")
    assert [r["op"] for r in log_records(repo, job)] == ["job_created", "claimed", "expired"]


def test_ref_lock_held_briefly_is_waited_out(swarm: Swarm, repo: Path) -> None:
    """BUG: a worker killed with -9 inside a ref update leaves `<ref>.lock` behind
    (seen when killing workers at random moments: the run then dies with exit 3,
    "internal error: OSError: failed to lock file ..."). `PygitRepo.cas_ref`
    promises to wait out a held lock, but pygit2 reports a lock failure as
    OSError, not GitError, so it fails on the first try. Here the lock goes away
    after 50 ms, well within the retries cas_ref means to make."""
    job = swarm.submit_text(spec_text('id = "a"\ncommand = "true"'))
    lock = swarm.repo.common_dir / "refs" / "swarm" / "jobs" / f"{job}.lock"
    assert (lock.parent / job).is_file()  # a loose ref, updated through its lock file
    lock.write_bytes(b"")
    timer = threading.Timer(0.05, lambda: lock.unlink(missing_ok=True))
    timer.start()
    try:
        result = cli(repo, "--json", "cancel", job)
    finally:
        timer.join()
        lock.unlink(missing_ok=True)
    assert result.code == 0, result.err
    assert result.json()["changed"] == {"a": "cancelled"}


def test_old_ref_lock_of_a_dead_writer_is_cleared(swarm: Swarm, repo: Path) -> None:
    """A lock file nobody has touched for a minute is a dead writer's: it must not wedge the job."""
    job = swarm.submit_text(spec_text('id = "a"\ncommand = "true"'))
    lock = swarm.repo.common_dir / "refs" / "swarm" / "jobs" / f"{job}.lock"
    lock.write_bytes(b"")
    old = time.time() - 60
    os.utime(lock, (old, old))
    try:
        result = cli(repo, "--json", "cancel", job)
    finally:
        lock.unlink(missing_ok=True)
    assert result.code == 0, result.err
    assert result.json()["changed"] == {"a": "cancelled"}


@pytest.mark.slow
def test_worker_killed_inside_a_ref_update_does_not_wedge_the_job(repo: Path, tmp_path: Path) -> None:
    """What kill -9 of a worker inside libgit2's ref update leaves: a fresh, empty
    `<ref>.lock` that nobody will ever remove. The next writers meet it at once;
    `gitswarm work` must still finish the job (exit 0), not die with exit 3."""
    swarm = Swarm(repo)
    try:
        job = swarm.submit_text(spec_text('id = "a"\ncommand = "true"', 'id = "b"\ncommand = "true"'))
        lock = swarm.repo.common_dir / "refs" / "swarm" / "jobs" / f"{job}.lock"
    finally:
        swarm.close()
    lock.write_bytes(b"")
    proc, _out, err = start(repo, tmp_path, "--json", "work", "--job", job, "-j", "2", "--lease", "2")
    code = finish(proc, 40)
    assert code == 0, err.read_text()[-1500:]
    assert cli(repo, "--json", "status", job).json()["status"] == "succeeded"


def test_an_idle_worker_stops_as_soon_as_the_done_event_is_set(repo: Path) -> None:
    """Idle workers sleep with a backoff of up to 200 ms; the shared event ends that at once."""
    fork = multiprocessing.get_context("fork")
    done = fork.Event()
    options = WorkOptions(workers=1)  # no job, no --until-idle: only the event can stop it
    worker = fork.Process(target=worker_main, args=(str(repo), "w-idle", options, fork.Value("i", 0), done))
    worker.start()
    time.sleep(0.8)  # well into its backoff
    assert worker.is_alive()
    set_at = time.monotonic()
    done.set()
    worker.join(timeout=5)
    assert worker.exitcode == 0
    assert time.monotonic() - set_at < 2  # without the event it would never stop


def test_the_worker_that_finds_the_job_done_tells_the_others(repo: Path) -> None:
    swarm = Swarm(repo)
    job = swarm.submit_text(spec_text('id = "t"\ncommand = "true"'))
    done = threading.Event()
    worker_main(str(repo), "w-last", WorkOptions(workers=1, job=job), SharedInt(), done)
    assert done.is_set()
    assert swarm.index.job(job)["status"] == "succeeded"


class SharedInt:
    """Stands in for the multiprocessing.Value the supervisor shares with a worker."""

    value = 0


def _on_one_core() -> None:
    """A child's preexec_fn: run on one core only (the supervisor sees one: usable_cores)."""
    interruptible()
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def _run_on_one_core(repo: Path, tmp_path: Path, *args: str) -> tuple[subprocess.Popen, Path]:
    err = tmp_path / "one-core.err"
    with open(err, "wb") as e:
        proc = subprocess.Popen([GITSWARM, *args], cwd=repo, stdout=subprocess.DEVNULL, stderr=e, start_new_session=True,
                                preexec_fn=_on_one_core)
    return proc, err


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs sched_setaffinity (Linux)")
def test_on_one_core_a_lone_task_gets_one_worker_not_all_n(repo: Path, tmp_path: Path) -> None:
    """-j is at most N: with one core and nothing else claimable, no other worker is forked to wait."""
    (repo / "spec.toml").write_text(spec_text('id = "slow"\ncommand = "sleep 1"'))
    proc, err = _run_on_one_core(repo, tmp_path, "--json", "run", "spec.toml", "-j", "4")
    try:
        wait_for(lambda: children(proc.pid), 10, "the first worker")
        time.sleep(0.5)  # ten polls of the supervisor, the task running all along
        assert len(children(proc.pid)) == 1
    finally:
        code = finish(proc, 30)
    assert code == 0, err.read_text()[-1500:]


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs sched_setaffinity (Linux)")
def test_on_one_core_the_rest_of_n_start_once_every_worker_holds_a_task(repo: Path, tmp_path: Path) -> None:
    """Three tasks of a second with -j 3 on one core still run side by side: the first worker holds one, two more
    are queued, so the supervisor starts the other two at its next poll."""
    tasks = [f'id = "t{n}"\ncommand = "echo $PPID >> {tmp_path}/pids; sleep 1"' for n in range(3)]
    (repo / "spec.toml").write_text(spec_text(*tasks))
    started = time.monotonic()
    proc, err = _run_on_one_core(repo, tmp_path, "--json", "run", "spec.toml", "-j", "3")
    code = finish(proc, 30)
    assert code == 0, err.read_text()[-1500:]
    assert time.monotonic() - started < 2.5  # one after the other they take 3 s
    assert len(set(read_pids(tmp_path / "pids"))) == 3  # each run by a worker of its own ($PPID: the worker)
