"""Leases and transitions: `Ledger`, each transition one short BEGIN IMMEDIATE transaction around a ref CAS.

`Leases` (store/lease_types.py) is what a worker needs: claim, renew, hold,
finish (and claim the next task with it), expire. `Ledger` implements it on this repository alone;
engine/machines/remote_leases.py's `RemoteLedger` implements it with a git
remote deciding every lease. tests/store/test_leases_protocol.py runs the same
suite on both.

The index's write lock is the critical section: inside it the fencing token
is checked, the operation is committed to the job's ref by compare-and-swap
against the tip the index holds, and the index is updated. If the ref moved
underneath (another clone's state was pulled in), the job is re-indexed from
the ref and the transition rebuilt on the new tip, a bounded number of times.

Each claim names its holder, the worker process that made it
(store/holders.py): a lease whose holder died on this machine is released at
once (`release_dead`), without waiting for its deadline. A lease that ends
without a result, a holder that died, went silent or was stopped, gives its
attempt back (`expired` with `attempt_used` false): only a task's own failure
counts against its max_attempts.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence

import msgspec

from gitswarm.model import codec
from gitswarm.model.approval import Approval
from gitswarm.model.artifacts import Artifact, artifact_id
from gitswarm.model.budget import exhausted
from gitswarm.model.errors import InternalError, LeaseLost, NotFound, RefConflict
from gitswarm.model.ids import new_id
from gitswarm.model.ops import (
    ArtifactsRecorded,
    BudgetStopped,
    Cancelled,
    Holder,
    JobCreated,
    Retried,
    TaskClaimed,
)
from gitswarm.model.records import Job, Task, TaskState
from gitswarm.model.reducer import Change
from gitswarm.model.spec import JobSpec
from gitswarm.store.group_commit import Posted
from gitswarm.store.index import Index
from gitswarm.store.jobs import JobRefs, Snapshot
from gitswarm.store.lease_ends import LAPSED, STOPPED, LeaseEnds
from gitswarm.store.lease_finish import OWN, LeaseFinish, NothingToWrite, Pending, Pick
from gitswarm.store.lease_types import (
    Ask,
    Build,
    Built,
    Lease,
    Leases,
    Released,
    Result,
    awaiting_person,
    granted_lease,
    why_not,
)
from gitswarm.store.trust import Trust

__all__ = [
    "LAPSED", "STOPPED", "Ask", "Build", "Built", "Lease", "Leases", "Ledger", "Released", "Result", "awaiting_person",
    "granted_lease", "why_not",
]

CAS_RETRIES = 6
CLAIM_SPREAD = 8


class Ledger(LeaseEnds, LeaseFinish):
    """Every state transition of every job in one repository: `Leases` on the local index and refs."""

    claim_spread = CLAIM_SPREAD  # a claim picks at random among this many first queued tasks

    def __init__(self, refs: JobRefs, index: Index, trusted_remotes: frozenset[str] = frozenset()) -> None:
        self.refs = refs
        self.index = index
        self.trust = Trust(refs.repo.common_dir)
        self.trusted_remotes = trusted_remotes  # `work --trust REMOTE`: jobs pulled from these run too
        self._untrusted: tuple[object, frozenset[str]] | None = None

    def untrusted_jobs(self) -> frozenset[str]:
        """Jobs whose tasks may not run here, as of now: pulled and not approved, or of no
        known origin, or waiting for a person's approval of their side effects. Asked at every
        claim, so a job pulled while workers run is never taken."""
        jobs_key = self.index.db.execute("SELECT count(*), max(id), sum(needs_person), group_concat(approval_ops) FROM jobs").fetchone()
        key = (jobs_key, self.trust.stamp(), self.trusted_remotes)
        if self._untrusted is None or self._untrusted[0] != key:
            untrusted = self.trust.untrusted(self.index.job_ids(), self.trusted_remotes) | self.awaiting_person()
            self._untrusted = (key, untrusted)
        return self._untrusted[1]

    def awaiting_person(self) -> frozenset[str]:
        return awaiting_person(self.index, self.trust)

    def why_not(self, job: str, trusted_remotes: frozenset[str] = frozenset()) -> str | None:
        return why_not(self.index, self.trust, job, trusted_remotes)

    def _snapshot(self, job_id: str) -> Snapshot:
        tip = self.index.job_tip(job_id)
        if tip is None:
            raise NotFound(f"no job {job_id}")
        return self.refs.snapshot(job_id, tip)

    def _transition(
        self, job_id: str, build: Build
    ) -> tuple[Snapshot, Change]:
        """Run build→append→record inside the caller's transaction, rebuilding on a lost CAS."""
        for attempt in range(CAS_RETRIES):
            snapshot = self._snapshot(job_id)
            op, artifacts = build(snapshot)
            try:
                tip, change = self.refs.append(snapshot, op, artifacts)
            except RefConflict:
                time.sleep(random.uniform(0, 0.002 * 2**attempt))
                current = self.refs.repo.read_ref(snapshot.where)
                if current is None:
                    raise NotFound(f"job {job_id} was deleted") from None
                self.index.reindex(self.refs.snapshot(job_id, current))
                continue
            ops = op if isinstance(op, Sequence) else (op,)
            holders = {o.task: o.holder for o in ops if isinstance(o, TaskClaimed) and o.holder is not None}
            self.index.record(snapshot.job, change.state, tip, change.tasks.values(), artifacts, holders)
            return snapshot, change
        raise InternalError(f"job {job_id}: its ref kept moving; gave up after {CAS_RETRIES} attempts")

    # -- jobs -----------------------------------------------------------------------------

    def submit(
        self, spec: JobSpec, now: float, source: str | None = None, base: str | None = None, base_ref: str | None = None,
        approval: Approval | None = None, awaits_approval: tuple[str, ...] = (),
    ) -> str:
        job = Job(
            id=new_id(now),
            goal=spec.goal,
            created=now,
            actor=self.refs.actor,
            defaults=spec.defaults,
            task_count=len(spec.tasks),
            source=source,
            base=base,
            base_ref=base_ref,
            budget=spec.budget,
            approval=approval,
            awaits_approval=awaits_approval,
        )
        op = self.refs.next_op(JobCreated, None, now, job=job, tasks=spec.tasks)
        codec.encode(op)  # a record that cannot be stored fails here, before anything is marked or written
        # Marked as this clone's own before its ref exists: a crash between the two leaves
        # a mark for nothing, never a job that looks pulled (and could not run here).
        Trust(self.refs.repo.common_dir).made_here(job.id)
        with self.index.immediate():
            tip, change = self.refs.create(op)
            self.index.record(job, change.state, tip, change.tasks.values())
        return job.id

    def cancel(self, job_id: str, task_id: str | None, now: float, reason: str | None = None) -> Change:
        with self.index.immediate():
            _, change = self._transition(
                job_id, lambda s: (self.refs.next_op(Cancelled, s, now, task=task_id, reason=reason), ())
            )
        return change

    def retry(self, job_id: str, task_id: str, now: float) -> Change:
        with self.index.immediate():
            _, change = self._transition(job_id, lambda s: (self.refs.next_op(Retried, s, now, task=task_id), ()))
        return change

    def transition(self, job_id: str, build: Build, lease: Lease | None = None, now: float = 0.0) -> Change:
        """One operation that `build` makes from the job's current snapshot, written in the critical section;
        with `lease`, only while that lease is held (LeaseLost otherwise)."""
        with self.index.immediate():
            if lease is not None:
                self._check_lease(lease, now)
            _, change = self._transition(job_id, build)
        return change

    def record_artifacts(self, job_id: str, task_id: str | None, artifacts: Sequence[Artifact], now: float) -> list[str]:
        ids = tuple(artifact_id(a) for a in artifacts)
        with self.index.immediate():
            self._transition(
                job_id,
                lambda s: (self.refs.next_op(ArtifactsRecorded, s, now, task=task_id, artifacts=ids), artifacts),
            )
        return list(ids)

    # -- leases ---------------------------------------------------------------------------

    def claim(
        self,
        owner: str,
        ttl: float,
        now: float,
        job_id: str | None = None,
        exclude: frozenset[str] = frozenset(),
        skip_jobs: frozenset[str] = frozenset(),
    ) -> Lease | None:
        """Lease one queued task (highest priority first), or None when there is none.

        Candidates of the top priority are picked at random among the first
        few, so workers claiming at once spread over rows instead of queueing
        on one.
        """
        if not self.claimable(now, job_id, exclude, skip_jobs):
            return None  # nothing to claim: no need to take the write lock
        group = self.group
        if group is None or job_id is None:
            with self.index.immediate():
                return self._claim_locked(owner, ttl, now, job_id, exclude, skip_jobs)
        # One of a supervisor's workers claiming in its job: another may claim for it, or it for the others.
        own = Posted(None, None, now, Ask(owner, ttl, job_id, exclude, skip_jobs), self.holder)
        with self._turn(own) as answer:
            if answer is None:
                try:
                    with self.index.transaction():
                        snapshot, change, batch = self._write_batch(own, job_id)
                except NothingToWrite as nothing:
                    self._answer(nothing.batch, None)
                    return None
                self._answer(batch, change)
                pick = batch.picks.get(OWN)
                return None if pick is None else granted_lease(snapshot, change, pick[1], owner, now + ttl)
        return None if answer.tip is None else self._claimed(self.refs.snapshot(job_id, answer.tip), own.ask, answer)

    def claimable(
        self, now: float, job_id: str | None, exclude: frozenset[str] = frozenset(), skip_jobs: frozenset[str] = frozenset()
    ) -> bool:
        """Whether a claim now would find a task (as the index has it), without taking the write lock."""
        query, params = self._claim_query(now, job_id, exclude, skip_jobs)
        return self.index.db.execute(query, params).fetchone() is not None

    def _claim_query(
        self, now: float, job_id: str | None, exclude: frozenset[str] = frozenset(), skip_jobs: frozenset[str] = frozenset()
    ) -> tuple[str, list[object]]:
        query = (
            "SELECT t.job, t.id, t.priority FROM tasks t JOIN jobs j ON j.id = t.job"
            " WHERE t.state = 'queued' AND j.cancelled = 0 AND t.not_before <= ?"
        )
        params: list[object] = [now]
        if job_id is not None:
            query += " AND t.job = ?"
            params.append(job_id)
        if exclude:  # adapters whose preflight failed here: their tasks wait for another worker
            query += f" AND t.adapter NOT IN ({','.join('?' * len(exclude))})"
            params.extend(sorted(exclude))
        skip_jobs = skip_jobs | self.untrusted_jobs()
        if skip_jobs:  # pulled jobs nobody here approved: their tasks are data, not instructions
            query += f" AND t.job NOT IN ({','.join('?' * len(skip_jobs))})"
            params.extend(sorted(skip_jobs))
        return query + " ORDER BY t.priority DESC, t.job, t.seq LIMIT ?", [*params, self.claim_spread]

    def _claim_locked(
        self,
        owner: str,
        ttl: float,
        now: float,
        job_id: str | None,
        exclude: frozenset[str] = frozenset(),
        skip_jobs: frozenset[str] = frozenset(),
    ) -> Lease | None:
        pick = self._pick(now, job_id, exclude=exclude, skip_jobs=skip_jobs)
        return None if pick is None else self._claim_chosen(*pick, owner, ttl, now)

    def _pick(
        self,
        now: float,
        job_id: str | None,
        pending: Change | None = None,
        pending_job: str = "",
        exclude: frozenset[str] = frozenset(),
        skip_jobs: frozenset[str] = frozenset(),
    ) -> tuple[str, str] | None:
        """The (job, task) to claim next: a random one among the top few of the highest priority.

        `pending` is a change of `pending_job` not yet in the index (a finish
        being written in the same commit): its tasks are judged by it instead.
        """
        query, params = self._claim_query(now, job_id, exclude, skip_jobs)
        rows = [(r[2], r[0], r[1]) for r in self.index.db.execute(query, params)]
        if pending is not None and pending_job not in skip_jobs and pending_job not in self.untrusted_jobs():
            rows = [r for r in rows if not (r[1] == pending_job and r[2] in pending.tasks)]
            if not pending.state.cancelled and job_id in (None, pending_job):
                rows += [
                    (t.spec.priority, pending_job, t.id)
                    for t in pending.tasks.values()
                    if t.state is TaskState.QUEUED and t.not_before <= now and t.spec.adapter not in exclude
                ]
        if not rows:
            return None
        top = max(r[0] for r in rows)
        _, job, task = self._choose([r for r in rows if r[0] == top])
        return job, task

    def _choose(self, candidates: list[tuple[int, str, str]]) -> tuple[int, str, str]:
        """Of the (priority, job, task) candidates, the one to claim: any (workers spread at random)."""
        return random.choice(candidates)

    def _claim_op(
        self, snapshot: Snapshot, task: Task, owner: str, ttl: float, now: float, after: int = 0, holder: Holder | None = None,
    ) -> TaskClaimed:
        """The claim of `task` for `owner`, held by `holder` (by default this process; store/group_commit.py claims
        for the other workers of its supervisor)."""
        return self.refs.next_op(
            TaskClaimed, snapshot, now, after, task=task.id, token=task.claims + 1, owner=owner, lease_expires=now + ttl,
            holder=holder or self.holder,
        )

    def _claim_next(self, pending: Pending, ask: Ask, now: float, holder: Holder) -> Pick | None:
        """Add to `pending` the claim of the task `ask` would take next (or stop the job, its budget spent);
        the (job, task) it picked: None when nothing is left to claim, another job's task not added (a
        stopped or cancelled job's never are: the next claim looks elsewhere)."""
        snapshot, state = pending.snapshot, pending.state
        pick = self._pick(now, ask.job, pending.change(), snapshot.job_id, ask.exclude, ask.skip_jobs)
        if pick is None or pick[0] != snapshot.job_id:
            return pick
        if state.stopped or state.cancelled:
            return None
        spent = exhausted(snapshot.job, state, now)
        if spent is not None:
            pending.add(self.refs.next_op(BudgetStopped, snapshot, now, len(pending.ops), reason=spent))
            return None
        pending.add(self._claim_op(snapshot, pending.task(pick[1]), ask.owner, ask.ttl, now, len(pending.ops), holder))
        return pick

    def _claim_chosen(self, job_id: str, task_id: str, owner: str, ttl: float, now: float) -> Lease | None:
        """Lease the task; or, when the job's budget is spent, stop the job instead (None)."""

        def build(s: Snapshot) -> Built:
            spent = exhausted(s.job, s.state, now)
            if spent is not None:
                return self.refs.next_op(BudgetStopped, s, now, reason=spent), ()
            return self._claim_op(s, s.task(task_id), owner, ttl, now), ()

        snapshot, change = self._decide(job_id, build)
        if change.state.stopped:
            return None
        return granted_lease(snapshot, change, task_id, owner, change.tasks[task_id].lease_expires or now + ttl)

    def _decide(self, job_id: str, build: Build) -> tuple[Snapshot, Change]:
        """Where a claim is decided and written: here, in the critical section (a RemoteLedger: by its remote)."""
        return self._transition(job_id, build)

    def renew(self, lease: Lease, ttl: float, now: float) -> Lease:
        """Extend a live lease; LeaseLost if it expired, was revoked or superseded."""
        with self.index.immediate() as db:
            updated = db.execute(
                "UPDATE leases SET expires = ?, heartbeat = ?"
                " WHERE job = ? AND task = ? AND token = ? AND owner = ? AND expires >= ?",
                (now + ttl, now, lease.job, lease.task, lease.token, lease.owner, now),
            ).rowcount
        if not updated:
            raise LeaseLost(f"{lease.job}/{lease.task}: lease {lease.token} is no longer held")
        return msgspec.structs.replace(lease, expires=now + ttl)

    def report_problems(self, listener: Callable[[str], None]) -> None:
        """Local writes land or raise: there is nothing to report."""

    def held(self, lease: Lease, now: float) -> bool:
        """Whether the lease is still current: a cheap read, for polling between renewals."""
        row = self.index.lease(lease.job, lease.task)
        return row is not None and row.owner == lease.owner and row.token == lease.token and row.expires >= now
