"""Operations: the events that change a job, one per commit on the job's ref.

Every operation carries its own id, a Lamport clock, a wall-clock time and
the actor that made it, so two clones' histories can be merged by replaying
both sides in one deterministic order: (clock, actor, id).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

import msgspec

from gitswarm.model.codec import FORMAT
from gitswarm.model.records import Job, TaskSpec


class OpBase(msgspec.Struct, frozen=True, kw_only=True, tag_field="op"):
    """The fields every operation has, a job's or memory's (model/memory.py), and their replay order."""

    v: int = FORMAT
    id: str
    clock: int
    at: float
    actor: str

    def order_key(self) -> tuple[int, str, str]:
        return (self.clock, self.actor, self.id)


OpBaseT = TypeVar("OpBaseT", bound=OpBase)


def canonical(ops: Iterable[OpBaseT]) -> list[OpBaseT]:
    """The order every op log replays in, whatever order the ops were found: (clock, actor, id)."""
    return sorted(ops, key=OpBase.order_key)


class JobCreated(OpBase, tag="job_created", kw_only=True, frozen=True):
    job: Job
    tasks: tuple[TaskSpec, ...]


class Holder(msgspec.Struct, frozen=True, kw_only=True):
    """The process that holds a lease: its machine and the process there (store/holders.py).

    A pid means something only on its machine, in its pid namespace and its
    kernel's boot: `boot` names those (Linux: the boot id and the pid
    namespace), and `start`, the process's start time in clock ticks after
    boot, tells a reused pid from the holder. Elsewhere both are unknown
    ("" and 0) and only the host name and the pid are judged.
    """

    host: str
    boot: str = ""
    pid: int
    start: int = 0


class TaskClaimed(OpBase, tag="claimed", kw_only=True, frozen=True):
    task: str
    token: int
    owner: str
    lease_expires: float
    holder: Holder | None = None  # the worker process that holds the lease (None: not recorded, as in claims made before it was)
    # The claiming machine's key (`ssh-ed25519 BASE64`), for a claim pushed to a shared remote: the lease's
    # renewals, expiries and finishes count only in commits that key signed (store/pulled_jobs.py).
    key: str | None = None


class TaskFinished(OpBase, tag="finished", kw_only=True, frozen=True):
    """A worker's final write: accepted only if `token` is the task's current claim."""

    task: str
    token: int
    ok: bool
    error: str | None = None
    artifacts: tuple[str, ...] = ()
    retryable: bool = True
    cost_usd: float = 0.0  # what the attempt's agent runs cost, as reported or priced
    tokens: int = 0  # their input + output tokens
    base: str | None = None  # the commit the attempt started from when stacked on its upstreams' patches
    skipped_because: str | None = None  # not ok: an upstream whose patch it cannot start from (→ skipped)


class LeaseRenewed(OpBase, tag="renewed", kw_only=True, frozen=True):
    """A running task's lease extended to `lease_expires` by its holder (written by `work --remote`,
    where the deadline in the record is what every machine judges the lease by)."""

    task: str
    token: int
    lease_expires: float


class LeaseExpired(OpBase, tag="expired", kw_only=True, frozen=True):
    """A lease ended without a result: its holder died, went silent or was stopped.

    `attempt_used` False (what gitswarm writes now unless its worker failed of
    its own) gives the attempt back: a crash is not the task's failure. Records
    written before the field existed decode as True, and replay as they did.
    """

    task: str
    token: int
    why: str | None = None  # what ended it, in words ("its worker w-1 (pid 812 on host ada) died")
    attempt_used: bool = True


class Cancelled(OpBase, tag="cancelled", kw_only=True, frozen=True):
    task: str | None = None  # None cancels the whole job
    reason: str | None = None


class Retried(OpBase, tag="retried", kw_only=True, frozen=True):
    task: str


class BudgetStopped(OpBase, tag="budget_stopped", kw_only=True, frozen=True):
    """A job budget ran out: nothing more is leased; queued and blocked tasks are cancelled."""

    reason: str


class ArtifactsRecorded(OpBase, tag="artifacts", kw_only=True, frozen=True):
    task: str | None = None
    artifacts: tuple[str, ...]


class FollowedUp(OpBase, tag="followed_up", kw_only=True, frozen=True):
    """A finished implement task continued: requeued to carry out `instruction` from `head`."""

    task: str
    instruction: str
    patch: str | None = None  # the patch it continues (None: the task left none)
    head: str | None = None  # that patch's head commit, where the next attempt starts
    resume_session: bool = False  # resume the agent's own session (adapters that can)
    session: str | None = None  # the session to resume: the one that made the patch


class Steered(OpBase, tag="steered", kw_only=True, frozen=True):
    """Guidance for a task's next attempt or repair round (`task` None: the next task of the job to start)."""

    task: str | None = None
    text: str


class SteeringDelivered(OpBase, tag="steering_delivered", kw_only=True, frozen=True):
    """Steers (by their `steered` op ids) put into the prompt of one attempt's round of a running task."""

    task: str
    token: int
    attempt: int
    round: int
    steers: tuple[str, ...]


class Approved(OpBase, tag="approved", kw_only=True, frozen=True):
    """A person approved the side effects of `tasks` (model/approval.py): `by` whom, `how`."""

    tasks: tuple[str, ...]
    by: str
    how: str


Op = (
    JobCreated | TaskClaimed | TaskFinished | LeaseRenewed | LeaseExpired | Cancelled | Retried | ArtifactsRecorded | BudgetStopped
    | FollowedUp | Steered | SteeringDelivered | Approved
)
# One concrete kind of operation (what a function that makes one returns).
OpT = TypeVar(
    "OpT", JobCreated, TaskClaimed, TaskFinished, LeaseRenewed, LeaseExpired, Cancelled, Retried, ArtifactsRecorded, BudgetStopped,
    FollowedUp, Steered, SteeringDelivered, Approved,
)


def subject(op: Op) -> str:
    """The task an operation is about, or '*' for the whole job."""
    task = getattr(op, "task", None)
    return task if isinstance(task, str) else "*"


def title(op: Op) -> str:
    """The first line of the commit that records `op`."""
    return f"{op.__struct_config__.tag} {subject(op)}"
