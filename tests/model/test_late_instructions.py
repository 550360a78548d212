"""Follow-ups and steering in the reducer and the replay: what each op does, what it refuses, and
that two clones' follow-ups and steers merge to one state whatever order they arrive in."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitswarm.model.errors import BadInput, CorruptRecord, InvalidTransition, LeaseLost
from gitswarm.model.late_instructions import MAX_GUIDANCE_CHARS, check_text
from gitswarm.model.ops import FollowedUp, JobCreated, Op, Steered, SteeringDelivered, TaskClaimed, TaskFinished
from gitswarm.model.records import Job, JobState, Task, TaskSpec, TaskState
from gitswarm.model.reducer import apply_all
from gitswarm.model.replay import replay
from gitswarm.model.validate import check_op

JOB = "01m8w4megz8werfv48thq922ek"
ACTORS = ("01m8w4megz8werfv48thq922ea", "01m8w4megz8werfv48thq922eb")
HEAD = "a" * 40
PATCH = "b" * 64


def _id(n: int) -> str:
    return f"{n:02d}".replace("0", "g") + "0" * 24


def created() -> JobCreated:
    job = Job(id=JOB, goal="g", created=1.0, actor=ACTORS[0], task_count=2, base="c" * 40)
    tasks = (
        TaskSpec(id="fix", seq=0, mode="implement", adapter="scripted", prompt="fix it", dependents=("docs",)),
        TaskSpec(id="docs", seq=1, mode="implement", adapter="scripted", prompt="document it", depends_on=("fix",)),
    )
    return JobCreated(id=_id(1), clock=1, at=1.0, actor=ACTORS[0], job=job, tasks=tasks)


def run(ops: list[Op]) -> tuple[JobState, dict[str, Task]]:
    """The ops applied in order on a new job (all or nothing)."""
    first = apply_all([ops[0]], JobState(), lambda t: pytest.fail(f"no task {t}"))
    tasks = dict(first.tasks)
    change = apply_all(ops[1:], first.state, tasks.__getitem__, lambda: list(tasks))
    tasks.update(change.tasks)
    return change.state, tasks


def claim(n: int, token: int, actor: str = ACTORS[0], task: str = "fix") -> TaskClaimed:
    return TaskClaimed(id=_id(n), clock=n, at=float(n), actor=actor, task=task, token=token, owner="w", lease_expires=99.0)


def finish(n: int, token: int, ok: bool, actor: str = ACTORS[0], task: str = "fix") -> TaskFinished:
    return TaskFinished(id=_id(n), clock=n, at=float(n), actor=actor, task=task, token=token, ok=ok, retryable=False)


def follow(n: int, actor: str = ACTORS[0], text: str = "now also this") -> FollowedUp:
    return FollowedUp(id=_id(n), clock=n, at=float(n), actor=actor, task="fix", instruction=text, patch=PATCH, head=HEAD)


def steer(n: int, task: str | None = "fix", actor: str = ACTORS[0]) -> Steered:
    return Steered(id=_id(n), clock=n, at=float(n), actor=actor, task=task, text=f"steer {n}")


def delivered(n: int, token: int, steers: tuple[str, ...], attempt: int = 1, round_: int = 0, actor: str = ACTORS[0]) -> SteeringDelivered:
    return SteeringDelivered(
        id=_id(n), clock=n, at=float(n), actor=actor, task="fix", token=token, attempt=attempt, round=round_, steers=steers
    )


# -- follow-ups ----------------------------------------------------------------------------


@pytest.mark.parametrize("ok", [True, False])
def test_a_follow_up_requeues_a_finished_task_with_the_continuation_in_its_record(ok: bool) -> None:
    state, tasks = run([created(), claim(2, 1), finish(3, 1, ok), follow(4)])
    task = tasks["fix"]
    assert task.state is TaskState.QUEUED and task.attempts == 0 and task.error is None
    assert task.follow_up is not None
    assert (task.follow_up.op, task.follow_up.instruction, task.follow_up.head, task.follow_up.patch) == (_id(4), "now also this", HEAD, PATCH)
    # a succeeded task had unblocked its dependent, which stays as it is; a failed one had skipped it:
    # the follow-up revives it, as a retry would
    assert state.counts == ({"queued": 2} if ok else {"queued": 1, "blocked": 1})
    assert tasks["docs"].state is (TaskState.QUEUED if ok else TaskState.BLOCKED) and tasks["docs"].skipped_because is None


def test_a_follow_up_stays_with_the_task_across_its_attempts_and_a_claim_counts_anew() -> None:
    _, tasks = run([created(), claim(2, 1), finish(3, 1, True), follow(4), claim(5, 2), finish(6, 2, False)])
    assert tasks["fix"].follow_up is not None and tasks["fix"].follow_up.op == _id(4)
    assert tasks["fix"].claims == 2 and tasks["fix"].attempts == 1


@pytest.mark.parametrize(
    "ops, why",
    [
        ([], "queued"),  # never ran
        ([claim(2, 1)], "running"),
    ],
)
def test_an_unfinished_task_is_not_followed_up(ops: list[Op], why: str) -> None:
    with pytest.raises(InvalidTransition, match=why):
        run([created(), *ops, follow(9)])


def test_an_analyze_task_is_not_followed_up() -> None:
    job = Job(id=JOB, goal="g", created=1.0, actor=ACTORS[0], task_count=1)
    analyze = JobCreated(id=_id(1), clock=1, at=1.0, actor=ACTORS[0], job=job, tasks=(TaskSpec(id="fix", seq=0, adapter="scripted"),))
    with pytest.raises(InvalidTransition, match="analyze"):
        run([analyze, claim(2, 1), finish(3, 1, True), follow(4)])


# -- steering ------------------------------------------------------------------------------


def test_a_steer_waits_in_the_task_and_its_delivery_takes_it_once() -> None:
    state, tasks = run([created(), steer(2), steer(3, task=None), claim(4, 1)])
    assert [g.op for g in tasks["fix"].steering] == [_id(2)] and [g.op for g in state.steering] == [_id(3)]
    state, tasks = run([created(), steer(2), steer(3, task=None), claim(4, 1), delivered(5, 1, (_id(2), _id(3)))])
    assert tasks["fix"].steering == () and state.steering == ()
    with pytest.raises(InvalidTransition, match="not all pending"):  # a second delivery of the same steer
        run([created(), steer(2), claim(4, 1), delivered(5, 1, (_id(2),)), delivered(6, 1, (_id(2),))])


@pytest.mark.parametrize(
    "late, error",
    [
        (delivered(5, 2, (_id(2),)), LeaseLost),  # a token that is not the current claim
        (delivered(5, 1, (_id(2),), attempt=2), InvalidTransition),  # another attempt
        (delivered(5, 1, ()), InvalidTransition),  # nothing delivered
        (delivered(5, 1, (_id(7),)), InvalidTransition),  # a steer never made
    ],
)
def test_a_delivery_is_fenced_by_the_claim_and_names_pending_steers(late: SteeringDelivered, error: type[Exception]) -> None:
    with pytest.raises(error):
        run([created(), steer(2), claim(4, 1), late])


def test_the_texts_are_checked_where_they_are_given() -> None:
    assert check_text("do x", "steer") == "do x"
    for bad, why in (("  ", "empty"), ("a\0b", "NUL"), ("x" * (MAX_GUIDANCE_CHARS + 1), "at most")):
        with pytest.raises(BadInput, match=why):
            check_text(bad, "steer")


def test_pulled_guidance_ops_are_validated() -> None:
    check_op(follow(4), JOB, ["fix", "docs"], "op")
    check_op(delivered(5, 1, (_id(2),)), JOB, ["fix", "docs"], "op")
    bad = [
        FollowedUp(id=_id(4), clock=4, at=4.0, actor=ACTORS[0], task="fix", instruction="x", patch=PATCH, head=None),
        FollowedUp(id=_id(4), clock=4, at=4.0, actor=ACTORS[0], task="fix", instruction="x", session="--evil flag"),
        FollowedUp(id=_id(4), clock=4, at=4.0, actor=ACTORS[0], task="fix", instruction=" "),
        Steered(id=_id(4), clock=4, at=4.0, actor=ACTORS[0], task=None, text="x" * (MAX_GUIDANCE_CHARS + 1)),
        delivered(5, 1, ("not an op id",)),
        delivered(5, 1, (_id(2),), round_=9),
    ]
    for op in bad:
        with pytest.raises(CorruptRecord):
            check_op(op, JOB, ["fix", "docs"], "op")


# -- two clones ----------------------------------------------------------------------------


def two_clones_following_up_and_steering() -> list[Op]:
    """The task ran and succeeded; then both clones follow it up and steer it (one job-wide), and
    both claim its next attempt with the same token, each delivering the steers to its own claim."""
    ops: list[Op] = [created(), claim(2, 1), finish(3, 1, True)]
    a, b = ACTORS
    ops += [follow(4, a, "clone a's follow-up"), FollowedUp(**{**_fields(follow(4, b, "clone b's")), "id": _id(14)})]
    ops += [steer(5, "fix", a), Steered(**{**_fields(steer(5, None, b)), "id": _id(15)})]
    ops += [claim(6, 2, a), TaskClaimed(**{**_fields(claim(6, 2, b)), "id": _id(16)})]
    ops += [delivered(7, 2, (_id(5),), actor=a), SteeringDelivered(**{**_fields(delivered(7, 2, (_id(5), _id(15)), actor=b)), "id": _id(17)})]
    return ops


def _fields(op: Op) -> dict:
    return {f: getattr(op, f) for f in op.__struct_fields__}


@settings(max_examples=60)
@given(st.permutations(two_clones_following_up_and_steering()))
def test_two_clones_follow_ups_and_steers_merge_to_one_state(ops: list[Op]) -> None:
    result = replay(list(ops), "job")
    expected = replay(two_clones_following_up_and_steering(), "job")
    assert (result.state, result.tasks) == (expected.state, expected.tasks)
    task = result.tasks["fix"]
    # the first follow-up in (clock, actor, id) order requeues the task; the other finds it queued and
    # does not apply (it stays in both histories, as a lost claim does)
    assert task.follow_up is not None and task.follow_up.instruction == "clone a's follow-up"
    # clone b's claim lost (same token, a sorts first): its delivery is not applied either, so clone b's
    # job-wide steer still waits, and clone a's task steer was delivered once, to clone a's attempt
    assert task.state is TaskState.RUNNING and task.claims == 2 and task.steering == ()
    assert [g.op for g in result.state.steering] == [_id(15)]
    assert result.skipped == 3
