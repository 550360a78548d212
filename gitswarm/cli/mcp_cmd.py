"""`gitswarm mcp` (serve the pilot's MCP server on stdio), `mcp install` and `mcp uninstall`.

The server is gitswarm.pilot.server; install and uninstall only edit a
client's configuration.
"""

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gitswarm.cli.context import Context, _ctx
from gitswarm.cli.mcp_serve import serve
from gitswarm.model.errors import BadInput
from gitswarm.store import reffiles

if TYPE_CHECKING:
    from gitswarm.pilot.clients import Registration

# No `from __future__ import annotations`: typer reads these annotations at start-up.

mcp_app = typer.Typer(help="The MCP server a live agent drives gitswarm through.", rich_markup_mode=None)

ClientOption = Annotated[str, typer.Option("--client", help="claude-code, codex, gemini, hermes or omp.")]
ScopeOption = Annotated[str, typer.Option("--scope", help="user (every project) or project (this repository's own file).")]
PrintOption = Annotated[bool, typer.Option("--print", help="Show what it would write; write nothing.")]


@mcp_app.callback(invoke_without_command=True)
def mcp(ctx: typer.Context) -> None:
    """Serve this repository's swarm to an MCP client over stdio (the client starts it)."""
    if ctx.invoked_subcommand is None:
        serve(Path("."))


def _registration(client: str, scope: str) -> "Registration":
    from gitswarm.pilot import clients  # deferred: see the note in app.py

    project = Path(".").resolve()
    if scope == "project":
        if reffiles.common_dir(project) is None:
            raise BadInput("--scope project: run it inside the repository (or with -C)")
        command = ["gitswarm", "mcp"]  # a file the team shares: whoever opens it runs their own gitswarm
    else:
        command = [sys.executable, "-m", "gitswarm", "mcp"]  # this installation, wherever the client's PATH points
    return clients.registration(client, scope, project, command)  # type: ignore[arg-type]  # checked inside


def _show(c: Context, data: dict) -> None:
    """The result line; with --print the file's would-be content follows, as it would be written."""
    c.output.result(data, lambda d: f"{d['client']} ({d['scope']}): {d['action']} {d['path']}")
    if not c.output.json_mode and data.get("content") is not None:
        sys.stdout.write(data["content"])


@mcp_app.command("install")
def mcp_install(ctx: typer.Context, client: ClientOption, scope: ScopeOption = "user", show: PrintOption = False) -> None:
    """Register gitswarm's MCP server with an agent CLI, in its own configuration file (idempotent)."""
    c = _ctx(ctx)
    from gitswarm.pilot import install  # deferred: see the note in app.py

    _show(c, install.install(_registration(client, scope), install.state_dir(), dry_run=show))


@mcp_app.command("uninstall")
def mcp_uninstall(ctx: typer.Context, client: ClientOption, scope: ScopeOption = "user", show: PrintOption = False) -> None:
    """Remove the registration; the file is put back exactly as it was when nothing else changed it since."""
    c = _ctx(ctx)
    from gitswarm.pilot import install  # deferred: see the note in app.py

    _show(c, install.uninstall(_registration(client, scope), install.state_dir(), dry_run=show))
