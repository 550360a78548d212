"""The one place errors become exit codes and one line on stderr."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from gitswarm.cli.output import error_line
from gitswarm.cli.quick import plan
from gitswarm.model.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, GitswarmError


def invoke(args: list[str]) -> int:
    """Run one command line (the quick path when it can parse it, else typer); its exit code."""
    quick = plan(args)
    return guarded(quick if quick is not None else lambda: _full(args))


def _full(args: list[str]) -> Any:
    from gitswarm.cli.full import run  # deferred: typer and the click tree, which the quick path does without

    return run(args)


def guarded(call: Callable[[], Any]) -> int:
    """Run `call`; map every outcome to an exit code (0/1/2/3/130), errors to one line on stderr."""
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
        return EXIT_INTERNAL
    finally:
        sys.stdout.flush()
    code = result if isinstance(result, int) else 0
    if code == EXIT_INTERRUPTED:  # typer turns Ctrl-C into Exit(130) itself
        error_line("interrupted")
    return code
