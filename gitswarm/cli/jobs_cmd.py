"""`init`, `submit`, the reads of a job (`status`, `show`, `output`, `log`, `artifacts`,
`artifact`) and `cancel`, `retry`, `recover`."""

import sys
from pathlib import Path
from typing import Annotated

import typer

from gitswarm.cli import reads, render
from gitswarm.cli.context import _ctx
from gitswarm.cli.options import ApproveOption, JobArg, OverlapOption, RemoteOption
from gitswarm.engine.jobs.kept import offer_kept

# No `from __future__ import annotations`: typer reads these annotations at start-up.


def init(ctx: typer.Context) -> None:
    """Set up the index (and this clone's actor id); safe to run again."""
    c = _ctx(ctx)
    swarm = c.swarm()
    data = {"index": str(swarm.index.path), "jobs": len(swarm.index.job_ids()), "actor": swarm.actor}
    c.output.result(data, lambda d: f"gitswarm ready: index {d['index']} ({d['jobs']} jobs)")


def submit(
    ctx: typer.Context,
    spec: Annotated[Path, typer.Argument(metavar="SPEC", help="Job spec (TOML).")],
    approve: ApproveOption = False,
    allow_overlap: OverlapOption = False,
    remote: RemoteOption = None,
) -> None:
    """Create a job from SPEC and print its id (with --remote, pushed there for every machine to work)."""
    c = _ctx(ctx)
    swarm = c.swarm()
    if remote is not None:
        from gitswarm.engine.machines.arbiter import Arbiter  # deferred: only --remote needs the transport

        arbiter = Arbiter(swarm, remote)  # an unknown remote is bad input before the job is made
    job_id = swarm.submit_file(spec, approve=approve, allow_overlap=allow_overlap)
    for notice in swarm.notices:
        c.output.info(f"gitswarm: note: {notice}")
    if remote is not None:
        arbiter.publish([job_id])
    c.output.result({"id": job_id}, lambda d: d["id"])


# status and show also run without typer, from the same code: gitswarm/cli/quick.py.


def status(
    ctx: typer.Context,
    job: Annotated[str | None, typer.Argument(metavar="JOB", help="Job id or prefix.")] = None,
    include_all: Annotated[bool, typer.Option("--all", help="Also the audit jobs the post-commit hook queues.")] = False,
    remote: Annotated[
        str | None, typer.Option("--remote", metavar="REMOTE", help="Fetch the jobs from this remote first (who holds what, everywhere).")
    ] = None,
) -> None:
    """List jobs, or one job's tasks (HELD BY: the machine and worker running each task)."""
    c = _ctx(ctx)
    if remote is not None:
        from gitswarm.engine.machines.arbiter import (
            Arbiter,  # deferred: status without --remote stays on the quick path
        )

        Arbiter(c.swarm(), remote).sync()
    reads.status(c, job, include_all)


def show(ctx: typer.Context, job: JobArg) -> None:
    """The stitched summary of a finished job; before that, its tasks and artifacts."""
    reads.show(_ctx(ctx), job)


def output(
    ctx: typer.Context,
    task: Annotated[str, typer.Argument(metavar="JOB/TASK", help="The task.")],
    attempt: Annotated[int | None, typer.Option("--attempt", help="Of attempt N (counted since the task's last retry).")] = None,
    stderr: Annotated[bool, typer.Option("--stderr", help="Its stderr instead of its stdout.")] = False,
) -> None:
    """Print the output of a task's last run or check, as it was captured (raw bytes)."""
    c = _ctx(ctx)
    found = c.swarm(create=False).task_output(task, attempt, stderr)
    if c.output.json_mode:
        c.output.result({**found, "data": found["data"].decode(errors="replace")}, str)
        return
    sys.stdout.flush()
    sys.stdout.buffer.write(found["data"]) if hasattr(sys.stdout, "buffer") else sys.stdout.write(found["data"].decode(errors="replace"))
    if found["truncated"]:
        c.output.info(f"gitswarm: output cut at the capture cap: {found['truncated']} bytes not kept")


def log(ctx: typer.Context, job: JobArg) -> None:
    """The job's event history, oldest first."""
    c = _ctx(ctx)
    c.output.result(c.swarm(create=False).log(job), render.log)


def artifacts(ctx: typer.Context, job: JobArg) -> None:
    """List a job's artifacts."""
    c = _ctx(ctx)
    c.output.result(c.swarm(create=False).artifacts(job), render.artifacts)


def artifact(ctx: typer.Context, artifact_id: Annotated[str, typer.Argument(metavar="ID", help="Artifact id or prefix.")]) -> None:
    """Print one artifact record."""
    c = _ctx(ctx)
    data = c.swarm(create=False).artifact(artifact_id)
    c.output.json_mode = True
    c.output.result(data, str)


def cancel(
    ctx: typer.Context,
    target: Annotated[str, typer.Argument(metavar="JOB|TASK", help="A job, or a task as JOB/TASK.")],
    reason: Annotated[str | None, typer.Option(help="Why; recorded with the cancel.")] = None,
) -> None:
    """Cancel a job or one task; dependents of a cancelled task are skipped."""
    c = _ctx(ctx)
    c.output.result(c.swarm().cancel(target, reason), render.changed)


def retry(ctx: typer.Context, task: Annotated[str, typer.Argument(metavar="TASK", help="JOB/TASK.")]) -> None:
    """Requeue a failed, cancelled or skipped task and the dependents skipped because of it."""
    c = _ctx(ctx)
    c.output.result(c.swarm().retry(task), render.changed)


def recover(ctx: typer.Context) -> None:
    """Requeue the tasks whose worker died on this machine or whose lease ran out (no attempt used); record results
    kept while a job's ref was gone."""
    c = _ctx(ctx)
    swarm = c.swarm()
    data = swarm.recover()
    data["kept"] = offer_kept(swarm)
    c.output.result(data, render.recovered)
