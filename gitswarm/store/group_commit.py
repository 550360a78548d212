"""Group commit: the finishes and claims of one supervisor's workers, written together by whichever holds the lock.

A transition costs ~1.5 ms, and nearly all of it is the same whatever it
records: reading the job's tip, its root tree, a commit, the ref, the index's
transaction. With four workers on two cores, two or three of them are often
queued on the write lock, each to write one finish. So a worker posts its
finish (with what it asks to claim next), or its claim alone, in a slot of
shared memory before it waits for the lock. The worker that holds the lock
takes everything posted for its job and writes it with its own, in one commit
(store/lease_finish.py), and once that commit is in the index, leaves each an
answer: the commit, the task it claimed for that worker (or why its finish was
refused).

A worker that gets the lock and finds its answer is done; it reads its
records at the answered commit. One whose post is still there withdraws it
and writes it itself, as does one whose post was taken by a holder that died
or failed before answering (a finish that landed after all is then refused by
its fencing token: the worker treats the lease as lost, as when any write's
fate is unknown; a claim that landed for it is held until its lease runs out).

This module holds what is posted and answered; store/group_slots.py, the
slots of shared memory (loaded only by a run that forks workers).
"""

from __future__ import annotations

from typing import NamedTuple

from gitswarm.model.ops import Holder
from gitswarm.store.lease_types import Ask, Lease, Result


class Posted(NamedTuple):
    """A worker's finish waiting for the write lock (or, with no lease and no result, its claim in `ask.job`)."""

    lease: Lease | None
    result: Result | None
    now: float
    ask: Ask
    holder: Holder

    @property
    def job(self) -> str | None:
        return self.lease.job if self.lease is not None else self.ask.job

    @property
    def of(self) -> tuple[str, str, int]:
        """What an answer names: the lease finished (job, task, token); for a claim, (job, owner, 0)."""
        if self.lease is not None:
            return (self.lease.job, self.lease.task, self.lease.token)
        return (self.ask.job or "", self.ask.owner, 0)


class Answer(NamedTuple):
    """What the holder of the lock did with the posted finish or claim `of` (Posted.of): written in commit
    `tip` (and `claimed` the worker's next task, its lease until `expires`), or refused (`lost`: why its
    lease was no longer held)."""

    of: tuple[str, str, int]
    tip: str | None
    claimed: str | None = None
    expires: float = 0.0
    lost: str | None = None
