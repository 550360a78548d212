"""The state machine: model.reducer.apply over an in-memory dict of Tasks."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitswarm.model.errors import InvalidTransition, LeaseLost
from gitswarm.model.ops import (
    ArtifactsRecorded,
    Cancelled,
    JobCreated,
    LeaseExpired,
    LeaseRenewed,
    Op,
    Retried,
    TaskClaimed,
    TaskFinished,
)
from gitswarm.model.records import POISON, Job, JobState, Task, TaskState
from gitswarm.model.reducer import Change, apply
from gitswarm.model.spec import parse_spec
from tests.conftest import spec_text

B, Q, R, S, F, C, K = (
    TaskState.BLOCKED,
    TaskState.QUEUED,
    TaskState.RUNNING,
    TaskState.SUCCEEDED,
    TaskState.FAILED,
    TaskState.CANCELLED,
    TaskState.SKIPPED,
)


def task(task_id: str, *deps: str, extra: str = "") -> str:
    body = f'id = "{task_id}"\ncommand = "true"'
    if deps:
        body += "\ndepends_on = [" + ", ".join(f'"{d}"' for d in deps) + "]"
    return body + ("\n" + extra if extra else "")


@dataclass
class Harness:
    """One job held in memory: the state, the tasks, and a Lamport clock."""

    state: JobState = field(default_factory=JobState)
    tasks: dict[str, Task] = field(default_factory=dict)
    clock: int = 0
    history: list[Op] = field(default_factory=list)

    @classmethod
    def of(cls, *bodies: str, defaults: str = "") -> Harness:
        spec = parse_spec(spec_text(*bodies, defaults=defaults), ("shell",))
        h = cls()
        job = Job(id="01m8va8phpsfsebf4x0dz68g1q", goal=spec.goal, created=0.0, actor="me", defaults=spec.defaults)
        h.apply(h.op(JobCreated, job=job, tasks=spec.tasks))
        return h

    def op(self, kind: type, **fields: object) -> Op:
        return kind(id=f"op{self.clock + 1:04d}", clock=self.clock + 1, at=float(self.clock + 1), actor="me", **fields)

    def apply(self, op: Op) -> Change:
        change = apply(op, self.state, self.tasks.__getitem__, lambda: list(self.tasks))
        self.state = change.state
        self.tasks.update(change.tasks)
        self.clock = max(self.clock, op.clock)
        self.history.append(op)
        check_invariants(self)
        return change

    def refused(self, op: Op, error: type[Exception]) -> str:
        """Apply an op that must be refused, and prove it changed nothing."""
        before_state, before_tasks = self.state, dict(self.tasks)
        with pytest.raises(error) as info:
            apply(op, self.state, self.tasks.__getitem__, lambda: list(self.tasks))
        assert self.state is before_state
        assert self.tasks == before_tasks
        return str(info.value)

    # conveniences
    def __getitem__(self, task_id: str) -> Task:
        return self.tasks[task_id]

    def states(self) -> dict[str, TaskState]:
        return {t: self.tasks[t].state for t in self.tasks}

    def claim(self, task_id: str, owner: str = "w1", ttl: float = 60.0) -> int:
        token = self.tasks[task_id].claims + 1
        self.apply(self.op(TaskClaimed, task=task_id, token=token, owner=owner, lease_expires=self.clock + ttl))
        return token

    def finish(self, task_id: str, ok: bool = True, token: int | None = None, **fields: object) -> Change:
        token = self.tasks[task_id].claims if token is None else token
        return self.apply(self.op(TaskFinished, task=task_id, token=token, ok=ok, **fields))

    def run(self, task_id: str, ok: bool = True, **fields: object) -> Change:
        self.claim(task_id)
        return self.finish(task_id, ok, **fields)

    def expire(self, task_id: str) -> Change:
        return self.apply(self.op(LeaseExpired, task=task_id, token=self.tasks[task_id].claims))

    def cancel(self, task_id: str | None = None, reason: str | None = None) -> Change:
        return self.apply(self.op(Cancelled, task=task_id, reason=reason))

    def retry(self, task_id: str) -> Change:
        return self.apply(self.op(Retried, task=task_id))


def check_invariants(h: Harness) -> None:
    tasks = h.tasks
    counts = Counter(t.state.value for t in tasks.values())
    assert h.state.counts == dict(sorted(counts.items())), "JobState.counts disagrees with the task states"
    assert all(v > 0 for v in h.state.counts.values())
    assert h.state.clock == max(op.clock for op in h.history)
    assert h.state.ops == len(h.history)
    for t in tasks.values():
        deps = [tasks[d] for d in t.spec.depends_on]
        assert (t.owner is not None) == (t.state is R), f"{t.id}: owner {t.owner!r} while {t.state.value}"
        assert (t.lease_expires is not None) == (t.state is R), f"{t.id}: lease {t.lease_expires} while {t.state.value}"
        assert 0 <= t.attempts <= t.spec.max_attempts
        assert t.claims >= t.attempts
        if t.state in (Q, R, S):
            assert all(d.state is S for d in deps), f"{t.id} is {t.state.value} before its dependencies succeeded"
        if t.state is B:
            assert deps and not all(d.state is S for d in deps), f"{t.id} blocked with nothing to wait for"
        if not t.state.terminal:
            assert not any(d.state in POISON for d in deps), f"{t.id} is {t.state.value} behind a dead dependency"
        if t.state is K:
            assert t.skipped_because is not None
            assert any(d.state in POISON for d in deps), f"{t.id} still skipped though no dependency is dead"
        else:
            assert t.skipped_because is None


# -- creation -------------------------------------------------------------------------


def test_job_created_queues_roots_and_blocks_the_rest() -> None:
    h = Harness.of(task("a"), task("b"), task("c", "a", "b"))
    assert h.states() == {"a": Q, "b": Q, "c": B}
    assert h.state.counts == {"blocked": 1, "queued": 2}
    assert h.state.status() == "queued"
    assert h.state.clock == 1 and h.state.ops == 1


# -- claim ----------------------------------------------------------------------------


def test_claim_makes_a_task_running_with_the_token() -> None:
    h = Harness.of(task("a"))
    token = h.claim("a", owner="worker-1", ttl=30)
    a = h["a"]
    assert token == 1
    assert (a.state, a.claims, a.attempts, a.owner, a.lease_expires) == (R, 1, 1, "worker-1", 31.0)
    assert h.state.counts == {"running": 1}
    assert h.state.status() == "running"


def test_claim_refuses_blocked_and_running_tasks() -> None:
    h = Harness.of(task("a"), task("b", "a"))
    message = h.refused(h.op(TaskClaimed, task="b", token=1, owner="w", lease_expires=9.0), InvalidTransition)
    assert message == "task b is blocked, not queued"
    h.claim("a")
    h.refused(h.op(TaskClaimed, task="a", token=2, owner="w2", lease_expires=9.0), InvalidTransition)


def test_claim_with_wrong_token_is_lease_lost() -> None:
    h = Harness.of(task("a"))
    for token in (0, 2, 5):
        message = h.refused(h.op(TaskClaimed, task="a", token=token, owner="w", lease_expires=9.0), LeaseLost)
        assert message == f"task a: claim token {token} is not 1"


# -- finish ---------------------------------------------------------------------------


def test_finish_ok_succeeds_and_queues_ready_dependents() -> None:
    h = Harness.of(task("a"), task("b"), task("c", "a"), task("d", "a", "b"))
    change = h.run("a", artifacts=("f00d",))
    assert set(change.tasks) == {"a", "c"}
    assert h.states() == {"a": S, "b": Q, "c": Q, "d": B}
    assert h["a"].owner is None and h["a"].lease_expires is None
    assert h["a"].artifacts == ("f00d",)
    h.run("b")
    assert h.states() == {"a": S, "b": S, "c": Q, "d": Q}
    h.run("c")
    h.run("d")
    assert h.state.status() == "succeeded"
    assert h.state.counts == {"succeeded": 4}


def test_fail_with_attempts_left_requeues() -> None:
    h = Harness.of(task("a"), task("b", "a"), defaults="max_attempts = 2")
    h.run("a", ok=False, error="boom")
    a = h["a"]
    assert (a.state, a.attempts, a.claims, a.error, a.owner) == (Q, 1, 1, "boom", None)
    assert h["b"].state is B
    token = h.claim("a")
    assert token == 2 and h["a"].attempts == 2


def test_fail_without_message_records_failed() -> None:
    h = Harness.of(task("a", extra="max_attempts = 1"))
    h.run("a", ok=False)
    assert (h["a"].state, h["a"].error) == (F, "failed")


def test_final_failure_skips_dependents_transitively() -> None:
    h = Harness.of(
        task("a", extra="max_attempts = 2"),
        task("b", "a"),
        task("c", "b"),
        task("d", "c", "x"),
        task("x"),
        task("y", "x"),
    )
    h.run("a", ok=False, error="one")
    h.run("a", ok=False, error="two")
    assert h.states() == {"a": F, "b": K, "c": K, "d": K, "x": Q, "y": B}
    assert h["a"].error == "two" and h["a"].attempts == 2
    for skipped in ("b", "c", "d"):
        assert h[skipped].skipped_because == "a"
    assert h.state.status() == "running"
    h.run("x")
    h.run("y")
    assert h.state.status() == "failed"


def test_non_retryable_failure_fails_at_once() -> None:
    h = Harness.of(task("a"), task("b", "a"))
    h.run("a", ok=False, error="verdict: violation", retryable=False)
    assert h.states() == {"a": F, "b": K}
    assert h["a"].attempts == 1


def test_stale_token_is_lease_lost_and_changes_nothing() -> None:
    h = Harness.of(task("a"))
    first = h.claim("a", owner="slow")
    h.expire("a")
    second = h.claim("a", owner="fast")
    assert (first, second) == (1, 2)
    message = h.refused(h.op(TaskFinished, task="a", token=first, ok=True), LeaseLost)
    assert message == "task a: token 1 is stale (task is running, current claim 2)"
    h.refused(h.op(LeaseExpired, task="a", token=first), LeaseLost)
    h.finish("a", token=second)
    assert h["a"].state is S
    h.refused(h.op(TaskFinished, task="a", token=second, ok=False), LeaseLost)


def test_finish_on_a_task_never_claimed_is_lease_lost() -> None:
    h = Harness.of(task("a"))
    h.refused(h.op(TaskFinished, task="a", token=0, ok=True), LeaseLost)


# -- lease expiry ---------------------------------------------------------------------


def test_lease_expiry_requeues_while_attempts_remain() -> None:
    h = Harness.of(task("a"), task("b", "a"))
    h.claim("a")
    h.expire("a")
    a = h["a"]
    assert (a.state, a.error, a.owner, a.lease_expires, a.attempts, a.claims) == (Q, "lease expired", None, None, 1, 1)


def test_lease_expiry_past_max_attempts_fails_and_skips() -> None:
    h = Harness.of(task("a", extra="max_attempts = 1"), task("b", "a"), task("c", "b"))
    h.claim("a")
    h.expire("a")
    assert h.states() == {"a": F, "b": K, "c": K}
    assert h["a"].error == "lease expired"


def test_a_crash_gives_the_attempt_back_and_requeues_at_once_even_on_the_last_attempt() -> None:
    h = Harness.of(task("a", extra="max_attempts = 1"), task("b", "a"))
    h.claim("a")
    why = "its worker w-1 (pid 812 on host ada) died"
    h.apply(h.op(LeaseExpired, task="a", token=1, why=why, attempt_used=False))
    a = h["a"]
    assert (a.state, a.error, a.owner, a.lease_expires, a.attempts, a.claims, a.not_before) == (Q, why, None, None, 0, 1, 0.0)
    assert h.states() == {"a": Q, "b": B}
    h.claim("a")  # the only attempt is still there: attempt 1 again, under a new token
    assert (h["a"].attempts, h["a"].claims) == (1, 2)
    h.finish("a")
    assert h.states() == {"a": S, "b": Q}


def test_crashes_between_real_failures_count_only_the_failures() -> None:
    h = Harness.of(task("a", extra="max_attempts = 2"))
    h.run("a", ok=False, error="exit 1")
    for _ in range(3):
        h.claim("a")
        h.apply(h.op(LeaseExpired, task="a", token=h["a"].claims, why="died", attempt_used=False))
        assert (h["a"].state, h["a"].attempts) == (Q, 1)
    h.run("a", ok=False, error="exit 1")
    assert (h["a"].state, h["a"].attempts, h["a"].claims, h["a"].error) == (F, 2, 5, "exit 1")


def test_a_crash_with_a_stale_token_is_refused() -> None:
    h = Harness.of(task("a"))
    first = h.claim("a")
    h.apply(h.op(LeaseExpired, task="a", token=first, attempt_used=False))
    second = h.claim("a")
    h.refused(h.op(LeaseExpired, task="a", token=first, attempt_used=False), LeaseLost)
    h.finish("a", token=second)
    h.refused(h.op(LeaseExpired, task="a", token=second, attempt_used=False), LeaseLost)


def test_an_expiry_recorded_before_crashes_were_told_apart_still_uses_its_attempt() -> None:
    """An `expired` without `attempt_used` (as every record before it) replays as it always did."""
    h = Harness.of(task("a", extra="max_attempts = 1"))
    h.claim("a")
    op = msgspec.json.decode(b'{"op":"expired","v":1,"id":"op0003","clock":3,"at":3.0,"actor":"me","task":"a","token":1}', type=Op)
    assert (op.why, op.attempt_used) == (None, True)
    h.apply(op)
    assert (h["a"].state, h["a"].error, h["a"].attempts) == (F, "lease expired", 1)


# -- cancel ---------------------------------------------------------------------------


def test_cancel_task_skips_its_dependents_transitively() -> None:
    h = Harness.of(task("a"), task("b", "a"), task("c", "b"), task("z"))
    h.cancel("a", reason="not needed")
    assert h.states() == {"a": C, "b": K, "c": K, "z": Q}
    assert h["a"].error == "not needed"
    assert h["c"].skipped_because == "a"
    assert h.state.cancelled is False


def test_cancel_running_task_fences_its_worker() -> None:
    h = Harness.of(task("a"))
    token = h.claim("a")
    h.cancel("a")
    assert h["a"].state is C and h["a"].owner is None
    h.refused(h.op(TaskFinished, task="a", token=token, ok=True), LeaseLost)


def test_cancel_finished_task_is_refused() -> None:
    h = Harness.of(task("a"), task("b", "a"))
    h.run("a")
    assert h.refused(h.op(Cancelled, task="a"), InvalidTransition) == "task a is already succeeded"
    h.cancel("b")
    h.refused(h.op(Cancelled, task="b"), InvalidTransition)


def test_cancel_job_cancels_every_live_task() -> None:
    h = Harness.of(task("a"), task("b"), task("c", "a"), task("d", "b"))
    h.run("a")
    h.claim("b")
    change = h.cancel(reason="stop")
    assert set(change.tasks) == {"b", "c", "d"}
    assert h.states() == {"a": S, "b": C, "c": C, "d": C}
    assert all(h[t].error == "stop" for t in "bcd")
    assert h.state.cancelled is True
    assert h.state.status() == "cancelled"


def test_cancel_finished_job_is_refused() -> None:
    h = Harness.of(task("a"))
    h.run("a")
    message = h.refused(h.op(Cancelled), InvalidTransition)
    assert message == "the job has already finished; nothing to cancel"
    h2 = Harness.of(task("a"))
    h2.cancel()
    h2.refused(h2.op(Cancelled), InvalidTransition)


def test_retry_uncancels_the_job() -> None:
    h = Harness.of(task("a"), task("b"))
    h.cancel()
    h.retry("a")  # a retry un-cancels the job...
    assert h.state.cancelled is False
    h.claim("a")  # ...so its task can be claimed again
    assert h["a"].state is R


def test_claim_refused_while_job_cancelled() -> None:
    h = Harness.of(task("a"))
    state = JobState(clock=h.state.clock, ops=h.state.ops, cancelled=True, counts=h.state.counts)
    with pytest.raises(InvalidTransition, match="the job is cancelled"):
        apply(h.op(TaskClaimed, task="a", token=1, owner="w", lease_expires=1.0), state, h.tasks.__getitem__)


# -- retry ----------------------------------------------------------------------------


def test_retry_failed_task_requeues_and_revives_skipped_dependents() -> None:
    h = Harness.of(task("a", extra="max_attempts = 1"), task("b", "a"), task("c", "b"))
    h.run("a", ok=False, error="boom")
    assert h.states() == {"a": F, "b": K, "c": K}
    change = h.retry("a")
    assert set(change.tasks) == {"a", "b", "c"}
    assert h.states() == {"a": Q, "b": B, "c": B}
    a = h["a"]
    assert (a.attempts, a.error, a.claims) == (0, None, 1)
    assert h["b"].skipped_because is None
    assert h.claim("a") == 2
    h.finish("a")
    h.run("b")
    h.run("c")
    assert h.state.status() == "succeeded"


def test_retry_does_not_revive_dependents_skipped_for_another_failed_dependency() -> None:
    h = Harness.of(
        task("a", extra="max_attempts = 1"),
        task("x", extra="max_attempts = 1"),
        task("both", "a", "x"),
        task("after", "both"),
        task("only_a", "a"),
    )
    h.run("x", ok=False)
    assert h["both"].skipped_because == "x"
    h.run("a", ok=False)
    h.retry("a")
    assert h.states() == {"a": Q, "x": F, "both": K, "after": K, "only_a": B}
    assert h["both"].skipped_because == "x"
    h.retry("x")
    assert h.states() == {"a": Q, "x": Q, "both": B, "after": B, "only_a": B}


def test_retry_revives_a_diamond_whatever_the_spec_order() -> None:
    # d is listed before b, so d is visited while b is still skipped; it must be revived anyway.
    h = Harness.of(task("a", extra="max_attempts = 1"), task("d", "a", "b"), task("b", "a"))
    h.run("a", ok=False)
    assert h.states() == {"a": F, "d": K, "b": K}
    h.retry("a")
    assert h.states() == {"a": Q, "d": B, "b": B}


def test_retry_cancelled_task_after_job_cancel() -> None:
    h = Harness.of(task("a"), task("b", "a"))
    h.cancel()
    assert h.state.status() == "cancelled"
    h.retry("a")
    assert h.states() == {"a": Q, "b": C}  # b was cancelled, not skipped: it stays cancelled
    assert h.state.status() == "running"
    h.retry("b")
    assert h.states() == {"a": Q, "b": B}


def test_retry_refuses_tasks_that_are_not_dead() -> None:
    h = Harness.of(task("a"), task("b", "a"), task("c"))
    assert h.refused(h.op(Retried, task="a"), InvalidTransition) == (
        "task a is queued; only failed, cancelled or skipped tasks can be retried"
    )
    h.refused(h.op(Retried, task="b"), InvalidTransition)
    h.claim("a")
    h.refused(h.op(Retried, task="a"), InvalidTransition)
    h.finish("a")
    h.refused(h.op(Retried, task="a"), InvalidTransition)


def test_retry_refuses_a_task_behind_a_dead_dependency() -> None:
    h = Harness.of(task("a", extra="max_attempts = 1"), task("b", "a"))
    h.run("a", ok=False)
    message = h.refused(h.op(Retried, task="b"), InvalidTransition)
    assert message == "task b depends on a, which is failed; retry a"


def test_retry_of_cancelled_task_whose_deps_succeeded_queues_it() -> None:
    h = Harness.of(task("a"), task("b", "a"))
    h.run("a")
    h.cancel("b")
    assert h["b"].state is C
    h.retry("b")
    assert h["b"].state is Q


# -- artifacts ------------------------------------------------------------------------


def test_artifacts_recorded_for_task_and_job() -> None:
    h = Harness.of(task("a"))
    h.apply(h.op(ArtifactsRecorded, task="a", artifacts=("11", "22")))
    h.apply(h.op(ArtifactsRecorded, task=None, artifacts=("33",)))
    h.apply(h.op(ArtifactsRecorded, task="a", artifacts=("44",)))
    assert h["a"].artifacts == ("11", "22", "44")
    assert h.state.artifacts == ("33",)
    assert h["a"].state is Q


# -- renewals (work --remote) -----------------------------------------------------------


def test_renewed_moves_a_running_leases_deadline_and_nothing_else() -> None:
    h = Harness.of(task("a"))
    token = h.claim("a", ttl=10.0)
    before = h["a"]
    h.apply(h.op(LeaseRenewed, task="a", token=token, lease_expires=before.lease_expires + 30.0))
    assert h["a"].lease_expires == before.lease_expires + 30.0
    assert (h["a"].state, h["a"].claims, h["a"].attempts, h["a"].owner) == (R, token, before.attempts, before.owner)


def test_renewed_is_refused_for_a_stale_token_a_task_not_running_or_a_shorter_lease() -> None:
    h = Harness.of(task("a"), task("b"))
    token = h.claim("a", ttl=10.0)
    deadline = h["a"].lease_expires
    assert "shorten" in h.refused(h.op(LeaseRenewed, task="a", token=token, lease_expires=deadline - 1.0), InvalidTransition)
    h.refused(h.op(LeaseRenewed, task="a", token=token + 1, lease_expires=deadline + 5.0), LeaseLost)
    h.refused(h.op(LeaseRenewed, task="b", token=1, lease_expires=deadline + 5.0), LeaseLost)  # queued, never claimed
    h.expire("a")
    h.refused(h.op(LeaseRenewed, task="a", token=token, lease_expires=deadline + 5.0), LeaseLost)  # expired meanwhile


# -- a random walk over every operation -----------------------------------------------

SPECS = [
    (task("a"),),
    (task("a"), task("b", "a"), task("c", "b")),
    (task("a"), task("b"), task("c", "a", "b"), task("d", "c"), task("e", "a")),
    (task("a"), task("d", "a", "b"), task("b", "a"), task("c", "d")),
]


def _moves(h: Harness) -> list[tuple[str, str | None]]:
    """Mostly operations that apply now, weighted towards progress, plus some that must be refused."""
    moves: list[tuple[str, str | None]] = [("cancel_job", None)]
    for name, t in sorted(h.tasks.items()):
        if t.state is Q:
            moves += [("claim", name)] * 4
        elif t.state is R:
            moves += [("ok", name)] * 3 + [("fail", name)] * 3 + [("fatal", name), ("expire", name), ("crash", name), ("stale", name)]
            moves += [("renew", name), ("shorten", name), ("renew_stale", name)]
        elif t.state in POISON:
            moves += [("retry", name)] * 2
        moves += [("cancel", name), ("retry", name), ("claim", name), ("ok", name)]
    return moves


def _move_op(h: Harness, action: str, name: str | None) -> Op:
    """The operation of a move of _moves (only the drawn one is built: most need the task)."""
    t = h.tasks[name] if name is not None else None
    return {
        "claim": lambda: h.op(TaskClaimed, task=name, token=t.claims + 1, owner="w", lease_expires=h.clock + 5.0),
        "ok": lambda: h.op(TaskFinished, task=name, token=t.claims, ok=True, artifacts=(f"{h.clock:064x}",)),
        "fail": lambda: h.op(TaskFinished, task=name, token=t.claims, ok=False, error="e"),
        "fatal": lambda: h.op(TaskFinished, task=name, token=t.claims, ok=False, retryable=False),
        "expire": lambda: h.op(LeaseExpired, task=name, token=t.claims),
        "crash": lambda: h.op(LeaseExpired, task=name, token=t.claims, why="died", attempt_used=False),
        "cancel": lambda: h.op(Cancelled, task=name),
        "cancel_job": lambda: h.op(Cancelled),
        "retry": lambda: h.op(Retried, task=name),
        "stale": lambda: h.op(TaskFinished, task=name, token=t.claims - 1, ok=True),
        "renew": lambda: h.op(LeaseRenewed, task=name, token=t.claims, lease_expires=(t.lease_expires or 0.0) + 5.0),
        "shorten": lambda: h.op(LeaseRenewed, task=name, token=t.claims, lease_expires=(t.lease_expires or 0.0) - 1.0),
        "renew_stale": lambda: h.op(LeaseRenewed, task=name, token=t.claims - 1, lease_expires=h.clock + 100.0),
    }[action]()


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(SPECS), st.integers(min_value=1, max_value=3), st.data())
def test_random_walk_keeps_counts_and_invariants(spec: tuple[str, ...], max_attempts: int, data: st.DataObject) -> None:
    h = Harness.of(*spec, defaults=f"max_attempts = {max_attempts}")
    for _ in range(data.draw(st.integers(min_value=0, max_value=40), label="steps")):
        action, name = data.draw(st.sampled_from(_moves(h)))
        op = _move_op(h, action, name)
        before = (h.state, dict(h.tasks))
        try:
            h.apply(op)
        except (InvalidTransition, LeaseLost):
            assert (h.state, h.tasks) == before
    check_invariants(h)
    status = h.state.status()
    if all(t.state.terminal for t in h.tasks.values()):
        assert status in ("succeeded", "failed", "cancelled")
        assert (status == "succeeded") == all(t.state is S for t in h.tasks.values())
    else:
        assert status in ("queued", "running")
