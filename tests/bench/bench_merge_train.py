"""`gitswarm merge JOB` of 10 verified patches on a repository of 10,000 files: gitswarm's own time.

    python tests/bench/bench_merge_train.py [--patches N] [--files N]

The job: N shell implement tasks, each editing its own file, each with one
check (`test -f <its file>`), run to the end (verified) before anything is
timed. The train then stacks the N patches on main (which moved since the
job's base, so that nothing fast-forwards: a merge per step), runs the checks
once on the stack, and moves main by one merge commit. Timed: the whole
`merge JOB` command (in-process, as `gitswarm` runs it), and, apart, one run
of the same checks in a clean checkout of the stack (what `merge JOB` waits
for anyway). Baseline in the same run: plain `git merge` of the same N
branches (an octopus merge in a fresh clone's worktree, no checks).
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

from benchlib import isolate, print_table, scratch_dir


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def make_repo(files: int) -> Path:
    repo = Path(scratch_dir("bench-train-")) / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for n in range(files):
        folder = repo / f"d{n // 500}"
        folder.mkdir(exist_ok=True)
        (folder / f"f{n}.txt").write_text(f"file {n}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "10,000 files")
    return repo


def spec(patches: int) -> str:
    tasks = "".join(
        f'[[tasks]]\nid = "t{n}"\nmode = "implement"\ncommand = "echo change {n} >> d{n}/f{n * 500}.txt"\n'
        f'checks = ["grep -q \'change {n}\' d{n}/f{n * 500}.txt"]\npaths = ["d{n}/f{n * 500}.txt"]\nmax_attempts = 1\n'
        for n in range(patches)
    )
    return 'goal = "bench the merge train"\n' + tasks


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--patches", type=int, default=10)
    parser.add_argument("--files", type=int, default=10_000)
    args = parser.parse_args()
    isolate()
    from gitswarm.cli.boundary import invoke  # after isolate(): the CLI reads the environment it sets

    repo = make_repo(args.files)
    spec_file = repo.parent / "spec.toml"
    spec_file.write_text(spec(args.patches))
    os.chdir(repo)
    started = time.perf_counter()
    with redirect_stdout(io.StringIO()):
        ran = invoke(["--json", "run", str(spec_file), "-j", "2"])
    if ran != 0:
        sys.exit("the job failed")
    setup = time.perf_counter() - started
    job = git(repo, "for-each-ref", "--format=%(refname:lstrip=3)", "refs/swarm/jobs").split()[0]
    (repo / "OTHER.md").write_text("main moved\n")
    git(repo, "add", "OTHER.md")
    git(repo, "commit", "-qm", "main moves on")
    old = git(repo, "rev-parse", "main").strip()

    # baseline: plain git merge of the same branches, in a fresh clone
    clone = repo.parent / "clone"
    git(repo.parent, "clone", "-q", "--no-local", str(repo), str(clone))
    git(clone, "fetch", "-q", "origin", "refs/heads/swarm/*:refs/remotes/origin/swarm/*")
    branches = [f"origin/swarm/{job}/t{n}" for n in range(args.patches)]
    t0 = time.perf_counter()
    git(clone, "merge", "-q", "--no-edit", *branches)
    plain = time.perf_counter() - t0

    # one run of the checks on a clean checkout of the stack (what the train runs once)
    stack = git(clone, "rev-parse", "HEAD").strip()
    git(repo, "fetch", "-q", str(clone), f"{stack}:refs/bench/stack")
    checkout = repo.parent / "checks-once"
    git(repo, "worktree", "add", "-q", "--detach", str(checkout), stack)
    t0 = time.perf_counter()
    for n in range(args.patches):
        subprocess.run(["sh", "-c", f"grep -q 'change {n}' d{n}/f{n * 500}.txt"], cwd=checkout, check=True)
    checks_once = time.perf_counter() - t0
    git(repo, "worktree", "remove", "--force", str(checkout))

    t0 = time.perf_counter()
    with redirect_stdout(io.StringIO()):
        code = invoke(["--json", "merge", job])
    train = time.perf_counter() - t0
    if code != 0:
        sys.exit(f"merge JOB exited {code}")
    new = git(repo, "rev-parse", "main").strip()
    parents = git(repo, "rev-list", "--parents", "-1", new).split()[1:]
    assert parents[0] == old and len(parents) == args.patches + 1, parents

    print()
    print(f"merge JOB of {args.patches} verified patches, {args.files:,} files (setup: the job ran in {setup:.1f} s)")
    print_table(
        ("what", "seconds"),
        [
            ("git merge of the same branches (baseline)", f"{plain:.3f}"),
            ("one run of the checks on the stack", f"{checks_once:.3f}"),
            ("gitswarm merge JOB (whole command)", f"{train:.3f}"),
            ("merge JOB beyond one run of the checks", f"{train - checks_once:.3f}"),
        ],
    )


if __name__ == "__main__":
    main()
