"""Group commit: the finishes of one supervisor's workers, written together by whichever holds the write lock.

A transition costs ~1.5 ms, and nearly all of it is the same whatever it
records: reading the job's tip, its root tree, a commit, the ref, the index's
transaction. With four workers on two cores, two or three of them are often
queued on the write lock, each to write one finish. So a worker posts its
finish (with what it asks to claim next) in a slot of shared memory before it
waits for the lock. The worker that holds the lock takes every finish posted
for its job and writes them with its own, in one commit: each checked and
applied on its own (one refused finish does not stop the others), each
followed by that worker's next claim, named for that worker's process (its
`Holder`). It leaves each an answer: the commit, the task it finished, the
task it claimed (or why its finish was refused).

A worker that gets the lock and finds an answer is done; it reads its records
at the answered commit. One whose finish is still posted withdraws it and
writes it itself, as does one whose finish was taken by a holder that died
before answering (the finish may have landed: its fencing token then refuses
the second write, and the worker treats the lease as lost, as when any write's
fate is unknown).

The slots are shared memory made by the supervisor before it forks its
workers: only they share them, so nothing in a slot comes from outside this
run. Every read and write of a slot is under the slots' own lock, and a slot
changes hands only under the index's write lock: posted by its worker while
it waits, taken and answered by the holder, read and emptied by its worker.
"""

from __future__ import annotations

import ctypes
import pickle
from multiprocessing.context import BaseContext
from typing import Any, NamedTuple

from gitswarm.model.ops import Holder
from gitswarm.store.lease_types import Ask, Lease, Result

EMPTY, POSTED, TAKEN, ANSWERED = 0, 1, 2, 3
SLOT_BYTES = 64 * 1024  # a finish that does not fit (a very large result) is written by its worker


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
    `tip` (and `claimed` the worker's next task), or refused (`lost`: why its lease was no longer held)."""

    of: tuple[str, str, int]
    tip: str | None
    claimed: str | None = None
    expires: float = 0.0
    lost: str | None = None


class Slots:
    """One slot per worker of a supervisor, in shared memory; made before the workers are forked."""

    def __init__(self, count: int, context: BaseContext) -> None:
        self.count = count
        self._flags: Any = context.RawArray(ctypes.c_int, count)
        self._sizes: Any = context.RawArray(ctypes.c_int, count)
        self._data: Any = context.RawArray(ctypes.c_char, count * SLOT_BYTES)
        self._lock = context.Lock()

    def clear(self, slot: int) -> None:
        """Empty a slot for a new worker (its last one may have died with a finish posted)."""
        with self._lock:
            self._flags[slot] = EMPTY

    def seat(self, slot: int) -> Seat:
        return Seat(self, slot)

    def _write(self, slot: int, payload: bytes, flag: int) -> None:
        with self._lock:
            ctypes.memmove(ctypes.addressof(self._data) + slot * SLOT_BYTES, payload, len(payload))
            self._sizes[slot] = len(payload)
            self._flags[slot] = flag

    def _read(self, slot: int) -> bytes:
        return ctypes.string_at(ctypes.addressof(self._data) + slot * SLOT_BYTES, self._sizes[slot])


class Seat:
    """One worker's slot, and what the holder of the write lock does with the others'."""

    def __init__(self, slots: Slots, slot: int) -> None:
        self.slots = slots
        self.slot = slot

    def post(self, finish: Posted) -> bool:
        """Offer the finish to whoever holds the write lock next; False when it does not fit a slot."""
        payload = pickle.dumps(finish, pickle.HIGHEST_PROTOCOL)
        if len(payload) > SLOT_BYTES:
            return False
        self.slots._write(self.slot, payload, POSTED)
        return True

    def withdraw(self, of: tuple[str, str, int]) -> Answer | None:
        """Under the write lock: the answer to this worker's posted finish or claim (`of`: Posted.of), or None
        when it is for the worker to write (still posted, or taken by a holder that died before answering). The
        slot is empty after.

        An answer to another post is ignored: one meant for the worker that had the slot before (it died
        with its finish posted, and the new one posted before the answer came)."""
        slots = self.slots
        with slots._lock:
            flag = slots._flags[self.slot]
            payload = slots._read(self.slot) if flag == ANSWERED else None
            slots._flags[self.slot] = EMPTY
        answer: Answer | None = None if payload is None else pickle.loads(payload)
        return answer if answer is not None and answer.of == of else None

    def take(self, job: str) -> list[tuple[int, Posted]]:
        """Under the write lock: the other workers' finishes and claims posted for `job`, each marked taken."""
        slots = self.slots
        found: list[tuple[int, Posted]] = []
        with slots._lock:
            for slot in range(slots.count):
                if slot == self.slot or slots._flags[slot] != POSTED:
                    continue
                posted: Posted = pickle.loads(slots._read(slot))
                if posted.job == job:
                    slots._flags[slot] = TAKEN
                    found.append((slot, posted))
        return found

    def answer(self, slot: int, answer: Answer) -> None:
        """Under the write lock: tell the worker of `slot` what became of its finish."""
        self.slots._write(slot, pickle.dumps(answer, pickle.HIGHEST_PROTOCOL), ANSWERED)
