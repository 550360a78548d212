"""`status` and `show`: the commands people run most, shared by the typer commands and the quick path.

No typer here (gitswarm.cli.quick runs these without it: start-up time is
most of what a read costs).
"""

from __future__ import annotations

from gitswarm.cli import render
from gitswarm.cli.context import Context
from gitswarm.cli.progress import print_markdown
from gitswarm.engine.swarm import Swarm


def released(c: Context, swarm: Swarm) -> None:
    """Requeue what workers that died on this machine held, and say so: a task shown `running` is one whose
    worker is alive (or on another machine)."""
    for task in swarm.release_dead():
        c.output.info(f"gitswarm: {render.ended(task)}")


def status(c: Context, job: str | None, include_all: bool = False) -> None:
    """Jobs (the post-commit hook's audit jobs only with `include_all`), or one job's tasks."""
    swarm = c.swarm(create=False)
    released(c, swarm)
    if job is not None:
        c.output.result(swarm.status(job), render.job)
        return
    for message in sorted(map(str, swarm.index.invalid.values())):
        c.output.info(f"gitswarm: skipping a job: {message}")
    data = swarm.status()
    hidden = 0
    if not include_all:
        shown = [j for j in data["jobs"] if not j["audit"]]
        hidden = len(data["jobs"]) - len(shown)
        data["jobs"] = shown
    c.output.result(data, lambda d: render.jobs(d, hidden))


def show(c: Context, job: str) -> None:
    """The stitched summary of a finished job; before that, its tasks and artifacts."""
    swarm = c.swarm(create=False)
    released(c, swarm)
    data = swarm.show(job)
    if "summary" in data and not c.output.json_mode:
        print_markdown(data["summary"]["text"])
        return
    c.output.result(data, render.show)
