"""The MCP server's speed: ready after spawn, `status` of a 1,000-task job, and how soon `wait` wakes.

    python tests/bench/bench_mcp.py [--runs N]

Targets (issue 12): tools/list answered under 1 s after spawn; `status` of a
1,000-task job p50 under 20 ms and p99 under 60 ms in a running server;
`wait` returns within 250 ms of the change. Baselines from the same run:
spawning `python -c pass`, importing the SDK alone, the same status read
in-process (no protocol), and the wait's poll interval.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from gitswarm.engine.swarm import Swarm
from gitswarm.pilot import actions, watch
from tests.bench.benchlib import isolate, print_table, scratch_dir
from tests.pilot.mcpclient import Session
from tests.pilot.rawclient import RawClient


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds >= 0.01 else f"{seconds * 1000:.1f} ms"


def spawn(args: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(args, check=True, capture_output=True)
    return time.perf_counter() - started


def ready_after_spawn(repo: Path) -> float:
    """Seconds from spawning `gitswarm mcp` to the answer of tools/list (initialize included)."""

    async def once() -> float:
        started = time.perf_counter()
        params = StdioServerParameters(command=sys.executable, args=["-m", "gitswarm", "mcp"], cwd=str(repo))
        async with Client(params) as client:
            await client.list_tools()
            return time.perf_counter() - started

    return asyncio.run(once())


def make_repo() -> Path:
    repo = Path(scratch_dir("bench-mcp-")) / "repo"
    repo.mkdir()
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "start"]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    return repo


def big_job(repo: Path, tasks: int) -> str:
    spec = 'goal = "many"\n' + "".join(f'[[tasks]]\nid = "t{n}"\ncommand = "true"\n' for n in range(tasks))
    swarm = Swarm(repo)
    try:
        return swarm.submit_text(spec)
    finally:
        swarm.close()


def wake_latency(session: Session, repo: Path, job: str, task: str) -> float:
    """Seconds from a change to a job's ref (a cancel, made here) to the return of a waiting `wait`."""
    returned: list[float] = []

    def waiter() -> None:
        session.call("wait", {"target": f"{job}/{task}", "timeout": 30})
        returned.append(time.perf_counter())

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.5)  # the wait is under way
    swarm = Swarm(repo)
    try:
        swarm.cancel(f"{job}/{task}")
        changed = time.perf_counter()
    finally:
        swarm.close()
    thread.join(60)
    return returned[0] - changed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--calls", type=int, default=300)
    options = parser.parse_args()
    isolate()
    repo = make_repo()
    job = big_job(repo, 1000)

    pass_spawn = statistics.median(spawn([sys.executable, "-c", "pass"]) for _ in range(options.runs))
    sdk_import = statistics.median(
        spawn([sys.executable, "-c", "import mcp.server.mcpserver, mcp.server.stdio"]) for _ in range(options.runs)
    )
    ready = [ready_after_spawn(repo) for _ in range(options.runs)]

    in_process = []
    for _ in range(options.calls // 3):
        started = time.perf_counter()
        actions.status(repo, job)
        in_process.append(time.perf_counter() - started)
    raw = RawClient(repo)
    # The measuring client parses each 500 KB answer: its own collector's full passes over this
    # process (the SDK and gitswarm imported) would otherwise show up as the server's tail.
    gc.collect()
    gc.freeze()
    try:
        through_raw = []
        for _ in range(options.calls):
            started = time.perf_counter()
            answer = raw.request("tools/call", {"name": "status", "arguments": {"job": job}})
            through_raw.append(time.perf_counter() - started)
            assert len(answer["result"]["structuredContent"]["tasks"]) == 1000
    finally:
        raw.close()
    session = Session(repo)
    try:
        through_mcp = []
        for _ in range(options.calls):
            started = time.perf_counter()
            result = session.call("status", {"job": job})
            through_mcp.append(time.perf_counter() - started)
            assert len(result.data["tasks"]) == 1000
        wakes = [wake_latency(session, repo, job, f"t{n}") for n in range(options.runs * 2)]
    finally:
        session.close()

    def p(values: list[float], q: int) -> float:
        return statistics.quantiles(values, n=100, method="inclusive")[q - 1]

    rows = [
        ("spawn python -c pass", ms(pass_spawn), "", "baseline"),
        ("spawn + import the MCP SDK (the server was built on it before)", ms(sdk_import), f"{sdk_import / pass_spawn:.1f}x", ""),
        ("gitswarm mcp: spawn to tools/list (median)", ms(statistics.median(ready)), f"{statistics.median(ready) / pass_spawn:.1f}x python -c pass", "< 1000 ms"),
        ("gitswarm mcp: spawn to tools/list (max)", ms(max(ready)), "", "< 1000 ms"),
        ("status of 1,000 tasks in-process p50", ms(statistics.median(in_process)), "", "baseline"),
        ("status of 1,000 tasks, server via raw JSON-RPC p50", ms(statistics.median(through_raw)), f"{statistics.median(through_raw) / statistics.median(in_process):.1f}x in-process", "< 20 ms"),
        ("status of 1,000 tasks, server via raw JSON-RPC p99", ms(p(through_raw, 99)), "", "< 60 ms"),
        ("status of 1,000 tasks via the SDK's client p50", ms(statistics.median(through_mcp)), f"{statistics.median(through_mcp) / statistics.median(in_process):.1f}x in-process", ""),
        ("status of 1,000 tasks via the SDK's client p99", ms(p(through_mcp, 99)), "", ""),
        ("wait: change to return p50", ms(statistics.median(wakes)), f"poll {ms(watch.POLL_SECONDS)}", "< 250 ms"),
        ("wait: change to return max", ms(max(wakes)), "", "< 250 ms"),
    ]
    print(f"{options.runs} spawns, {options.calls} status calls, {len(wakes)} waits; one server, one client, this machine")
    print_table(("what", "time", "ratio", "target"), rows)


if __name__ == "__main__":
    main()
