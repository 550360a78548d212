"""One fetch at a time per clone and remote, and none that a fetch just made needless."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from gitswarm.store.fetch_gate import coalesced_fetch
from gitswarm.store.remote_refusals import RemoteRefusals


def test_fetches_waiting_on_one_are_served_by_the_next_that_starts(tmp_path: Path) -> None:
    running, ran, overlapped = threading.Event(), [], []

    def fetch() -> None:
        if running.is_set():
            overlapped.append(True)
        running.set()
        ran.append(time.monotonic())
        time.sleep(0.3)
        running.clear()

    first = threading.Thread(target=coalesced_fetch, args=(tmp_path, "origin", None, fetch))
    first.start()
    time.sleep(0.1)  # the first is fetching: these two wait; the one that gets the lock next fetches for both
    waiting = [threading.Thread(target=coalesced_fetch, args=(tmp_path, "origin", None, fetch)) for _ in range(2)]
    for thread in waiting:
        thread.start()
    for thread in [first, *waiting]:
        thread.join()
    assert len(ran) == 2 and not overlapped


def test_a_fetch_of_some_jobs_does_not_stand_in_for_one_of_others(tmp_path: Path) -> None:
    calls: list[str] = []
    assert coalesced_fetch(tmp_path, "origin", ["a"], lambda: calls.append("a"))
    assert coalesced_fetch(tmp_path, "origin", ["b"], lambda: calls.append("b"))  # started before it was asked: runs
    assert coalesced_fetch(tmp_path, "other", None, lambda: calls.append("other"))  # another remote: its own lock
    assert calls == ["a", "b", "other"]


def test_refused_jobs_are_shared_and_leave_once_taken(tmp_path: Path) -> None:
    one, other = RemoteRefusals(tmp_path, "origin"), RemoteRefusals(tmp_path, "origin")
    assert one.read() == {}
    one.update({"j1": "forged", "j2": "rewound"}, [])
    assert other.read() == {"j1": "forged", "j2": "rewound"}  # another process of the clone sees them
    other.update({}, ["j1"])
    assert one.read() == {"j2": "rewound"}
    one.path.write_text("not json")
    assert RemoteRefusals(tmp_path, "origin").read() == {}


def test_a_record_dated_in_the_future_never_stands_in_for_a_fetch(tmp_path: Path) -> None:
    """A clock stepped back, or a file written by anything else: a fetch 'started' an hour from now skips nothing."""
    where = tmp_path / "gitswarm" / "fetch"
    where.mkdir(parents=True)
    (where / "origin.json").write_text(json.dumps({"started": time.time_ns() + 3600 * 10**9, "jobs": None}))
    calls: list[int] = []
    assert coalesced_fetch(tmp_path, "origin", None, lambda: calls.append(1))
    assert calls == [1]
