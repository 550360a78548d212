"""How a lease ends with a result: a worker's finish, and its next claim in the same write. Mixed into
`Ledger` (store/leases.py), whose critical section each finish is written in.

With `group` set (the workers of one supervisor, store/group_commit.py), the
worker that holds the write lock writes what the others posted for its job (a
finish and the next claim, or a claim alone) in the same commit as its own,
and answers them once the commit is in the index.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from gitswarm.model.artifacts import Artifact, Run, artifact_id
from gitswarm.model.errors import InvalidTransition, LeaseLost
from gitswarm.model.ops import Holder, Op, TaskFinished
from gitswarm.model.records import Task
from gitswarm.model.reducer import Change, apply
from gitswarm.store.group_commit import Answer, Posted
from gitswarm.store.index import Index
from gitswarm.store.jobs import JobRefs, Snapshot
from gitswarm.store.lease_types import Ask, Build, Lease, Result, granted_lease

if TYPE_CHECKING:  # loaded only by a run that forks workers (multiprocessing, ctypes): not by every command
    from gitswarm.store.group_slots import Seat

Pick = tuple[str, str]  # (job, task) to claim next
OWN = -1  # the slot of what the worker that holds the lock writes for itself


class NothingToWrite(Exception):
    """A batch of claims only, none of which found a task: no commit to make (`batch`: to answer them so)."""

    def __init__(self, batch: _Batch) -> None:
        super().__init__("nothing to write")
        self.batch = batch


class LeaseFinish:
    """finish() and finish_and_claim() over a ledger's index, refs and critical section."""

    refs: JobRefs
    index: Index
    holder: Holder
    group: Seat | None = None  # the slots this supervisor's workers post their finishes and claims in

    def _transition(self, job_id: str, build: Build) -> tuple[Snapshot, Change]:
        raise NotImplementedError  # the ledger's: build, append by CAS, record in the index

    def _claim_chosen(self, job_id: str, task_id: str, owner: str, ttl: float, now: float) -> Lease | None:
        raise NotImplementedError  # the ledger's: lease that task, in its own transition

    def _claim_next(self, pending: Pending, ask: Ask, now: float, holder: Holder) -> Pick | None:
        raise NotImplementedError  # the ledger's: add the claim `ask` makes next in the pending commit's job

    def finish(
        self,
        lease: Lease,
        ok: bool,
        now: float,
        error: str | None = None,
        artifacts: Sequence[Artifact] = (),
        retryable: bool = True,
    ) -> Task:
        """A worker's final write, accepted only while its token is current and its lease live."""
        self.refs.write_artifacts(artifacts)
        with self.index.immediate():
            return self._finish_locked(lease, Result(ok, error, artifacts, retryable), now)

    def finish_and_claim(self, lease: Lease, result: Result, now: float, ask: Ask | None) -> tuple[Task, Lease | None]:
        """finish(), then claim the worker's next task (`ask`; None: no claim) in the same critical section.

        When the next task is in the same job, the finish and the claim share
        one commit: one tree, one ref write and one index update per task
        instead of two. The choice sees the tasks the finish unblocks. A
        refused finish claims nothing. With `group`, the finish may be written
        by another worker of this supervisor, or write theirs.
        """
        self.refs.write_artifacts(result.artifacts)
        if ask is None:
            with self.index.immediate():
                return self._finish_locked(lease, result, now), None
        own = Posted(lease, result, now, ask, self.holder)
        with self._turn(own) as answer:
            if answer is None:
                with self.index.transaction():
                    self._check_lease(lease, now)  # refused: LeaseLost, and nothing taken from the others
                    snapshot, change, batch = self._write_batch(own, lease.job)
                self._answer(batch, change)
                task, pick = change.tasks[lease.task], batch.picks.get(OWN)
                if pick is None:
                    return task, None
                if pick[0] == lease.job:
                    return task, granted_lease(snapshot, change, pick[1], ask.owner, now + ask.ttl)
                with self.index.transaction():  # its next task is in another job: a commit of its own, still in its turn
                    return task, self._claim_chosen(*pick, ask.owner, ask.ttl, now)
        if answer.lost is not None or answer.tip is None:
            raise LeaseLost(answer.lost or f"{lease.job}/{lease.task}: lease {lease.token} is no longer held; result refused")
        snapshot = self.refs.snapshot(lease.job, answer.tip)
        return snapshot.task(lease.task), self._claimed(snapshot, ask, answer)

    @contextlib.contextmanager
    def _turn(self, own: Posted) -> Iterator[Answer | None]:
        """Post `own` for another worker to write, wait for the write lock, and (holding it) yield what that
        worker answered: None when `own` is this worker's to write, under the lock it holds."""
        posted = self.group is not None and self.group.post(own)
        with self.index.write_lock():
            yield self.group.withdraw(own.of) if posted and self.group is not None else None

    def _write_batch(self, own: Posted, job: str) -> tuple[Snapshot, Change, _Batch]:
        """Under the lock, in the caller's transaction: write `own` and the finishes and claims the others
        posted for `job` in one commit. NothingToWrite when no claim found a task and there was no finish.

        The others are answered (`_answer`) once the transaction is committed: should anything fail before,
        each finds what it posted taken and not answered, and writes it itself."""
        batch = _Batch(self, own, job)
        batch.taken = self.group.take(job) if self.group is not None else []
        for slot, posted in batch.taken:
            try:
                if posted.lease is not None:
                    self._check_lease(posted.lease, posted.now)
                batch.entries.append((slot, posted))
            except LeaseLost as exc:
                batch.lost[slot] = str(exc)
        snapshot, change = self._transition(job, batch.build)
        return snapshot, change, batch

    def _answer(self, batch: _Batch, change: Change | None) -> None:
        """Tell each worker whose post the batch took what became of it: written in the job's tip, now
        committed to the index (`change`; None: the batch found nothing to write), or refused."""
        if self.group is None or not batch.taken:
            return
        tip = self.index.job_tip(batch.job) if change is not None else None
        for slot, posted in batch.taken:
            why = batch.refused.get(slot)
            if why is not None:
                self.group.answer(slot, Answer(posted.of, None, lost=why))
                continue
            pick = batch.picks.get(slot)
            claimed = change.tasks.get(pick[1]) if pick is not None and change is not None else None
            expires = (claimed.lease_expires or 0.0) if claimed is not None else 0.0
            self.group.answer(slot, Answer(posted.of, tip, claimed.id if claimed else None, expires))

    def _claimed(self, snapshot: Snapshot, ask: Ask, answer: Answer) -> Lease | None:
        """The lease another worker claimed for this one (None: it found no task), read at the answered commit."""
        if answer.claimed is None:
            return None
        claimed = Change(state=snapshot.state, tasks={answer.claimed: snapshot.task(answer.claimed)})
        return granted_lease(snapshot, claimed, answer.claimed, ask.owner, answer.expires)

    def _check_lease(self, lease: Lease, now: float) -> None:
        row = self.index.db.execute(
            "SELECT token, expires, owner FROM leases WHERE job = ? AND task = ?", (lease.job, lease.task)
        ).fetchone()
        # The owner too: another clone's claim of the task, merged in by a pull, carries the same token.
        if row is None or row[0] != lease.token or row[1] < now or row[2] != lease.owner:
            raise LeaseLost(f"{lease.job}/{lease.task}: lease {lease.token} is no longer held; result refused")

    def _finish_builder(self, lease: Lease, result: Result, now: float) -> Callable[..., tuple[TaskFinished, Sequence[Artifact]]]:
        """What builds the finish op on a snapshot (`after` ops already in its commit)."""
        artifacts = result.artifacts
        ids = tuple(artifact_id(a) for a in artifacts)
        runs = [a for a in artifacts if isinstance(a, Run)]
        cost = round(sum(r.cost_usd or 0.0 for r in runs), 8)
        tokens = sum(r.tokens for r in runs)
        return lambda s, after=0: (
            self.refs.next_op(
                TaskFinished, s, now, after, task=lease.task, token=lease.token, ok=result.ok, error=result.error,
                artifacts=ids, retryable=result.retryable, cost_usd=cost, tokens=tokens, base=result.base,
                skipped_because=result.skipped_because,
            ),
            artifacts,
        )

    def _finish_locked(self, lease: Lease, result: Result, now: float) -> Task:
        self._check_lease(lease, now)
        _, change = self._transition(lease.job, self._finish_builder(lease, result, now))
        return change.tasks[lease.task]


