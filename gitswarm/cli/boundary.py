"""The one place errors become exit codes and one line on stderr.

An internal error (exit 3) also leaves its full traceback in a log file, and a
second line names it: engine/upkeep/errorlog.py, store/errorlogs.py.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from gitswarm.cli.output import error_line
from gitswarm.cli.quick import plan
from gitswarm.model.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, GitswarmError


def invoke(args: list[str]) -> int:
    """Run one command line (the quick path when it can parse it, else typer); its exit code."""
    quick = plan(args)
    return guarded(quick if quick is not None else lambda: _full(args), args)


def _full(args: list[str]) -> Any:
    from gitswarm.cli.full import run  # deferred: typer and the click tree, which the quick path does without

    return run(args)


def guarded(call: Callable[[], Any], argv: Sequence[str] = ()) -> int:
    """Run `call` (the command line `argv`); map every outcome to an exit code (0/1/2/3/130),
    errors to one line on stderr (an internal error to two: the second names its log)."""
    try:
        result = call()
    except GitswarmError as exc:
        error_line(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        error_line("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return 0
    except Exception as exc:  # the one error boundary: anything else is our bug
        error_line(f"internal error: {type(exc).__name__}: {exc}")
        _leave_evidence(exc, argv)
        return EXIT_INTERNAL
    finally:
        sys.stdout.flush()
    code = result if isinstance(result, int) else 0
    if code == EXIT_INTERRUPTED:  # typer turns Ctrl-C into Exit(130) itself
        error_line("interrupted")
    return code


def _leave_evidence(exc: BaseException, argv: Sequence[str]) -> None:
    """Write the traceback of an internal error to a log file, and name the file on stderr."""
    from gitswarm.engine.upkeep.errorlog import record_internal_error  # deferred: only an internal error needs it

    try:
        path = record_internal_error(exc, list(argv))
    except OSError as failed:
        error_line(f"the traceback could not be written to a log: {failed}")
        return
    error_line(f"the full traceback is in {path}")
