"""The console entry point and the one error boundary.

`gitswarm --version` is answered before the CLI (typer, pygit2) is imported:
start-up time is part of the product, and that path needs none of it. So is
the pre-push hook on a push that touches no verified branch (most pushes):
git waits for it on every `git push`. `status` and `show` go the quick path
(gitswarm.cli.quick), without typer.
"""

from __future__ import annotations

import gc
import io
import sys

from gitswarm import __version__

PRE_PUSH = ["hooks", "run", "pre-push"]


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--version"]:
        print(f"gitswarm {__version__}")
        return
    if args[:3] == PRE_PUSH and _push_needs_no_check():
        return
    code = run(args)
    # What is left is freed by the exit: frozen, the interpreter's last collection does not walk every object
    # the command's imports made (~30 ms of each command's wall time here).
    gc.freeze()
    sys.exit(code)


def _push_needs_no_check() -> bool:
    """Answer the pre-push hook from the standard library alone when no pushed branch must be
    verified. What git gave on stdin is kept for the full hook otherwise."""
    from pathlib import Path  # deferred, as the line below: --version does without them (~5 ms)

    from gitswarm.engine.sharing.push_gate import nothing_to_check  # deferred: stdlib only, but only this path needs it

    pushed = sys.stdin.read()
    sys.stdin = io.StringIO(pushed)
    return nothing_to_check(Path.cwd(), pushed.splitlines())


def run(args: list[str]) -> int:
    """Run one command; map every outcome to an exit code (0/1/2/3/130)."""
    from gitswarm.cli.boundary import invoke  # deferred so that --version stays fast

    return invoke(args)
