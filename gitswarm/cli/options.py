"""Options more than one command module takes."""

from typing import Annotated

import typer

# No `from __future__ import annotations`: typer reads these annotations at start-up.

ApproveOption = Annotated[bool, typer.Option("--approve", help="Approve tasks that act outside the repository (browser, deploy).")]
OverlapOption = Annotated[
    bool, typer.Option("--allow-overlap", help="Submit implement tasks that may run at once and touch the same files.")
]
JobArg = Annotated[str, typer.Argument(metavar="JOB", help="Job id or prefix.")]
RemoteOption = Annotated[
    str | None, typer.Option("--remote", metavar="REMOTE", help="Coordinate through this git remote: it decides every claim (docs/many-machines.md).")
]
