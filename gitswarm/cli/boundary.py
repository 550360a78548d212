"""The one place errors become exit codes and one line on stderr."""

from __future__ import annotations

import sys

from gitswarm.cli.app import app
from gitswarm.cli.output import error_line
from gitswarm.model.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE, GitswarmError

from typer import Abort

try:  # newer typer vendors click
    from typer._click.exceptions import ClickException
except ImportError:  # pragma: no cover - older typer with click as a dependency
    from click.exceptions import ClickException


def invoke(args: list[str]) -> int:
    try:
        result = app(args=args, prog_name="gitswarm", standalone_mode=False)
    except GitswarmError as exc:
        error_line(str(exc))
        return exc.exit_code
    except ClickException as exc:
        error_line(exc.format_message())
        return EXIT_USAGE
    except (Abort, KeyboardInterrupt):
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
