"""The watch's pace (engine/machines/remote_watch.py): prompt while a worker here waits, quiet otherwise."""

from __future__ import annotations

import multiprocessing
import queue
import threading
import time
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from gitswarm.engine.machines.crew import Siblings
from gitswarm.engine.machines.remote_watch import (
    BUSY_SYNC_SECONDS,
    IDLE_SYNC_SECONDS,
    PROMPT_SECONDS,
    QUIET_SYNC_SECONDS,
    SYNC_SECONDS,
    RemoteWatch,
    next_wait,
    pause,
)
from tests.engine.machines.test_remote_leases import Clock, make_clones


def test_a_waiting_worker_sees_the_others_finishes_within_a_quarter_second() -> None:
    assert next_wait(busy=True, all_running=False, quiet_for=0.0) == SYNC_SECONDS
    assert next_wait(busy=True, all_running=False, quiet_for=PROMPT_SECONDS - 0.01) == SYNC_SECONDS


def test_a_long_task_elsewhere_is_not_polled_for() -> None:
    assert next_wait(busy=True, all_running=False, quiet_for=PROMPT_SECONDS) == QUIET_SYNC_SECONDS


def test_nothing_to_do_anywhere_is_looked_at_least_often() -> None:
    assert next_wait(busy=False, all_running=False, quiet_for=0.0) == IDLE_SYNC_SECONDS


def test_a_machine_whose_workers_all_run_a_task_looks_only_for_dead_leases_and_cancels() -> None:
    assert next_wait(busy=True, all_running=True, quiet_for=0.0) == BUSY_SYNC_SECONDS
    assert BUSY_SYNC_SECONDS <= 5.0  # a cancel made elsewhere stops the tasks here within five seconds


@given(busy=st.booleans(), all_running=st.booleans(), quiet_for=st.floats(0, 1e6))
def test_the_pace_never_exceeds_four_fetches_a_second_and_waits_longest_only_while_every_worker_runs(
    busy: bool, all_running: bool, quiet_for: float,
) -> None:
    wait = next_wait(busy, all_running, quiet_for)
    assert SYNC_SECONDS <= wait <= BUSY_SYNC_SECONDS
    if not (busy and all_running):
        assert wait <= IDLE_SYNC_SECONDS


def _crew(states: list[bool]) -> Siblings:
    """Siblings whose slots are busy (True) or waiting for work (False)."""
    siblings = Siblings(len(states))
    for slot, busy in enumerate(states):
        siblings.seat(slot, f"host.abcdef.w{slot}")
        if not busy:
            siblings.idle(slot)
    return siblings


def test_the_watch_of_a_busy_machine_wakes_as_soon_as_a_worker_waits_for_work() -> None:
    siblings, stopped = _crew([True, True]), multiprocessing.get_context("fork").Event()
    threading.Timer(0.2, siblings.idle, args=(1,)).start()
    started = time.monotonic()
    assert pause(stopped, BUSY_SYNC_SECONDS, siblings) is False
    assert 0.15 < time.monotonic() - started < 2.5  # not the five seconds it was to wait


def test_a_worker_that_turned_idle_before_the_busy_wait_began_ends_it_at_once() -> None:
    siblings, stopped = _crew([True, False]), multiprocessing.get_context("fork").Event()
    started = time.monotonic()
    assert pause(stopped, BUSY_SYNC_SECONDS, siblings) is False
    assert time.monotonic() - started < 2.5  # not the five seconds it was to wait


def test_the_watch_stops_when_told_whatever_its_workers_do() -> None:
    stopped = multiprocessing.get_context("fork").Event()
    for siblings in (_crew([True, True]), None):
        stopped.clear()
        threading.Timer(0.1, stopped.set).start()
        started = time.monotonic()
        assert pause(stopped, BUSY_SYNC_SECONDS, siblings) is True
        assert time.monotonic() - started < 2.5  # not the five seconds


def test_a_machine_with_a_waiting_worker_waits_its_whole_pace() -> None:
    stopped = multiprocessing.get_context("fork").Event()
    started = time.monotonic()
    assert pause(stopped, 0.3) is False  # a worker waits already: the wait is the prompt pace, not to be cut
    assert time.monotonic() - started >= 0.29



def test_a_remote_gone_while_a_worker_waits_is_tried_again_with_backoff_not_in_a_loop(tmp_path: Path) -> None:
    """The watch's last good fetch found every worker running (its wait ends when one waits); then the remote
    stops answering and a worker turns idle: the backoff is waited out, not cut short round after round."""
    bare, swarms, job = make_clones(tmp_path, Clock())
    for swarm in swarms:
        swarm.close()
    siblings = _crew([True, True])
    watch = RemoteWatch(str(tmp_path / "b"), "origin", 2.0, job, frozenset({"origin"}), siblings)
    watch.start()
    try:
        time.sleep(1.5)  # the first round fetched (the job's four tasks are queued): the busy wait began
        bare.rename(tmp_path / "gone.git")
        siblings.idle(1)
        time.sleep(2.5)
        rounds = 0
        while rounds < 50:
            try:
                report = watch.reports.get(timeout=0.5)
            except queue.Empty:
                break
            rounds += not report.reachable
        assert 1 <= rounds <= 8  # backoff from 0.5 s: a handful of tries in 2.5 s, not one after another
    finally:
        watch.stop()
