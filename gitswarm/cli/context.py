"""What every command gets: the output sink and the directory it runs in."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import typer

from gitswarm.cli.output import Output
from gitswarm.engine.swarm import Swarm


@dataclass
class Context:
    output: Output
    path: Path

    def swarm(self, create: bool = True) -> Swarm:
        """The repository's Swarm; `create=False` for commands that only read (they write nothing,
        not even the index, in a clone that has none yet)."""
        return Swarm(self.path, create=create)


def _ctx(ctx: typer.Context) -> Context:
    return ctx.find_root().obj
