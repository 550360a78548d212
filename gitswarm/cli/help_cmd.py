"""`help [COMMAND]` and `completion SHELL`: finding one's way around the command line."""

import difflib
import enum
from typing import Annotated

import typer

from gitswarm.cli.completion import script
from gitswarm.model.errors import BadInput

# No `from __future__ import annotations`: typer reads these annotations at start-up.


class Shell(str, enum.Enum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def help_(
    ctx: typer.Context,
    command: Annotated[list[str] | None, typer.Argument(metavar="[COMMAND]...", help="A command, e.g. status or worktrees list.")] = None,
) -> None:
    """Show what gitswarm, or one of its commands, takes (as --help does)."""
    here = ctx.find_root()
    for n, name in enumerate(command or []):
        sub = getattr(here.command, "commands", {}).get(name)
        if sub is None or sub.hidden:
            known = [c for c, found in getattr(here.command, "commands", {}).items() if not found.hidden]
            close = difflib.get_close_matches(name, known, n=1)
            where = " ".join(["gitswarm", *(command or [])[:n]])
            hint = f"; did you mean {close[0]!r}?" if close else f" (it has: {', '.join(known) or 'no commands'})"
            raise BadInput(f"help: {where} has no command {name!r}{hint}")
        here = typer.Context(sub, info_name=name, parent=here)
    print(here.get_help())


def completion(shell: Annotated[Shell, typer.Argument(metavar="SHELL", help="bash, zsh or fish.")], ctx: typer.Context) -> None:
    """Print a completion script for SHELL (load it with eval, or save it where the shell looks); nothing is installed."""
    print(script(shell.value, ctx.find_root().command), end="")
