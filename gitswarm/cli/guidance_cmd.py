"""`follow-up` and `steer`: what a person adds to a job after submitting it."""

from typing import Annotated

import typer

from gitswarm.cli import render
from gitswarm.cli.context import _ctx
from gitswarm.cli.progress import print_markdown, progress_sink
from gitswarm.cli.run_job import work_options
from gitswarm.model.errors import EXIT_FAILED
from gitswarm.model.limits import DEFAULT_LEASE_SECONDS, DEFAULT_OUTPUT_CAP

# No `from __future__ import annotations`: typer reads these annotations at start-up.


def follow_up(
    ctx: typer.Context,
    target: Annotated[str, typer.Argument(metavar="PATCH|JOB/TASK", help="A patch id (prefix), or the finished implement task.")],
    instruction: Annotated[str, typer.Argument(metavar="INSTRUCTION", help="What to do now.")],
    resume_session: Annotated[
        bool, typer.Option("--resume-session", help="Resume the agent's own session (adapters that can); default: a fresh one.")
    ] = False,
    lease: Annotated[float, typer.Option("--lease", help="Lease length in seconds; renewed every third of it.")] = DEFAULT_LEASE_SECONDS,
) -> None:
    """Continue a finished delegation on its branch: a new attempt from its last patch, verified again; exit 0 iff it succeeded."""
    from gitswarm.engine.jobs.followup import run_follow_up  # deferred: see the note in app.py

    c = _ctx(ctx)
    options = work_options(1, lease, DEFAULT_OUTPUT_CAP)
    with progress_sink(c.output.json_mode) as sink:
        data = run_follow_up(c.swarm(), target, instruction, resume_session, options, sink)
    if c.output.json_mode:
        c.output.result(data, str)
    else:
        if "summary" in data:
            print_markdown(data["summary"]["text"])
        recorded = data["follow_up"]
        c.output.info(f"follow-up {recorded['op'][:12]} of {recorded['job'][:12]}/{recorded['task']}: {data['outcome']}")
        for line in render.next_steps(data):
            c.output.info(line)
    if data["outcome"] != "succeeded":
        raise typer.Exit(EXIT_FAILED)


def steer(
    ctx: typer.Context,
    target: Annotated[str, typer.Argument(metavar="JOB[/TASK]", help="A task (its next attempt or repair round), or a job (its next task to start).")],
    text: Annotated[str, typer.Argument(metavar="TEXT", help="The guidance.")],
) -> None:
    """Record guidance, delivered once at the task's next safe point (log shows when and to which attempt)."""
    from gitswarm.engine.jobs.steering import steer as record  # deferred: see the note in app.py

    c = _ctx(ctx)
    data = record(c.swarm(), target, text)
    c.output.result(data, lambda d: f"steer {d['op'][:12]} recorded: delivered at {d['delivered_at']}")
