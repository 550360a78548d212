"""Where the traceback of an internal error is written down.

Under the repository's git common dir, `gitswarm/logs/` beside the index,
when there is a repository; else (no repository, or a git dir that cannot be
written) under the user's state directory, `$XDG_STATE_HOME/gitswarm/logs/`
(`~/.local/state/gitswarm/logs/` by default). One file per error,
`error-<UTC time to the microsecond>-<pid>.log`, so that no two errors write into one.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path

from gitswarm.store import reffiles
from gitswarm.store.worktrees import state_home

LOGS = ("gitswarm", "logs")
GIT_TIMEOUT = 10.0


def repo_log_dir(common_dir: Path) -> Path:
    """The error logs of the repository whose git common dir is `common_dir`."""
    return common_dir.joinpath(*LOGS)


def user_log_dir() -> Path:
    """The error logs of commands run outside any repository."""
    return state_home().joinpath(*LOGS)


def find_common_dir(start: Path) -> Path | None:
    """The git common dir of the repository at `start`, read from the files when that is
    certain, else asked of git (which honours GIT_DIR and the like); None outside a repository."""
    found = reffiles.common_dir(start)
    if found is not None:
        return found
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
            cwd=start,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=GIT_TIMEOUT,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    text = os.fsdecode(done.stdout).strip()
    return Path(text) if done.returncode == 0 and text else None


def write_log(text: str, start: Path | None) -> Path:
    """Write `text` to a new log file, under the repository at `start` if there is one, else
    under the user's state directory; its path. OSError when neither can be written."""
    now = time.time()
    name = f"error-{time.strftime('%Y%m%dT%H%M%S', time.gmtime(now))}.{int(now % 1 * 1e6):06d}Z-{os.getpid()}.log"
    common = None if start is None else find_common_dir(start)
    if common is not None:
        with contextlib.suppress(OSError):  # a git dir that cannot be written: the user's state directory
            return _write_new(repo_log_dir(common) / name, text)
    return _write_new(user_log_dir() / name, text)


def _write_new(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "x", encoding="utf-8", errors="backslashreplace") as file:
        file.write(text)
    return path
