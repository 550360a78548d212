"""What the agents' sandbox costs per agent run (docs/sandbox.md), against the same run without it.

    python tests/bench/bench_sandbox.py [--quick]

One agent run, as a worker makes it: the adapter's invocation (the ephemeral
home, the bwrap command line), the process, and for a sandboxed run its
private git dir (made before, its head read after, removed). The agent is
`true`: the run is nothing but its start-up, so the difference is the
sandbox's own cost. Measured in the same run, on a repository of 2,000
files (the private git dir copies the worktree's index): the run with the
sandbox off, the run with it on, and the parts of the difference; and the
run with it on and `network = "endpoint"` (the proxy started and closed, the
network bridge ahead of the agent in the sandbox: adapters/endpoint.py).
Target: under 30 ms of sandbox start-up per agent run.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

from benchlib import isolate, print_table, scratch_dir

from gitswarm.adapters.agent import AgentAdapter
from gitswarm.adapters.agentspec import AgentSpec
from gitswarm.adapters.base import RunContext
from gitswarm.adapters.isolation import remove_scratch
from gitswarm.adapters.process import run_process
from gitswarm.adapters.sandbox import Decision, SandboxTable, decide, find_bwrap
from gitswarm.engine.delegation.confine import Confined
from gitswarm.model.records import TaskSpec
from gitswarm.store.gitcli import git
from gitswarm.store.worktrees import Worktrees

QUICK = "--quick" in sys.argv
FILES = 500 if QUICK else 2_000
RUNS = 10 if QUICK else 30
TARGET_MS = 30.0


def repository() -> tuple[Path, Path]:
    path = Path(scratch_dir("bench-sandbox-"))
    git(["init", "-q", "-b", "main"], path)
    for i in range(FILES):
        directory = path / f"d{i % 50:02d}"
        directory.mkdir(exist_ok=True)
        (directory / f"f{i:05d}.txt").write_text(f"file {i}\n")
    git(["add", "-A"], path)
    git(["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "files"], path)
    base = git(["rev-parse", "HEAD"], path).decode().strip()
    worktree = Worktrees(path, path / ".git", path.parent / (path.name + "-worktrees")).prepare("job", "task", base, reset=True)
    return path, worktree.path


def one_run(adapter: AgentAdapter, task: TaskSpec, ctx: RunContext, common: Path, decided: Decision | None) -> dict[str, float]:
    """One agent run; its parts in seconds: `git` (the private git dir, made and read back), `run` (invocation and process)."""
    times: dict[str, float] = {}
    start = time.perf_counter()
    confined = Confined(common, decided, ctx, ctx.workdir) if decided is not None else None
    times["git"] = time.perf_counter() - start
    start = time.perf_counter()
    invocation = adapter.invocation(task, confined.ctx if confined is not None else ctx)
    result = run_process(invocation.argv, cwd=invocation.cwd, env=invocation.env, timeout=30)
    if invocation.proxy is not None:
        invocation.proxy.close()
    remove_scratch(invocation.scratch)
    assert result.exit_code == 0, result.stderr.decode()
    times["run"] = time.perf_counter() - start
    start = time.perf_counter()
    if confined is not None:
        confined.bring_back()
        confined.close()
    times["git"] += time.perf_counter() - start
    return times


def main() -> None:
    isolate()
    bwrap, why = find_bwrap(os.environ.get("PATH"))
    if bwrap is None:
        print(f"no sandbox to measure here: {why}")
        return
    repo, worktree = repository()
    adapter = AgentAdapter("bench", AgentSpec(executable="true"))
    task = TaskSpec(id="task", seq=0, mode="implement", prompt="nothing", timeout=30)
    ctx = RunContext("job", "task", 1, worktree, os.environ)
    decided = decide(None, None, os.environ.get("PATH"), os.environ.get("HOME"))
    endpoint = decide(SandboxTable(network="endpoint", hosts=["127.0.0.1:9"]), None, os.environ.get("PATH"), os.environ.get("HOME"))
    off: list[dict[str, float]] = []
    on: list[dict[str, float]] = []
    proxied: list[dict[str, float]] = []
    for n in range(RUNS + 2):  # interleaved, so that all see the same machine; the first two warm up
        a = one_run(adapter, task, ctx, repo / ".git", None)
        b = one_run(adapter, task, ctx, repo / ".git", decided)
        c = one_run(adapter, task, ctx, repo / ".git", endpoint)
        if n >= 2:
            off.append(a)
            on.append(b)
            proxied.append(c)

    def ms(values: list[float]) -> str:
        return f"{statistics.median(values) * 1000:.1f}"

    total_off = [t["git"] + t["run"] for t in off]
    total_on = [t["git"] + t["run"] for t in on]
    total_proxied = [t["git"] + t["run"] for t in proxied]
    startup = statistics.median(total_on) - statistics.median(total_off)
    startup_proxied = statistics.median(total_proxied) - statistics.median(total_off)
    print(f"sandbox start-up per agent run ({FILES} files, {RUNS} runs each, medians in ms; agent: `true`)")
    print_table(
        ["run", "total", "private git dir", "invocation + process"],
        [
            ["sandbox off", ms(total_off), "-", ms([t["run"] for t in off])],
            ["sandbox on (bwrap)", ms(total_on), ms([t["git"] for t in on]), ms([t["run"] for t in on])],
            ["sandbox on, network endpoint", ms(total_proxied), ms([t["git"] for t in proxied]), ms([t["run"] for t in proxied])],
            ["start-up (on - off)", f"{startup * 1000:.1f}", "", ""],
            ["start-up (endpoint - off)", f"{startup_proxied * 1000:.1f}", "", ""],
        ],
    )
    for name, value in (("sandbox", startup), ("sandbox with network endpoint", startup_proxied)):
        print(f"target for the {name}: under {TARGET_MS:.0f} ms: {'met' if value * 1000 < TARGET_MS else 'NOT met'}")


if __name__ == "__main__":
    main()
