"""The replay rules, without git: the canonical state depends only on the set of operations."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitswarm.model.errors import CorruptRecord
from gitswarm.model.ops import Cancelled, JobCreated, LeaseRenewed, Op, Retried, TaskClaimed, TaskFinished, canonical
from gitswarm.model.records import Job, TaskSpec
from gitswarm.model.replay import Replay, replay

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


def a_token_that_comes_round_again() -> list[Op]:
    """Clone B claims task a (token 1) and fails it for good; clone A had cancelled a at the same clock,
    so in the merged order B's claim lost and took no token. B retries a and, after pulling, claims it
    again: token 1 once more. Found by the convergence state machine (tests/store/test_oplog_convergence.py)."""
    a, b = ACTORS
    return [
        created(),
        Cancelled(id="1a" + "0" * 24, clock=2, at=2.0, actor=a, task="a"),
        TaskClaimed(id="1b" + "0" * 24, clock=2, at=2.0, actor=b, task="a", token=1, owner="wb", lease_expires=9.0),
        TaskFinished(id="2b" + "0" * 24, clock=3, at=3.0, actor=b, task="a", token=1, ok=False, retryable=False),
        Retried(id="3b" + "0" * 24, clock=4, at=4.0, actor=b, task="a"),
        TaskClaimed(id="4b" + "0" * 24, clock=5, at=5.0, actor=b, task="a", token=1, owner="wb", lease_expires=30.0),
        TaskFinished(id="5b" + "0" * 24, clock=6, at=6.0, actor=b, task="a", token=1, ok=False, error="boom", retryable=True),
    ]


@settings(max_examples=30)
@given(st.permutations(a_token_that_comes_round_again()))
def test_a_finish_of_a_later_claim_with_the_same_token_applies(ops: list[Op]) -> None:
    result = replay(list(ops), "job")
    task = result.tasks["a"]
    assert task.claims == 1 and task.attempts == 1 and task.owner is None
    assert task.state.value == "queued" and task.error == "boom"  # the second claim's finish applied: retried, queued
    assert result.skipped == 2  # the claim that lost to the cancel, and its own finish


TASKS = ("a", "b")


@st.composite
def op_logs(draw: st.DrawFn) -> list[Op]:
    """A job and ops of two clones on it, many of which do not apply at their turn (claims that lose, finishes
    of stale tokens, renewals after a finish): what merging machines' histories meets."""
    ops: list[Op] = [created()]
    for n in range(draw(st.integers(0, 24))):
        kind = draw(st.sampled_from(["claim", "finish", "renew", "cancel", "retry"]))
        actor, task = draw(st.sampled_from(ACTORS)), draw(st.sampled_from(TASKS))
        clock, token = draw(st.integers(2, 12)), draw(st.integers(1, 3))
        common = {"id": f"{n:02d}" + "0" * 24, "clock": clock, "at": float(clock), "actor": actor, "task": task}
        if kind == "claim":
            ops.append(TaskClaimed(**common, token=token, owner=f"w{n}", lease_expires=99.0))
        elif kind == "finish":
            ops.append(TaskFinished(**common, token=token, ok=draw(st.booleans())))
        elif kind == "renew":
            ops.append(LeaseRenewed(**common, token=token, lease_expires=float(100 + n)))
        elif kind == "cancel":
            ops.append(Cancelled(**common))
        else:
            ops.append(Retried(**common))
    return ops


@settings(max_examples=200, deadline=None)
@given(ops=op_logs(), cuts=st.lists(st.integers(0, 2), min_size=0, max_size=30), every=st.integers(1, 4))
def test_a_replay_resumed_from_its_checkpoints_is_the_replay_from_nothing(ops: list[Op], cuts: list[int], every: int) -> None:
    """Replay.adding: the operations added in chunks, each chunk replayed from the last checkpoint before its
    first operation in canonical order, gives exactly the replay of all of them at once."""
    full = Replay.of(ops, "job").result
    chunks: list[list[Op]] = [[], [], []]
    for i, op in enumerate(ops[1:]):
        chunks[cuts[i] if i < len(cuts) else 0].append(op)
    made = Replay._fold(canonical([ops[0], *chunks[0]]), [], every, "job")
    for chunk in chunks[1:]:
        made = made.adding(chunk, "job")
    assert (made.result.state, made.result.tasks, made.result.applied, made.result.skipped) == (
        full.state, full.tasks, full.applied, full.skipped,
    )
    assert made.result.state == replay(ops, "job").state
