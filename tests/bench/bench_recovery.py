"""Recovery speed: from `kill -9` of a worker (or of a whole run) to its task queued again.

    python tests/bench/bench_recovery.py [--quick]

A lease names the worker process that holds it, so a worker that died on this
machine is seen at once; the target is under 1 s from kill -9 to requeued,
whoever notices: the supervisor of the killed worker (a worker killed under a
live `gitswarm run`), or, after the whole run was killed, the next `gitswarm
recover`, `gitswarm status` or `gitswarm work`. Each is measured with a lease
of 30 s, which nothing may wait out.

Baselines measured in the same run: what recovery cost before, waiting for
the lease to run out (a lease of LEASE_SECONDS whose holder is on "another
machine", so never judged by its pid; polled with `gitswarm recover`), and
the floor of one CLI call, `gitswarm recover` with nothing to recover.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchlib import isolate, print_table, scratch_dir

QUICK = "--quick" in sys.argv
ROUNDS = 2 if QUICK else 5
TASKS = 4
LEASE_SECONDS = 3.0  # the baseline's lease; any real one is longer (30 s by default)
TARGET_SECONDS = 1.0
EXE = str(Path(sys.executable).with_name("gitswarm"))

# In the baseline, a process claims as a worker on another machine would, renews, and is killed.
ELSEWHERE = """
import sys, time, msgspec
from gitswarm.engine.swarm import Swarm
from gitswarm.store.holders import this_process
swarm = Swarm(sys.argv[1])
swarm.ledger.holder = msgspec.structs.replace(this_process(), host="another-machine")
lease = swarm.ledger.claim("w-elsewhere", float(sys.argv[2]), time.time())
print("claimed", flush=True)
while True:
    time.sleep(float(sys.argv[2]) / 3)
    lease = swarm.ledger.renew(lease, float(sys.argv[2]), time.time())
