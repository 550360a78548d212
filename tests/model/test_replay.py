"""The replay rules, without git: the canonical state depends only on the set of operations."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitswarm.model.errors import CorruptRecord
from gitswarm.model.ops import Cancelled, JobCreated, LeaseRenewed, Op, TaskClaimed, TaskFinished
from gitswarm.model.records import Job, TaskSpec
from gitswarm.model.replay import replay

JOB = "01m8w4megz8werfv48thq922ek"
ACTORS = ("01m8w4megz8werfv48thq922ea", "01m8w4megz8werfv48thq922eb")


def created() -> JobCreated:
    job = Job(id=JOB, goal="g", created=1.0, actor=ACTORS[0], task_count=2)
    tasks = (TaskSpec(id="a", seq=0, command="true"), TaskSpec(id="b", seq=1, command="true"))
    return JobCreated(id="0" * 26, clock=1, at=1.0, actor=ACTORS[0], job=job, tasks=tasks)


def two_clones_claiming() -> list[Op]:
    """Both clones claim task a with the same token; each finishes its own claim; one cancels b."""
    ops: list[Op] = [created()]
    for n, actor in enumerate(ACTORS):
        ops.append(TaskClaimed(id=f"1{n}" + "0" * 24, clock=2, at=2.0, actor=actor, task="a", token=1, owner=f"w{n}", lease_expires=9.0))
        ops.append(TaskFinished(id=f"2{n}" + "0" * 24, clock=3, at=3.0, actor=actor, task="a", token=1, ok=n == 0))
    ops.append(Cancelled(id="3" + "0" * 25, clock=4, at=4.0, actor=ACTORS[1], task="b"))
    return ops


@settings(max_examples=50)
@given(st.permutations(two_clones_claiming()))
def test_the_state_depends_only_on_the_set_of_operations(ops: list[Op]) -> None:
    result = replay(list(ops), "job")
    expected = replay(two_clones_claiming(), "job")
    assert (result.state, result.tasks) == (expected.state, expected.tasks)
    # the claim that lost, and that clone's finish of it, changed nothing but the clock
    assert result.skipped == 2 and result.tasks["a"].state.value == "succeeded"
    assert result.state.clock == 4


def test_a_second_job_created_is_refused() -> None:
    again = JobCreated(**{**{f: getattr(created(), f) for f in created().__struct_fields__}, "id": "9" * 26, "clock": 2})
    with pytest.raises(CorruptRecord, match="exactly one job_created"):
        replay([created(), again], "job")


def two_clones_renewing() -> list[Op]:
    """Both clones claim task a with the same token, and each renews its own claim."""
    ops: list[Op] = [created()]
    for n, actor in enumerate(ACTORS):
        ops.append(TaskClaimed(id=f"1{n}" + "0" * 24, clock=2, at=2.0, actor=actor, task="a", token=1, owner=f"w{n}", lease_expires=9.0))
        ops.append(LeaseRenewed(id=f"2{n}" + "0" * 24, clock=3 + n, at=3.0, actor=actor, task="a", token=1, lease_expires=20.0 + n))
    return ops


@settings(max_examples=30)
@given(st.permutations(two_clones_renewing()))
def test_a_renewal_of_a_claim_that_lost_is_not_applied(ops: list[Op]) -> None:
    result = replay(list(ops), "job")
    winner = result.tasks["a"]
    assert (winner.owner, winner.lease_expires) == ("w0", 20.0)  # the losing clone's later renewal changed nothing
    assert result.skipped == 2 and result.state.clock == 4
