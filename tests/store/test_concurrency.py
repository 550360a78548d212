"""Many worker processes claiming and finishing tasks of one job at once.

Every worker is a separate Python process with its own Swarm (its own SQLite
connection and libgit2 repository), as real workers are. The invariants:
every task is completed exactly once, the refs record exactly one `finished`
per task, and the object database stays sound.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from gitswarm.engine.swarm import Swarm
from gitswarm.model.errors import LeaseLost
from gitswarm.model.ops import TaskClaimed, TaskFinished
from tests.conftest import git

TASKS = 2_000
WORKERS = 8

# One worker: open its own Swarm, say "ready", wait for "go" (so that every
# worker is racing at once rather than whoever imported first draining the
# queue), then claim/finish until nothing is left and print what it did.
WORKER = textwrap.dedent(
    """
    import json, os, sys, time
    from gitswarm.engine.swarm import Swarm

    repo, owner = sys.argv[1], sys.argv[2]
    swarm = Swarm(repo)
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        sys.exit("worker: no go signal")
    done = []
    while True:
        lease = swarm.ledger.claim(owner, ttl=60, now=time.time())
        if lease is None:
            break
        swarm.ledger.finish(lease, True, time.time())
        done.append([lease.job, lease.task, lease.token])
    swarm.close()
    env = {k: os.environ.get(k) for k in ("HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM")}
    print(json.dumps({"owner": owner, "done": done, "env": env}), flush=True)
    """
)


def many_tasks(n: int) -> str:
    body = "".join(f'[[tasks]]\nid = "t{i:05d}"\ncommand = "true"\n' for i in range(n))
    return f'goal = "concurrency"\n[defaults]\nadapter = "shell"\n{body}'


def start_workers(repo: Path, n: int) -> list[subprocess.Popen[str]]:
    env = os.environ.copy()  # carries the isolated HOME / GIT_CONFIG_GLOBAL set by the autouse fixture
    return [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(repo), f"worker-{i}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=repo,
        )
        for i in range(n)
    ]


@pytest.mark.slow
def test_many_workers_complete_every_task_exactly_once(repo: Path, isolated_env: Path) -> None:
    submitter = Swarm(repo)
    job = submitter.submit_text(many_tasks(TASKS))
    submitter.close()
    task_ids = {f"t{i:05d}" for i in range(TASKS)}

    workers = start_workers(repo, WORKERS)
    try:
        for w in workers:
            line = w.stdout.readline()
            assert line == "ready\n", f"worker did not start: {line!r} {w.stderr.read() if w.poll() is not None else ''}"
        start = time.perf_counter()
        for w in workers:
            w.stdin.write("go\n")
            w.stdin.flush()
        outputs = [w.communicate(timeout=300) for w in workers]
        elapsed = time.perf_counter() - start
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()
    print(f"\n{WORKERS} workers, {TASKS} tasks ({2 * TASKS} transitions): {elapsed:.2f} s wall")

    reports = []
    for w, (out, err) in zip(workers, outputs):
        assert w.returncode == 0, f"worker failed (exit {w.returncode}):\n{err}"
        reports.append(json.loads(out.strip().splitlines()[-1]))

    # The isolated environment reached every child.
    for report in reports:
        assert report["env"] == {
            "HOME": os.environ["HOME"],
            "GIT_CONFIG_GLOBAL": os.environ["GIT_CONFIG_GLOBAL"],
            "GIT_CONFIG_NOSYSTEM": "1",
        }
        assert report["env"]["HOME"] == str(isolated_env)

    # Every task completed exactly once, by exactly one worker, with the first token.
    completed = [(j, t, k) for report in reports for j, t, k in report["done"]]
    per_task = Counter(t for _, t, _ in completed)
    duplicates = {t: n for t, n in per_task.items() if n > 1}
    assert not duplicates, f"tasks completed more than once: {sorted(duplicates.items())[:10]}"
    assert set(per_task) == task_ids, f"missing: {sorted(task_ids - set(per_task))[:10]}"
    assert {j for j, _, _ in completed} == {job}
    assert {k for _, _, k in completed} == {1}

    # The work was actually shared.
    busy = {r["owner"]: len(r["done"]) for r in reports}
    print("tasks per worker:", busy)
    assert sum(1 for n in busy.values() if n > 0) > 1, busy

    # The final state, both from the index and straight from the refs.
    check = Swarm(repo)
    try:
        status = check.status(job)
        assert status["status"] == "succeeded"
        assert status["counts"] == {"succeeded": TASKS}
        assert len(status["tasks"]) == TASKS
        assert {t["state"] for t in status["tasks"]} == {"succeeded"}
        assert check.index.leases() == []
        snapshot = check.refs.snapshot(job)
        assert snapshot.state.counts == {"succeeded": TASKS}
        assert {t.state.value for t in snapshot.tasks()} == {"succeeded"}

        # The history: one create, then exactly one claim and one finish per task.
        ops = [op for _, op in check.refs.history(job)]
        finished = Counter(op.task for op in ops if isinstance(op, TaskFinished))
        claimed = Counter(op.task for op in ops if isinstance(op, TaskClaimed))
        assert set(finished) == task_ids and set(finished.values()) == {1}
        assert set(claimed) == task_ids and set(claimed.values()) == {1}
        assert len(ops) == 1 + 2 * TASKS
        # Claims went to the owners that reported finishing those tasks.
        owner_of = {t: r["owner"] for r in reports for _, t, _ in r["done"]}
        assert {op.task: op.owner for op in ops if isinstance(op, TaskClaimed)} == owner_of
        # Lamport clocks strictly increase along the single chain.
        clocks = [op.clock for op in ops]
        assert clocks == list(range(1, len(ops) + 1))
    finally:
        check.close()

    # The same through git itself: a linear chain with one `finished` subject per task.
    subjects = git(repo, "log", "--format=%s", f"refs/swarm/jobs/{job}").splitlines()
    finished_subjects = Counter(s.split(" ", 1)[1] for s in subjects if s.startswith("finished "))
    assert set(finished_subjects) == task_ids and set(finished_subjects.values()) == {1}
    assert git(repo, "rev-list", "--count", "--merges", f"refs/swarm/jobs/{job}").strip() == "0"

    fsck = subprocess.run(["git", "fsck", "--strict", "--no-progress"], cwd=repo, capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr


def test_late_finish_after_expiry_is_refused_and_the_new_owner_wins(repo: Path) -> None:
    a, b = Swarm(repo), Swarm(repo)
    try:
        job = a.submit_text('goal = "lease"\n[[tasks]]\nid = "only"\ncommand = "true"\n')
        b.index.refresh(b.refs)
        t0 = time.time()
        ttl = 30.0

        lease_a = a.ledger.claim("worker-a", ttl=ttl, now=t0)
        assert lease_a is not None and lease_a.task == "only" and lease_a.token == 1

        # Nothing is left to claim while A holds the lease.
        assert b.ledger.claim("worker-b", ttl=ttl, now=t0 + 1) is None

        assert b.ledger.expire(t0 + ttl + 1) == [(job, "only")]
        assert b.status(job)["tasks"][0]["state"] == "queued"

        lease_b = b.ledger.claim("worker-b", ttl=ttl, now=t0 + ttl + 2)
        assert lease_b is not None and lease_b.task == "only" and lease_b.token == 2
        assert lease_b.attempt == 1  # A's lease ran out: no failure of the task's, so no attempt used

        # A comes back late, while B holds the task: refused, nothing written.
        tip = a.refs.repo.read_ref(f"refs/swarm/jobs/{job}")
        with pytest.raises(LeaseLost):
            a.ledger.finish(lease_a, True, t0 + ttl + 3)
        assert a.refs.repo.read_ref(f"refs/swarm/jobs/{job}") == tip
        # A cannot renew its way back in either.
        with pytest.raises(LeaseLost):
            a.ledger.renew(lease_a, ttl, t0 + ttl + 3)

        # B's result (a failure, distinguishable from A's success) is the one that sticks.
        task = b.ledger.finish(lease_b, False, t0 + ttl + 4, error="from worker b", retryable=False)
        assert task.state.value == "failed" and task.error == "from worker b"

        # A trying again after B finished is refused as well.
        with pytest.raises(LeaseLost):
            a.ledger.finish(lease_a, True, t0 + ttl + 5)

        fresh = Swarm(repo)
        try:
            for view in (a, b, fresh):
                view.index.refresh(view.refs)
                row = view.status(job)["tasks"][0]
                assert (row["state"], row["error"], row["claims"], row["attempts"]) == ("failed", "from worker b", 2, 1)
        finally:
            fresh.close()
        final = a.refs.snapshot(job).task("only")
        assert (final.state.value, final.error, final.claims) == ("failed", "from worker b", 2)

        ops = [op for _, op in a.refs.history(job)]
        assert [op.__struct_config__.tag for op in ops] == ["job_created", "claimed", "expired", "claimed", "finished"]
        (finish,) = [op for op in ops if isinstance(op, TaskFinished)]
        assert (finish.token, finish.ok, finish.error) == (2, False, "from worker b")
        assert [op.owner for op in ops if isinstance(op, TaskClaimed)] == ["worker-a", "worker-b"]
    finally:
        a.close()
        b.close()
