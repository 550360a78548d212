"""Delegation speed on a repository of 10,000 files: gitswarm's own time per delegation, and its parts.

    python tests/bench/bench_delegation.py [--quick]
    TMPDIR=/dev/shm python tests/bench/bench_delegation.py   # the same on tmpfs: no disk in the way

gitswarm's own time is a delegation's wall time (worktree, prompt, integrity
snapshots, capture, clean checkout for the checks, verdict, note) less the
time of the processes it runs for the agent and the checks. The agent here
sleeps AGENT_SECONDS, then appends a line to a file: gitswarm stocks its pool
of clean checkouts while an agent runs, which a real agent's minutes hide.
The first delegation finds no clean checkout to draw on (cold); the next
ones do (warm).
Baselines measured in the same run: `git worktree add` of the same tree
(what one fresh checkout costs on this disk), and `python -c pass` for the
start-up floor of a CLI call.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import isolate, print_table, scratch_dir

from gitswarm.adapters.base import Invocation, RunContext
from gitswarm.adapters.process import ProcessResult, run_process
from gitswarm.adapters.shell import ShellAdapter
from gitswarm.engine.delegation.attempt import Delegation
from gitswarm.engine.delegation.integrity import Watch, snapshot, violations
from gitswarm.model.artifacts import BlobRef
from gitswarm.model.ids import new_id
from gitswarm.model.records import TaskSpec
from gitswarm.store.checkouts import Checkouts
from gitswarm.store.git import open_repo
from gitswarm.store.gitcli import IDENTITY, git
from gitswarm.store.worktrees import Worktrees

QUICK = "--quick" in sys.argv
FILES = 2_000 if QUICK else 10_000
RUNS = 3 if QUICK else 5
AGENT_SECONDS = 1.0 if QUICK else 3.0  # a real agent takes minutes; the pool is stocked meanwhile
TARGET_MS = 500  # gitswarm's own time per delegation


def big_repo(files: int) -> Path:
    path = Path(scratch_dir("bench-deleg-"))
    git(["init", "-q", "-b", "main"], path)
    git(["config", "gc.auto", "0"], path)  # no repack of the 10,000 loose objects in the background, in the timings
    for i in range(files):
        directory = path / f"d{i % 100:02d}"
        directory.mkdir(exist_ok=True)
        (directory / f"f{i:05d}.txt").write_text(f"file {i}\n" * 5)
    (path / "big.txt").write_text("".join(f"line {i}\n" for i in range(1000)))
    git(["add", "-A"], path)
    git(["commit", "-q", "-m", "many files"], path, env=IDENTITY)
    return path


def best(values: list[float]) -> float:
    """Best of N: I/O-bound timings here are noisy upward, never downward."""
    return min(values)


class TimedRunner:
    """Runs the agent's and the checks' processes, adding up how long they took."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self, invocation: Invocation) -> ProcessResult:
        start = time.perf_counter()
        try:
            return run_process(invocation.argv, cwd=invocation.cwd, env=invocation.env, stdin=invocation.stdin, timeout=invocation.timeout)
        finally:
            self.seconds += time.perf_counter() - start


def delegation_overhead(repo: Path, trees: Worktrees, base: str, n: int) -> tuple[float, float]:
    """One delegation in-process (a shell 'agent' that edits one file, one check): (wall, gitswarm's own) seconds."""
    git_repo = open_repo(repo)

    def store(data: bytes, dropped: int) -> BlobRef:
        return BlobRef(oid=git_repo.write_blob(data), size=len(data) + dropped, truncated=dropped)

    agent = f"sleep {AGENT_SECONDS}; echo change {n} >> big.txt"
    spec = TaskSpec(id="task", seq=0, mode="implement", command=agent, checks=("true",), repair_rounds=0)
    ctx = RunContext(new_id(), "task", 1, repo, dict(os.environ))
    runner = TimedRunner()
    start = time.perf_counter()
    outcome = Delegation(git_repo, trees, store, time.time).run(ShellAdapter(), ctx, base, spec, runner, lambda: False)
    wall = time.perf_counter() - start
    assert outcome.ok, outcome.error
    return wall, wall - runner.seconds


