"""`index rebuild`, `doctor` and `demo`: looking after the store, and trying gitswarm out."""

import typer

from gitswarm.cli import render
from gitswarm.cli.context import _ctx
from gitswarm.cli.groups import group
from gitswarm.cli.progress import print_markdown, progress_sink
from gitswarm.model.errors import EXIT_FAILED

# No `from __future__ import annotations`: typer reads these annotations at start-up.

index_app = group("The SQLite index beside the refs.")


@index_app.command("rebuild")
def index_rebuild(ctx: typer.Context) -> None:
    """Delete the index and rebuild it from the refs."""
    c = _ctx(ctx)
    data = c.swarm().rebuild_index()
    c.output.result(data, lambda d: f"rebuilt {d['path']}: {d['jobs']} jobs, {d['tasks']} tasks")


def doctor(ctx: typer.Context) -> None:
    """Check the repository, the index and every job's records."""
    from gitswarm.engine.upkeep.doctor import diagnose  # deferred: only this command needs it

    c = _ctx(ctx)
    data = diagnose(c.swarm(create=False))
    c.output.result(data, render.doctor)
    if not data["ok"]:
        raise typer.Exit(EXIT_FAILED)


def demo(ctx: typer.Context) -> None:
    """Run a small job of shell tasks in a throwaway repository and print its summary."""
    from gitswarm.engine.upkeep import demo as demo_engine  # deferred: workers and a scratch repository

    c = _ctx(ctx)
    with progress_sink(c.output.json_mode) as sink:
        data = demo_engine.run_demo(sink)
    if c.output.json_mode:
        c.output.result(data, str)
    else:
        print_markdown(data["summary"]["text"])
        c.output.result(data["demo"], render.demo_story)
    if not demo_engine.demo_went_as_designed(data):
        raise typer.Exit(EXIT_FAILED)
