"""Many machines, one job: wall/ideal, refused pushes, tasks and CPU per machine, for M machines (issue 31).

    python tests/bench/bench_machines.py [--machines 1,2,3,4,6] [--tasks 60] [--seconds 1]
                                         [--trivial 200] [--trivial-machines 1,3,6] [--alone 3] [--repeat 1]
                                         [--quick] [--scratch DIR]

Each configuration gets a fresh `git daemon` on 127.0.0.1 serving a bare
repository and M fresh clones of it, each with a home and git config of its
own (a machine). The first machine submits the job
(`gitswarm --json submit --remote origin SPEC`); then every machine runs
`gitswarm --json work --remote origin --trust origin -j 2 --until-idle --job JOB`
at once, each in a session of its own. Only the CLI is driven, so the
benchmark measures whatever layout of claims the engine uses. All of it
shares this computer's cores and disk: where creating a file is slow (the
virtual disk measured took 10-270 us of CPU a file, a tmpfs 3;
each task writes ~9 git objects on its machine, again on the remote, again
on every machine that fetches them), `--scratch /dev/shm` shows what the
disk costs. Each configuration starts after an `os.sync()`: the kernel
would otherwise still be writing back an earlier one's files while it runs
(measured: the trivial 3-machine runs of full benchmarks read 1.49-1.60x
one machine's rate without it, 1.62x with it, and 1.56-1.67x in runs of the
trivial tasks alone).

Figures, per configuration (medians over --repeat runs):
- wall: from starting the first machine's `work` to the exit of the last;
  ideal = tasks x seconds / (2 workers x M); wall/ideal.
- refused pushes per accepted write. Accepted writes come from the job's
  history: after every machine exited, `gitswarm pull origin` and
  `gitswarm --json log JOB` on the first machine, counting the operations that
  decide who runs what (claimed, renewed, expired, finished), each accepted by
  the remote once, however many of them one push carried. Refused pushes are
  counted on the machines' side by a `git` shim put first on PATH in the
  machines' environment only (never in the baseline): it runs the real git and,
  for every `git ... push` and `git ... fetch`, appends one line to a file of
  that machine's: the exit code and the number of refused refs (`!` lines of
  `--porcelain` output on stdout, ` ! [` lines of plain output on stderr).
  A push that exits non-zero with a refused ref is a refused push (a lost
  compare-and-swap: "fetch first", "non-fast-forward", "stale info", or a
  lock another push held): what the issue counts, a write attempt that
  landed nothing and must be fetched and tried again. A push that exits
  non-zero with no refused ref (the remote unreachable) is counted apart as
  failed. The shim sees every push the engine makes, whatever the engine
  pushes and however many refs at once; the machines' `--json` progress
  events do not (they speak only of pushes that keep failing), and the
  daemon logs nothing per ref. Accepted pushes and fetches are shown too.
  The shim costs each push and fetch one `sh` and nothing else (shell
  built-ins only: about a millisecond of CPU; a push here takes ~55 ms).
- tasks per machine: every task's command appends "start TASK MACHINE" to a
  log (the machine's clone is the command's working directory). A task
  started twice is reported, allowed where its lease expired (a renewal that
  did not land in time); one started twice with no expiry, or never, fails
  the run (exit 1, after the tables).
- CPU seconds per machine: each machine's `work` process is reaped with
  os.wait4, whose rusage covers the process and every descendant it waited
  for (its workers, its watch process, git, the commands run). For trivial
  tasks also the remote's CPU (the daemon and every receive-pack and
  upload-pack it served, from /proc) and all of it per task: what the
  machines and the remote spend together on one task, the figure that
  bounds tasks/s once the cores are saturated.
- trivial tasks (each `true`, plus the log line): tasks/s = tasks / wall, and
  relative to one machine; and the cores 1.5x one machine's rate takes at
  the CPU per task measured at 3 machines (and at one): where every machine
  and the remote share this computer's cores, a rate above cores / CPU per
  task is out of reach whatever the layout.
- merges per task: the merge commits in the job's history (on the first
  machine, after its pull): each one a clone's two tips of the job joined
  (another machine's claims fetched, or a sibling worker's push that landed
  while this one's was in flight), each its own tree and commit on the
  machine, pushed, unpacked on the remote and fetched by the others.
- the share-nothing ceiling (`--alone 3`, default; 0: none): 3 machines,
  each with a remote of its own (a bare repository on the same daemon)
  and a job of its own of a third of the trivial tasks, all working at once:
  the same computer, cores and disk, and the same work per task as one
  machine alone, with nothing of one machine's touching another's. No layout
  of claims makes 3 machines sharing one job faster than that, so its rate
  against one machine's is the most the trivial target can show here, and
  the gap between it and the shared job's is the cost of sharing.
- baseline, same run, same daemon: one plain `git push` of a one-commit update
  to a branch, then one `git fetch` of it into another clone (medians of a few
  rounds before each configuration), so the figures can be read against what
  git itself costs on this machine right now (column wall/(push+fetch)).

The issue's targets, marked met/not met: 60 x 1 s on 4 machines within 1.3x
of ideal; at 6 machines at most 0.5 refused pushes per accepted write;
trivial tasks on 3 machines at least 1.5x the tasks/s of one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench.benchlib import isolate, print_table, scratch_dir
from tests.netremote import GitDaemon

WORKERS = 2
WRITE_OPS = ("claimed", "renewed", "expired", "finished")
BASELINE_ROUNDS = 3

# `git` first on the machines' PATH: the real git, and for push and fetch one line per call appended to
# $BENCH_GIT_LOG: "push|fetch EXIT REFUSED_REFS REASON". Only shell built-ins besides the real git.
SHIM = r"""#!/bin/sh
kind= skip=
for a do
    if [ -n "$skip" ]; then skip=; continue; fi
    case $a in
        -c|-C|--git-dir|--work-tree|--namespace|--exec-path|--config-env) skip=1 ;;
        -*) ;;
        *) kind=$a; break ;;
    esac