def main() -> None:
    isolate()
    repo = big_repo(FILES)
    base = git(["rev-parse", "HEAD"], repo).decode().strip()
    trees = Worktrees(repo, repo / ".git")  # the default root: the state directory of the isolated home
    plain, ours = [], []
    elsewhere = Path(scratch_dir("bench-deleg-plain-"))  # removed at exit, as the repository is

    def run_plain(n: int) -> None:
        start = time.perf_counter()
        git(["worktree", "add", "-q", "-b", f"plain{n}", str(elsewhere / f"plain{n}"), base], repo)
        plain.append(time.perf_counter() - start)

    def run_ours(n: int) -> None:
        start = time.perf_counter()
        trees.prepare(f"job{n}", "task", base, reset=False)
        ours.append(time.perf_counter() - start)

    for n in range(RUNS):
        for step in (run_plain, run_ours) if n % 2 == 0 else (run_ours, run_plain):  # neither always goes first
            step(n)
    worktree = trees.prepare("job0", "task", base, reset=False)
    captures = []
    for n in range(RUNS):
        big = worktree.path / "big.txt"
        big.write_text("".join(f"line {i} changed {n}\n" for i in range(1000)))
        start = time.perf_counter()
        captured = trees.capture(worktree, f"bench capture {n}\n")
        captures.append(time.perf_counter() - start)
    assert captured.files and captured.files[0].added == 1000

    # The integrity watch around one agent run: two snapshots and their comparison.
    watch = Watch(repo, repo / ".git", worktree.path, trees.root)
    watches = []
    for _ in range(RUNS):
        start = time.perf_counter()
        assert not violations(watch, snapshot(watch, time.time()), snapshot(watch, time.time()))
        watches.append(time.perf_counter() - start)

    # A clean checkout for the checks: made afresh (the pool empty), then reused at another commit.
    pool = Checkouts(repo, trees.root)
    start = time.perf_counter()
    checkout = pool.take(base)
    fresh_checkout = time.perf_counter() - start
    pool.give_back(checkout)
    reused = []
    for n in range(RUNS):
        start = time.perf_counter()
        checkout = pool.take(captured.head if n % 2 == 0 else base)
        reused.append(time.perf_counter() - start)
        pool.give_back(checkout)
    pool.stock(base)
    start = time.perf_counter()
    trees.prepare("adopting", "task", base, reset=False)
    adopted = time.perf_counter() - start
    pool.clear()

    # Whole delegations: the first with an empty pool, then warm.
    cold_wall, cold_own = delegation_overhead(repo, trees, base, 0)
    warm = [delegation_overhead(repo, trees, base, n) for n in range(1, RUNS + 1)]
    warm_own = statistics.median(own for _, own in warm)
    warm_wall = statistics.median(wall for wall, _ in warm)

    # Merge wall time through the CLI: delegate a one-line change with a check, then merge it (fast-forward).
    (repo / ".gitswarm" / "adapters").mkdir(parents=True)
    (repo / ".gitswarm" / "adapters" / "scripted.toml").write_text(
        f'executable = {json.dumps(sys.executable)}\nargs = ["-m", "gitswarm.scripted_agent", "{{prompt}}"]\n'
    )
    (repo / ".gitignore").write_text(".gitswarm/\n")
    git(["add", ".gitignore"], repo)
    git(["commit", "-q", "-m", "ignore"], repo, env=IDENTITY)
    exe = str(Path(sys.executable).with_name("gitswarm"))
    merges, spawn, delegates = [], [], []
    for n in range(RUNS):
        start = time.perf_counter()
        done = subprocess.run(
            [exe, "--json", "delegate", f"write note{n}.txt: hello", "--adapter", "scripted", "--check", "true"],
            cwd=repo, capture_output=True, text=True,
        )
        delegates.append(time.perf_counter() - start)
        assert done.returncode == 0, done.stderr
        patch = next(a["id"] for a in json.loads(done.stdout)["artifacts"] if a["kind"] == "patch")
        start = time.perf_counter()
        subprocess.run([exe, "merge", patch, "--no-recheck"], cwd=repo, check=True, capture_output=True)
        merges.append(time.perf_counter() - start)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        spawn.append(time.perf_counter() - start)

    add = best(plain)
    ms = lambda seconds: f"{seconds * 1e3:.0f} ms"  # noqa: E731
    print(f"{FILES:,} files in {tempfile.gettempdir()}; worktree root {trees.root}")
    rows = [
        (f"git worktree add, {FILES:,} files (best of {RUNS})", ms(add), "1.00x", "baseline"),
        (f"delegation worktree (prepare, fresh), best of {RUNS}", ms(best(ours)), f"{best(ours) / add:.2f}x", "<= 1.3x"),
        ("delegation worktree (prepare, an idle clean checkout adopted)", ms(adopted), f"{adopted / add:.2f}x", ""),
        ("capture + patch of a 1,000-line change (median)", ms(statistics.median(captures)), f"{statistics.median(captures) / add:.2f}x", "< 200 ms"),
        ("integrity watch: 2 snapshots + compare (median)", ms(statistics.median(watches)), f"{statistics.median(watches) / add:.2f}x", ""),
        ("clean checkout for checks, made afresh", ms(fresh_checkout), f"{fresh_checkout / add:.2f}x", ""),
        ("clean checkout for checks, reused (median)", ms(statistics.median(reused)), f"{statistics.median(reused) / add:.2f}x", ""),
        ("delegation, gitswarm's own time, cold pool (a fresh worktree)", ms(cold_own), f"{cold_own / add:.2f}x", ""),
        (f"delegation, gitswarm's own time, warm (median of {RUNS})", ms(warm_own), f"{warm_own / add:.2f}x", f"< {TARGET_MS} ms"),
        (f"delegation wall, warm, in-process (agent {AGENT_SECONDS:.0f} s and check included)", ms(warm_wall), "", ""),
        ("delegation wall, cold, in-process", ms(cold_wall), "", ""),
        ("gitswarm delegate, CLI wall (median)", ms(statistics.median(delegates)), "", ""),
        ("python -c pass (start-up floor)", ms(statistics.median(spawn)), "", ""),
        ("gitswarm merge (verified, --no-recheck), CLI", ms(statistics.median(merges)), f"{statistics.median(merges) / statistics.median(spawn):.1f}x", "< 300 ms"),
    ]
    print_table(("measure", "value", "ratio", "target"), rows)


if __name__ == "__main__":
    main()
