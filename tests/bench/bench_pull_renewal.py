"""A worker's lease renewal while a large pull runs: the pull must not stall it.

    python tests/bench/bench_pull_renewal.py [--jobs N] [--ops N] [--pull-with SRC]

`--pull-with SRC` runs the pull with the gitswarm source tree at SRC (an
older commit checked out there), to compare against it in the same setup.

Clone A holds JOBS jobs of OPS operations each (cancel/retry cycles of one
task, written as commits straight with pygit2: only the tip's tree must be
the replayed state, which is what a pull checks). Clone B has a job of its
own with a task leased to a worker process that renews the lease every 10
ms and records how long each renewal took. B then pulls everything from A.
Figures: the pull's wall time, and the renewal latencies before (baseline)
and during the pull. With the index's write lock held for the whole pull, a
renewal waits for all of it; taken per job, a renewal waits for one job's
ref update at most.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pygit2
from benchlib import isolate, print_table, scratch_dir

from gitswarm.engine.swarm import Swarm
from gitswarm.model import codec
from gitswarm.model.ids import new_id
from gitswarm.model.ops import Cancelled, Retried, title
from gitswarm.model.replay import replay
from gitswarm.store import layout
from gitswarm.store.oplog import op_message

JOBS = int(sys.argv[sys.argv.index("--jobs") + 1]) if "--jobs" in sys.argv else 100
OPS = int(sys.argv[sys.argv.index("--ops") + 1]) if "--ops" in sys.argv else 1000
GITSWARM = str(Path(sys.executable).with_name("gitswarm"))
PULL_WITH = sys.argv[sys.argv.index("--pull-with") + 1] if "--pull-with" in sys.argv else None
SPEC = 'goal = "bench"\n[[tasks]]\nid = "a"\ncommand = "true"\n'


def sh(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(args, cwd=cwd, check=True, capture_output=True, text=True).stdout


def long_history(path: Path, job_id: str, ops: int) -> None:
    """Append cancel/retry pairs to a job until it has `ops` operations; only the tip's tree
    is the replayed state (raw pygit2, as another clone's long history would arrive)."""
    swarm = Swarm(path)
    snapshot = swarm.refs.snapshot(job_id)
    history = [op for _, op in swarm.refs.history(job_id)]
    repo = pygit2.Repository(str(path))
    tip, clock, now = snapshot.tip, snapshot.state.clock, snapshot.state.updated
    sig = pygit2.Signature("gitswarm", f"{swarm.actor}@gitswarm")
    tree = pygit2.Oid(hex=snapshot.tree)
    for n in range(ops - len(history)):
        clock, now = clock + 1, now + 0.001
        kind = Cancelled if n % 2 == 0 else Retried
        op = kind(id=new_id(now), clock=clock, at=now, actor=swarm.actor, task="a")
        history.append(op)
        tip = str(repo.create_commit(None, sig, sig, op_message([op], title), tree, [pygit2.Oid(hex=tip)]))
    result = replay(history, job_id)
    paths = {layout.STATE_PATH: swarm.repo.write_blob(codec.encode(result.state))}
    paths.update((layout.task_path(t.id), swarm.repo.write_blob(codec.encode(t))) for t in result.tasks.values())
    final = swarm.repo.update_tree(snapshot.tree, paths)
    last = repo.get(tip)
    tip = str(repo.create_commit(None, sig, sig, last.message, pygit2.Oid(hex=final), list(last.parent_ids)))
    repo.references[layout.job_ref(job_id)].set_target(tip)
    swarm.close()


def renewer(path: str, lease_job: str, out: multiprocessing.Queue, stop: multiprocessing.Event) -> None:
    swarm = Swarm(path)
    lease = swarm.ledger.claim("bench-worker", 3600, time.time(), job_id=lease_job)
    assert lease is not None
    out.put("ready")
    while not stop.is_set():
        start = time.perf_counter()
        lease = swarm.ledger.renew(lease, 3600, time.time())
        out.put((time.time(), time.perf_counter() - start))
        time.sleep(0.01)
    swarm.close()


def main() -> None:
    isolate()
    root = Path(scratch_dir("bench-renewal-"))
    bare = root / "remote.git"
    sh("git", "init", "-q", "--bare", str(bare))
    a, b = root / "a", root / "b"
    for path in (a, b):
        sh("git", "init", "-q", str(path))
        sh("git", "commit", "-q", "--allow-empty", "-m", "init", cwd=path)
        sh("git", "remote", "add", "origin", str(bare), cwd=path)
    swarm = Swarm(a)
    jobs = [swarm.submit_text(SPEC) for _ in range(JOBS)]
    swarm.close()
    for job in jobs:
        long_history(a, job, OPS)
    sh(GITSWARM, "push", cwd=a)
    mine = Swarm(b)
    local = mine.submit_text(SPEC)
    mine.close()
    out: multiprocessing.Queue = multiprocessing.Queue()
    stop = multiprocessing.Event()
    worker = multiprocessing.Process(target=renewer, args=(str(b), local, out, stop))
    worker.start()
    assert out.get(timeout=30) == "ready"
    time.sleep(1.0)  # renewals before the pull: the baseline
    pull_start = time.time()
    env = {**os.environ, "PYTHONPATH": PULL_WITH} if PULL_WITH else None
    pulled = subprocess.run([GITSWARM, "--json", "pull"], cwd=b, capture_output=True, text=True, env=env)
    pull_end = time.time()
    time.sleep(0.2)
    stop.set()
    samples = []
    while True:
        try:
            item = out.get(timeout=2)
        except queue.Empty:  # the worker is done
            break
        samples.append(item)
    worker.join(timeout=10)
    assert pulled.returncode == 0, pulled.stderr
    before = [took for at, took in samples if at < pull_start]
    during = [took for at, took in samples if pull_start <= at <= pull_end]
    rows = [
        (f"gitswarm pull of {JOBS} jobs x {OPS} ops (start-up included{', ' + PULL_WITH if PULL_WITH else ''})", f"{pull_end - pull_start:.2f} s", ""),
        ("lease renewal before the pull (median, baseline)", f"{statistics.median(before) * 1000:.1f} ms", "baseline"),
        (f"lease renewal during the pull (median of {len(during)})", f"{statistics.median(during) * 1000:.1f} ms",
         f"{statistics.median(during) / statistics.median(before):.1f}x"),
        ("lease renewal during the pull (slowest)", f"{max(during) * 1000:.1f} ms", f"{max(during) / statistics.median(before):.0f}x"),
    ]
    print_table(("measure", "value", "ratio"), rows)


if __name__ == "__main__":
    main()
