"""The console entry point and the one error boundary.

`gitswarm --version` is answered before the CLI (typer, pygit2) is imported:
start-up time is part of the product, and that path needs none of it. So is
the pre-push hook on a push that touches no verified branch (most pushes):
git waits for it on every `git push`. `status` and `show` go the quick path
(gitswarm.cli.quick), without typer.
"""

from __future__ import annotations

import atexit
import gc
import io
import os
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
    _exit(code)


def _exit(code: int) -> None:
    """Exit with `code` once the atexit handlers have run and stdout and stderr are flushed, without tearing
    the interpreter down: that teardown frees every module and object one by one, and closing the index's
    last SQLite connection checkpoints its WAL with two fsyncs (~7 ms of a `run` here). Nothing is lost
    by skipping it: git objects and refs are written when made; SQLite treats a connection never closed as
    a crash, which its WAL recovers from (the next connection replays the WAL, and checkpoints in due
    course); what `weakref.finalize` and `atexit` would clean up runs first. A command that leaves another
    thread running (whose end the interpreter would wait for) exits the ordinary way, as does one whose
    output cannot be flushed (the interpreter says so as it always did)."""
    threading = sys.modules.get("threading")
    multiprocessing = sys.modules.get("multiprocessing")
    if (threading is not None and threading.active_count() > 1) or (multiprocessing is not None and multiprocessing.active_children()):
        sys.exit(code)  # the ordinary way, as with a child process still running (a worker stopping after Ctrl-C)
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(code)
    os._exit(code)


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
