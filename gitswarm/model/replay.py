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

import bisect
from dataclasses import dataclass

import msgspec

from gitswarm.model.errors import CorruptRecord, InvalidTransition, LeaseLost
from gitswarm.model.ops import (
    JobCreated,
    LeaseRenewed,
    Op,
    OpBase,
    SteeringDelivered,
    TaskClaimed,
    TaskFinished,
    canonical,
)
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
    return Replay.of(ops, where, resumable=False).result


class _Fold:
    """Where a replay stands after some of its operations: what the next one is applied to."""

    def __init__(self) -> None:
        self.state = JobState()
        self.tasks: dict[str, Task] = {}
        self.lost_claims: set[tuple[str, int, str]] = set()
        self.applied = 0
        self.skipped = 0

    def copy(self) -> _Fold:
        other = _Fold()
        other.state, other.tasks, other.lost_claims = self.state, dict(self.tasks), set(self.lost_claims)
        other.applied, other.skipped = self.applied, self.skipped
        return other

    def step(self, op: Op, where: str) -> None:
        if isinstance(op, (TaskFinished, SteeringDelivered, LeaseRenewed)) and (op.task, op.token, op.actor) in self.lost_claims:
            self.state, self.skipped = _seen(self.state, op), self.skipped + 1
            return
        tasks = self.tasks

        def lookup(task_id: str) -> Task:
            found = tasks.get(task_id)
            if found is None:
                raise CorruptRecord(f"{where}: an operation names task {task_id!r}, which the job does not have")
            return found

        try:
            change = apply(op, self.state, lookup, lambda: list(tasks))
        except (InvalidTransition, LeaseLost):
            if isinstance(op, TaskClaimed):
                self.lost_claims.add((op.task, op.token, op.actor))
            self.state, self.skipped = _seen(self.state, op), self.skipped + 1
            return
        if isinstance(op, TaskClaimed):
            # A later claim of the same task with the same token by the same clone (the token came
            # round again: the claim it lost took none, then a retry requeued the task) holds the
            # lease now: what follows with that (task, token, actor) is this claim's, and applies.
            self.lost_claims.discard((op.task, op.token, op.actor))
        self.state = change.state
        tasks.update(change.tasks)
        self.applied += 1


class Replay:
    """A replay kept with where it stood every CHECKPOINT operations, so that more operations are replayed
    from the last point before the first of them in the canonical order rather than from nothing: the
    result is the same fold over the same order (what precedes that point is unchanged), in a fraction of
    the time when the new operations are recent, as another machine's claims and finishes are."""

    CHECKPOINT = 32  # operations between two points at least; a job of many tasks keeps fewer (each copies them)

    def __init__(
        self, ordered: list[Op], keys: list[tuple[int, str, str]], points: list[_Fold], every: int, result: Replayed,
    ) -> None:
        self.ordered = ordered  # every operation, in canonical order
        self.keys = keys  # their order keys
        self.points = points  # points[i]: the fold after the first i * every operations
        self.every = every
        self.result = result

    @classmethod
    def of(cls, ops: list[Op], where: str, resumable: bool = True) -> Replay:
        """The replay of `ops`; with `resumable` false, one that keeps no checkpoint (adding to it replays all)."""
        ordered = canonical(ops)
        if not resumable:  # no checkpoint and no keys: adding to it replays everything
            return cls._fold(ordered, [], len(ordered) + 1, where, keys=[])
        tasks = max((len(op.tasks) for op in ordered if isinstance(op, JobCreated)), default=0)
        return cls._fold(ordered, [], max(cls.CHECKPOINT, tasks // 4), where)

    def adding(self, ops: list[Op], where: str) -> Replay:
        """This replay with `ops` (none of them in it already) replayed in their places."""
        if not ops:
            return self
        new = canonical(ops)
        first = bisect.bisect_left(self.keys, new[0].order_key())
        kept = min(first // self.every, len(self.points) - 1)
        start = kept * self.every
        rest = sorted([*self.ordered[start:], *new], key=OpBase.order_key)
        keys = [*self.keys[:start], *(op.order_key() for op in rest)]
        return self._fold([*self.ordered[:start], *rest], self.points[: kept + 1], self.every, where, start, keys)

    @classmethod
    def _fold(
        cls, ordered: list[Op], points: list[_Fold], every: int, where: str, start: int = 0,
        keys: list[tuple[int, str, str]] | None = None,
    ) -> Replay:
        if sum(isinstance(op, JobCreated) for op in ordered) != 1:
            raise CorruptRecord(f"{where}: a job's history holds exactly one job_created")
        points = points or [_Fold()]
        fold = points[-1].copy()
        for i in range(start, len(ordered)):
            fold.step(ordered[i], where)
            if (i + 1) % every == 0:
                points.append(fold.copy())
        result = Replayed(fold.state, fold.tasks, fold.applied, fold.skipped)
        return cls(ordered, keys if keys is not None else [op.order_key() for op in ordered], points, every, result)


def _seen(state: JobState, op: Op) -> JobState:
    """An op that did not apply still advances the clock: the next local op must sort
    after every op in the history, or a later replay could let a skipped op apply."""
    return state if op.clock <= state.clock else msgspec.structs.replace(state, clock=op.clock)
