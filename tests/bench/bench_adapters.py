"""The adapter runtime's own cost per run, beyond the agent process itself.

    python tests/bench/bench_adapters.py [--quick]

A stand-in agent (a shell script printing a Claude Code style JSON result)
is run through the shipped claude-code spec: spec load, allow-listed
environment, ephemeral home with linked files, prompt/schema files, the
process run, result parsing (answer, cost, tokens, findings), cleanup.
The baseline spawns the same script with the same argv through plain
subprocess in the same run, interleaved; the difference is the overhead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchlib import isolate, print_table, scratch_dir

from gitswarm.adapters.agent import AgentAdapter
from gitswarm.adapters.agentspec import load_spec
from gitswarm.adapters.base import RunContext, execute
from gitswarm.adapters.isolation import remove_scratch
from gitswarm.adapters.process import run_process
from gitswarm.model.artifacts import BlobRef
from gitswarm.model.records import TaskSpec

QUICK = "--quick" in sys.argv
RUNS = 60 if QUICK else 300
SHIPPED = Path(__file__).resolve().parents[2] / "adapters" / "claude-code.toml"
RESULT = {
    "type": "result", "subtype": "success", "is_error": False, "num_turns": 2, "session_id": "s-1",
    "result": json.dumps({"findings": [{"title": "t", "body": "b", "confidence": 0.8, "severity": "low"}], "decisions": []}),
    "total_cost_usd": 0.0123, "usage": {"input_tokens": 1200, "output_tokens": 80}, "permission_denials": [],
}


def main() -> None:
    isolate()
    root = Path(scratch_dir("bench-adapters-"))
    home = Path(os.environ["HOME"])
    (home / ".claude").mkdir()
    (home / ".claude" / ".credentials.json").write_text("{}")
    (home / ".claude.json").write_text("{}")
    agent = root / "claude"
    agent.write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(RESULT)}\nEOF\n")
    agent.chmod(0o755)
    spec_path = root / "claude-code.toml"
    spec_path.write_text(SHIPPED.read_text().replace('executable = "claude"', f"executable = {json.dumps(str(agent))}"))
    task = TaskSpec(id="t", seq=0, adapter="claude-code", prompt="review calc.py", timeout=60)
    ctx = RunContext(job="j", task="t", attempt=1, workdir=root, base_env=os.environ, prompt="review calc.py\n" * 50)
    store = lambda data, dropped: BlobRef(oid="0" * 40, size=len(data) + dropped)  # noqa: E731 - no repository needed

    adapter = AgentAdapter("claude-code", load_spec(spec_path))
    argv = adapter.invocation(task, ctx).argv  # the same argv for the baseline

    def baseline_once() -> float:
        start = time.perf_counter()
        subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, cwd=root, check=True)
        return time.perf_counter() - start

    def gitswarm_once() -> float:
        start = time.perf_counter()
        loaded = AgentAdapter("claude-code", load_spec(spec_path))  # a worker loads the spec per task
        outcome = execute(loaded, task, ctx, lambda inv: run_process(inv.argv, cwd=inv.cwd, env=inv.env, stdin=inv.stdin, timeout=inv.timeout), store, time.time)
        assert outcome.ok and len(outcome.artifacts) == 2, outcome
        return time.perf_counter() - start

    def parts_once() -> tuple[float, float, float]:
        t0 = time.perf_counter()
        loaded = AgentAdapter("claude-code", load_spec(spec_path))
        t1 = time.perf_counter()
        invocation = loaded.invocation(task, ctx)
        t2 = time.perf_counter()
        result = run_process(invocation.argv, cwd=invocation.cwd, env=invocation.env, stdin=invocation.stdin, timeout=60)
        t3 = time.perf_counter()
        loaded.outcome(task, ctx, result, store, time.time(), invocation=invocation)
        remove_scratch(invocation.scratch)
        t4 = time.perf_counter()
        return t1 - t0, t2 - t1, t4 - t3

    for _ in range(10):  # warm up both paths
        baseline_once()
        gitswarm_once()
    base, ours = [], []
    for _ in range(RUNS):
        base.append(baseline_once())
        ours.append(gitswarm_once())
    base.sort()
    ours.sort()
    median_base, median_ours = base[len(base) // 2], ours[len(ours) // 2]
    load, invoke, outcome = zip(*(parts_once() for _ in range(30)))
    rows = [
        (f"plain subprocess spawn of the agent ({RUNS} runs, median)", f"{median_base * 1e3:.2f} ms", "baseline", ""),
        ("run through the claude-code spec (median)", f"{median_ours * 1e3:.2f} ms", f"{median_ours / median_base:.2f}x", ""),
        ("adapter runtime overhead per run", f"{(median_ours - median_base) * 1e3:.2f} ms", "", "< 20 ms"),
        ("  spec load (median)", f"{sorted(load)[15] * 1e3:.2f} ms", "", ""),
        ("  env + ephemeral home + files (median)", f"{sorted(invoke)[15] * 1e3:.2f} ms", "", ""),
        ("  result parsing + findings + cleanup (median)", f"{sorted(outcome)[15] * 1e3:.2f} ms", "", ""),
    ]
    print_table(("measure", "value", "ratio", "target"), rows)


if __name__ == "__main__":
    main()
