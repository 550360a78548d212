"""`run`, `work` and `delegate`: the commands that supervise workers."""

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gitswarm.cli import render
from gitswarm.cli.context import _ctx
from gitswarm.cli.options import ApproveOption, OverlapOption, RemoteOption
from gitswarm.cli.progress import print_markdown, progress_sink
from gitswarm.model.errors import EXIT_FAILED, BadInput
from gitswarm.model.limits import (
    DEFAULT_LEASE_SECONDS,
    DEFAULT_OUTPUT_CAP,
    MAX_LEASE_SECONDS,
    MAX_OUTPUT_CAP,
    MAX_WORKERS,
    MIN_LEASE_SECONDS,
    MIN_OUTPUT_CAP,
)

if TYPE_CHECKING:
    from gitswarm.engine.jobs.supervisor import WorkOptions

# No `from __future__ import annotations`: typer reads these annotations at start-up.
# The engine modules these commands run (multiprocessing, worktrees, ...) are imported
# when they run: every other command, `status` first, must not pay for them at start-up.

JobsOption = Annotated[int, typer.Option("-j", "--jobs", help="Worker processes to keep busy.")]
LeaseOption = Annotated[float, typer.Option("--lease", help="Lease length in seconds; renewed every third of it.")]
CapOption = Annotated[int, typer.Option("--output-cap", help="Bytes of stdout/stderr kept per run; the rest is counted.")]
SkewOption = Annotated[
    float, typer.Option("--clock-skew", help="With --remote: seconds past its deadline before another machine's lease is expired.")
]
DEFAULT_SKEW = 5.0  # engine/remote_ledger.DEFAULT_CLOCK_SKEW_SECONDS, not imported: see the note at the imports
MAX_SKEW = 3600.0


def _work_options(
    jobs: int, lease: float, output_cap: int, job: str | None = None, until_idle: bool = False,
    remote: str | None = None, clock_skew: float = DEFAULT_SKEW,
) -> "WorkOptions":
    from gitswarm.engine.jobs.supervisor import WorkOptions  # deferred: see the note at the imports
    from gitswarm.engine.jobs.worker import WorkerOptions

    _check_work_limits(jobs, lease, output_cap, clock_skew)
    return WorkOptions(
        workers=jobs, job=job, until_idle=until_idle, worker=WorkerOptions(lease=lease, output_cap=output_cap),
        remote=remote, clock_skew=clock_skew,
    )


def _check_work_limits(jobs: int, lease: float, output_cap: int, clock_skew: float = DEFAULT_SKEW) -> None:
    """The bounds of -j, --lease, --output-cap and --clock-skew (gitswarm.model.limits); checked before anything is opened."""
    if not (math.isfinite(clock_skew) and 0 <= clock_skew <= MAX_SKEW):
        raise BadInput(f"--clock-skew: must be between 0 and {MAX_SKEW:g} seconds")
    if jobs < 1:
        raise BadInput("-j: must be at least 1")
    if jobs > MAX_WORKERS:
        raise BadInput(f"-j: must be at most {MAX_WORKERS}")
    if not math.isfinite(lease):
        raise BadInput(f"--lease: must be a finite number of seconds, got {lease}")
    if lease <= 0:
        raise BadInput("--lease: must be positive")
    if not MIN_LEASE_SECONDS <= lease <= MAX_LEASE_SECONDS:
        raise BadInput(f"--lease: must be between {MIN_LEASE_SECONDS:g} and {MAX_LEASE_SECONDS:g} seconds")
    if not MIN_OUTPUT_CAP <= output_cap <= MAX_OUTPUT_CAP:
        raise BadInput(f"--output-cap: must be between {MIN_OUTPUT_CAP} and {MAX_OUTPUT_CAP} bytes")


