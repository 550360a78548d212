"""`run`, `work` and `delegate`: the commands that supervise workers."""

from pathlib import Path
from typing import Annotated

import typer

from gitswarm.cli import render
from gitswarm.cli.context import _ctx
from gitswarm.cli.options import ApproveOption, OverlapOption, RemoteOption
from gitswarm.cli.progress import print_markdown, progress_sink
from gitswarm.cli.run_job import DEFAULT_SKEW, DEFAULT_WORKERS, check_work_limits, run_job, work_options
from gitswarm.model.errors import EXIT_FAILED
from gitswarm.model.limits import DEFAULT_LEASE_SECONDS, DEFAULT_OUTPUT_CAP

# No `from __future__ import annotations`: typer reads these annotations at start-up.
# The engine modules these commands run (multiprocessing, worktrees, ...) are imported
# when they run: every other command, `status` first, must not pay for them at start-up.

JobsOption = Annotated[int, typer.Option("-j", "--jobs", help="Worker processes to keep busy, at most: a local run starts one per core, the rest once those each hold a task.")]
LeaseOption = Annotated[float, typer.Option("--lease", help="Lease length in seconds; renewed every third of it.")]
CapOption = Annotated[int, typer.Option("--output-cap", help="Bytes of stdout/stderr kept per run; the rest is counted.")]
SkewOption = Annotated[
    float, typer.Option("--clock-skew", help="With --remote: seconds past its deadline before another machine's lease is expired.")
]


def run(
    ctx: typer.Context,
    spec: Annotated[Path, typer.Argument(metavar="SPEC", help="Job spec (TOML).")],
    jobs: JobsOption = DEFAULT_WORKERS,
    lease: LeaseOption = DEFAULT_LEASE_SECONDS,
    output_cap: CapOption = DEFAULT_OUTPUT_CAP,
    approve: ApproveOption = False,
    allow_overlap: OverlapOption = False,
    remote: RemoteOption = None,
    clock_skew: SkewOption = DEFAULT_SKEW,
) -> None:
    """Submit a job, work it to the end, print its summary; exit 0 iff every task succeeded."""
    code = run_job(_ctx(ctx), spec, jobs, lease, output_cap, approve, allow_overlap, remote, clock_skew)
    if code:
        raise typer.Exit(code)


def work(
    ctx: typer.Context,
    job: Annotated[str | None, typer.Option("--job", help="Only this job; stop when it is done.")] = None,
    jobs: JobsOption = DEFAULT_WORKERS,
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
    check_work_limits(jobs, lease, output_cap, clock_skew)
    swarm = c.swarm()
    if remote is not None:  # the jobs there first: --job may name one this clone has not seen yet
        for refused, why in sorted(run_engine.check_remote(swarm, remote).items()):
            c.output.info(f"gitswarm: job {refused} on {remote} refused here (nothing of it is taken): {why}")
    job_id = swarm.resolve_job(job) if job else None
    options = work_options(jobs, lease, output_cap, job_id, until_idle, remote, clock_skew)
    with progress_sink(c.output.json_mode) as sink:
        data = run_engine.work(swarm, options, sink, tuple(trust or ()))
    for name, reason in sorted(data["unusable"].items()):
        c.output.info(f"gitswarm: tasks for adapter {name} were not run: {reason}")
    for job_id, why in sorted(data["skipped"].items()):
        c.output.info(f"gitswarm: skipped job {job_id}: {why} (gitswarm approve {job_id[:12]} to run it here)")
    if c.output.json_mode or not data["jobs"]:
        c.output.result(
            data,
            lambda d: "done; no job finished"
            + (f"; {render.plural(len(d['skipped']), 'job')} skipped, awaiting approval" if d["skipped"] else ""),
        )
        return
    for job_id in data["jobs"]:  # each finished job's summary, then what to do next, as `delegate` ends
        view = swarm.show(job_id)
        if "summary" in view:
            print_markdown(view["summary"]["text"])
        for line in render.next_steps(view):
            c.output.info(line)


def delegate(
    ctx: typer.Context,
    instruction: Annotated[str, typer.Argument(metavar="INSTRUCTION", help="What the agent should do.")],
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
    options = work_options(1, lease, DEFAULT_OUTPUT_CAP)
    with progress_sink(c.output.json_mode) as sink:
        data = delegate_engine.delegate(c.swarm(), instruction, adapter, list(check or ()), base, options, sink)
    if c.output.json_mode:
        c.output.result(data, str)
    else:
        print_markdown(data["summary"]["text"])
        for line in render.next_steps(data):
            c.output.info(line)
    if data["status"] != "succeeded":
        raise typer.Exit(EXIT_FAILED)
    if data.get("unverified"):  # the patch stands, but nothing judged it: not a success
        c.output.info("gitswarm: no checks: unverified; look at it (gitswarm diff) and verify it with checks before merging")
        raise typer.Exit(EXIT_FAILED)
