"""Workers a pilot starts: `gitswarm work --job JOB` as a process of its own.

A tool call returns at once and the job goes on without the server: the
worker is a new session (the pilot's client closing the server does not
stop it), its output goes to a log file in the pilot's state directory, and it exits
when its job is done.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gitswarm.model.errors import BadInput
from gitswarm.model.limits import MAX_WORKERS
from gitswarm.pilot.proposals import pilot_dir


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
    return {"pid": process.pid, "log": os.fspath(log)}
