"""What judging a patch against its base adds to verification, on a repository of 10,000 files.

    python tests/bench/bench_verify.py [--quick]

Verification now reads the patch's changes for protected files, puts the
base's judges back, runs the checks in a guarded environment, looks up each
check's result on the base (cached per base and check) and reads the test
counts. Its added time is `verify` with all of that (base result cached)
less `verify` without it (`against_base=False`, what `audit` of a person's
commit does), both with a warm pool of clean checkouts, interleaved, medians.
The baseline measured in the same run is the bare minimum of any
verification: a clean checkout taken from the pool and one `sh -c true`.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchlib import isolate, print_table, scratch_dir

from gitswarm.adapters.base import RunContext
from gitswarm.adapters.process import run_process
from gitswarm.engine.delegation.verify import Rules, verify
from gitswarm.model.artifacts import BlobRef, Patch
from gitswarm.model.records import TaskSpec
from gitswarm.store.checkouts import Checkouts
from gitswarm.store.git import open_repo
from gitswarm.store.gitcli import git

QUICK = "--quick" in sys.argv
FILES = 2_000 if QUICK else 10_000
ROUNDS = 5 if QUICK else 11
TARGET_MS = 100


def make_repo() -> tuple[Path, str, str]:
    path = Path(scratch_dir("bench-verify-")) / "repo"
    path.mkdir()
    git(["init", "-q", "-b", "main"], path)
    for n in range(FILES):
        folder = path / f"pkg{n % 100:02d}"
        folder.mkdir(exist_ok=True)
        (folder / f"mod{n}.py").write_text(f"VALUE = {n}\n")
    (path / "tests").mkdir()
    (path / "tests" / "test_value.py").write_text("def test_value():\n    assert True\n")
    git(["add", "-A"], path)
    git(["commit", "-qm", "base"], path)
    base = git(["rev-parse", "HEAD"], path).decode().strip()
    (path / "pkg00" / "mod0.py").write_text("VALUE = -1\n")
    git(["commit", "-qam", "the patch"], path)
    head = git(["rev-parse", "HEAD"], path).decode().strip()
    git(["checkout", "-q", base], path)
    return path, base, head


def main() -> None:
    isolate()
    path, base, head = make_repo()
    repo = open_repo(path)
    root = Path(scratch_dir("bench-verify-root-"))
    diff = git(["diff", "--binary", base, head], path)
    blob = repo.write_blob(diff)
    patch = Patch(job="bench", task="t", created=time.time(), base=base, head=head,
                  diff=BlobRef(oid=blob, size=len(diff)), sha256="0" * 64)
    spec = TaskSpec(id="t", seq=0, mode="implement", checks=("true",), timeout=60)
    ctx = RunContext("bench", "t", 1, path, dict(os.environ))

    def runner(invocation):  # the worker's runner, without a lease to renew
        return run_process(invocation.argv, cwd=invocation.cwd, env=invocation.env, timeout=invocation.timeout)

    def store(data: bytes, dropped: int) -> BlobRef:
        return BlobRef(oid=repo.write_blob(data), size=len(data) + dropped, truncated=dropped)

    def timed_verify(rules: Rules) -> float:
        start = time.perf_counter()
        verify(repo, path, root, patch, spec, ctx, runner, store, time.time, None, rules)
        return time.perf_counter() - start

    def bare() -> float:
        pool = Checkouts(path, root)
        start = time.perf_counter()
        checkout = pool.take(head)
        subprocess.run(["sh", "-c", "true"], cwd=checkout.path, check=True)
        pool.give_back(checkout)
        return time.perf_counter() - start

    first = timed_verify(Rules())  # cold: the pool's first checkout and the base's run, cached from here on
    judged, plain, floor = [], [], []
    for _ in range(ROUNDS):
        judged.append(timed_verify(Rules()))
        plain.append(timed_verify(Rules(against_base=False)))
        floor.append(bare())
    j, p, f = (statistics.median(x) for x in (judged, plain, floor))
    rows = [
        (f"clean checkout from the pool + sh -c true, {FILES} files (median)", f"{f * 1e3:.0f} ms", "baseline", ""),
        ("verify without the base (as audit does), warm (median)", f"{p * 1e3:.0f} ms", f"{p / f:.2f}x", ""),
        ("verify against the base, base result cached, warm (median)", f"{j * 1e3:.0f} ms", f"{j / f:.2f}x", ""),
        ("added by judging against the base, per patch", f"{(j - p) * 1e3:.0f} ms", "", f"< {TARGET_MS} ms"),
        ("first verify: cold pool, base checks run and cached", f"{first * 1e3:.0f} ms", "", ""),
    ]
    print_table(("measure", "value", "ratio", "target"), rows)


if __name__ == "__main__":
    main()
