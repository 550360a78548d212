"""Command groups (`index`, `worktrees`, `adapters`, `hooks`) that list their commands when run bare."""

import typer

# No `from __future__ import annotations`: typer reads these annotations at start-up.


def group(help_text: str) -> typer.Typer:
    """A typer group whose bare invocation prints its help (its commands) and exits 0."""
    sub = typer.Typer(help=help_text, rich_markup_mode=None)

    @sub.callback(invoke_without_command=True)
    def bare(ctx: typer.Context) -> None:
        if ctx.invoked_subcommand is None:
            print(ctx.get_help())

    return sub