def run(
    ctx: typer.Context,
    spec: Annotated[Path, typer.Argument(help="Job spec (TOML).")],
    jobs: JobsOption = 4,
    lease: LeaseOption = DEFAULT_LEASE_SECONDS,
    output_cap: CapOption = DEFAULT_OUTPUT_CAP,
    approve: ApproveOption = False,
    allow_overlap: OverlapOption = False,
    remote: RemoteOption = None,
    clock_skew: SkewOption = DEFAULT_SKEW,
) -> None:
    """Submit a job, work it to the end, print its summary; exit 0 iff every task succeeded."""
    from gitswarm.engine.jobs import run as run_engine  # deferred: see the note at the imports

    c = _ctx(ctx)
    options = _work_options(jobs, lease, output_cap, remote=remote, clock_skew=clock_skew)
    swarm = c.swarm()
    if remote is not None:
        run_engine.check_remote(swarm, remote, fetch=False)
    with progress_sink(c.output.json_mode) as sink:
        data = run_engine.run(swarm, spec, options, sink, approve=approve, allow_overlap=allow_overlap)
    if c.output.json_mode:
        c.output.result(data, str)
    elif "summary" in data:
        print_markdown(data["summary"]["text"])
    for name, reason in sorted(data.get("unusable", {}).items()):
        c.output.info(f"gitswarm: tasks for adapter {name} were not run: {reason}")
    if data["status"] != "succeeded":
        raise typer.Exit(EXIT_FAILED)


def work(
    ctx: typer.Context,
    job: Annotated[str | None, typer.Option("--job", help="Only this job; stop when it is done.")] = None,
    jobs: JobsOption = 4,
    until_idle: Annotated[bool, typer.Option("--until-idle", help="Stop when nothing is queued or running.")] = False,
    lease: LeaseOption = DEFAULT_LEASE_SECONDS,
    output_cap: CapOption = DEFAULT_OUTPUT_CAP,
    trust: Annotated[list[str] | None, typer.Option("--trust", help="Also run jobs pulled from this remote.")] = None,
    remote: RemoteOption = None,
    clock_skew: SkewOption = DEFAULT_SKEW,
) -> None:
    """Run workers on queued tasks (until the job is done, or with --until-idle the queue; else until Ctrl-C)."""
    from gitswarm.engine.jobs import run as run_engine  # deferred: see the note at the imports

    c = _ctx(ctx)
    _check_work_limits(jobs, lease, output_cap, clock_skew)
    swarm = c.swarm()
    if remote is not None:  # the jobs there first: --job may name one this clone has not seen yet
        for refused, why in sorted(run_engine.check_remote(swarm, remote).items()):
            c.output.info(f"gitswarm: job {refused} on {remote} refused here (nothing of it is taken): {why}")
    job_id = swarm.resolve_job(job) if job else None
    options = _work_options(jobs, lease, output_cap, job_id, until_idle, remote, clock_skew)
    with progress_sink(c.output.json_mode) as sink:
        data = run_engine.work(swarm, options, sink, tuple(trust or ()))
    for name, reason in sorted(data["unusable"].items()):
        c.output.info(f"gitswarm: tasks for adapter {name} were not run: {reason}")
    for job_id, why in sorted(data["skipped"].items()):
        c.output.info(f"gitswarm: skipped job {job_id}: {why} (gitswarm approve {job_id[:12]} to run it here)")
    c.output.result(
        data,
        lambda d: f"done; summaries written for {render.plural(len(d['jobs']), 'job')}"
        + (f"; {render.plural(len(d['skipped']), 'job')} skipped, awaiting approval" if d["skipped"] else ""),
    )


def delegate(
    ctx: typer.Context,
    instruction: Annotated[str, typer.Argument(help="What the agent should do.")],
    adapter: Annotated[str, typer.Option("--adapter", help="The agent to delegate to.")],
    check: Annotated[
        list[str] | None, typer.Option("--check", help="A command that must pass on the patch; repeatable (default: [audit] checks).")
    ] = None,
    base: Annotated[str | None, typer.Option("--base", help="Branch from this commit (default: the checked-out tip).")] = None,
    lease: LeaseOption = DEFAULT_LEASE_SECONDS,
) -> None:
    """Hand one change to an agent in its own branch and worktree; exit 0 iff the patch was verified."""
    from gitswarm.engine.jobs import delegate as delegate_engine  # deferred: see the note at the imports

    c = _ctx(ctx)
    options = _work_options(1, lease, DEFAULT_OUTPUT_CAP)
    with progress_sink(c.output.json_mode) as sink:
        data = delegate_engine.delegate(c.swarm(), instruction, adapter, list(check or ()), base, options, sink)
    if c.output.json_mode:
        c.output.result(data, str)
    else:
        print_markdown(data["summary"]["text"])
        for line in render.delegate_next(data):
            c.output.info(line)
    if data["status"] != "succeeded":
        raise typer.Exit(EXIT_FAILED)
    if data.get("unverified"):  # the patch stands, but nothing judged it: not a success
        c.output.info("gitswarm: no checks: unverified; look at it (gitswarm diff) and verify it with checks before merging")
        raise typer.Exit(EXIT_FAILED)
