"""Helpers for tests that watch real processes: liveness (zombies count as dead), children, polling."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether `pid` is a live process; a zombie waiting to be reaped is dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_gone(pids: Iterable[int], timeout: float = 1.0) -> list[int]:
    """Wait up to `timeout` for every pid to die; returns those still alive."""
    pids = list(pids)
    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in pids if alive(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.02)


def wait_for(predicate: Callable[[], object], timeout: float, what: str = "", interval: float = 0.02) -> object:
    """Poll until `predicate()` is truthy and return it; fail the test on timeout, saying for `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


def read_pids(path: Path) -> list[int]:
    try:
        return [int(word) for word in path.read_text().split()]
    except FileNotFoundError:
        return []


def children(pid: int) -> list[int]:
    """Live direct children of `pid`, found by scanning /proc/*/stat for their parent."""
    out: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] not in ("Z", "X"):
            out.append(int(entry.name))
    return out


def kill_quietly(pids: Iterable[int], sig: int = 9) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def finish(proc: subprocess.Popen, timeout: float) -> int:
    """The exit code of `proc` within `timeout`; else its whole session killed, and TimeoutExpired."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise


def interruptible() -> None:
    """A child's preexec_fn: SIGINT as a terminal's Ctrl-C delivers it. A process started in the background by
    a shell without job control inherits SIGINT ignored, and Python then never raises KeyboardInterrupt in it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
