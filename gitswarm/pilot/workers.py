"""Workers a pilot starts: `gitswarm work --job JOB` as a process of its own.

A tool call returns at once and the job goes on without the server: the
worker is a new session (the pilot's client closing the server does not
stop it), its output goes to a log file in the pilot's state directory, and it exits
when its job is done. A server stopped by SIGTERM or SIGHUP stops the workers it
started (stop_workers): each gets SIGTERM, and stops its task and requeues it as
`gitswarm work` does.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from gitswarm.model.errors import BadInput
from gitswarm.model.limits import MAX_WORKERS
from gitswarm.pilot.proposals import pilot_dir

# The workers this process started, kept (unreaped) so that a pid signalled is never another process's.
_started: list[subprocess.Popen[bytes]] = []
_started_lock = threading.Lock()


def start_worker(repo_dir: Path, common_dir: Path, job_id: str, workers: int) -> dict:
    """Start `gitswarm work --job JOB -j WORKERS` in `repo_dir`; {"pid", "log"}."""
    if not 1 <= workers <= MAX_WORKERS:
        raise BadInput(f"workers: must be between 1 and {MAX_WORKERS}")
    logs = pilot_dir(common_dir) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"work-{job_id}.log"
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "gitswarm", "-C", os.fspath(repo_dir), "work", "--job", job_id, "-j", str(workers)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True, close_fds=True,
        )
    with _started_lock:
        _started[:] = [p for p in _started if p.poll() is None] + [process]
    return {"pid": process.pid, "log": os.fspath(log)}


def stop_workers() -> list[subprocess.Popen[bytes]]:
    """SIGTERM every worker this process started that still runs; those signalled."""
    with _started_lock:
        running = [p for p in _started if p.poll() is None]
    for process in running:
        process.send_signal(signal.SIGTERM)
    return running


def wait_for(process: subprocess.Popen[bytes], seconds: float) -> bool:
    """Whether the worker has exited within `seconds` (reaped if so)."""
    try:
        process.wait(max(0.0, seconds))
    except subprocess.TimeoutExpired:
        return False
    return True
