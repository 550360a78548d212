"""Run one adapter process: its own session, capped capture, heartbeats, group kill.

The process starts in a new session, so it and every grandchild share one
process group. Timeout, cancel and Ctrl-C send SIGTERM to the whole group,
then SIGKILL after a grace period; when the process exits on its own, the
group is killed too, so no grandchild outlives its task.

A process on its way out calls stop_runs(): from then on every run of it, in
any thread, kills its group within a tick and raises Interrupted instead of
returning a result (`gitswarm mcp` on SIGTERM, whose checks run on threads
of their own: a check cut short is no check result).
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

import msgspec

from gitswarm.model.errors import Interrupted
from gitswarm.model.limits import DEFAULT_OUTPUT_CAP

GRACE_SECONDS = 2.0
TICK_SECONDS = 0.1
_CHUNK = 65536


class Stream(msgspec.Struct):
    """Captured bytes of one pipe, up to a cap; what is cut is counted, never silently lost."""

    cap: int
    chunks: list[bytes] = msgspec.field(default_factory=list)
    size: int = 0
    dropped: int = 0

    def feed(self, data: bytes) -> None:
        room = self.cap - self.size
        if room > 0:
            kept = data[:room]
            self.chunks.append(kept)
            self.size += len(kept)
        self.dropped += max(0, len(data) - max(room, 0))

    @property
    def data(self) -> bytes:
        return b"".join(self.chunks)


class ProcessResult(msgspec.Struct, frozen=True):
    exit_code: int | None  # None when we killed it
    stdout: bytes
    stderr: bytes
    stdout_dropped: int
    stderr_dropped: int
    duration: float
    timed_out: bool = False
    stopped: str | None = None  # why we killed it: "timeout", "cancelled", "lease lost", "supervisor gone", "interrupted"
    error: str | None = None  # could not start


class _Stopping:
    """Whether this process stops its runs, and why (stop_runs)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.why = ""


_stopping = _Stopping()


def stop_runs(why: str) -> None:
    """Stop every run of this process, now and from now on: each kills its process group (SIGTERM, then
    SIGKILL after its grace) and raises Interrupted(`why`). Not undone: the process is on its way out."""
    _stopping.why = why
    _stopping.event.set()


def _refuse_if_stopping(argv: Sequence[str], what: str) -> None:
    if _stopping.event.is_set():
        raise Interrupted(f"{_stopping.why}: {argv[0] if argv else 'a command'} {what}")