done
case $kind in
    push|fetch) ;;
    *) exec "$BENCH_REAL_GIT" "$@" ;;
esac
out=$BENCH_GIT_LOG.$$.out err=$BENCH_GIT_LOG.$$.err
"$BENCH_REAL_GIT" "$@" >"$out" 2>"$err"
code=$?
refused=0 reason=
while IFS= read -r line || [ -n "$line" ]; do
    case $line in '!'*) refused=$((refused + 1)); [ -n "$reason" ] || reason=${line##*	} ;; esac
    printf '%s\n' "$line"
done <"$out"
while IFS= read -r line || [ -n "$line" ]; do
    case $line in ' ! ['*) refused=$((refused + 1)); [ -n "$reason" ] || reason=${line#*\] } ;; esac
    printf '%s\n' "$line" >&2
done <"$err"
: >"$out"; : >"$err"  # (emptied, not removed: no rm to spawn; the cluster's directory goes at the end)
echo "$kind $code $refused $reason" >>"$BENCH_GIT_LOG"
exit $code
"""


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout


@dataclass
class Machine:
    name: str
    path: Path
    env: dict[str, str]
    gitlog: Path
    out: Path

    def gitswarm(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "gitswarm", *args], cwd=self.path, env=self.env, capture_output=True, text=True, timeout=300
        )
        if done.returncode != 0:
            raise SystemExit(f"{self.name}: gitswarm {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}{done.stdout[-2000:]}")
        return done.stdout


@dataclass
class Run:
    """One configuration, run once."""

    machines: int
    tasks: int
    seconds: float  # 0: trivial tasks
    wall: float = 0.0
    exits: list[int] = field(default_factory=list)  # per machine; -1: killed at the deadline
    cpu: list[float] = field(default_factory=list)  # per machine, children included
    remote_cpu: float = 0.0  # the daemon's, every push and fetch it served included
    ran: list[int] = field(default_factory=list)  # tasks started, per machine
    twice: int = 0  # tasks started more than once
    twice_unexplained: int = 0  # of those, tasks whose lease never expired (a command run twice for nothing)
    never: int = 0  # tasks never started
    writes: Counter[str] = field(default_factory=Counter)  # accepted operations by kind, from the job's history
    pushes: Counter[str] = field(default_factory=Counter)  # accepted, refused, failed
    fetches: int = 0
    merges: int = 0  # merge commits in the job's history (two tips of the job, written by a machine to hold both)
    reasons: Counter[str] = field(default_factory=Counter)  # why refused pushes were refused
    failures: list[str] = field(default_factory=list)

    @property
    def ideal(self) -> float:
        return self.tasks * self.seconds / (WORKERS * self.machines)

    @property
    def accepted_writes(self) -> int:
        return sum(self.writes[op] for op in WRITE_OPS)

    @property
    def refused_per_write(self) -> float:
        return self.pushes["refused"] / self.accepted_writes if self.accepted_writes else float("nan")


class Cluster:
    """A daemon, a seed commit on its main branch, M machine clones (git shim on PATH) and two baseline clones."""

    def __init__(self, root: Path, count: int, shim_dir: Path, alone: bool = False) -> None:
        self.root = root
        root.mkdir()
        self.daemon = GitDaemon(root, dict(os.environ))
        self.daemon.start()
        seed = root / "seed"
        seed.mkdir()
        git(seed, "init", "-q", "-b", "main")
        (seed / "README.md").write_text("many machines\n")
        git(seed, "add", "-A")
        git(seed, "commit", "-qm", "init")
        git(seed, "push", "-q", self.daemon.url, "main")
        self.baseline = [root / "base-push", root / "base-fetch"]
        for clone in self.baseline:
            git(root, "clone", "-q", self.daemon.url, str(clone))
        real_git = shutil.which("git")
        assert real_git is not None
        self.machines = []
        for i in range(count):
            name = f"m{i}"
            home = root / f"home-{name}"
            home.mkdir()
            (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
            env = {
                **os.environ,
                "HOME": str(home),
                "XDG_STATE_HOME": str(home / ".local" / "state"),
                "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
                "GIT_TERMINAL_PROMPT": "0",
                "PATH": f"{shim_dir}{os.pathsep}{os.environ.get('PATH', '')}",
                "BENCH_REAL_GIT": real_git,
                "BENCH_GIT_LOG": str(root / f"git-{name}.log"),
            }
            git(root, "clone", "-q", self.daemon.url, str(root / name), env=env)
            if alone:  # a bare repository of its own on the same daemon, the seed pushed to it
                git(root, "init", "-q", "--bare", "-b", "main", f"alone-{name}.git")
                url = self.daemon.url.replace("/swarm.git", f"/alone-{name}.git")
                git(root / name, "push", "-q", url, "main", env=env)
                git(root / name, "remote", "set-url", "origin", url, env=env)
            self.machines.append(Machine(name, root / name, env, root / f"git-{name}.log", root / f"out-{name}"))

    def close(self) -> None:
        self.daemon.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def baseline_round(self, n: int) -> tuple[float, float]:
        """One plain `git push` of a new commit to a branch of the remote, and one `git fetch` of it elsewhere."""
        pusher, fetcher = self.baseline
        commit = git(pusher, "commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", f"baseline {n}").strip()
        git(pusher, "update-ref", "HEAD", commit)
        started = time.perf_counter()
        git(pusher, "push", "-q", "origin", "HEAD:refs/heads/baseline")
        pushed = time.perf_counter()
        git(fetcher, "fetch", "-q", "origin", "+refs/heads/baseline:refs/remotes/origin/baseline")
        fetched = time.perf_counter()
        return pushed - started, fetched - pushed


def spec_text(tasks: int, seconds: float, log: Path) -> str:
    work = f"sleep {seconds:g}" if seconds else "true"
    lines = ['goal = "bench machines"\n']
    for i in range(tasks):
        task = f"t{i:04d}"
        command = f'echo start {task} "${{PWD##*/}}" >> {log}; {work}'
        lines.append(f'[[tasks]]\nid = "{task}"\ncommand = {json.dumps(command)}\n')
    return "".join(lines)


def run_once(
    parent: Path, shim_dir: Path, label: str, machines: int, tasks: int, seconds: float
) -> tuple[Run, list[tuple[float, float]]]:
    """A fresh daemon and clones; baseline rounds; submit; every machine works the job; count."""
    cluster = Cluster(parent / label, machines, shim_dir)
    run = Run(machines, tasks, seconds)
    try:
        baseline = [cluster.baseline_round(n) for n in range(BASELINE_ROUNDS)]
        log = cluster.root / "ran.log"
        spec = cluster.root / "spec.toml"
        spec.write_text(spec_text(tasks, seconds, log))
        first = cluster.machines[0]
        job = json.loads(first.gitswarm("--json", "submit", "--remote", "origin", str(spec)))["id"]
        for m in cluster.machines:
            m.gitlog.unlink(missing_ok=True)  # the submit's push is not the work's
        daemon_before = cluster.daemon.cpu_seconds()
        work(cluster.machines, job, run, deadline=300 + 5 * run.ideal + tasks * 0.5)
        run.remote_cpu = cluster.daemon.cpu_seconds() - daemon_before
        first.gitswarm("pull", "origin")
        history = json.loads(first.gitswarm("--json", "log", job))["events"]
        run.writes = Counter(e["op"] for e in history)
        run.merges = merges_in(first, job)
        expired = {e.get("task") for e in history if e["op"] == "expired"}
        starts = starts_in(log)
        started = Counter(task for _, task, _ in starts)
        run.twice = sum(1 for n in started.values() if n > 1)
        run.twice_unexplained = sum(1 for task, n in started.items() if n > 1 and task not in expired)
        run.never = tasks - len(started)
        where = Counter(machine for _, _, machine in starts)
        run.ran = [where[m.name] for m in cluster.machines]
        count_git(cluster.machines, run)
        if run.twice_unexplained or run.never:  # a command may run again only where its lease was lost
            run.failures.append(f"{run.twice_unexplained} tasks started twice with no lease expired, {run.never} never")
        if not run.accepted_writes:
            run.failures.append(f"no accepted write found in the job's history (ops: {dict(run.writes)})")
    finally:
        cluster.close()
    return run, baseline


def count_git(machines: list[Machine], run: Run) -> None:
    """The pushes (accepted, refused, failed; why refused) and fetches the machines' shims logged."""
    for m in machines:
        for line in m.gitlog.read_text().splitlines() if m.gitlog.exists() else []:
            kind, code, refused, *reason = line.split(" ", 3)
            if kind == "fetch":
                run.fetches += 1
            elif code == "0":
                run.pushes["accepted"] += 1
            elif refused != "0":
                run.pushes["refused"] += 1
                run.reasons[" ".join(reason).strip() or "?"] += 1
            else:
                run.pushes["failed"] += 1


def merges_in(machine: Machine, job: str) -> int:
    """How many merge commits `job`'s history holds on `machine`."""
    return len(git(machine.path, "rev-list", "--merges", f"refs/swarm/jobs/{job}").splitlines())


def starts_in(log: Path) -> list[list[str]]:
    """The tasks' "start TASK MACHINE" lines, split."""
    return [line.split() for line in log.read_text().splitlines()] if log.exists() else []


def run_alone(parent: Path, shim_dir: Path, label: str, machines: int, tasks: int) -> Run:
    """The share-nothing ceiling: M machines on this computer, each working a job of its own (tasks / M trivial
    tasks) through a remote of its own (a bare repository on one daemon): what M machines do here when no
    claim, fetch or merge of theirs touches another's, the most any layout of claims could reach."""
    cluster = Cluster(parent / label, machines, shim_dir, alone=True)
    run = Run(machines, tasks, 0.0)
    try:
        jobs = []
        for i, m in enumerate(cluster.machines):
            spec = cluster.root / f"spec-{m.name}.toml"
            spec.write_text(spec_text(tasks // machines + (i < tasks % machines), 0.0, cluster.root / "ran.log"))
            jobs.append(json.loads(m.gitswarm("--json", "submit", "--remote", "origin", str(spec)))["id"])
            m.gitlog.unlink(missing_ok=True)  # the submit's push is not the work's
        daemon_before = cluster.daemon.cpu_seconds()
        work(cluster.machines, jobs, run, deadline=300 + tasks * 0.5)
        run.remote_cpu = cluster.daemon.cpu_seconds() - daemon_before
        count_git(cluster.machines, run)
        run.merges = sum(merges_in(m, job) for m, job in zip(cluster.machines, jobs))
        where = Counter(machine for _, _, machine in starts_in(cluster.root / "ran.log"))
        run.ran = [where[m.name] for m in cluster.machines]
        if sum(run.ran) != tasks:
            run.failures.append(f"share-nothing: {sum(run.ran)} tasks started of {tasks}")
    finally:
        cluster.close()
    return run


def work(machines: list[Machine], job: str | list[str], run: Run, deadline: float) -> None:
    """Start every machine's `work` at once (on `job`, or each on its own of a list); reap each with wait4
    (its rusage, children included)."""
    argv = [sys.executable, "-m", "gitswarm", "--json", "work", "--remote", "origin", "--trust", "origin",
            "-j", str(WORKERS), "--until-idle", "--job"]
    # Whatever an earlier configuration wrote (tens of thousands of small files) is on disk before this one starts,
    # not written back by the kernel while it runs, on the same disk its machines create their files on.
    os.sync()
    started = time.monotonic()
    running: dict[int, int] = {}  # pid -> machine index
    for i, m in enumerate(machines):
        with open(m.out, "wb") as out:
            process = subprocess.Popen([*argv, job if isinstance(job, str) else job[i]], cwd=m.path, env=m.env,
                                       stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
        running[process.pid] = i
        process.returncode = 0  # reaped below with os.wait4, not by Popen
    run.exits = [0] * len(machines)
    run.cpu = [0.0] * len(machines)
    killed = False
    while running:
        for pid in list(running):
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                i = running.pop(pid)
                run.exits[i] = -1 if killed else os.waitstatus_to_exitcode(status)
                run.cpu[i] = usage.ru_utime + usage.ru_stime
        if running and not killed and time.monotonic() - started > deadline:
            for pid in running:
                os.killpg(pid, signal.SIGKILL)
            killed = True
            run.failures.append(f"killed after {deadline:.0f} s: {sorted(machines[i].name for i in running.values())}")
        time.sleep(0.01)
    run.wall = time.monotonic() - started
    for i, code in enumerate(run.exits):
        if code:
            said = machines[i].out.read_text(errors="replace").splitlines()[-5:]
            run.failures.append(f"{machines[i].name} exited {code}: " + " | ".join(said))


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def per_machine(runs: list[Run], attr: str, fmt: str) -> str:
    """Per machine (m0 submitted the job), the median over the repetitions."""
    columns = zip(*(getattr(r, attr) for r in runs))
    return " ".join(format(median(list(c)), fmt) for c in columns)


def trivial_row(label: str, runs: list[Run], one: float) -> tuple[str, ...]:
    """A row of the trivial tasks' table: `one` is one machine's tasks/s."""
    rate = median([r.tasks / r.wall for r in runs])
    return (
        label, f"{median([r.wall for r in runs]):.1f}", f"{rate:.1f}", f"{rate / one:.2f}",
        f"{median([r.refused_per_write for r in runs]):.2f}" if runs[0].accepted_writes else "-",
        f"{median([(r.pushes['accepted'] + r.pushes['refused']) / r.tasks for r in runs]):.2f}",
        f"{median([r.merges / r.tasks for r in runs]):.2f}",
        f"{median([r.fetches for r in runs]):.0f}",
        per_machine(runs, "ran", ".0f"), per_machine(runs, "cpu", ".1f"),
        f"{median([r.remote_cpu for r in runs]):.1f}",
        f"{median([(sum(r.cpu) + r.remote_cpu) / r.tasks * 1000 for r in runs]):.0f}",
        f"{median([(sum(r.cpu) + r.remote_cpu) / r.wall for r in runs]):.2f}",
    )


def verdict(ok: bool | None) -> str:
    return "not measured" if ok is None else ("met" if ok else "NOT MET")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--machines", default="1,2,3,4,6", help="machine counts for the sleeping tasks")
    parser.add_argument("--tasks", type=int, default=60)
    parser.add_argument("--seconds", type=float, default=1.0, help="each task's sleep")
    parser.add_argument("--trivial", type=int, default=200, help="trivial tasks (`true`); 0: none")
    parser.add_argument("--trivial-machines", default="1,3,6")
    parser.add_argument("--repeat", type=int, default=1, help="runs per configuration; medians")
    parser.add_argument("--quick", action="store_true", help="a smoke check: 1 and 3 machines, 12 x 0.5 s, 40 trivial")
    parser.add_argument("--alone", type=int, default=3,
                        help="the share-nothing ceiling: this many machines, each on a job and a remote of its own "
                             "(the trivial tasks split among them); 0: none")
    parser.add_argument("--scratch", default=None,
                        help="where the remote and the clones live (default: the system's temporary directory); "
                             "a tmpfs such as /dev/shm takes the disk's cost of creating files out of the figures")
    args = parser.parse_args()
    if args.quick:
        args.machines, args.tasks, args.seconds, args.trivial, args.trivial_machines, args.repeat = "1,3", 12, 0.5, 40, "1,3", 1
    counts = [int(n) for n in args.machines.split(",") if n]
    trivial_counts = [int(n) for n in args.trivial_machines.split(",") if n] if args.trivial else []
    isolate()
    parent = Path(scratch_dir("bench-machines-", args.scratch))
    shim_dir = parent / "shim"
    shim_dir.mkdir()
    (shim_dir / "git").write_text(SHIM)
    (shim_dir / "git").chmod(0o755)

    baseline: list[tuple[float, float]] = []
    sleeping: dict[int, list[Run]] = {m: [] for m in counts}
    trivial: dict[int, list[Run]] = {m: [] for m in trivial_counts}
    alone: list[Run] = []
    began = time.monotonic()
    for rep in range(args.repeat):
        for m in counts:
            run, base = run_once(parent, shim_dir, f"sleep-{m}-{rep}", m, args.tasks, args.seconds)
            sleeping[m].append(run)
            baseline += base
            print(f"  [{time.monotonic() - began:5.0f} s] {m} machines, {args.tasks} x {args.seconds:g} s: {run.wall:.1f} s",
                  file=sys.stderr, flush=True)
        for m in trivial_counts:
            run, base = run_once(parent, shim_dir, f"trivial-{m}-{rep}", m, args.trivial, 0.0)
            trivial[m].append(run)
            baseline += base
            print(f"  [{time.monotonic() - began:5.0f} s] {m} machines, {args.trivial} x true: {run.wall:.1f} s",
                  file=sys.stderr, flush=True)
        if args.trivial and args.alone:
            alone.append(run_alone(parent, shim_dir, f"alone-{rep}", args.alone, args.trivial))
            print(f"  [{time.monotonic() - began:5.0f} s] {args.alone} machines sharing nothing, {args.trivial} x true: "
                  f"{alone[-1].wall:.1f} s", file=sys.stderr, flush=True)

    push = median([p for p, _ in baseline])
    fetch = median([f for _, f in baseline])
    print(f"baseline (same daemon, same run, {len(baseline)} rounds): git push of one commit {push * 1000:.0f} ms, "
          f"git fetch of it {fetch * 1000:.0f} ms; {os.cpu_count()} CPUs; medians of {args.repeat} run(s); in {parent.parent}")
    print()
    print(f"{args.tasks} tasks x sleep {args.seconds:g} s, {WORKERS} workers per machine")
    rows: list[tuple[str, ...]] = []
    for m, runs in sleeping.items():
        wall = median([r.wall for r in runs])
        rows.append((
            str(m), f"{wall:.1f}", f"{runs[0].ideal:.1f}", f"{median([r.wall / r.ideal for r in runs]):.2f}",
            f"{median([r.accepted_writes for r in runs]):.0f}", f"{median([r.pushes['refused'] for r in runs]):.0f}",
            f"{median([r.refused_per_write for r in runs]):.2f}",
            f"{median([r.pushes['accepted'] for r in runs]):.0f}", f"{median([r.fetches for r in runs]):.0f}",
            f"{wall / (push + fetch):.0f}", per_machine(runs, "ran", ".0f"), per_machine(runs, "cpu", ".1f"),
            f"{median([sum(r.cpu) / r.wall for r in runs]):.2f}",
        ))
    print_table(("M", "wall s", "ideal s", "wall/ideal", "writes", "refused", "refused/write", "pushes ok", "fetches",
                 "wall/(push+fetch)", "tasks per machine", "CPU s per machine", "CPU s/wall s"), rows)

    if trivial:
        print()
        print(f"{args.trivial} trivial tasks (`true`), {WORKERS} workers per machine")
        one = median([args.trivial / r.wall for r in trivial[min(trivial)]])
        rows = [trivial_row(str(m), runs, one) for m, runs in trivial.items()]
        if alone:  # each machine on a job and a remote of its own: nothing of one touches another's
            rows.append(trivial_row(f"{args.alone} alone", alone, one))
        print_table(("M", "wall s", "tasks/s", f"vs M={min(trivial)}", "refused/write", "pushes/task", "merges/task", "fetches",
                     "tasks per machine",
                     "CPU s per machine", "remote CPU s", "CPU ms/task", "CPU s/wall s"), rows)
        if alone:
            print(f"{args.alone} alone: {args.alone} machines sharing nothing, each working {args.trivial // args.alone}-"
                  f"{-(-args.trivial // args.alone)} of the tasks as a job of its own through a remote of its own, all at once on "
                  "this computer: the most any layout of claims could reach here")
        if trivial.get(1) and trivial.get(3):
            # What the target asks of the cores, the machines and the remote sharing them here: tasks/s times CPU
            # per task. Above the cores there are, no layout of claims reaches it on this machine at that cost.
            def cpu_per_task(runs: list[Run]) -> float:
                return median([(sum(r.cpu) + r.remote_cpu) / r.tasks for r in runs])

            wanted = 1.5 * one
            print(f"1.5x one machine's rate ({wanted:.1f} tasks/s) takes {wanted * cpu_per_task(trivial[3]):.1f} cores at 3 machines' "
                  f"CPU per task, {wanted * cpu_per_task(trivial[1]):.1f} at one machine's; this machine has {os.cpu_count()}")

    every = [r for runs in [*sleeping.values(), *trivial.values(), alone] for r in runs]
    print()
    reasons = Counter[str]()
    for run in every:
        reasons.update(run.reasons)
    if reasons:
        print("refused pushes, by what git said: " + "; ".join(f"{why} {n}" for why, n in reasons.most_common()))
    for run in every:
        if run.pushes["failed"]:
            print(f"{run.machines} machines, {run.tasks} tasks: {run.pushes['failed']} pushes failed (no ref refused)")
        if run.twice:  # allowed where the lease was lost: a renewal that did not land before its deadline
            print(f"{run.machines} machines, {run.tasks} tasks: {run.twice} tasks started twice, "
                  f"{run.twice - run.twice_unexplained} after their lease expired; {run.writes['expired']} leases expired")

    print()
    four = median([r.wall / r.ideal for r in sleeping[4]]) if sleeping.get(4) else None
    six = median([r.refused_per_write for r in sleeping[6]]) if sleeping.get(6) else None
    gain = None
    if trivial.get(1) and trivial.get(3):
        gain = median([args.trivial / r.wall for r in trivial[3]]) / median([args.trivial / r.wall for r in trivial[1]])
    print_table(("target (issue 31)", "measured", ""), [
        (f"{args.tasks} x {args.seconds:g} s on 4 machines: wall/ideal <= 1.30", "-" if four is None else f"{four:.2f}",
         verdict(None if four is None else four <= 1.3)),
        ("6 machines: refused pushes per accepted write <= 0.5", "-" if six is None else f"{six:.2f}",
         verdict(None if six is None else six <= 0.5)),
        ("trivial tasks, 3 machines: tasks/s >= 1.5x one machine's", "-" if gain is None else f"{gain:.2f}x",
         verdict(None if gain is None else gain >= 1.5)),
        *([(f"  (the ceiling here: {args.alone} machines sharing nothing)",
            f"{median([args.trivial / r.wall for r in alone]) / median([args.trivial / r.wall for r in trivial[1]]):.2f}x", "")]
          if alone and trivial.get(1) else []),
    ])

    failures = [f"{r.machines} machines, {r.tasks} tasks: {f}" for r in every for f in r.failures]
    if failures:
        print()
        print("FAILURES:\n" + "\n".join(failures))
        raise SystemExit(1)
    print(f"\n({time.monotonic() - began:.0f} s in all)", file=sys.stderr)


if __name__ == "__main__":
    main()
