"""`gitswarm mcp` with no subcommand: serve the repository to an MCP client over stdio.

No typer here: the quick path (gitswarm.cli.quick) starts the server without
it, since a client waits for the whole start-up before its first request.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gitswarm.model.errors import BadInput
from gitswarm.store import reffiles


def serve(repo: Path) -> None:
    """Run the server until the client closes it."""
    if reffiles.common_dir(repo.resolve()) is None:
        raise BadInput(f"{repo.resolve()}: not a git repository (run gitswarm mcp inside one, or with -C)")
    from gitswarm.pilot import server  # deferred: the quick `status` and `show` need none of the pilot's modules

    if sys.stdin.isatty():  # a person ran it: say what it waits for instead of sitting silent
        print(
            f"gitswarm mcp: serving {repo.resolve()} to an MCP client on stdin/stdout; an agent CLI starts it itself "
            "once registered (gitswarm mcp install --client NAME). Ctrl-C stops it.",
            file=sys.stderr,
        )
    server.serve(repo.resolve())