def kill_group(pgid: int, grace: float = GRACE_SECONDS, alive: Callable[[], bool] | None = None) -> None:
    """SIGTERM the group, wait up to `grace` for `alive()` to turn false, then SIGKILL it."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while alive is not None and alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    timeout: float | None = None,
    output_cap: int = DEFAULT_OUTPUT_CAP,
    on_tick: Callable[[], str | None] | None = None,
    on_start: Callable[[int], None] | None = None,
    grace: float = GRACE_SECONDS,
    tick: float = TICK_SECONDS,
) -> ProcessResult:
    """Run `argv` to completion, or until timeout or until `on_tick` returns a reason to stop.

    `on_tick` is called about every `tick` seconds while the process runs (the
    worker renews its lease there); `on_start` gets the process group id.
    After stop_runs() it raises Interrupted: before the start, or once the group is killed.
    """
    _refuse_if_stopping(argv, "was not started")
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=None if env is None else dict(env),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return ProcessResult(None, b"", b"", 0, 0, 0.0, error=f"cannot start {argv[0]!r}: {exc.strerror or exc}")
    pgid = proc.pid
    out, err = Stream(output_cap), Stream(output_cap)
    selector = selectors.DefaultSelector()
    exit_fd: int | None = None
    exited = False
    stopped: str | None = None
    next_tick = start + tick
    # From here on an interrupt (Ctrl-C, or the SIGTERM a worker turns into one) kills the group:
    # under load the agent may already have started children before the next line runs.
    try:
        if on_start is not None:
            on_start(pgid)
        assert proc.stdout is not None and proc.stderr is not None
        selector.register(proc.stdout, selectors.EVENT_READ, out)
        selector.register(proc.stderr, selectors.EVENT_READ, err)
        if stdin is not None:
            assert proc.stdin is not None
            os.set_blocking(proc.stdin.fileno(), False)
            selector.register(proc.stdin, selectors.EVENT_WRITE, _Feed(proc.stdin, stdin))
        exit_fd = _watch_exit(proc.pid, selector)
        while True:
            now = time.monotonic()
            if _stopping.event.is_set():
                stopped = "interrupted"
            elif timeout is not None and now - start > timeout:
                stopped = "timeout"
            elif now >= next_tick:
                next_tick = now + tick
                stopped = on_tick() if on_tick is not None else None
            if stopped:
                kill_group(pgid, grace, lambda: proc.poll() is None)
                break
            if exited or (exit_fd is None and proc.poll() is not None):
                exited = True
                if not _reading(selector):
                    break
                # The process is gone; anything still holding the pipes is a stray grandchild.
                _kill_silently(pgid)
            wait = next_tick - now
            if timeout is not None:
                wait = min(wait, start + timeout - now)
            if exit_fd is None and not _reading(selector):
                # No pidfd here: both pipes are closed, so wait on the process itself.
                try:
                    proc.wait(timeout=max(wait, 0.0))
                except subprocess.TimeoutExpired:
                    pass
                continue
            for key, _ in selector.select(max(wait, 0.0)):
                if key.data is _EXITED:
                    selector.unregister(key.fileobj)
                    exited = True
                elif isinstance(key.data, _Feed):
                    if key.data.write(key.fd):
                        selector.unregister(key.fileobj)
                        key.data.pipe.close()
                else:
                    chunk = os.read(key.fd, _CHUNK)
                    if chunk:
                        key.data.feed(chunk)
                    else:
                        selector.unregister(key.fileobj)
    except KeyboardInterrupt:
        kill_group(pgid, grace, lambda: proc.poll() is None)
        raise
    finally:
        _kill_silently(pgid)
        _drain(selector)
        selector.close()
        if exit_fd is not None:
            os.close(exit_fd)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    code = proc.wait()
    if stopped == "interrupted":
        _refuse_if_stopping(argv, "was stopped before it finished, and has no result")
    return ProcessResult(
        exit_code=None if stopped else code,
        stdout=out.data,
        stderr=err.data,
        stdout_dropped=out.dropped,
        stderr_dropped=err.dropped,
        duration=time.monotonic() - start,
        timed_out=stopped == "timeout",
        stopped=stopped,
    )


_EXITED = object()


def _watch_exit(pid: int, selector: selectors.BaseSelector) -> int | None:
    """A pidfd that turns readable when the process exits (Linux >= 5.3), or None."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None
    selector.register(fd, selectors.EVENT_READ, _EXITED)
    return fd


def _reading(selector: selectors.BaseSelector) -> bool:
    """Whether stdout or stderr is still open."""
    return any(isinstance(key.data, Stream) for key in selector.get_map().values())


class _Feed:
    """Bytes for the process's stdin, written as the pipe takes them (never blocking the reads)."""

    def __init__(self, pipe: IO[bytes], data: bytes) -> None:
        self.pipe = pipe
        self.data = memoryview(data)

    def write(self, fd: int) -> bool:
        """Write what the pipe takes now; True when all is written or the reader is gone."""
        try:
            self.data = self.data[os.write(fd, self.data[:_CHUNK]) :]
        except BlockingIOError:
            return False
        except BrokenPipeError:
            return True
        return not self.data


def _kill_silently(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _drain(selector: selectors.BaseSelector) -> None:
    """Read what is left in the pipes after the group is dead (non-blocking by then)."""
    for key in list(selector.get_map().values()):
        if not isinstance(key.data, Stream):
            continue
        os.set_blocking(key.fd, False)  # a grandchild that escaped the group may hold the pipe
        while True:
            try:
                chunk = os.read(key.fd, _CHUNK)
            except OSError:
                break
            if not chunk:
                break
            key.data.feed(chunk)
