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

    def swarm(self) -> Swarm:
        return Swarm(self.path)


def _ctx(ctx: typer.Context) -> Context:
    return ctx.find_root().obj
