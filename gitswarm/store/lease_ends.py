"""How a lease ends without a result: it ran out, its holder died on this machine, or its worker was
stopped. Mixed into `Ledger` (store/leases.py), whose critical section each end is written in.

A lease that ends so gives its attempt back (`expired` with `attempt_used`
false): a holder that died, went silent or was stopped is no failure of the
task's. Only a worker that failed of its own (the supervisor says so) has
its attempt counted, so that a task that sets off a bug cannot loop for ever.
"""

from __future__ import annotations

from gitswarm.model.errors import InvalidTransition, LeaseLost, NotFound
from gitswarm.model.ops import Holder, LeaseExpired
from gitswarm.model.reducer import Change
from gitswarm.store.holders import Liveness, liveness, recorded, this_process
from gitswarm.store.index import HolderRow, Index
from gitswarm.store.jobs import JobRefs, Snapshot
from gitswarm.store.lease_types import Build, Built, Released

LAPSED = "its lease ran out: its holder stopped renewing it"
STOPPED = "its worker was stopped"


class LeaseEnds:
    """expire() and release_dead() over a ledger's index, refs and critical section."""

    refs: JobRefs
    index: Index
    _holder: Holder | None = None

    @property
    def holder(self) -> Holder:
        """The process that holds what this ledger claims: this one (a worker claims for itself)."""
        return self._holder or this_process()

    @holder.setter
    def holder(self, holder: Holder) -> None:
        self._holder = holder

    def _transition(self, job_id: str, build: Build) -> tuple[Snapshot, Change]:
        raise NotImplementedError  # the ledger's: build, append by CAS, record in the index

    def expire(
        self, now: float, job_id: str | None = None, owner: str | None = None, why: str | None = None,
        attempt_used: bool = False,
    ) -> list[tuple[str, str]]:
        """Requeue every task whose lease ran out; returns them. The attempt is given back (a holder that
        went silent is no failure of the task's), unless `attempt_used`.

        With `owner`, expire every lease that owner holds, whatever its expiry:
        for a worker known to be dead, or stopped. `why` is recorded (default: LAPSED, or STOPPED).
        """
        expired: list[tuple[str, str]] = []
        if owner is None and not self.index.db.execute("SELECT 1 FROM leases WHERE expires < ? LIMIT 1", (now,)).fetchone():
            return expired  # the common case, without taking the write lock
        if owner is not None and not self.index.db.execute("SELECT 1 FROM leases WHERE owner = ? LIMIT 1", (owner,)).fetchone():
            return expired  # a worker that held nothing when it went (every one at the end of a run): no write lock
        why = why or (LAPSED if owner is None else STOPPED)
        with self.index.immediate() as db:
            if owner is None:
                rows = db.execute("SELECT job, task, token FROM leases WHERE expires < ? ORDER BY job, task", (now,)).fetchall()
            else:
                rows = db.execute("SELECT job, task, token FROM leases WHERE owner = ? ORDER BY job, task", (owner,)).fetchall()
            for job, task, token in rows:
                if job_id is not None and job != job_id:
                    continue
                if owner is not None and self._keyed(job, task, token):
                    continue
                if self._end(job, task, token, now, why, attempt_used):
                    expired.append((job, task))
        return expired

    def _keyed(self, job: str, task: str, token: int) -> bool:
        """Whether lease `token` of a task was claimed through a remote, naming a machine key: this ledger's
        claims name none, so its holder is another machine's key, whatever worker name the claim gave (anyone
        can copy one). Ended here before its deadline, in a commit that key did not sign, every clone would
        refuse the job; it runs out instead (store/pulled_jobs.py, _check_signers). (Nor is a process such a
        claim names taken as its holder: store/index/sync.py, claim_holders.)"""
        try:
            found = self.refs.snapshot(job).task(task)
        except NotFound:  # its job or task gone: ending it finds that out and drops the row (_end)
            return False
        return found.claims == token and found.holder_key is not None

    def release_dead(self, now: float, job_id: str | None = None) -> list[Released]:
        """Requeue, at once and with no attempt used, every task whose holder was a process of this machine
        that died (kill -9, a crash, its whole run killed): no waiting for the lease to run out. A live
        holder, and any holder on another machine, is left alone."""
        if not dead_holders(self.index):
            return []  # the common case: a read, and a look at /proc, without taking the write lock
        released: list[Released] = []
        with self.index.immediate():
            for row in dead_holders(self.index):  # again under the lock: another process may have been first
                if job_id is not None and row.job != job_id:
                    continue
                why = f"its worker {row.owner} ({recorded(row.holder)}) died"
                if self._end(row.job, row.task, row.token, now, why, False):
                    released.append(Released(row.job, row.task, row.owner, row.holder, why))
        return released

    def _end(self, job: str, task: str, token: int, now: float, why: str, attempt_used: bool) -> bool:
        """Write the `expired` of one lease (inside the caller's transaction); False when it was no longer
        current (finished or ended meanwhile): its stale row is dropped."""

        def build(s: Snapshot) -> Built:
            return self.refs.next_op(LeaseExpired, s, now, task=task, token=token, why=why, attempt_used=attempt_used), ()

        try:
            self._transition(job, build)
        except (LeaseLost, InvalidTransition):
            self.index.db.execute("DELETE FROM leases WHERE job = ? AND task = ? AND token = ?", (job, task, token))
            return False
        return True


def dead_holders(index: Index) -> list[HolderRow]:
    """The leases whose holder was a process of this machine that is dead: a read of the index and of /proc."""
    return [row for row in index.held_by_processes() if liveness(row.holder) is Liveness.DEAD]
