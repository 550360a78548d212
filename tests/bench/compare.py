"""Run benchmark scripts from two source trees, interleaved, and compare: before/after in one run.

    python tests/bench/compare.py OLD_REV [--rounds 3] [--quick] bench_store bench_run bench_share

Each round runs every named script once from a checkout of OLD_REV and once
from the working tree (in alternating order), each in its own interpreter
with only that tree on the path, so a noisy machine slows both alike. It
prints each script's wall time per side (median of the rounds) and the
ratio, then the last round's own tables of both sides for the detail.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[2]


def checkout(rev: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="bench-compare-"))
    subprocess.run(["git", "worktree", "add", "-q", "--detach", str(folder / "tree"), rev], cwd=HERE, check=True)
    return folder / "tree"


def run(tree: Path, script: str, quick: bool) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    argv = [sys.executable, str(tree / "tests" / "bench" / f"{script}.py"), *(["--quick"] if quick else [])]
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{script} failed in {tree}:\n{done.stdout}\n{done.stderr}")
    return wall, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("old")
    parser.add_argument("scripts", nargs="+")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    options = parser.parse_args()
    old = checkout(options.old)
    try:
        walls: dict[tuple[str, str], list[float]] = {}
        last: dict[tuple[str, str], str] = {}
        for n in range(options.rounds):
            for script in options.scripts:
                sides = [("before", old), ("after", HERE)]
                for side, tree in sides if n % 2 == 0 else reversed(sides):
                    wall, out = run(tree, script, options.quick)
                    walls.setdefault((script, side), []).append(wall)
                    last[(script, side)] = out
        print(f"{options.rounds} interleaved rounds; before = {options.old}, after = the working tree")
        print(f"{'script':<16} {'before':>9} {'after':>9} {'after/before':>13}")
        for script in options.scripts:
            before, after = statistics.median(walls[(script, "before")]), statistics.median(walls[(script, "after")])
            print(f"{script:<16} {before:>8.2f}s {after:>8.2f}s {after / before:>12.2f}x")
        for script in options.scripts:
            for side in ("before", "after"):
                print(f"\n== {script}, {side} (last round)\n{last[(script, side)].rstrip()}")
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=HERE, check=False)


if __name__ == "__main__":
    main()
