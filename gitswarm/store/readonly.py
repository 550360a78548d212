"""A repository that cannot be written, said as such: a read-only mount, a CI cache, a checkout
without write permission.

The first write of every command that writes is the index's (its lock file,
store/index/connection.py): `refusal` tells such a failure from any other
there, so that the command stops with one line (`refused`, exit 2) before it
has written anything, and a command that only reads keeps its index in memory
instead.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from gitswarm.model.errors import ReadOnlyRepository

REFUSED = (errno.EROFS, errno.EACCES, errno.EPERM)  # a read-only filesystem; no permission to write
_SQLITE_REFUSED = (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN)


def read_only(folder: Path, exc: BaseException) -> ReadOnlyRepository | None:
    """A ReadOnlyRepository naming `folder` when `exc`, raised by a write in it, says it cannot be written
    there (`refusal`); None for any other failure."""
    why = refusal(folder, exc)
    return None if why is None else refused(why)


def refused(why: str) -> ReadOnlyRepository:
    """The error a write meets first in a repository that cannot be written, `why` as `refusal` says it."""
    return ReadOnlyRepository(f"the repository is read-only: {why}; nothing was written")


def refusal(folder: Path, exc: BaseException) -> str | None:
    """`cannot write to FOLDER (WHY)` when `exc`, raised by a write in `folder`, says it cannot be written
    there: the errno of an OSError, or SQLite's "readonly"/"cannot open" in a folder this process may not
    write (access(2) says so for a read-only mount too, root included). None for any other failure."""
    if isinstance(exc, OSError) and exc.errno in REFUSED:
        why = exc.strerror or str(exc)
    elif isinstance(exc, sqlite3.Error) and _sqlite_code(exc) in _SQLITE_REFUSED and not os.access(folder, os.W_OK):
        why = str(exc)
    else:
        return None
    return f"cannot write to {folder} ({why})"


def unwritable(folder: Path) -> str | None:
    """`cannot write to FOLDER (WHY)` when this process may not write in `folder` (or, while it does not
    exist, the folder it would be made in); None when it may. Asked without writing anything."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if os.access(existing, os.W_OK):
        return None
    mounted_read_only = os.statvfs(existing).f_flag & os.ST_RDONLY
    return f"cannot write to {folder} ({os.strerror(errno.EROFS if mounted_read_only else errno.EACCES)})"


def _sqlite_code(exc: sqlite3.Error) -> int:
    """The primary result code of a SQLite error (its extended code's low byte); -1 when it has none."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else -1
