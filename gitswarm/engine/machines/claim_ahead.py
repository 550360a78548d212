"""Keeping a remote worker's round trips off its critical path (`work --remote`).

Through a remote, each write is a push (and, when another machine got
there first, a fetch and a push again): a few hundred milliseconds that a
local worker does not pay. While a task runs, its worker claims its next
task ahead, and the finish of a task is pushed while the next one already
runs, together with the claim after it: for short tasks the worker never
waits on the network. A task is claimed ahead only while the job has at
least `DEEP_QUEUE` times as many queued tasks as this machine has workers,
so a slow task never holds back work other machines could start.

Only shell and analyze results wait this way: an implement task's finish
carries its branch and is pushed before anything else happens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gitswarm.adapters.base import Outcome
from gitswarm.engine.machines.arbiter import RemoteRejected, RemoteUnavailable
from gitswarm.engine.machines.crew import Crew
from gitswarm.engine.machines.remote_leases import RemoteLedger
from gitswarm.model.errors import LeaseLost
from gitswarm.store.leases import Ask, Lease, Result

DEEP_QUEUE = 2


@dataclass(frozen=True)
class Claiming:
    """What a worker claims with: its owner name and the options of its claims."""

    owner: str
    ttl: float
    job: str | None
    exclude: frozenset[str]
    skip_jobs: frozenset[str]
    workers: int  # this machine's workers


class Pipeline:
    """A remote worker's claims: the next lease to run, and the round trips done while a task runs."""

    def __init__(self, ledger: RemoteLedger, claiming: Claiming, crew: Crew, clock: Callable[[], float]) -> None:
        self.ledger = ledger
        self.claiming = claiming
        self.crew = crew
        self.clock = clock
        self.ahead: Lease | None = None
        self.ahead_renewed = 0.0
        self.pending: tuple[Lease, Outcome] | None = None
        self.taken: set[tuple[str, str, int]] = set()  # leases this worker ran or gave up: never taken up again

    def next_lease(self) -> Lease | None:
        """The lease to run next: the one claimed ahead, else one claimed with the result that waited,
        else one a sibling claimed for this worker or this worker claims now. None when there is none;
        a lease no longer held by the time it would start is given up, not run."""
        lease = self.take_ahead()
        if lease is None:
            self.flush()  # nothing runs next: the result that waits is pushed now (and may claim the next)
            lease = self.take_ahead()
        if lease is None:
            c = self.claiming
            lease = self.crew.claim(self.ledger, c.owner, c.ttl, self.clock(), c.job, c.exclude, c.skip_jobs, self._holding())
        if lease is not None and not self.ledger.held(lease, self.clock()):
            self.give_up(lease)
            return None
        if lease is not None:
            self.took(lease)
        return lease

    def took(self, lease: Lease) -> None:
        """This worker runs `lease` now (however it came): it is never taken up again."""
        self.taken.add((lease.job, lease.task, lease.token))

    def give_up(self, lease: Lease) -> None:
        """This worker will not run (or finish) the lease: its expiry is pushed, and it is never taken up again."""
        self.taken.add((lease.job, lease.task, lease.token))
        self.ledger.give_up(lease)

    def _holding(self) -> frozenset[tuple[str, str, int]]:
        held = [lease for lease in (self.ahead, self.pending[0] if self.pending else None) if lease is not None]
        return frozenset({*self.taken, *((lease.job, lease.task, lease.token) for lease in held)})

    def hold(self, lease: Lease, outcome: Outcome) -> bool:
        """Keep a finished task's result to push while the next one runs: only when the next is
        claimed already, and only one result at a time."""
        if self.ahead is None or self.pending is not None or lease.spec.mode == "implement":
            return False
        self.pending = (lease, outcome)
        return True

    def take_ahead(self) -> Lease | None:
        lease, self.ahead = self.ahead, None
        return lease

    def background(self) -> None:
        """Called on the running task's heartbeat: push the result that waits (with the claim after
        this task), else claim ahead; renew the lease claimed ahead when a third of it has passed.
        One try each: an unanswered remote is tried again at the next tick."""
        try:
            if self.pending is not None:
                self.flush(patient=False)
            elif self.ahead is None and self._deep():
                c = self.claiming
                self.ahead = self.ledger.claim(c.owner, c.ttl, self.clock(), c.job, c.exclude, c.skip_jobs)
                self.ahead_renewed = self.clock()
            elif self.ahead is not None:
                self._renew_ahead()
        except (RemoteUnavailable, RemoteRejected):
            return  # the result is kept: tried again at the next tick, pushed at the latest when this task ends

    def flush(self, patient: bool = True) -> None:
        """Push the result that waits, and (when the job is still deep) claim the next task in the same commit."""
        if self.pending is None:
            return
        lease, outcome = self.pending
        c = self.claiming
        ask = Ask(c.owner, c.ttl, c.job, c.exclude, c.skip_jobs) if self.ahead is None and self._deep() else None
        result = Result(outcome.ok, outcome.error, outcome.artifacts, outcome.retryable, outcome.base, outcome.skipped_because)
        try:
            _, after = self.ledger.finish_and_claim(lease, result, self.clock(), ask, patient=patient)
        except LeaseLost:
            self.pending = None  # its lease was lost: the task runs again elsewhere, as it would locally
            self.give_up(lease)
            return
        self.pending = None
        if after is not None:
            self.ahead, self.ahead_renewed = after, self.clock()

    def _deep(self) -> bool:
        job = self.claiming.job
        query = "SELECT count(*) FROM tasks WHERE state = 'queued'" + (" AND job = ?" if job else "")
        queued = self.ledger.index.db.execute(query, (job,) if job else ()).fetchone()[0]
        return bool(queued >= DEEP_QUEUE * self.claiming.workers)

    def _renew_ahead(self) -> None:
        assert self.ahead is not None
        now = self.clock()
        if now - self.ahead_renewed < (self.ahead.expires - self.ahead_renewed) / 3:
            return
        try:
            self.ahead = self.ledger.renew(self.ahead, self.claiming.ttl, now)
            self.ahead_renewed = now
        except LeaseLost:
            self.ahead = None
