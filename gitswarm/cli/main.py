"""The console entry point and the one error boundary.

`gitswarm --version` is answered before the CLI (typer, pygit2) is imported:
start-up time is part of the product, and that path needs none of it.
"""

from __future__ import annotations

import sys

from gitswarm import __version__


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--version"]:
        print(f"gitswarm {__version__}")
        return
    sys.exit(run(args))


def run(args: list[str]) -> int:
    """Run one command; map every outcome to an exit code (0/1/2/3/130)."""
    from gitswarm.cli.boundary import invoke  # deferred so that --version stays fast

    return invoke(args)
