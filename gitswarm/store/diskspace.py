"""A full disk, said as such: libgit2 reports one as "no error", SQLite as "database or disk is full".

Each write seam (store/git.py, the index guard, the git CLI) asks `full` after
a write failed: the error is a full disk when the errno says so, or when the
filesystem it wrote to has less room than the write needed plus a margin.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from gitswarm.model.errors import DiskFull

MARGIN = 256 * 1024  # less room than this beside the write is full, for any write gitswarm makes
NO_SPACE_SAID = ("No space left on device", "disk is full", "Disk quota exceeded")


LOST_ERRNO = ("no error", "")  # what libgit2 says of a failed write whose errno it lost (a full disk among them)


def free_bytes(path: Path) -> int | None:
    """Room left on the filesystem of `path` for this process (root may use the reserved blocks); None if
    it cannot be told."""
    try:
        found = os.statvfs(path)
    except OSError:
        return None
    return (found.f_bfree if os.geteuid() == 0 else found.f_bavail) * found.f_frsize


def full(path: Path, exc: BaseException, need: int = 0) -> DiskFull | None:
    """A DiskFull that names `path` when `exc`, raised by a write of about `need` bytes there, was a full disk:
    its errno or its text says so, or it says nothing (libgit2's "no error") and the room left is less than
    the write needed. Any other failure is not a full disk, however little room is left."""
    by_errno = isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)
    by_text = any(words in str(exc) for words in NO_SPACE_SAID)
    free = free_bytes(path)
    unsaid = not isinstance(exc, OSError) and str(exc).strip() in LOST_ERRNO
    by_room = unsaid and free is not None and free < need + MARGIN
    if not (by_errno or by_text or by_room):
        return None
    wanted = f"a write of {_size(need)}, " if need >= 1024 else ""
    room = "" if free is None else f" ({wanted}{_size(free)} free)"
    return DiskFull(f"disk full: cannot write to {path}{room}; nothing of that write was kept")


def _size(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} bytes"
