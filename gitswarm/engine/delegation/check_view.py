"""What a person needs to see of a check: the command, how it ended and, when it failed,
the last lines it printed (read from the check's stdout and stderr blobs)."""

from __future__ import annotations

from collections.abc import Callable

from gitswarm.engine.results import CheckView
from gitswarm.model.artifacts import BlobRef, Check

TAIL_LINES = 10  # of stdout, then as many of stderr


def check_view(check: Check, read_blob: Callable[[str], bytes]) -> CheckView:
    """The check as a person sees it: `tail` holds the last lines of stdout then of stderr when the
    check failed, one string per line; [] when it passed."""
    tail = [] if check.passed else [*_tail(check.stdout, read_blob), *_tail(check.stderr, read_blob)]
    command = check.command if isinstance(check.command, str) else list(check.command)
    return CheckView(command=command, exit_code=check.exit_code, passed=check.passed, timed_out=check.timed_out, tail=tail)


def _tail(ref: BlobRef | None, read_blob: Callable[[str], bytes]) -> list[str]:
    if ref is None:
        return []
    text = read_blob(ref.oid).decode("utf-8", errors="replace").rstrip("\n")
    return text.splitlines()[-TAIL_LINES:] if text else []
