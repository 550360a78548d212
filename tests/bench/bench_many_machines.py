"""Many machines, one swarm: throughput and the cost of one claim through a loopback git remote.

    python tests/bench/bench_many_machines.py [--tasks 120] [--sleep 1] [--claims 30]

A `git daemon` on 127.0.0.1 serves a bare repository; three clones with
homes of their own are the machines. Figures:
- throughput: TASKS tasks of `sleep SLEEP` worked by `gitswarm work --remote`
  on 3 machines x 2 workers; wall time against the ideal (tasks x sleep / 6),
  target within 1.4x; every task must have run exactly once;
- one claim (pick, commit, push, adopt) against a bare `git push` of one new
  commit to one ref of the same remote, both medians in the same run, target
  within 2x.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench.benchlib import isolate, print_table, scratch_dir
from tests.netremote import GitDaemon

MACHINES = 3
WORKERS = 2


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout


def machine_env(root: Path, name: str) -> dict[str, str]:
    """A machine's own home and git config (the clone's actor, worktrees and logs are its own)."""
    home = root / f"home-{name}"
    home.mkdir()
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
    return {**os.environ, "HOME": str(home), "XDG_STATE_HOME": str(home / ".state"), "GIT_CONFIG_GLOBAL": str(home / ".gitconfig")}


def setup(root: Path) -> tuple[GitDaemon, list[tuple[Path, dict[str, str]]]]:
    daemon = GitDaemon(root, dict(os.environ))
    daemon.start()
    seed = root / "seed"
    seed.mkdir()
    git(seed, "init", "-q", "-b", "main")
    (seed / "README.md").write_text("many machines\n")
    git(seed, "add", "-A")
    git(seed, "commit", "-qm", "init")
    git(seed, "push", "-q", daemon.url, "main")
    machines = []
    for i in range(MACHINES):
        env = machine_env(root, f"m{i}")
        git(root, "clone", "-q", daemon.url, str(root / f"m{i}"), env=env)
        machines.append((root / f"m{i}", env))
    return daemon, machines


def gitswarm(cwd: Path, env: dict[str, str], *args: str) -> str:
    return subprocess.run([sys.executable, "-m", "gitswarm", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def throughput(root: Path, machines: list[tuple[Path, dict[str, str]]], tasks: int, sleep: float) -> tuple[float, int, int]:
    log = root / "ran.log"
    body = "".join(f'[[tasks]]\nid = "t{i:04d}"\ncommand = "sleep {sleep}; echo t{i:04d} >> {log}"\n' for i in range(tasks))
    spec = root / "throughput.toml"
    spec.write_text(f'goal = "throughput"\n{body}')
    first, env = machines[0]
    job = gitswarm(first, env, "--json", "submit", "--remote", "origin", str(spec)).split('"id":"')[1].split('"')[0]
    started = time.monotonic()
    running = [
        subprocess.Popen(
            [sys.executable, "-m", "gitswarm", "--json", "work", "--remote", "origin", "--trust", "origin", "--job", job, "-j", str(WORKERS)],
            cwd=path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        for path, env in machines
    ]
    codes = [p.wait() for p in running]
    wall = time.monotonic() - started
    if any(codes):
        raise SystemExit(f"a machine failed: exit codes {codes}")
    ran = log.read_text().split()
    return wall, len(ran), len(set(ran))


def bare_push_seconds(path: Path, env: dict[str, str], rounds: int) -> list[float]:
    """A bare `git push` of one new commit (a fast-forward) to one ref: the baseline."""
    times = []
    parent = git(path, "rev-parse", "HEAD", env=env).strip()
    tree = git(path, "rev-parse", "HEAD^{tree}", env=env).strip()
    for i in range(rounds):
        commit = git(path, "commit-tree", tree, "-p", parent, "-m", f"bench {i}", env=env).strip()
        started = time.perf_counter()
        git(path, "push", "-q", "origin", f"{commit}:refs/heads/bench-baseline", env=env)
        times.append(time.perf_counter() - started)
        parent = commit
    return times


def claim_seconds(path: Path, env: dict[str, str], rounds: int) -> list[float]:
    """One claim through the remote, in-process: pick, build the commit, push it, adopt it."""
    os.environ.update(env)
    from gitswarm.engine.machines.arbiter import Arbiter
    from gitswarm.engine.machines.remote_leases import RemoteLedger
    from gitswarm.engine.swarm import Swarm

    spec = path / "claims.toml"
    spec.write_text('goal = "claims"\n' + "".join(f'[[tasks]]\nid = "c{i:03d}"\ncommand = "true"\n' for i in range(rounds)))
    os.chdir(path)
    swarm = Swarm(path)
    job = swarm.submit_file(spec)
    arbiter = Arbiter(swarm, "origin")
    arbiter.publish([job])
    ledger = RemoteLedger(swarm.ledger, arbiter)
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        lease = ledger.claim("bench.w-1", 30.0, swarm.clock(), job_id=job)
        times.append(time.perf_counter() - started)
        assert lease is not None
    swarm.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=120)
    parser.add_argument("--sleep", type=float, default=1.0)
    parser.add_argument("--claims", type=int, default=30)
    args = parser.parse_args()
    isolate()
    root = Path(scratch_dir("bench-many-"))
    daemon, machines = setup(root)
    try:
        pushes = bare_push_seconds(*machines[2], args.claims)
        claims = claim_seconds(*machines[2], args.claims)
        wall, ran, distinct = throughput(root, machines, args.tasks, args.sleep)
    finally:
        daemon.stop()
    ideal = args.tasks * args.sleep / (MACHINES * WORKERS)
    push, claim = statistics.median(pushes), statistics.median(claims)
    print_table(
        ("figure", "value", "baseline", "ratio", "target"),
        [
            (f"{args.tasks} x sleep {args.sleep:g} on {MACHINES}x{WORKERS}", f"{wall:.1f} s", f"ideal {ideal:.1f} s", f"{wall / ideal:.2f}x", "<= 1.40x"),
            ("commands run / distinct tasks", f"{ran} / {distinct}", f"{args.tasks}", "", "each once"),
            ("one claim (median)", f"{claim * 1000:.0f} ms", f"git push {push * 1000:.0f} ms", f"{claim / push:.2f}x", "<= 2.00x"),
            ("one claim (max)", f"{max(claims) * 1000:.0f} ms", f"git push max {max(pushes) * 1000:.0f} ms", "", ""),
        ],
    )


if __name__ == "__main__":
    main()
