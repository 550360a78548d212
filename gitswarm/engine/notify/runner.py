"""Runs one notifier command with a deadline, apart from the work that raised the event.

    python -m gitswarm.engine.notify.runner LOG TIMEOUT COMMAND...

The event (JSON) comes on stdin and goes to the command's stdin. A command
that fails, cannot start, or outlives TIMEOUT seconds (its whole process
group is killed) leaves one line in LOG; nothing reaches the job. Standard
library only: it starts for every event.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def run(log: str, timeout: float, command: list[str], event: bytes) -> int:
    try:
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
        )
    except OSError as exc:
        return _note(log, command, f"could not start: {exc.strerror or exc}")
    try:
        _, err = process.communicate(event, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return _note(log, command, f"killed after {timeout:g} s")
    if process.returncode != 0:
        tail = err.decode(errors="replace").strip().splitlines()[-1:] if err else []
        return _note(log, command, f"exit {process.returncode}" + (f": {tail[0][:300]}" if tail else ""))
    return 0


def _note(log: str, command: list[str], what: str) -> int:
    try:
        os.makedirs(os.path.dirname(log), exist_ok=True)
        with open(log, "a") as handle:
            handle.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} notifier {command[0]!r} {what}\n")
    except OSError:
        pass  # nowhere to say it: a notifier never affects the work
    return 1


def main() -> int:
    log, timeout, *command = sys.argv[1:]
    return run(log, float(timeout), command, sys.stdin.buffer.read())


if __name__ == "__main__":
    sys.exit(main())
