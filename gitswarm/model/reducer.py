"""The state machine of a job: how one operation changes the materialized state.

This is the only place task transitions are decided. The store applies it
when it writes an operation, and replays it when it merges two histories;
the index only mirrors what it produces.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import assert_never

import msgspec

from gitswarm.model.approval import Approval
from gitswarm.model.errors import InvalidTransition, LeaseLost
from gitswarm.model.late_instructions import FollowUp, Guidance
from gitswarm.model.ops import (
    Approved,
    ArtifactsRecorded,
    BudgetStopped,
    Cancelled,
    FollowedUp,
    JobCreated,
    LeaseExpired,
    LeaseRenewed,
    Op,
    Retried,
    Steered,
    SteeringDelivered,
    TaskClaimed,
    TaskFinished,
)
from gitswarm.model.records import POISON, JobState, Task, TaskState

TaskLookup = Callable[[str], Task]
#: The states a follow-up continues an implement task from.
FOLLOWABLE = frozenset({TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED})
RETRY_BASE_SECONDS = 0.25
RETRY_MAX_SECONDS = 30.0


def retry_delay(attempts: int) -> float:
    """Backoff before the next attempt after `attempts` failed ones: 0.25 s, doubling, at most 30 s."""
    return min(RETRY_BASE_SECONDS * 2.0 ** max(attempts - 1, 0), RETRY_MAX_SECONDS)


class Change(msgspec.Struct):
    """The result of applying one operation: the new job state and every task it touched."""

    state: JobState
    tasks: dict[str, Task] = msgspec.field(default_factory=dict)


class _Apply:
    def __init__(self, op: Op, state: JobState, lookup: TaskLookup, task_ids: Callable[[], list[str]]) -> None:
        self.op = op
        self.state = state
        self.lookup = lookup
        self.task_ids = task_ids
        self.changed: dict[str, Task] = {}
        self.counts = dict(state.counts)

    def get(self, task_id: str) -> Task:
        found = self.changed.get(task_id)
        return found if found is not None else self.lookup(task_id)

    def put(self, old: Task | None, new: Task) -> None:
        if old is not None:
            self.counts[old.state.value] -= 1
        self.counts[new.state.value] = self.counts.get(new.state.value, 0) + 1
        self.changed[new.id] = new

    def set(self, task: Task, **fields: object) -> Task:
        new = msgspec.structs.replace(task, updated=self.op.at, **fields)
        self.put(task, new)
        return new

    def unblock_dependents(self, task: Task) -> None:
        for dep_id in task.spec.dependents:
            dependent = self.get(dep_id)
            if dependent.state is TaskState.BLOCKED and all(
                self.get(d).state is TaskState.SUCCEEDED for d in dependent.spec.depends_on
            ):
                self.set(dependent, state=TaskState.QUEUED)

    def skip_dependents(self, task: Task) -> None:
        pending = deque(task.spec.dependents)
        while pending:
            dependent = self.get(pending.popleft())
            if dependent.state.terminal:
                continue
            self.set(dependent, state=TaskState.SKIPPED, skipped_because=task.id, owner=None, lease_expires=None)
            pending.extend(dependent.spec.dependents)

    def revive_dependents(self, task: Task) -> None:
        pending = deque(task.spec.dependents)
        while pending:
            dependent = self.get(pending.popleft())
            if dependent.state is not TaskState.SKIPPED:
                continue
            if any(self.get(d).state in POISON for d in dependent.spec.depends_on):
                continue
            self.set(dependent, state=TaskState.BLOCKED, skipped_because=None, attempts=0, error=None)
            pending.extend(dependent.spec.dependents)

    def requeue(self, task: Task, **fields: object) -> None:
        """A finished task queued again (blocked while a dependency is unfinished), attempts anew; refused while a
        dependency cannot succeed. Dependents skipped only because of it are revived."""
        for dep in task.spec.depends_on:
            if self.get(dep).state in POISON:
                raise InvalidTransition(f"task {task.id} depends on {dep}, which is {self.get(dep).state.value}; retry {dep}")
        ready = all(self.get(d).state is TaskState.SUCCEEDED for d in task.spec.depends_on)
        revived = self.set(
            task,
            state=TaskState.QUEUED if ready else TaskState.BLOCKED,
            attempts=0,
            not_before=0.0,
            error=None,
            skipped_because=None,
            **fields,
        )
        self.revive_dependents(revived)

    def running(self, task_id: str, token: int) -> Task:
        task = self.get(task_id)
        if task.state is not TaskState.RUNNING or task.claims != token:
            raise LeaseLost(
                f"task {task_id}: token {token} is stale (task is {task.state.value}, current claim {task.claims})"
            )
        return task

    def end_attempt(self, task: Task, error: str, retryable: bool, backoff: bool) -> None:
        if retryable and task.attempts < task.spec.max_attempts:
            not_before = self.op.at + retry_delay(task.attempts) if backoff else 0.0
            self.set(task, state=TaskState.QUEUED, error=error, owner=None, lease_expires=None, not_before=not_before)
            return
        failed = self.set(task, state=TaskState.FAILED, error=error, owner=None, lease_expires=None)
        self.skip_dependents(failed)

    def run(self) -> Change:
        op = self.op
        cancelled = self.state.cancelled
        job_artifacts = self.state.artifacts
        claims, spent_usd, tokens, stopped = self.state.claims, self.state.spent_usd, self.state.tokens, self.state.stopped
        steering, approvals = self.state.steering, self.state.approvals
        match op:
            case JobCreated(tasks=specs):
                for spec in specs:
                    initial = TaskState.BLOCKED if spec.depends_on else TaskState.QUEUED
                    self.put(None, Task(spec=spec, state=initial, updated=op.at))
            case TaskClaimed(task=task_id, token=token, owner=owner, lease_expires=expires):
                task = self.get(task_id)
                if cancelled:
                    raise InvalidTransition(f"task {task_id}: the job is cancelled")
                if task.state is not TaskState.QUEUED:
                    raise InvalidTransition(f"task {task_id} is {task.state.value}, not queued")
                if token != task.claims + 1:
                    raise LeaseLost(f"task {task_id}: claim token {token} is not {task.claims + 1}")
                if stopped:
                    raise InvalidTransition(f"task {task_id}: the job was stopped ({stopped})")
                self.set(
                    task,
                    state=TaskState.RUNNING,
                    claims=token,
                    attempts=task.attempts + 1,
                    owner=owner,
                    lease_expires=expires,
                    holder_key=op.key,
                )
                claims += 1
            case TaskFinished(task=task_id, token=token, ok=ok, error=error, artifacts=artifacts):
                task = self.running(task_id, token)
                spent_usd, tokens = spent_usd + op.cost_usd, tokens + op.tokens
                task = msgspec.structs.replace(task, artifacts=task.artifacts + artifacts)
                if op.base is not None:
                    task = msgspec.structs.replace(task, base=op.base)
                if op.skipped_because is not None and not ok:  # an upstream it cannot start from
                    skipped = self.set(
                        task, state=TaskState.SKIPPED, skipped_because=op.skipped_because, error=error, owner=None, lease_expires=None,
                    )
                    self.skip_dependents(skipped)
                elif ok:
                    done = self.set(task, state=TaskState.SUCCEEDED, error=None, owner=None, lease_expires=None)
                    self.unblock_dependents(done)
                else:
                    self.end_attempt(task, error or "failed", op.retryable, backoff=True)
            case LeaseRenewed(task=task_id, token=token, lease_expires=expires):
                task = self.running(task_id, token)
                if task.lease_expires is not None and expires < task.lease_expires:
                    raise InvalidTransition(f"task {task_id}: a renewal may not shorten the lease")
                self.set(task, lease_expires=expires)
            case LeaseExpired(task=task_id, token=token, why=why, attempt_used=used):
                task = self.running(task_id, token)
                if used:  # as recorded before crashes were told apart: a failed attempt, retried without backoff
                    self.end_attempt(task, why or "lease expired", True, backoff=False)
                else:  # its holder crashed or was stopped: not the task's failure, and the attempt is given back
                    self.set(
                        task, state=TaskState.QUEUED, attempts=max(task.attempts - 1, 0), error=why or "lease expired",
                        owner=None, lease_expires=None, not_before=0.0,
                    )
            case Cancelled(task=task_id):
                if task_id is None:  # the whole job
                    live = [t for t in map(self.get, self.task_ids()) if not t.state.terminal]
                    if not live:
                        raise InvalidTransition("the job has already finished; nothing to cancel")
                    cancelled = True
                    for task in live:
                        self.set(task, state=TaskState.CANCELLED, owner=None, lease_expires=None, error=op.reason)
                else:
                    task = self.get(task_id)
                    if task.state.terminal:
                        raise InvalidTransition(f"task {task_id} is already {task.state.value}")
                    done = self.set(task, state=TaskState.CANCELLED, owner=None, lease_expires=None, error=op.reason)
                    self.skip_dependents(done)
            case Retried(task=task_id):
                task = self.get(task_id)
                if task.state not in POISON:
                    raise InvalidTransition(f"task {task_id} is {task.state.value}; only failed, cancelled or skipped tasks can be retried")
                self.requeue(task)
                cancelled = False
                stopped = None  # the budget is checked again at the next claim
            case FollowedUp(task=task_id):
                task = self.get(task_id)
                if task.spec.mode != "implement":
                    raise InvalidTransition(f"task {task_id} is an {task.spec.mode} task; only implement tasks are followed up")
                if task.state not in FOLLOWABLE:
                    raise InvalidTransition(f"task {task_id} is {task.state.value}; only a succeeded, failed or cancelled task is followed up")
                follow_up = FollowUp(
                    op=op.id, instruction=op.instruction, patch=op.patch, head=op.head,
                    resume_session=op.resume_session, session=op.session, at=op.at,
                )
                self.requeue(task, follow_up=follow_up)
                cancelled = False
                stopped = None
            case Steered(task=task_id, text=text):
                guidance = Guidance(op=op.id, text=text, at=op.at)
                if task_id is None:  # the next task of the job to start
                    steering = (*steering, guidance)
                else:
                    task = self.get(task_id)
                    self.set(task, steering=(*task.steering, guidance))
            case SteeringDelivered(task=task_id, token=token, attempt=attempt, steers=steers):
                task = self.running(task_id, token)
                pending = {g.op for g in task.steering} | {g.op for g in steering}
                if attempt != task.attempts:
                    raise InvalidTransition(f"task {task_id} is in attempt {task.attempts}, not {attempt}")
                if not steers or len(set(steers)) != len(steers) or not pending.issuperset(steers):
                    raise InvalidTransition(f"task {task_id}: the steers delivered are not all pending")
                self.set(task, steering=tuple(g for g in task.steering if g.op not in steers))
                steering = tuple(g for g in steering if g.op not in steers)
            case BudgetStopped(reason=reason):
                if stopped:
                    raise InvalidTransition(f"the job was already stopped ({stopped})")
                stopped = reason
                for task in map(self.get, self.task_ids()):
                    if task.state in (TaskState.QUEUED, TaskState.BLOCKED):
                        self.set(task, state=TaskState.CANCELLED, error=f"budget: {reason}")
            case Approved(tasks=approved):
                approvals = (*approvals, Approval(tasks=approved, by=op.by, how=op.how, at=op.at, op=op.id))
            case ArtifactsRecorded(task=task_id, artifacts=artifacts):
                if task_id is None:  # the job's own
                    job_artifacts = job_artifacts + artifacts
                else:
                    task = self.get(task_id)
                    new = msgspec.structs.replace(task, artifacts=task.artifacts + artifacts)
                    self.changed[task_id] = new
            case _:
                assert_never(op)
        state = JobState(
            clock=max(self.state.clock, op.clock),
            ops=self.state.ops + 1,
            cancelled=cancelled,
            counts={k: v for k, v in sorted(self.counts.items()) if v},
            artifacts=job_artifacts,
            updated=op.at,
            claims=claims,
            spent_usd=round(spent_usd, 8),
            tokens=tokens,
            stopped=stopped,
            steering=steering,
            approvals=approvals,
        )
        return Change(state=state, tasks=self.changed)


def _no_task_ids() -> list[str]:
    return []


def apply(op: Op, state: JobState, lookup: TaskLookup, task_ids: Callable[[], list[str]] = _no_task_ids) -> Change:
    """Apply `op` to a job whose state is `state` and whose tasks `lookup` returns.

    `task_ids` lists every task of the job; only a whole-job cancel needs it.
    Raises InvalidTransition or LeaseLost, changing nothing, when `op` does
    not apply.
    """
    return _Apply(op, state, lookup, task_ids).run()


def apply_all(
    ops: Sequence[Op], state: JobState, lookup: TaskLookup, task_ids: Callable[[], list[str]] = _no_task_ids
) -> Change:
    """Apply several operations in order, each seeing the tasks the earlier ones changed.

    All or nothing: if any operation does not apply, the error is raised and
    nothing is changed.
    """
    changed: dict[str, Task] = {}

    def current(task_id: str) -> Task:
        found = changed.get(task_id)
        return found if found is not None else lookup(task_id)

    for op in ops:
        change = apply(op, state, current, task_ids)
        state = change.state
        changed.update(change.tasks)
    return Change(state=state, tasks=changed)
