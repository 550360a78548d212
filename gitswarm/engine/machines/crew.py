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

if TYPE_CHECKING:
    from gitswarm.engine.machines.remote_leases import RemoteLedger
    from gitswarm.store.leases import Lease

BUSY, IDLE, RESERVED = 0, 1, 2
NAME_BYTES = 64
PROBLEM_BYTES = 512
RESERVATION_SECONDS = 30.0

_fork = multiprocessing.get_context("fork")


class Siblings:
    """Slots shared by a supervisor's worker processes (created before they are forked)."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.lock: Any = _fork.Lock()
        self.states: Any = _fork.Array("i", slots, lock=False)
        self.since: Any = _fork.Array("d", slots, lock=False)
        self.names: Any = _fork.Array("c", slots * NAME_BYTES, lock=False)
        self.said: Any = _fork.Array("c", slots * PROBLEM_BYTES, lock=False)  # per worker: why its pushes do not land
        self.raced: Any = _fork.Array("i", slots, lock=False)  # per worker: pushes another machine's got ahead of

    def seat(self, slot: int, owner: str) -> None:
        """A new worker process in `slot` (a replacement too): busy until it finds nothing to do."""
        with self.lock:
            raw = owner.encode()[:NAME_BYTES].ljust(NAME_BYTES, b"\0")
            self.names[slot * NAME_BYTES:(slot + 1) * NAME_BYTES] = raw
            self.states[slot] = BUSY
            self.said[slot * PROBLEM_BYTES:(slot + 1) * PROBLEM_BYTES] = b"\0" * PROBLEM_BYTES  # the last one's problem went with it

    def name(self, slot: int) -> str:
        return bytes(self.names[slot * NAME_BYTES:(slot + 1) * NAME_BYTES]).rstrip(b"\0").decode()

    def reserve(self, slot: int) -> list[int] | None:
        """Worker `slot` is about to claim: the idle siblings it claims for (now reserved), or None
        when a sibling is claiming for it already (it waits for that claim instead)."""
        with self.lock:
            if self.states[slot] == RESERVED and time.monotonic() - self.since[slot] < RESERVATION_SECONDS:
                return None
            self.states[slot] = BUSY
            chosen = [other for other in range(self.slots) if other != slot and self.states[other] == IDLE]
            for other in chosen:
                self.states[other] = RESERVED
                self.since[other] = time.monotonic()
            return chosen

    def release(self, slots: list[int]) -> None:
        """The claim for these siblings was decided: each finds its task in the index, or claims again."""
        with self.lock:
            for other in slots:
                if self.states[other] == RESERVED:
                    self.states[other] = IDLE

    def idle(self, slot: int) -> None:
        """Worker `slot` found nothing to do: siblings may claim for it."""
        with self.lock:
            if self.states[slot] != RESERVED:
                self.states[slot] = IDLE

    def report(self, slot: int, problem: str) -> None:
        """Worker `slot`'s pushes stopped landing (why), or land again (""): the supervisor says so."""
        with self.lock:
            raw = problem.encode(errors="replace")[: PROBLEM_BYTES - 1]
            self.said[slot * PROBLEM_BYTES:(slot + 1) * PROBLEM_BYTES] = raw.ljust(PROBLEM_BYTES, b"\0")

    def lost_race(self, slot: int) -> None:
        """Worker `slot`'s push was refused because another machine's landed first (it fetched and went on)."""
        with self.lock:
            self.raced[slot] += 1

    def races(self) -> int:
        """How many races this machine's workers lost so far, replaced workers' included."""
        with self.lock:
            return sum(self.raced[slot] for slot in range(self.slots))

    def problem(self) -> str:
        """Why some worker's pushes do not land ("" when every worker's do)."""
        with self.lock:
            for slot in range(self.slots):
                said = bytes(self.said[slot * PROBLEM_BYTES:(slot + 1) * PROBLEM_BYTES]).rstrip(b"\0")
                if said:
                    return said.decode(errors="replace")
            return ""

    def any_idle(self) -> bool:
        """Whether some worker waits for work (idle, or reserved for a sibling's claim)."""
        with self.lock:
            return any(self.states[slot] != BUSY for slot in range(self.slots))

    def busy(self, slot: int) -> None:
        with self.lock:
            self.states[slot] = BUSY


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
