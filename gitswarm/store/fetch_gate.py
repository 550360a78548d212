"""One fetch from a remote at a time per clone, and none that a fetch just made needless.

The processes of one machine (the command, its remote watch, its workers)
all fetch the same remote into the same shadow refs. Two at once fight over
those refs ("cannot lock ref", said as if the remote did not answer) and
pay two round trips for one answer. So a fetch takes a lock first
(`<git common dir>/gitswarm/fetch/<remote key>.lock`); a process that
waited there skips its own fetch when one that covered its refs started
after it began to wait, since what that fetch brought is at least as new.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection
from pathlib import Path

from gitswarm.store.locks import held

FETCH_DIR = "fetch"  # under <git common dir>/gitswarm/: the lock and the last fetch of each remote


def coalesced_fetch(common_dir: Path, key: str, jobs: Collection[str] | None, fetch: Callable[[], None]) -> bool:
    """Run `fetch` (of `jobs`, or every job when None) under the clone's fetch lock for remote `key`, unless
    a fetch covering them started while this one waited; whether it ran."""
    where = common_dir / "gitswarm" / FETCH_DIR
    asked = time.time_ns()
    with held(where / f"{key}.lock"):
        last = _last(where / f"{key}.json")
        # Started after this one asked, and not in the future (a clock stepped back, a file written by anyone
        # else: such a record never stands in for a fetch).
        if last is not None and asked <= last[0] <= time.time_ns() and (last[1] is None or (jobs is not None and set(jobs) <= last[1])):
            return False
        started = time.time_ns()
        fetch()
        (where / f"{key}.json").write_text(json.dumps({"started": started, "jobs": None if jobs is None else sorted(jobs)}))
    return True


def _last(path: Path) -> tuple[int, frozenset[str] | None] | None:
    """When the last fetch that completed started, and what it covered (None: every job)."""
    try:
        data = json.loads(path.read_text())
        jobs = data["jobs"]
        return int(data["started"]), None if jobs is None else frozenset(str(j) for j in jobs)
    except (OSError, ValueError, KeyError, TypeError):
        return None