class _Batch:
    """What one commit writes: the holder's own finish or claim first, then each other worker's finish (with
    its next claim in the job) or lone claim, in slot order."""

    def __init__(self, ledger: LeaseFinish, own: Posted, job: str) -> None:
        self.ledger = ledger
        self.job = job
        self.entries: list[tuple[int, Posted]] = [(OWN, own)]
        self.taken: list[tuple[int, Posted]] = []  # what the other workers posted, by slot
        self.lost: dict[int, str] = {}  # slot -> why its lease was no longer held (checked before the build)
        self.refused: dict[int, str] = {}  # those, and the finishes that did not apply
        self.picks: dict[int, Pick | None] = {}

    def build(self, snapshot: Snapshot) -> tuple[list[Op], list[Artifact]]:
        """Everything that applies, in order, on `snapshot` (run again on a new tip should the CAS lose)."""
        ledger = self.ledger
        self.refused, self.picks = dict(self.lost), {}
        pending = Pending(snapshot)
        artifacts: list[Artifact] = []
        for slot, posted in self.entries:
            if slot in self.refused:
                continue
            if posted.lease is not None and posted.result is not None:
                finish, written = ledger._finish_builder(posted.lease, posted.result, posted.now)(snapshot, len(pending.ops))
                try:
                    pending.add(finish)
                except (InvalidTransition, LeaseLost) as exc:
                    if slot == OWN:
                        raise
                    self.refused[slot] = str(exc)
                    continue
                artifacts.extend(written)
            pick = ledger._claim_next(pending, posted.ask, posted.now, posted.holder)
            # The holder claims in another job after this commit; the others, at their next step.
            self.picks[slot] = pick if slot == OWN or (pick is not None and pick[0] == snapshot.job_id) else None
        if not pending.ops:
            raise NothingToWrite(self)
        return pending.ops, artifacts


class Pending:
    """Operations added one by one on a snapshot, each seeing what the earlier ones changed: one commit's."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.ops: list[Op] = []
        self.state = snapshot.state
        self.changed: dict[str, Task] = {}

    def task(self, task_id: str) -> Task:
        found = self.changed.get(task_id)
        return found if found is not None else self.snapshot.task(task_id)

    def add(self, op: Op) -> None:
        """Apply `op` after the others (InvalidTransition or LeaseLost, nothing added, when it does not apply)."""
        change = apply(op, self.state, self.task, self.snapshot.task_ids)
        self.state = change.state
        self.changed.update(change.tasks)
        self.ops.append(op)

    def change(self) -> Change:
        return Change(state=self.state, tasks=self.changed)
