"""Start-up and read-command speed of the installed `gitswarm`, wall time as a person sees it.

    python tests/bench/bench_cli.py [--runs N] [--compare DIR]

A scratch repository holds one job of 10,000 shell tasks (the index built
once). Each command runs N times (default 21), all of them taking turns so
that a busy machine slows them alike; the figure is the median. The ratio is
against `python -c pass` measured in the same run, so it holds on a noisy
machine; the import-only rows show what the libraries cost by themselves.
Bytecode caching is on (benchlib.isolate), as in an installed gitswarm.

--compare DIR also runs the gitswarm commands from another source tree (one
holding a `gitswarm` package, e.g. `git archive OLD gitswarm | tar -x -C
DIR`), through a copy of the console script with DIR first on the path.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchlib import isolate, print_table, scratch_dir

RUNS = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 21
COMPARE = Path(sys.argv[sys.argv.index("--compare") + 1]).resolve() if "--compare" in sys.argv else None
TASKS = 10_000
GITSWARM = str(Path(sys.executable).with_name("gitswarm"))
PY = sys.executable


def big_job(path: Path) -> str:
    """A repository with one job of TASKS tasks; its id."""
    from gitswarm.engine.swarm import Swarm  # after isolate(): the home and git identity are the bench's

    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "initial"], cwd=path, check=True)
    body = "".join(f'[[tasks]]\nid = "t{i:05d}"\ncommand = "true"\n' for i in range(TASKS))
    swarm = Swarm(path)
    try:
        return swarm.submit_text(f'goal = "bench {TASKS}"\n' + body)
    finally:
        swarm.close()


def medians(commands: dict[str, list[str]], cwd: Path, runs: int) -> dict[str, tuple[float, float]]:
    """Median wall and CPU (user + system) seconds of each command, the commands taking turns.
    CPU time moves less than wall time when other processes share the machine."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for argv in commands.values():  # one warm-up each: page cache, .pyc files
        subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    for _ in range(runs):
        for name, argv in commands.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            times[name].append((wall, cpu))
    return {
        name: (statistics.median(w for w, _ in found), statistics.median(c for _, c in found)) for name, found in times.items()
    }


def compare_script(source: Path) -> str:
    """The console script's code, importing gitswarm from `source` first."""
    script = Path(scratch_dir("bench-compare-")) / "gitswarm"
    script.write_text(
        f"import re\nimport sys\nsys.path.insert(0, {str(source)!r})\nfrom gitswarm.cli.main import main\n"
        "sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\nsys.exit(main())\n"
    )
    return str(script)


def main() -> None:
    isolate()
    repo = Path(scratch_dir("bench-cli-")) / "repo"
    job = big_job(repo)
    rows = [
        ("python -c pass", [PY, "-c", "pass"], "baseline"),
        ("import typer, pygit2, msgspec (no gitswarm)", [PY, "-c", "import typer, pygit2, msgspec"], ""),
        ("import pygit2, msgspec (no gitswarm)", [PY, "-c", "import pygit2, msgspec"], ""),
        ("gitswarm --version", [GITSWARM, "--version"], "< 50 ms"),
        ("gitswarm status", [GITSWARM, "status"], "< 150 ms"),
        ("gitswarm status JOB (10,000 tasks)", [GITSWARM, "status", job], "< 150 ms"),
        ("gitswarm --json status JOB (10,000 tasks)", [GITSWARM, "--json", "status", job], "< 150 ms"),
        ("gitswarm show JOB (10,000 tasks)", [GITSWARM, "show", job], "< 150 ms"),
        ("gitswarm --json show JOB (10,000 tasks)", [GITSWARM, "--json", "show", job], "< 150 ms"),
        ("gitswarm --help", [GITSWARM, "--help"], ""),
    ]
    if COMPARE is not None:
        other = compare_script(COMPARE)
        rows += [(f"{name} ({COMPARE.name})", [PY, other, *argv[1:]], "") for name, argv, _ in rows if argv[0] == GITSWARM]
    found = medians({name: argv for name, argv, _ in rows}, repo, RUNS)
    base, imports = found["python -c pass"], found["import typer, pygit2, msgspec (no gitswarm)"]
    table = [
        (name, f"{wall * 1e3:.0f} ms", f"{wall / base[0]:.2f}x", f"{wall / imports[0]:.2f}", f"{cpu * 1e3:.0f} ms", f"{cpu / base[1]:.2f}x", target)
        for (name, _, target), (wall, cpu) in ((row, found[row[0]]) for row in rows)
    ]
    print(f"median of {RUNS} runs each, interleaved; ratios against python -c pass, and wall against importing")
    print("typer, pygit2 and msgspec (the issue's 150 ms target was set where that import took ~115 ms: 1.30)")
    print_table(("command", "wall", "ratio", "vs imports", "cpu", "ratio", "target"), table)


if __name__ == "__main__":
    main()
