"""The workers of one machine, as each other's claimers (`work --remote`).

A worker that claims through the remote claims for its idle siblings too, in
the same push: one accepted commit hands a task to every free worker of the
machine, instead of each racing the other machines for the job's tip on its
own. Shared memory, one slot per worker process: its owner name and a state
(busy, idle, or reserved by a sibling claiming for it). A reservation is
released when the claimer's push is decided; one older than
`RESERVATION_SECONDS` (its claimer died) is taken back by its worker.
"""

from __future__ import annotations

import multiprocessing
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gitswarm.store.shared_memory import SharedRegion

if TYPE_CHECKING:
    from gitswarm.engine.machines.remote_leases import RemoteLedger
    from gitswarm.store.leases import Lease

BUSY, IDLE, RESERVED = 0, 1, 2
NAME_BYTES = 64
PROBLEM_BYTES = 512
# A slot's layout (store/shared_memory.py): state and lost races (4-byte words), when it was reserved (a double),
# the owner's name, why its pushes do not land.
_STATE, _RACED, _SINCE, _NAME = 0, 4, 8, 16
_SAID = _NAME + NAME_BYTES
_SLOT = _SAID + PROBLEM_BYTES
RESERVATION_SECONDS = 30.0

_fork = multiprocessing.get_context("fork")


class Siblings:
    """Slots shared by a supervisor's worker processes (created before they are forked): per worker, its
    state, when it was reserved, how many races it lost, its owner name and why its pushes do not land."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.lock: Any = _fork.Lock()
        self._memory = SharedRegion(slots * _SLOT)

    def state(self, slot: int) -> int:
        return self._memory.word(slot * _SLOT + _STATE)

    def _set_state(self, slot: int, state: int) -> None:
        self._memory.set_word(slot * _SLOT + _STATE, state)

    def _since(self, slot: int) -> float:
        return self._memory.real(slot * _SLOT + _SINCE)

    def _text(self, slot: int, at: int, size: int) -> bytes:
        return self._memory.read(slot * _SLOT + at, size).rstrip(b"\0")

    def _set_text(self, slot: int, at: int, size: int, raw: bytes) -> None:
        self._memory.write(slot * _SLOT + at, raw[:size].ljust(size, b"\0"))

    def seat(self, slot: int, owner: str) -> None:
        """A new worker process in `slot` (a replacement too): busy until it finds nothing to do."""
        with self.lock:
            self._set_text(slot, _NAME, NAME_BYTES, owner.encode())
            self._set_state(slot, BUSY)
            self._set_text(slot, _SAID, PROBLEM_BYTES, b"")  # the last one's problem went with it

    def name(self, slot: int) -> str:
        return self._text(slot, _NAME, NAME_BYTES).decode()

    def reserve(self, slot: int) -> list[int] | None:
        """Worker `slot` is about to claim: the idle siblings it claims for (now reserved), or None
        when a sibling is claiming for it already (it waits for that claim instead)."""
        with self.lock:
            if self.state(slot) == RESERVED and time.monotonic() - self._since(slot) < RESERVATION_SECONDS:
                return None
            self._set_state(slot, BUSY)
            chosen = [other for other in range(self.slots) if other != slot and self.state(other) == IDLE]
            for other in chosen:
                self._set_state(other, RESERVED)
                self._memory.set_real(other * _SLOT + _SINCE, time.monotonic())
            return chosen

    def release(self, slots: list[int]) -> None:
        """The claim for these siblings was decided: each finds its task in the index, or claims again."""
        with self.lock:
            for other in slots:
                if self.state(other) == RESERVED:
                    self._set_state(other, IDLE)

    def idle(self, slot: int) -> None:
        """Worker `slot` found nothing to do: siblings may claim for it."""
        with self.lock:
            if self.state(slot) != RESERVED:
                self._set_state(slot, IDLE)

    def report(self, slot: int, problem: str) -> None:
        """Worker `slot`'s pushes stopped landing (why), or land again (""): the supervisor says so."""
        with self.lock:
            self._set_text(slot, _SAID, PROBLEM_BYTES, problem.encode(errors="replace")[: PROBLEM_BYTES - 1])

    def lost_race(self, slot: int) -> None:
        """Worker `slot`'s push was refused because another machine's landed first (it fetched and went on)."""
        with self.lock:
            at = slot * _SLOT + _RACED
            self._memory.set_word(at, self._memory.word(at) + 1)

    def races(self) -> int:
        """How many races this machine's workers lost so far, replaced workers' included."""
        with self.lock:
            return sum(self._memory.word(slot * _SLOT + _RACED) for slot in range(self.slots))

    def problem(self) -> str:
        """Why some worker's pushes do not land ("" when every worker's do)."""
        with self.lock:
            for slot in range(self.slots):
                said = self._text(slot, _SAID, PROBLEM_BYTES)
                if said:
                    return said.decode(errors="replace")
            return ""

    def any_idle(self) -> bool:
        """Whether some worker waits for work (idle, or reserved for a sibling's claim)."""
        with self.lock:
            return any(self.state(slot) != BUSY for slot in range(self.slots))

    def busy_others(self, slot: int) -> int:
        """How many workers besides `slot` are busy (running a task, or claiming). Read without the lock (each
        state is one aligned word), as it is read every millisecond while this worker holds the push lock."""
        return sum(1 for other in range(self.slots) if other != slot and self.state(other) == BUSY)

    def busy(self, slot: int) -> None:
        with self.lock:
            self._set_state(slot, BUSY)


@dataclass(frozen=True)
class Crew:
    """One worker's seat among its siblings."""

    siblings: Siblings
    slot: int

    def claim(
        self, ledger: RemoteLedger, owner: str, ttl: float, now: float, job_id: str | None,
        exclude: frozenset[str], skip_jobs: frozenset[str], skip: frozenset[tuple[str, str, int]] = frozenset(),
    ) -> Lease | None:
        """The task a sibling claimed for this worker; else claim one, and one for each idle sibling,
        in one push. None when there is nothing (or a sibling is claiming for it right now). `skip`:
        leases of this worker's not to take as assigned (held ahead, waiting to be pushed, given up)."""
        # Reserved first, then looked for: a sibling that claimed for this worker adopted the lease
        # before it let go of the reservation, so it is in the index by now.
        chosen = self.siblings.reserve(self.slot)
        if chosen is None:
            return None
        assigned = ledger.assigned(owner, skip)
        if assigned is not None:
            self.siblings.release(chosen)
            return assigned
        try:
            owners = [owner, *(self.siblings.name(other) for other in chosen)]
            leases = ledger.claim_for(owners, ttl, now, job_id, exclude, skip_jobs)
        finally:
            self.siblings.release(chosen)
        mine = next((lease for lease in leases if lease.owner == owner), None)
        if mine is None:
            self.siblings.idle(self.slot)
        return mine
