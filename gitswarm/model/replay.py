"""Replaying a set of operations: the canonical state of a job, whatever order they came in.

All operations are applied once each, from nothing, in ascending (clock,
actor, id) order. An operation that does not apply at its turn changes
nothing but the clock; a finish whose claim lost to another clone's (both
carry the same token, so the claim's actor tells them apart) is not applied
either, nor is a delivery of steering to that claim's attempt or a renewal of its lease. The result
depends only on the set of operations, so two clones' histories merge
commutatively and lose nothing. These are state-machine
rules, next to the reducer that applies each operation: a new kind of
operation is taught in model/ only.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from gitswarm.model.errors import CorruptRecord, InvalidTransition, LeaseLost
from gitswarm.model.ops import JobCreated, LeaseRenewed, Op, SteeringDelivered, TaskClaimed, TaskFinished, canonical
from gitswarm.model.records import JobState, Task
from gitswarm.model.reducer import apply


@dataclass(frozen=True)
class Replayed:
    state: JobState
    tasks: dict[str, Task]
    applied: int
    skipped: int


def replay(ops: list[Op], where: str) -> Replayed:
    """The canonical state of a set of operations: all of them, from nothing, in
    (clock, actor, id) order. An op that does not apply at its turn is skipped; so is
    a finish whose claim lost (same task and token, same actor, and no claim of those
    applied since). For a clone's own
    linear history this is exactly the state its tip records."""
    ordered = canonical(ops)
    state, applied, skipped = JobState(), 0, 0
    tasks: dict[str, Task] = {}
    lost_claims: set[tuple[str, int, str]] = set()

    def lookup(task_id: str) -> Task:
        found = tasks.get(task_id)
        if found is None:
            raise CorruptRecord(f"{where}: an operation names task {task_id!r}, which the job does not have")
        return found

    if sum(isinstance(op, JobCreated) for op in ordered) != 1:
        raise CorruptRecord(f"{where}: a job's history holds exactly one job_created")
    for op in ordered:
        if isinstance(op, (TaskFinished, SteeringDelivered, LeaseRenewed)) and (op.task, op.token, op.actor) in lost_claims:
            state, skipped = _seen(state, op), skipped + 1
            continue
        try:
            change = apply(op, state, lookup, lambda: list(tasks))
        except (InvalidTransition, LeaseLost):
            if isinstance(op, TaskClaimed):
                lost_claims.add((op.task, op.token, op.actor))
            state, skipped = _seen(state, op), skipped + 1
            continue
        if isinstance(op, TaskClaimed):
            # A later claim of the same task with the same token by the same clone (the token came
            # round again: the claim it lost took none, then a retry requeued the task) holds the
            # lease now: what follows with that (task, token, actor) is this claim's, and applies.
            lost_claims.discard((op.task, op.token, op.actor))
        state = change.state
        tasks.update(change.tasks)
        applied += 1
    return Replayed(state, tasks, applied, skipped)


def _seen(state: JobState, op: Op) -> JobState:
    """An op that did not apply still advances the clock: the next local op must sort
    after every op in the history, or a later replay could let a skipped op apply."""
    return state if op.clock <= state.clock else msgspec.structs.replace(state, clock=op.clock)
