"""An agent's own sessions, kept across its isolated runs so that a follow-up may resume one.

Every run has an ephemeral home, removed after it (adapters/isolation.py), and
CLIs such as Claude Code keep their sessions there. For a spec with `[resume]
keep`, the paths it names are copied out of an implement run's home when the
run reported a session, to `$XDG_STATE_HOME/gitswarm/sessions/<session>/`,
and copied back into the home of the run that resumes that session. Nothing
else of the home is kept; a run that resumes nothing gets none of it.

A kept session is a copy of the agent's transcript, not work: one neither
kept nor resumed for KEEP_DAYS is removed the next time a session is kept
(a resume marks its session used).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from gitswarm.adapters.agentspec import ResumeSpec

SAFE_SESSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")  # a session id that is safe as a directory name
KEEP_DAYS = 30


def sessions_root() -> Path:
    """$XDG_STATE_HOME/gitswarm/sessions ($XDG_STATE_HOME: ~/.local/state when unset or not absolute)."""
    configured = os.environ.get("XDG_STATE_HOME", "")
    state = Path(configured) if os.path.isabs(configured) else Path.home() / ".local" / "state"
    return state / "gitswarm" / "sessions"


def keep(resume: ResumeSpec, session: str, home: Path) -> None:
    """Copy the session paths of a finished run's home aside, under the session's id."""
    if not resume.keep or SAFE_SESSION.fullmatch(session) is None or ".." in session:
        return
    with contextlib.suppress(OSError):  # tidying up never fails the run that keeps a session
        prune(sessions_root(), time.time() - KEEP_DAYS * 86400)
    dest = sessions_root() / session
    with _sessions_lock(sessions_root(), exclusive=False):  # no prune meanwhile: it may be an old session kept again
        _copy(resume.keep, home, dest)
        if dest.is_dir():
            os.utime(dest)  # kept now, whether new or updated in place


def restore(resume: ResumeSpec, session: str, home: Path) -> bool:
    """Put a kept session's paths into the home of the run that resumes it; False when none was kept."""
    if SAFE_SESSION.fullmatch(session) is None or ".." in session:
        return False
    kept = sessions_root() / session
    if not kept.is_dir():
        return False
    with _sessions_lock(sessions_root(), exclusive=False):  # no prune while it is read
        if not kept.is_dir():
            return False
        os.utime(kept)  # used: kept for KEEP_DAYS more
        _copy(resume.keep, kept, home)
    return True


def _copy(entries: list[str], source_root: Path, dest_root: Path) -> None:
    """Copy each of `entries` (folders whole, symlinks as symlinks) from under `source_root` to under `dest_root`."""
    for entry in entries:
        source = source_root / entry
        if source.is_dir():
            shutil.copytree(source, dest_root / entry, symlinks=True, dirs_exist_ok=True)
        elif source.is_file():
            (dest_root / entry).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest_root / entry)


def prune(root: Path, unused_since: float) -> list[str]:
    """Remove the kept sessions under `root` last kept or resumed before `unused_since`; their ids.
    Only folders named as session ids are touched, and a symlink is never followed. While a session
    is kept or resumed, or another prune runs, it prunes nothing (the next keep will)."""
    removed: list[str] = []
    if not root.is_dir():
        return removed
    try:
        with _sessions_lock(root, exclusive=True):
            for entry in os.scandir(root):
                if SAFE_SESSION.fullmatch(entry.name) is None or not entry.is_dir(follow_symlinks=False):
                    continue
                try:
                    unused = entry.stat(follow_symlinks=False).st_mtime < unused_since
                except FileNotFoundError:
                    continue  # removed meanwhile by hand
                if unused:
                    shutil.rmtree(entry.path, ignore_errors=True)
                    removed.append(entry.name)
    except BlockingIOError:
        return removed
    return sorted(removed)


@contextlib.contextmanager
def _sessions_lock(root: Path, exclusive: bool) -> Iterator[None]:
    """An flock on `<root>/.lock`: shared while a session is kept or resumed, exclusive (never waited for)
    while pruning."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
