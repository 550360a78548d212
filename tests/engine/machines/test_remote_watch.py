"""The watch's pace (engine/machines/remote_watch.py): prompt while a worker here waits, quiet otherwise."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gitswarm.engine.machines.remote_watch import (
    IDLE_SYNC_SECONDS,
    PROMPT_SECONDS,
    QUIET_SYNC_SECONDS,
    SYNC_SECONDS,
    next_wait,
)


def test_a_waiting_worker_sees_the_others_finishes_within_a_quarter_second() -> None:
    assert next_wait(busy=True, all_running=False, quiet_for=0.0) == SYNC_SECONDS
    assert next_wait(busy=True, all_running=False, quiet_for=PROMPT_SECONDS - 0.01) == SYNC_SECONDS


def test_a_long_task_elsewhere_is_not_polled_for() -> None:
    assert next_wait(busy=True, all_running=False, quiet_for=PROMPT_SECONDS) == QUIET_SYNC_SECONDS


def test_nothing_to_do_anywhere_is_looked_at_least_often() -> None:
    assert next_wait(busy=False, all_running=False, quiet_for=0.0) == IDLE_SYNC_SECONDS


@given(busy=st.booleans(), all_running=st.booleans(), quiet_for=st.floats(0, 1e6))
def test_the_pace_never_exceeds_four_fetches_a_second_nor_waits_past_two_seconds(busy: bool, all_running: bool, quiet_for: float) -> None:
    wait = next_wait(busy, all_running, quiet_for)
    assert SYNC_SECONDS <= wait <= IDLE_SYNC_SECONDS
    if busy and all_running:
        assert wait == QUIET_SYNC_SECONDS  # every worker here runs a task: its pushes find out when refused
