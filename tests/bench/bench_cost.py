"""`gitswarm cost` over many jobs: wall time of the command, against its baselines.

    python tests/bench/bench_cost.py [--jobs 1000] [--runs 10]

Target (issue 16): over 1,000 jobs with 10 runs each, under 500 ms wall.
Baselines from the same run: `python -c pass`, `gitswarm --version`, and
reading every run artifact's blob with raw pygit2 (no decoding, no sums).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pygit2

from gitswarm.engine.swarm import Swarm
from gitswarm.model.artifacts import Run
from tests.bench.benchlib import isolate, print_table, scratch_dir

ADAPTERS = ("claude-code", "codex", "gemini")
MODELS = ("claude-sonnet-4-5", "gpt-5.5", "gemini-2.5-pro")


def make_repo(jobs: int, runs: int) -> Path:
    repo = Path(scratch_dir("bench-cost-")) / "repo"
    repo.mkdir()
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "start"]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    swarm = Swarm(repo)
    try:
        for n in range(jobs):
            job = swarm.submit_text(f'goal = "job {n}"\n[[tasks]]\nid = "t"\ncommand = "true"\n')
            now = swarm.clock()
            records = [
                Run(job=job, task="t", attempt=1, created=now + k, adapter=ADAPTERS[k % 3], model=MODELS[k % 3],
                    exit_code=0, duration=1.0, cost_usd=None if k == 9 else 0.001 * (k + 1),
                    cost_estimated=k % 3 == 1, input_tokens=1000 + k, output_tokens=100 + k)
                for k in range(runs)
            ]
            swarm.ledger.record_artifacts(job, "t", records, now)
    finally:
        swarm.close()
    return repo


def timed(args: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(args, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - started


def raw_read(repo: Path) -> float:
    """Every artifact blob of every job's tip, read with pygit2 alone."""
    started = time.perf_counter()
    git = pygit2.Repository(str(repo))
    size = 0
    for ref in git.references.iterator():
        if not ref.name.startswith("refs/swarm/jobs/"):
            continue
        tree = git[ref.target].tree
        for fan in tree:
            if fan.name.startswith("artifacts."):
                for entry in git[fan.id]:
                    size += len(git[entry.id].data)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=7)
    options = parser.parse_args()
    isolate()
    started = time.perf_counter()
    repo = make_repo(options.jobs, options.runs)
    made = time.perf_counter() - started
    gitswarm = [sys.executable, "-m", "gitswarm"]
    rows = []
    baseline = statistics.median(timed([sys.executable, "-c", "pass"], repo) for _ in range(options.repeat))
    version = statistics.median(timed([*gitswarm, "--version"], repo) for _ in range(options.repeat))
    raw = statistics.median(raw_read(repo) for _ in range(options.repeat))
    cost = [timed([*gitswarm, "--json", "cost"], repo) for _ in range(options.repeat)]
    rows.append(("python -c pass", f"{baseline * 1000:.0f} ms", "baseline", ""))
    rows.append(("gitswarm --version", f"{version * 1000:.0f} ms", f"{version / baseline:.1f}x", ""))
    rows.append(("raw pygit2: read every artifact blob (in-process)", f"{raw * 1000:.0f} ms", "", ""))
    rows.append((f"gitswarm cost ({options.jobs} jobs x {options.runs} runs) median", f"{statistics.median(cost) * 1000:.0f} ms",
                 f"{statistics.median(cost) / baseline:.1f}x", "< 500 ms"))
    rows.append(("gitswarm cost max", f"{max(cost) * 1000:.0f} ms", "", "< 500 ms"))
    print(f"{options.jobs} jobs x {options.runs} runs made in {made:.0f} s; {options.repeat} runs each")
    print_table(("what", "wall", "ratio", "target"), rows)


if __name__ == "__main__":
    main()
