"""What a lease is, and the `Leases` protocol a worker claims, renews and finishes through.

store/leases.py implements it on this repository (`Ledger`);
engine/machines/remote_leases.py with a git remote deciding every lease.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

import msgspec

from gitswarm.model.artifacts import Artifact
from gitswarm.model.errors import LeaseLost
from gitswarm.model.ops import Holder, Op
from gitswarm.model.records import Task, TaskSpec, TaskState
from gitswarm.model.reducer import Change
from gitswarm.store.index import Index
from gitswarm.store.jobs import JobRefs, Snapshot
from gitswarm.store.trust import Trust

# What a transition's builder returns: the operation(s) to append and the artifacts they record.
Built = tuple[Op | Sequence[Op], Sequence[Artifact]]
Build = Callable[[Snapshot], Built]


class Lease(msgspec.Struct, frozen=True):
    """What a worker holds while it runs a task; `token` fences its writes."""

    job: str
    task: str
    token: int
    owner: str
    expires: float
    attempt: int
    spec: TaskSpec
    base: str | None = None  # the job's pinned base commit, for implement tasks


class Ask(msgspec.Struct, frozen=True):
    """What a worker claims with: whose the lease is, for how long, from which job (None: any),
    which adapters it cannot run here, and which jobs it must leave alone."""

    owner: str
    ttl: float
    job: str | None = None
    exclude: frozenset[str] = frozenset()
    skip_jobs: frozenset[str] = frozenset()


class Result(msgspec.Struct, frozen=True):
    """A worker's final write of one attempt: how it ended and what it produced."""

    ok: bool
    error: str | None = None
    artifacts: Sequence[Artifact] = ()
    retryable: bool = True
    base: str | None = None  # the stacked base the attempt started from (engine/delegation/stack.py)
    skipped_because: str | None = None  # the upstream whose patch it could not start from: skipped, not failed


class Leases(Protocol):
    """Who runs which task, fenced: what a worker claims, renews and finishes through."""

    refs: JobRefs
    index: Index
    trust: Trust  # which jobs may run here, and which ops this clone made

    def claim(
        self, owner: str, ttl: float, now: float, job_id: str | None = None, exclude: frozenset[str] = frozenset(),
        skip_jobs: frozenset[str] = frozenset(),
    ) -> Lease | None:
        """Lease one queued task, or None when there is none to lease."""

    def renew(self, lease: Lease, ttl: float, now: float) -> Lease:
        """The lease held `ttl` longer; LeaseLost when it is no longer held."""

    def held(self, lease: Lease, now: float) -> bool:
        """Whether the lease is still current, as far as this clone knows."""

    def finish(
        self, lease: Lease, ok: bool, now: float, error: str | None = None, artifacts: Sequence[Artifact] = (),
        retryable: bool = True,
    ) -> Task:
        """The attempt's result, accepted only while its token is current (else LeaseLost)."""

    def finish_and_claim(self, lease: Lease, result: Result, now: float, ask: Ask | None) -> tuple[Task, Lease | None]:
        """finish(), then (with `ask`) the worker's next claim in the same write when it can be."""

    def transition(self, job_id: str, build: Build, lease: Lease | None = None, now: float = 0.0) -> Change:
        """Append what `build` makes of the job's snapshot, fenced by `lease` when given: for what decides
        no lease (a steer delivered), written here and carried by the next write that does."""

    def expire(
        self, now: float, job_id: str | None = None, owner: str | None = None, why: str | None = None,
        attempt_used: bool = False,
    ) -> list[tuple[str, str]]:
        """End every lease past its deadline (with `owner`: every one that owner holds); the tasks it ended.
        The attempt is given back unless `attempt_used` (its worker failed of its own); `why` is recorded."""

    def report_problems(self, listener: Callable[[str], None]) -> None:
        """Tell `listener` why writes do not land, and "" when they land again (a no-op where they always do)."""


def awaiting_person(index: Index, trust: Trust) -> frozenset[str]:
    """Jobs whose side-effecting tasks a pilot asked for and no person here has approved yet.

    An `approved` op counts only when this clone made it (local-ops): one
    pulled from elsewhere may be anyone's, and is kept as data (model/approval.py)."""
    waiting = index.awaiting_person()
    made = trust.ops_made_here() if any(waiting.values()) else frozenset()
    return frozenset(job for job, ops in waiting.items() if made.isdisjoint(ops))


def why_not(index: Index, trust: Trust, job: str, trusted_remotes: frozenset[str] = frozenset()) -> str | None:
    """Why `job` may not run here, or None when it may: trust first, then a person's approval."""
    why = trust.why_not(job, trusted_remotes)
    if why is None and job in awaiting_person(index, trust):
        why = "its side effects await a person's approval"
    return why

class Released(NamedTuple):
    """A lease ended because the process that held it died on this machine: its task is queued again."""

    job: str
    task: str
    owner: str
    holder: Holder
    why: str  # as the `expired` op records it


def granted_lease(snapshot: Snapshot, change: Change, task_id: str, owner: str, expires: float) -> Lease:
    """The lease a claim written in `change` grants."""
    task = change.tasks[task_id]
    return Lease(
        job=snapshot.job_id,
        task=task_id,
        token=task.claims,
        owner=owner,
        expires=expires,
        attempt=task.attempts,
        spec=task.spec,
        base=snapshot.job.base,
    )


def require_held(snapshot: Snapshot, lease: Lease) -> None:
    """Raise LeaseLost unless the task is still running under `lease` in `snapshot`."""
    task = snapshot.task(lease.task)
    if task.state is not TaskState.RUNNING or task.claims != lease.token or task.owner != lease.owner:
        raise LeaseLost(
            f"{lease.job}/{lease.task}: lease {lease.token} is no longer held (the task is {task.state.value}"
            + (f", claimed by {task.owner}" if task.owner and task.owner != lease.owner else "") + "); result refused"
        )
