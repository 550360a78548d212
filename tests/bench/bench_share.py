"""Sharing speed: pull-and-merge of diverged jobs, and push of many jobs against plain git.

    python tests/bench/bench_share.py [--quick]

Pull: clones A and B share JOBS jobs through a bare remote; then each side
makes OPS/2 operations on every job (claim + finish of shell tasks) and A
pushes. B's `gitswarm pull` fetches and merges every job (op-log replay);
the baseline is a plain `git fetch` of the same refs into a third clone.

Push: a clone with PUSH_JOBS jobs pushes them to an empty bare repository
with `gitswarm push`, against `git push` of the same refs from an identical
copy to another empty bare repository; best of 3, interleaved.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchlib import isolate, print_table, scratch_dir

from gitswarm.engine.swarm import Swarm

QUICK = "--quick" in sys.argv
JOBS, OPS = (20, 40) if QUICK else (100, 100)
PUSH_JOBS = 200 if QUICK else 1000
GITSWARM = str(Path(sys.executable).with_name("gitswarm"))


def sh(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(args, cwd=cwd, check=True, capture_output=True, text=True).stdout


def clone_pair(root: Path) -> tuple[Path, Path, Path]:
    bare = root / "remote.git"
    sh("git", "init", "-q", "--bare", str(bare))
    clones = []
    for name in ("a", "b"):
        path = root / name
        sh("git", "init", "-q", str(path))
        sh("git", "commit", "-q", "--allow-empty", "-m", "init", cwd=path)
        sh("git", "remote", "add", "origin", str(bare), cwd=path)
        clones.append(path)
    return bare, clones[0], clones[1]


def spec(tasks: int) -> str:
    return 'goal = "bench"\n' + "".join(f'[[tasks]]\nid = "t{i:03d}"\ncommand = "true"\n' for i in range(tasks))


def work_ops(path: Path, jobs: list[str], pairs: int, now: float) -> None:
    """`pairs` claim+finish pairs on every job (2 operations each), straight through the ledger."""
    swarm = Swarm(path)
    for job in jobs:
        for _ in range(pairs):
            lease = swarm.ledger.claim("bench", 3600, now, job_id=job)
            assert lease is not None
            swarm.ledger.finish(lease, True, now + 1)
    swarm.close()


def bench_pull(root: Path) -> tuple[float, float, int]:
    bare, a, b = clone_pair(root)
    swarm = Swarm(a)
    jobs = [swarm.submit_text(spec(OPS)) for _ in range(JOBS)]
    swarm.close()
    sh(GITSWARM, "push", cwd=a)
    sh(GITSWARM, "pull", cwd=b)
    for job in jobs:
        sh(GITSWARM, "approve", job, cwd=b)
    now = time.time()
    work_ops(a, jobs, OPS // 4, now)  # OPS/2 operations per job on each side
    work_ops(b, jobs, OPS // 4, now + 5)
    sh(GITSWARM, "push", cwd=a)
    third = root / "c"
    sh("git", "init", "-q", str(third))
    start = time.perf_counter()
    sh("git", "fetch", "-q", str(bare), "+refs/swarm/jobs/*:refs/shadow/jobs/*", cwd=third)
    fetch = time.perf_counter() - start
    start = time.perf_counter()
    out = sh(GITSWARM, "--json", "pull", cwd=b)
    pull = time.perf_counter() - start
    merged = len(json.loads(out)["merged"])
    return pull, fetch, merged


def bench_push(root: Path) -> tuple[float, float]:
    source = root / "source"
    sh("git", "init", "-q", str(source))
    sh("git", "commit", "-q", "--allow-empty", "-m", "init", cwd=source)
    swarm = Swarm(source)
    for _ in range(PUSH_JOBS):
        swarm.submit_text(spec(2))
    swarm.close()
    copy = root / "copy"
    shutil.copytree(source, copy)
    ours, theirs = [], []
    for round_ in range(3):
        for kind in ("gitswarm", "git"):
            bare = root / f"{kind}-{round_}.git"
            sh("git", "init", "-q", "--bare", str(bare))
            start = time.perf_counter()
            if kind == "gitswarm":
                sh(GITSWARM, "push", str(bare), cwd=source)
                ours.append(time.perf_counter() - start)
            else:
                sh("git", "push", "-q", "--atomic", str(bare), "refs/swarm/jobs/*:refs/swarm/jobs/*", cwd=copy)
                theirs.append(time.perf_counter() - start)
    return min(ours), min(theirs)


def main() -> None:
    isolate()
    root = Path(scratch_dir("bench-share-"))
    pull, fetch, merged = bench_pull(root / "pull")
    push, plain = bench_push(root / "push")
    rows = [
        (f"git fetch of {JOBS} job refs (baseline)", f"{fetch:.3f} s", "baseline", ""),
        (f"gitswarm pull: fetch + merge {JOBS} jobs x {OPS} diverged ops ({merged} merged)", f"{pull:.3f} s", f"{pull / fetch:.1f}x", "< 2 s"),
        (f"git push of {PUSH_JOBS} job refs (best of 3)", f"{plain:.3f} s", "baseline", ""),
        (f"gitswarm push of {PUSH_JOBS} jobs (best of 3, start-up included)", f"{push:.3f} s", f"{push / plain:.2f}x", "<= 2x"),
    ]
    print_table(("measure", "value", "ratio", "target"), rows)


if __name__ == "__main__":
    main()
