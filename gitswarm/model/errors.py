"""The errors gitswarm raises, each carrying the exit code the CLI maps it to.

Exit codes are part of the public contract: 0 success, 1 the work failed,
2 bad input or usage, 3 internal error.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130


class GitswarmError(Exception):
    """Base of every error gitswarm reports on purpose."""

    exit_code: int = EXIT_INTERNAL


class BadInput(GitswarmError):
    """The user gave something gitswarm cannot accept; nothing was written."""

    exit_code = EXIT_USAGE


class NotARepository(BadInput):
    pass


class NotFound(BadInput):
    pass


class ReadOnlyRepository(BadInput):
    """The repository cannot be written (a read-only mount, a checkout without write permission);
    raised by the first write, so nothing was written."""


class Ambiguous(BadInput):
    pass


class SpecError(BadInput):
    """A job spec failed validation; the message starts with the field path."""


class CorruptRecord(BadInput):
    """A record in a ref does not decode or breaks an invariant."""


class NewerFormat(BadInput):
    """A record was written by a newer gitswarm; refusing beats misreading it."""


class InvalidTransition(BadInput):
    """The operation does not apply to the task or job in its current state."""


class WorkFailed(GitswarmError):
    """The work itself failed: a task, check, verdict or merge."""

    exit_code = EXIT_FAILED


class DiskFull(WorkFailed):
    """A write found no room on its filesystem; nothing of it was kept (git objects and refs are
    written whole or not at all, the index in transactions)."""


class LeaseLost(WorkFailed):
    """A worker's fencing token is no longer current; its write was refused."""


class Interrupted(GitswarmError):
    """A run was stopped before it finished because its process is stopping (`gitswarm mcp` got SIGTERM):
    it has no result, and none is recorded as if the command had failed."""

    exit_code = EXIT_INTERRUPTED


class RefConflict(GitswarmError):
    """A compare-and-swap on a ref lost a race; callers rebuild and retry."""


class InternalError(GitswarmError):
    exit_code = EXIT_INTERNAL
