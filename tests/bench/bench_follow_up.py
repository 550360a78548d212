"""How soon `gitswarm follow-up` reaches the agent's start, on a repository of 10,000 files.

    python tests/bench/bench_follow_up.py [--quick]

A delegation is run once to the end; then each round times `gitswarm follow-up
JOB/TASK INSTRUCTION` from the moment the command is started to the first
statement of the agent's process (it writes the time as it starts): the CLI's
start-up, the `followed_up` op, the supervisor and its worker, the claim, the
prompt packet (with the follow-up section), the worktree reset to the
continued head, the integrity snapshot. The target is 500 ms.
Baselines measured in the same run: `git worktree add` of the same tree (one
fresh checkout on this disk), `gitswarm --version` and `python -c pass` (the
start-up floors of a CLI call and of the agent's interpreter).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchlib import isolate, print_table, scratch_dir

from gitswarm.store.gitcli import IDENTITY, git

QUICK = "--quick" in sys.argv
FILES = 2_000 if QUICK else 10_000
RUNS = 3 if QUICK else 7
TARGET_MS = 500
GITSWARM = str(Path(sys.executable).with_name("gitswarm"))
AGENT = """
import sys, time
start = time.time()
from pathlib import Path
Path({stamps!r}).open("a").write(f"{{start}}\\n")
from gitswarm.scripted_agent import main
sys.exit(main(sys.argv[1:]))
"""


def big_repo(files: int) -> tuple[Path, Path]:
    path = Path(scratch_dir("bench-followup-"))
    control = Path(scratch_dir("bench-followup-agent-"))
    git(["init", "-q", "-b", "main"], path)
    git(["config", "gc.auto", "0"], path)
    for i in range(files):
        directory = path / f"d{i % 100:02d}"
        directory.mkdir(exist_ok=True)
        (directory / f"f{i:05d}.txt").write_text(f"file {i}\n" * 5)
    (control / "agent.py").write_text(AGENT.format(stamps=str(control / "stamps")))
    spec = f'executable = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(control / "agent.py"))}, "{{prompt}}"]\n'
    (path / ".gitswarm" / "adapters").mkdir(parents=True)
    (path / ".gitswarm" / "adapters" / "timed.toml").write_text(spec)
    git(["add", "-A"], path)
    git(["commit", "-q", "-m", "many files"], path, env=IDENTITY)
    return path, control


def stamps(control: Path) -> list[float]:
    path = control / "stamps"
    return [float(line) for line in path.read_text().split()] if path.exists() else []


def timed(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    isolate()
    repo, control = big_repo(FILES)
    (repo / "job.toml").write_text(
        'goal = "bench"\n[[tasks]]\nid = "fix"\nmode = "implement"\nadapter = "timed"\nprompt = "write first.txt: one"\n'
    )
    done = subprocess.run([GITSWARM, "--json", "run", "job.toml", "-j", "1"], cwd=repo, check=True, capture_output=True, text=True)
    job = json.loads(done.stdout)["id"]
    latencies, walls = [], []
    for n in range(RUNS):
        before = len(stamps(control))
        start = time.time()
        t0 = time.perf_counter()
        subprocess.run(
            [GITSWARM, "--json", "follow-up", f"{job}/fix", f"write more{n}.txt: {n}"], cwd=repo, check=True, capture_output=True
        )
        walls.append(time.perf_counter() - t0)
        started = stamps(control)[before]
        latencies.append(started - start)
    scratch = Path(scratch_dir("bench-followup-wt-"))
    adds = [timed(["git", "worktree", "add", "-q", "--detach", str(scratch / f"wt{n}"), "HEAD"], repo) for n in range(3)]
    versions = [timed([GITSWARM, "--version"], repo) for _ in range(5)]
    pythons = [timed([sys.executable, "-c", "pass"], repo) for _ in range(5)]

    def ms(values: list[float]) -> tuple[str, str]:
        return f"{statistics.median(values) * 1000:.0f}", f"{min(values) * 1000:.0f}"

    print(f"gitswarm follow-up on a repository of {FILES:,} files, {RUNS} rounds (target: agent start within {TARGET_MS} ms)\n")
    rows = [
        ["follow-up: command to agent start", *ms(latencies)],
        ["follow-up: whole command (agent, capture, patch)", *ms(walls)],
        ["baseline: git worktree add (fresh checkout)", *ms(adds)],
        ["baseline: gitswarm --version", *ms(versions)],
        ["baseline: python -c pass", *ms(pythons)],
    ]
    print_table(["what", "median ms", "best ms"], rows)
    verdict = "met" if statistics.median(latencies) * 1000 <= TARGET_MS else "MISSED"
    print(f"\ntarget {verdict}: median {statistics.median(latencies) * 1000:.0f} ms to the agent's start")


if __name__ == "__main__":
    main()
