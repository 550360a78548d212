"""The slots of shared memory a supervisor's workers post their finishes and claims in (store/group_commit.py).

They are made by the supervisor before it forks its workers: only they share
them, so nothing in a slot comes from outside this run. No lock of their own
guards them (a process killed while holding one would stop every other): a
worker writes only its own slot, and only while it is not waiting; the holder
of the index's write lock (through a remote, of the machine's push lock:
engine/machines/finish_group.py) marks what it takes and answers it; a
slot's worker empties it under that lock, or without it once answered, or
(through a remote, giving up its wait) takes back what is still only posted. Every write puts the bytes first and the flag
last, with a checksum a reader verifies, so a write torn by a race (a slot
given to a new worker while a holder answers the dead one's post) is read as
nothing and never decoded.
"""

from __future__ import annotations

import pickle
import zlib

from gitswarm.store.group_commit import Answer, Posted
from gitswarm.store.shared_memory import SharedRegion

EMPTY, POSTED, TAKEN, ANSWERED = 0, 1, 2, 3
SLOT_BYTES = 64 * 1024  # a finish that does not fit (a very large result) is written by its worker
_FLAG, _SIZE, _SUM, _HEADER = 0, 4, 8, 12  # a slot's header: offsets of its words, and its length


class Slots:
    """One slot per worker of a supervisor, in shared memory; made before the workers are forked.

    Each slot has a header of three 4-byte words (its flag, the size of what it holds, that data's CRC-32),
    all headers first, then each slot's data.
    """

    def __init__(self, count: int) -> None:
        self.count = count
        self._region = SharedRegion(count * (_HEADER + SLOT_BYTES))

    def clear(self, slot: int) -> None:
        """Empty a slot for a new worker (its last one may have died with something posted)."""
        self.mark(slot, EMPTY)

    def seat(self, slot: int) -> Seat:
        return Seat(self, slot)

    def write(self, slot: int, record: Posted | Answer, flag: int) -> bool:
        """Put `record` in `slot`, then `flag`; False (nothing written) when it does not fit."""
        payload = pickle.dumps(record, pickle.HIGHEST_PROTOCOL)
        if len(payload) > SLOT_BYTES:
            return False
        region, header = self._region, slot * _HEADER
        region.write(self._data(slot), payload)
        region.set_word(header + _SIZE, len(payload))
        region.set_word(header + _SUM, zlib.crc32(payload))
        self.mark(slot, flag)
        return True

    def flag(self, slot: int) -> int:
        return self._region.word(slot * _HEADER + _FLAG)

    def mark(self, slot: int, flag: int) -> None:
        self._region.set_word(slot * _HEADER + _FLAG, flag)

    def read(self, slot: int) -> Posted | Answer | None:
        """What the slot holds; None when a racing write tore it."""
        region, header = self._region, slot * _HEADER
        size = region.word(header + _SIZE)
        if not 0 < size <= SLOT_BYTES:
            return None
        payload = region.read(self._data(slot), size)
        if zlib.crc32(payload) != region.word(header + _SUM):
            return None
        found = pickle.loads(payload)  # (bytes this run's own processes wrote, checked whole)
        return found if isinstance(found, (Posted, Answer)) else None

    def _data(self, slot: int) -> int:
        return self.count * _HEADER + slot * SLOT_BYTES


class Seat:
    """One worker's slot, and what the holder of the write lock (through a remote: of the machine's push lock,
    engine/machines/finish_group.py) does with the others'."""

    def __init__(self, slots: Slots, slot: int) -> None:
        self.slots = slots
        self.slot = slot

    def post(self, posted: Posted) -> bool:
        """Offer a finish or a claim to whoever holds the write lock next; False when it does not fit a slot."""
        return self.slots.write(self.slot, posted, POSTED)

    def withdraw(self, of: tuple[str, str, int]) -> Answer | None:
        """Under the write lock: the answer to this worker's post (`of`: Posted.of), or None when it is for the
        worker to write (still posted, or taken by a holder that died or failed before answering). The slot is
        empty after.

        An answer to another post is ignored: one meant for the worker that had the slot before (it died
        with something posted, and the new one posted before the answer came)."""
        slots = self.slots
        answer = slots.read(self.slot) if slots.flag(self.slot) == ANSWERED else None
        slots.mark(self.slot, EMPTY)
        return answer if isinstance(answer, Answer) and answer.of == of else None

    def answered(self, of: tuple[str, str, int]) -> Answer | None:
        """Without the lock: the answer to this worker's post `of`, when there is one (the slot is then emptied).
        Safe: once a post is answered, nobody but its worker writes the slot."""
        slots = self.slots
        if slots.flag(self.slot) != ANSWERED:
            return None
        answer = slots.read(self.slot)
        if not isinstance(answer, Answer) or answer.of != of:
            return None
        slots.mark(self.slot, EMPTY)
        return answer

    def in_flight(self, of: tuple[str, str, int]) -> bool:
        """Without the lock: whether this worker's post `of` was taken by a holder that has not answered yet."""
        slots = self.slots
        if slots.flag(self.slot) != TAKEN:
            return False
        posted = slots.read(self.slot)
        return isinstance(posted, Posted) and posted.of == of

    def retract(self) -> None:
        """Without the lock: take this worker's post back while it is still only posted. A holder taking it at
        that very moment pushes it anyway; the worker's own push of it later is then refused by its token."""
        if self.slots.flag(self.slot) == POSTED:
            self.slots.mark(self.slot, EMPTY)

    def take(self, job: str) -> list[tuple[int, Posted]]:
        """Under the write lock: the other workers' finishes and claims posted for `job`, each marked taken."""
        slots = self.slots
        found: list[tuple[int, Posted]] = []
        for slot in range(slots.count):
            if slot == self.slot or slots.flag(slot) != POSTED:
                continue
            posted = slots.read(slot)
            if isinstance(posted, Posted) and posted.job == job:
                slots.mark(slot, TAKEN)
                found.append((slot, posted))
        return found

    def answer(self, slot: int, answer: Answer) -> None:
        """Under the write lock: tell the worker of `slot` what became of what it posted."""
        self.slots.write(slot, answer, ANSWERED)
