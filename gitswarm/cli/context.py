"""What every command gets: the output sink and the directory it runs in.

No typer here: the quick path (gitswarm.cli.quick) runs read commands
without it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from gitswarm.cli.output import Output
from gitswarm.engine.swarm import Swarm
from gitswarm.model.errors import BadInput

if TYPE_CHECKING:
    import typer


class Context(msgspec.Struct):
    output: Output
    path: Path

    def swarm(self, create: bool = True) -> Swarm:
        """The repository's Swarm; `create=False` for commands that only read (they write nothing,
        not even the index, in a clone that has none yet)."""
        return Swarm(self.path, create=create)


def enter(path: str) -> None:
    """`-C PATH`: run as if started in PATH, as `git -C` does (relative arguments are then relative to it)."""
    if Path(path) == Path("."):
        return
    try:
        os.chdir(path)
    except OSError as exc:
        raise BadInput(f"-C {path}: {exc.strerror}") from None


def _ctx(ctx: typer.Context) -> Context:
    found: Context = ctx.find_root().obj  # set by the app's callback (cli/app.py)
    return found