"""


def gitswarm(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([EXE, *args], cwd=repo, capture_output=True, text=True, check=False)


def new_repo(tasks: int) -> tuple[Path, Path, str]:
    """A repository with a job of `tasks` tasks, each holding its worker until the file `go` exists."""
    path = Path(scratch_dir("bench-recovery-"))
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    gate, started = path.parent / f"{path.name}.go", path.parent / f"{path.name}.started"
    body = "".join(
        f"[[tasks]]\nid = \"t{n}\"\nmax_attempts = 1\n"
        f"command = 'echo t{n} >> {started}; while [ ! -e {gate} ]; do sleep 0.01; done'\n"
        for n in range(tasks)
    )
    (path / "job.toml").write_text('goal = "bench"\n' + body)
    job = json.loads(gitswarm(path, "--json", "submit", "job.toml").stdout)["id"]
    return path, gate, job


def wait_started(repo: Path, n: int) -> None:
    started = repo.parent / f"{repo.name}.started"
    deadline = time.monotonic() + 30
    while not (started.exists() and len(started.read_text().split()) >= n):
        if time.monotonic() > deadline:
            raise SystemExit("the tasks never started")
        time.sleep(0.005)


def children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(fields[1]) == pid and fields[0] not in ("Z", "X"):
                out.append(int(entry.name))
    return out


def start_work(repo: Path, job: str, workers: int, *more: str) -> subprocess.Popen:
    return subprocess.Popen(
        [EXE, "--json", "work", "--job", job, "-j", str(workers), "--lease", "30", *more],
        cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )


def killed_run(tasks: int) -> tuple[Path, Path, str, float]:
    """A `work` of `tasks` tasks, killed with -9 while every task runs; (repo, gate, job, when killed)."""
    repo, gate, job = new_repo(tasks)
    proc = start_work(repo, job, tasks)
    wait_started(repo, tasks)
    os.kill(proc.pid, signal.SIGKILL)
    killed = time.time()
    proc.wait()
    assert proc.stderr is not None
    proc.stderr.close()
    return repo, gate, job, killed


def all_queued(repo: Path, job: str) -> bool:
    """Read from the refs alone (a `status` would release what it finds)."""
    log = json.loads(gitswarm(repo, "--json", "log", job).stdout)["events"]
    expired = {e["record"]["task"] for e in log if e["op"] == "expired"}
    return len(expired) == TASKS


def finish(repo: Path, gate: Path, job: str) -> None:
    gate.write_text("")
    done = gitswarm(repo, "--json", "work", "--job", job)
    if done.returncode != 0:
        raise SystemExit(f"the job did not finish: {done.stderr[-500:]}")


def worker_killed_under_supervisor() -> float:
    """kill -9 of one busy worker while its `gitswarm work` runs on: until the supervisor requeued its task."""
    repo, gate, job = new_repo(1)
    proc = start_work(repo, job, 1)
    wait_started(repo, 1)
    [worker] = [w for w in children(proc.pid) if children(w)]
    gate.write_text("")  # its next attempt is quick
    os.kill(worker, signal.SIGKILL)
    killed = time.time()
    _, err = proc.communicate(timeout=60)
    [exit_] = [e for e in map(json.loads, filter(None, err.splitlines())) if e["event"] == "worker_exit"]
    return exit_["t"] - killed


def run_killed_then(command: str) -> float:
    """kill -9 of a whole `work`: until `gitswarm COMMAND` (run again and again) has requeued every task
    (the time its run that did so returned; checked after, with a read of the log)."""
    repo, gate, job, killed = killed_run(TASKS)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        gitswarm(repo, command)
        returned = time.time()
        if all_queued(repo, job):
            finish(repo, gate, job)
            return returned - killed
    raise SystemExit(f"timed out: {command} to requeue")


def run_killed_then_work() -> float:
    """kill -9 of a whole `work`: until the next `gitswarm work` said it requeued the last task."""
    repo, gate, job, killed = killed_run(TASKS)
    gate.write_text("")
    proc = start_work(repo, job, TASKS)
    _, err = proc.communicate(timeout=60)
    said = [e["t"] for e in map(json.loads, filter(None, err.splitlines())) if e["event"] == "requeued"]
    assert len(said) == TASKS, err[-500:]
    return max(said) - killed


def lease_waited_out() -> float:
    """The baseline: a holder elsewhere, killed; `gitswarm recover` polled until its lease ran out."""
    repo, gate, job = new_repo(1)
    holder = subprocess.Popen([sys.executable, "-c", ELSEWHERE, str(repo), str(LEASE_SECONDS)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "claimed"
    time.sleep(LEASE_SECONDS / 2)  # mid-lease, as a crash comes whenever it comes
    holder.kill()
    killed = time.time()
    holder.wait()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if "requeued" in gitswarm(repo, "recover").stdout:
            returned = time.time()
            finish(repo, gate, job)
            return returned - killed
    raise SystemExit("timed out: the lease to run out")


def recover_floor() -> float:
    repo, _gate, _job = new_repo(1)
    started = time.perf_counter()
    gitswarm(repo, "recover")
    return time.perf_counter() - started


def main() -> None:
    isolate()
    cases = [
        ("kill -9 of a worker, its supervisor alive: supervisor requeues", worker_killed_under_supervisor, True),
        (f"kill -9 of `work` ({TASKS} tasks): next `gitswarm recover`", lambda: run_killed_then("recover"), True),
        (f"kill -9 of `work` ({TASKS} tasks): next `gitswarm status`", lambda: run_killed_then("status"), True),
        (f"kill -9 of `work` ({TASKS} tasks): next `gitswarm work` says so", run_killed_then_work, True),
        (f"baseline: lease waited out (--lease {LEASE_SECONDS:g}, holder elsewhere)", lease_waited_out, False),
        ("baseline: `gitswarm recover`, nothing to recover", recover_floor, False),
    ]
    rows = []
    failed = False
    for name, measure, targeted in cases:
        seconds = [measure() for _ in range(ROUNDS)]
        median = statistics.median(seconds)
        verdict = ("ok" if median < TARGET_SECONDS else "SLOW") if targeted else "-"
        failed = failed or verdict == "SLOW"
        rows.append((name, f"{median:.3f}", f"{min(seconds):.3f}", f"{max(seconds):.3f}", f"< {TARGET_SECONDS:g} s: {verdict}" if targeted else ""))
    print(f"kill -9 to requeued, seconds ({ROUNDS} rounds each)")
    print_table(("case", "median", "best", "worst", "target"), rows)
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
