"""`gitswarm steer`: guidance for a task (or a job) delivered at its next safe point.

A steer is recorded as a `steered` operation and waits in the task record
(or, job-wide, in the job state) until a worker reaches a safe point: the
start of an attempt (the prompt packet) or of a repair round. The worker
then records a `steering_delivered` operation, fenced by its lease, in the
same critical section that takes the steers off the pending list; so each
steer reaches exactly one attempt, and `log` shows when and which. Whether
the agent followed it is not gitswarm's to say.
"""

from __future__ import annotations

from gitswarm.engine.results import SteerRecorded
from gitswarm.engine.swarm import Swarm
from gitswarm.model.errors import BadInput, InvalidTransition, LeaseLost
from gitswarm.model.late_instructions import Guidance, check_text
from gitswarm.model.ops import Steered, SteeringDelivered
from gitswarm.model.records import Task
from gitswarm.store.jobs import Snapshot
from gitswarm.store.leases import Built, Lease, Leases

SECTION = "# Guidance from the user"


def steer(swarm: Swarm, target: str, text: str) -> SteerRecorded:
    """Record `text` for the next attempt or repair round of task `target` (`JOB/TASK`, or `TASK`
    alone), or job-wide for the next task of job `target` to start. Nothing is written for bad
    input (BadInput): an unknown id, a shell task (it has no prompt), a job without an agent task,
    an empty or over-long text or one holding a NUL byte."""
    check_text(text, "steer")
    job_id, task_id = swarm.resolve_target(target)
    snapshot = swarm.refs.snapshot(job_id, swarm.index.job_tip(job_id))
    if task_id is not None:
        task = snapshot.task(task_id)
        if task.spec.adapter == "shell":
            raise BadInput(f"task {job_id[:12]}/{task_id} runs a shell command: it has no prompt to steer")
        waits = f"the next attempt or repair round of {task_id}"
        if task.state.terminal:
            waits += f" (it is {task.state.value}: a retry or follow-up starts one)"
    else:
        if all(t.spec.adapter == "shell" for t in snapshot.tasks()):
            raise BadInput(f"job {job_id[:12]} has no agent task: shell commands have no prompt to steer")
        waits = "the next task of the job to start"

    def build(s: Snapshot) -> Built:
        op = swarm.refs.next_op(Steered, s, swarm.clock(), task=task_id, text=text)
        swarm.ledger.trust.made_op(op.id)  # before it is written: this clone's own word, for its workers
        return op, ()

    change = swarm.ledger.transition(job_id, build)
    pending = change.tasks[task_id].steering if task_id is not None else change.state.steering
    return SteerRecorded(job=job_id, task=task_id, op=pending[-1].op, delivered_at=waits)


def pending(snapshot: Snapshot, task: Task, round_: int, made_here: frozenset[str] | None = None) -> tuple[Guidance, ...]:
    """The steers a task's round `round_` takes: its own; at an attempt's start (round 0) the job-wide ones too.
    With `made_here`, only the steers this clone made: a steer pulled from elsewhere is data, never an
    instruction to an agent here (its text is shown by `status`, refused)."""
    found = task.steering + (snapshot.state.steering if round_ == 0 else ())
    return found if made_here is None else tuple(g for g in found if g.op in made_here)


def deliver(ledger: Leases, lease: Lease, snapshot: Snapshot, round_: int, now: float) -> str:
    """Take the steers waiting for round `round_` of the leased attempt, recording their delivery
    (`steering_delivered`, only while the lease is held); the prompt section that carries them,
    or "" when none is waiting (or the lease is gone)."""
    mine = ledger.trust.ops_made_here()
    if not pending(snapshot, snapshot.task(lease.task), round_, mine):
        return ""  # the common case: no write, no lock
    taken: list[tuple[Guidance, ...]] = [()]

    def build(s: Snapshot) -> Built:
        taken[0] = found = pending(s, s.task(lease.task), round_, mine)
        steers = tuple(g.op for g in found)
        op = ledger.refs.next_op(
            SteeringDelivered, s, now, task=lease.task, token=lease.token, attempt=lease.attempt, round=round_, steers=steers
        )
        return op, ()

    try:
        ledger.transition(lease.job, build, lease, now)
    except (InvalidTransition, LeaseLost):
        return ""  # taken by another worker meanwhile, or this one lost its lease (it stops at its next tick)
    return section(taken[0])


def section(steers: tuple[Guidance, ...]) -> str:
    """The prompt section of delivered steers, oldest first."""
    if not steers:
        return ""
    body = "\n\n".join(g.text.strip() for g in steers)
    return f"\n{SECTION}\n\nGiven since the task was submitted; weigh it with the task above.\n\n{body}\n"
