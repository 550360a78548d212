"""Swarm speed: N trivial shell tasks through `gitswarm run -j 4` vs plain spawning.

    python tests/bench/bench_run.py [--quick]

The baseline spawns the same commands (`sh -c true`) 4 at a time with plain
subprocess in the same run; "overhead per task" is gitswarm's extra wall time
divided by the number of tasks. The fixed cost of a run is `gitswarm run` of
20 `true` tasks against the import floor, `python -c "import pygit2, msgspec"`,
the two interleaved (medians of FIXED_ROUNDS, each run on a fresh repository, on the disk and on tmpfs), with
what creating as many files as a run does costs on the disk at that moment (this machine's disk varies ~10x). The supervisor's peak memory is measured in a
process of its own (workers are forked and not counted).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchlib import isolate, print_table, scratch_dir

QUICK = "--quick" in sys.argv
WORKERS = 4

SUPERVISE = """
import json, resource, sys, time
from gitswarm.engine.jobs import run as run_engine
from gitswarm.engine.jobs.supervisor import WorkOptions
from gitswarm.engine.swarm import Swarm
start = time.perf_counter()
swarm = Swarm(sys.argv[1])
view = run_engine.run(swarm, sys.argv[2], WorkOptions(workers=int(sys.argv[3])), lambda event: None)
print(json.dumps({"status": view["status"], "seconds": time.perf_counter() - start,
                  "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def make_repo(tasks: int, parent: str | None = None) -> tuple[Path, Path]:
    path = Path(scratch_dir("bench-run-", parent))
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    spec = path / "job.toml"
    body = "".join(f'[[tasks]]\nid = "t{i:05d}"\ncommand = "true"\n' for i in range(tasks))
    spec.write_text('goal = "bench"\n' + body)
    return path, spec


def baseline(tasks: int) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(lambda _: subprocess.run(["sh", "-c", "true"], stdin=subprocess.DEVNULL), range(tasks)))
    return time.perf_counter() - start


def cli_run(tasks: int, parent: str | None = None) -> float:
    path, spec = make_repo(tasks, parent)
    exe = str(Path(sys.executable).with_name("gitswarm"))
    start = time.perf_counter()
    done = subprocess.run([exe, "--json", "run", str(spec), "-j", str(WORKERS)], cwd=path, capture_output=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"gitswarm run failed: {done.stderr.decode()[-500:]}")
    return wall


FIXED_TASKS = 20
FIXED_ROUNDS = 5 if QUICK else 11


TMPFS = "/dev/shm"
FILES, FOLDERS = 250, 155  # about what a run of FIXED_TASKS creates in a fresh repository: objects, fan-out folders


def file_cost(parent: str | None = None) -> float:
    """Wall time to create FILES small files (each a temporary renamed into place, as git writes an object)
    spread over FOLDERS new folders: the file system's share of a run, measured beside it."""
    root = Path(scratch_dir("bench-files-", parent))
    start = time.perf_counter()
    for i in range(FILES):
        folder = root / f"{i % FOLDERS:02x}"
        folder.mkdir(exist_ok=True)
        temporary = folder / f"tmp_{i}"
        temporary.write_bytes(b"x" * 200)
        temporary.rename(folder / f"o{i}")
    return time.perf_counter() - start


def fixed_cost() -> tuple[float, float | None, float, float]:
    """Median walls of `gitswarm run` of FIXED_TASKS `true` tasks in a repository on the disk and on tmpfs
    (None without one), and of the import floor; interleaved. A run creates ~250 files (git objects,
    refs, the index), whose cost on a disk varies with its state; tmpfs shows gitswarm's own."""
    floor, runs, in_memory, files = [], [], [], []
    on_tmpfs = os.path.isdir(TMPFS) and os.access(TMPFS, os.W_OK)
    for _ in range(FIXED_ROUNDS):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import pygit2, msgspec"], check=True)
        floor.append(time.perf_counter() - start)
        runs.append(cli_run(FIXED_TASKS))
        files.append(file_cost())
        if on_tmpfs:
            in_memory.append(cli_run(FIXED_TASKS, TMPFS))
    tmpfs = statistics.median(in_memory) if in_memory else None
    return statistics.median(runs), tmpfs, statistics.median(floor), statistics.median(files)


def supervised(tasks: int) -> dict:
    path, spec = make_repo(tasks)
    done = subprocess.run(
        [sys.executable, "-c", SUPERVISE, str(path), str(spec), str(WORKERS)], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def main() -> None:
    isolate()
    small, large = (200, 600) if QUICK else (200, 2000)
    fixed, fixed_tmpfs, floor, files = fixed_cost()
    base_small = min(baseline(small) for _ in range(3))
    wall_small = min(cli_run(small) for _ in range(3))  # best of 3: this machine's I/O is noisy
    overhead = (wall_small - base_small) / small
    mem_small = supervised(small)
    mem_large = supervised(large)
    base_large = baseline(large)
    wall_large = cli_run(large)
    rows = [
        ("import floor: python -c 'import pygit2, msgspec' (median)", f"{floor * 1e3:.0f} ms", "baseline", ""),
        (f"gitswarm run, {FIXED_TASKS} x true, -j 4 (median, side by side)", f"{fixed * 1e3:.0f} ms",
         f"+{(fixed - floor) * 1e3:.0f} ms", "<= +100 ms"),
        (f"  the disk's share: {FILES} files in {FOLDERS} new folders, side by side", f"{files * 1e3:.0f} ms", "", ""),
        (f"  the same, repository on tmpfs ({TMPFS})", "-" if fixed_tmpfs is None else f"{fixed_tmpfs * 1e3:.0f} ms",
         "-" if fixed_tmpfs is None else f"+{(fixed_tmpfs - floor) * 1e3:.0f} ms", "<= +100 ms"),
        (f"plain spawn, {small} x sh -c true, 4 at a time (best of 3)", f"{base_small:.3f} s", "baseline", ""),
        (f"gitswarm run, {small} tasks, -j 4 (CLI, start-up included; best of 3)", f"{wall_small:.3f} s", f"{wall_small / base_small:.1f}x", "< 2 s"),
        ("overhead per task beyond spawning", f"{overhead * 1e3:.2f} ms", "", "< 5 ms"),
        (f"plain spawn, {large} tasks", f"{base_large:.3f} s", "baseline", ""),
        (f"gitswarm run, {large} tasks, -j 4", f"{wall_large:.3f} s", f"{wall_large / wall_small:.1f}x of {small}", f"<= {large // small * 1.2:.0f}x"),
        (f"supervisor peak RSS, {small} tasks", f"{mem_small['maxrss_kb'] / 1024:.1f} MiB", "", ""),
        (f"supervisor peak RSS, {large} tasks", f"{mem_large['maxrss_kb'] / 1024:.1f} MiB", f"{mem_large['maxrss_kb'] / mem_small['maxrss_kb']:.2f}x", "<= 1.5x"),
    ]
    print_table(("measure", "value", "ratio", "target"), rows)


if __name__ == "__main__":
    main()
