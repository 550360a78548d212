"""The durable records of a job: Job, JobState, TaskSpec and Task.

All are frozen msgspec Structs with a format version `v`. A Task pairs the
immutable TaskSpec that the job spec gave with the mutable fields the
reducer changes; TaskSpec never changes after submission.
"""

from __future__ import annotations

import enum
from typing import Literal

import msgspec

from gitswarm.model.approval import Approval
from gitswarm.model.codec import FORMAT
from gitswarm.model.late_instructions import FollowUp, Guidance


class TaskState(enum.StrEnum):
    BLOCKED = "blocked"
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset({TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED, TaskState.SKIPPED})
#: Terminal states that make every dependent skipped.
POISON = frozenset({TaskState.FAILED, TaskState.CANCELLED, TaskState.SKIPPED})


SHELL = "shell"  # the one adapter that is not an agent


def runs_in_users_tree(mode: str, adapter: str, stacked: bool = False) -> bool:
    """Whether a task runs in the user's working tree: shell analyze tasks (`pytest`, a build) that are
    not `stacked` on implement tasks (model/stacking.py). Implement tasks have their worktree, agents'
    analyze tasks a read-only checkout (engine/delegation/readonly.py), stacked shell tasks a clean
    checkout of their upstreams' patches (engine/delegation/stack.py)."""
    return mode != "implement" and adapter == SHELL and not stacked


class JobStatus(enum.StrEnum):
    """A job's overall status, derived from its tasks' states (JobState.status)."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


#: The statuses a job ends in: nothing of it runs again unless a task is retried or followed up.
FINISHED = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED})


class Defaults(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    adapter: str = "shell"
    timeout: float = 600.0
    max_attempts: int = 3
    priority: int = 0


class TaskSpec(msgspec.Struct, frozen=True, kw_only=True):
    """What the spec asked of one task; fixed at submission."""

    id: str
    seq: int
    mode: str = "analyze"
    adapter: str = "shell"
    command: str | list[str] | None = None
    prompt: str | None = None
    depends_on: tuple[str, ...] = ()
    dependents: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()
    priority: int = 0
    timeout: float = 600.0
    max_attempts: int = 3
    cwd: str | None = None
    env: dict[str, str] = {}
    setup: str | None = None  # implement mode: run in the worktree before the agent
    repair_rounds: int = 2  # implement mode: rejected patches go back this many times
    auditor: str | None = None  # implement mode: an adapter that reviews the patch
    model: str | None = None  # for agent adapters: the model to ask for
    effort: Literal["low", "high"] | None = None  # for agent adapters: "low" (the fast tier) or "high" (the strong one); `model` wins
    needs: tuple[str, ...] = ()  # capabilities the adapter must have (routing)
    approved: bool = False  # side effects outside the repository were approved at submission
    paths: tuple[str, ...] = ()  # implement mode: the files or folders (or globs) it may touch, declared
    require: Literal["fail-to-pass"] | None = None  # implement mode: at least one check must fail on the base and pass


class Task(msgspec.Struct, frozen=True, kw_only=True):
    """One task's materialized state: its spec plus what has happened to it.

    `claims` counts every lease ever granted and never goes down: the current
    claim's number is the fencing token, so the refs alone can tell a stale
    result. `attempts` counts attempts since the last retry.
    """

    v: int = FORMAT
    spec: TaskSpec
    state: TaskState
    attempts: int = 0
    claims: int = 0
    owner: str | None = None
    lease_expires: float | None = None
    error: str | None = None
    skipped_because: str | None = None
    artifacts: tuple[str, ...] = ()
    not_before: float = 0.0  # a retried attempt waits (backoff) until then
    updated: float = 0.0
    follow_up: FollowUp | None = None  # the follow-up its attempts carry out (since the last one)
    steering: tuple[Guidance, ...] = ()  # steers waiting for its next attempt or repair round
    base: str | None = None  # the stacked base its last attempt started from (None: the job's base)
    holder_key: str | None = None  # the machine key its latest claim named (`work --remote`; docs/many-machines.md)

    @property
    def id(self) -> str:
        return self.spec.id


class Budget(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Limits on a whole job; None is no limit. `max_wall` is seconds since submission."""

    max_usd: float | None = None
    max_tokens: int | None = None
    max_attempts: int | None = None
    max_wall: float | None = None


class Job(msgspec.Struct, frozen=True, kw_only=True):
    """The job as submitted; never changes."""

    v: int = FORMAT
    id: str
    goal: str
    created: float
    actor: str
    defaults: Defaults = Defaults()
    task_count: int = 0
    source: str | None = None
    base: str | None = None  # the commit implement tasks branch from
    base_ref: str | None = None  # the branch it was the tip of, e.g. refs/heads/main
    budget: Budget | None = None
    approval: Approval | None = None  # the person's approval of side effects, given at submission
    awaits_approval: tuple[str, ...] = ()  # tasks with side effects a pilot asked for: they wait for a person


class JobState(msgspec.Struct, frozen=True, kw_only=True):
    """The job-level fields the reducer changes, with counts of tasks by state."""

    v: int = FORMAT
    clock: int = 0
    ops: int = 0
    cancelled: bool = False
    counts: dict[str, int] = {}
    artifacts: tuple[str, ...] = ()
    updated: float = 0.0
    claims: int = 0  # leases granted, over all tasks: attempts made
    spent_usd: float = 0.0  # what finished runs reported (or were priced at)
    tokens: int = 0  # input + output tokens of finished runs
    stopped: str | None = None  # the budget that stopped the job, and why
    steering: tuple[Guidance, ...] = ()  # job-wide steers waiting for the next task to start
    approvals: tuple[Approval, ...] = ()  # approvals given after submission (`approved` ops; which count: store/leases.py)

    def status(self) -> str:
        """The job's overall status, derived from the task counts."""
        total = sum(self.counts.values())
        done = sum(self.counts.get(s.value, 0) for s in TERMINAL)
        if total and done == total:
            if self.counts.get(TaskState.SUCCEEDED.value, 0) == total:
                return JobStatus.SUCCEEDED.value
            return JobStatus.CANCELLED.value if self.cancelled else JobStatus.FAILED.value
        if self.counts.get(TaskState.RUNNING.value, 0) or done:
            return JobStatus.RUNNING.value
        return JobStatus.QUEUED.value
