"""The evidence an internal error leaves: its full traceback in a log file (store/errorlogs.py)."""

from __future__ import annotations

import os
import platform
import sys
import traceback
from pathlib import Path

from gitswarm import __version__
from gitswarm.store.errorlogs import write_log


def report(exc: BaseException, argv: list[str]) -> str:
    """What the log says: the command, the versions, where it ran, and the whole traceback."""
    lines = [
        f"gitswarm {__version__}: internal error",
        f"command: gitswarm {' '.join(argv)}",
        f"python: {platform.python_version()} ({sys.executable})",
        f"platform: {platform.platform()}",
        f"cwd: {_cwd() or '(deleted)'}",
        f"pid: {os.getpid()}",
        "",
    ]
    return "\n".join(lines) + "".join(traceback.format_exception(exc))


def record_internal_error(exc: BaseException, argv: list[str]) -> Path:
    """Write the report of `exc` to a new log file; its path. OSError when no log could be written."""
    return write_log(report(exc, argv), _cwd())


def _cwd() -> Path | None:
    """The working directory, None when it was deleted."""
    try:
        return Path.cwd()
    except FileNotFoundError:
        return None
