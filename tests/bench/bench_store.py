"""Store and index speed: one transition vs bare pygit2, flatness, status and rebuild.

    python tests/bench/bench_store.py [--quick]

Prints a table of figures; ratios are against baselines measured in the same
run, so they hold on a noisy machine.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pygit2

from benchlib import isolate, print_table

from gitswarm.engine.swarm import Swarm

QUICK = "--quick" in sys.argv


def new_repo() -> Path:
    path = Path(tempfile.mkdtemp(prefix="bench-repo-"))
    pygit2.init_repository(str(path))
    return path


def spec(tasks: int) -> str:
    body = "".join(f'[[tasks]]\nid = "t{i:05d}"\ncommand = "true"\n' for i in range(tasks))
    return f'goal = "bench {tasks}"\n' + body


def bare_pygit2(n: int) -> float:
    """Seconds per blob + tree + commit + ref update, straight through pygit2."""
    repo = pygit2.Repository(str(new_repo()))
    sig = pygit2.Signature("b", "b@example.com")
    blob = repo.create_blob(b"x")
    builder = repo.TreeBuilder()
    builder.insert("f", blob, pygit2.enums.FileMode.BLOB)
    first = repo.create_commit(None, sig, sig, "m", builder.write(), [])
    ref = repo.references.create("refs/swarm/bench", first)
    start = time.perf_counter()
    for i in range(n):
        blob = repo.create_blob(b"x%d" % i)
        builder = repo.TreeBuilder()
        builder.insert("f", blob, pygit2.enums.FileMode.BLOB)
        commit = repo.create_commit(None, sig, sig, "m", builder.write(), [ref.target])
        ref.set_target(commit)
    return (time.perf_counter() - start) / n


def transitions(tasks: int, n: int) -> tuple[float, Swarm, str]:
    """Seconds per transition (claim or finish) on a job of `tasks` tasks."""
    path = new_repo()
    swarm = Swarm(path)
    job = swarm.submit_text(spec(tasks))
    start = time.perf_counter()
    for _ in range(n // 2):
        lease = swarm.ledger.claim("bench", 60, time.time())
        swarm.ledger.finish(lease, True, time.time())
    return (time.perf_counter() - start) / (n // 2 * 2), swarm, job


def wall(argv: list[str], cwd: Path, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def rebuild(jobs: int, tasks: int) -> float:
    path = new_repo()
    swarm = Swarm(path)
    for _ in range(jobs):
        swarm.submit_text(spec(tasks))
    start = time.perf_counter()
    swarm.rebuild_index()
    return time.perf_counter() - start


def main() -> None:
    isolate()
    n = 200 if QUICK else 1000
    rows = []
    base = bare_pygit2(n)
    small, _, _ = transitions(100, min(n, 100))
    large, swarm, job = transitions(10_000, n)
    rows.append(("bare pygit2 blob+tree+commit+ref", f"{base * 1e3:.3f} ms", "1.00x", "baseline"))
    rows.append(("transition, 100-task job", f"{small * 1e3:.3f} ms", f"{small / base:.2f}x", "<= 3x baseline"))
    rows.append(("transition, 10,000-task job", f"{large * 1e3:.3f} ms", f"{large / base:.2f}x", "<= 3x baseline"))
    rows.append(("flatness 10,000 vs 100", "", f"{large / small:.2f}x", "<= 1.5x"))
    exe = str(Path(sys.executable).with_name("gitswarm"))
    spawn = wall([sys.executable, "-c", "pass"], swarm.repo.workdir)
    status = wall([exe, "--json", "status", job], swarm.repo.workdir)
    version = wall([exe, "--version"], swarm.repo.workdir)
    rows.append(("python -c pass (spawn baseline)", f"{spawn * 1e3:.0f} ms", "1.00x", ""))
    rows.append(("gitswarm --json status JOB (10,000 tasks)", f"{status * 1e3:.0f} ms", f"{status / spawn:.2f}x", "< 300 ms"))
    rows.append(("gitswarm --version", f"{version * 1e3:.0f} ms", f"{version / spawn:.2f}x", "< 150 ms"))
    jobs, per = (20, 100) if QUICK else (100, 100)
    rows.append((f"index rebuild {jobs} jobs x {per} tasks", f"{rebuild(jobs, per) * 1e3:.0f} ms", "", "< 3000 ms"))
    print_table(("measure", "value", "ratio", "target"), rows)


if __name__ == "__main__":
    main()
