"""Advisory file locks in gitswarm's local directory: one process at a time, released with it."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def held(path: Path) -> Iterator[None]:
    """Hold an exclusive flock on `path` (created if needed); the kernel drops it if the process dies."""
    with held_within(path, None):
        yield


@contextmanager
def held_within(path: Path, seconds: float | None, poll: float = 0.005) -> Iterator[bool]:
    """held(), waiting at most `seconds` (None: as long as it takes): yields whether the lock is held."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        yield _lock(fd, seconds, poll)
    finally:
        os.close(fd)


def _lock(fd: int, seconds: float | None, poll: float) -> bool:
    """Take the flock on `fd`: blocking (`seconds` None), or trying every `poll` seconds until `seconds` passed."""
    if seconds is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return True
    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll)
