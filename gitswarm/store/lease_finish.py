"""How a lease ends with a result: a worker's finish, and its next claim in the same write. Mixed into
`Ledger` (store/leases.py), whose critical section each finish is written in.

With `group` set (the workers of one supervisor, store/group_commit.py), the
worker that holds the write lock writes the finishes the others posted for its
job in the same commit as its own, each followed by that worker's next claim.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gitswarm.model.artifacts import Artifact, Run, artifact_id
from gitswarm.model.errors import InvalidTransition, LeaseLost
from gitswarm.model.ops import Holder, Op, TaskClaimed, TaskFinished
from gitswarm.model.records import Task
from gitswarm.model.reducer import Change, apply
from gitswarm.store.group_commit import Answer, Posted, Seat
from gitswarm.store.index import Index
from gitswarm.store.jobs import JobRefs, Snapshot
from gitswarm.store.lease_types import Ask, Build, Lease, Result, granted_lease

Pick = tuple[str, str]  # (job, task) to claim next


class LeaseFinish:
    """finish() and finish_and_claim() over a ledger's index, refs and critical section."""

    refs: JobRefs
    index: Index
    holder: Holder
    group: Seat | None = None  # the slots this supervisor's workers post their finishes in

    def _transition(self, job_id: str, build: Build) -> tuple[Snapshot, Change]:
        raise NotImplementedError  # the ledger's: build, append by CAS, record in the index

    def _pick(
        self, now: float, job_id: str | None, pending: Change | None = None, pending_job: str = "",
        exclude: frozenset[str] = frozenset(), skip_jobs: frozenset[str] = frozenset(),
    ) -> Pick | None:
        raise NotImplementedError  # the ledger's: which queued task to claim next

    def _claim_op(
        self, snapshot: Snapshot, task: Task, owner: str, ttl: float, now: float, after: int = 0, holder: Holder | None = None,
    ) -> TaskClaimed:
        raise NotImplementedError

    def _claim_chosen(self, job_id: str, task_id: str, owner: str, ttl: float, now: float) -> Lease | None:
        raise NotImplementedError

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
        group = self.group
        posted = group is not None and group.post(own)
        with self.index.write_lock():
            answer = group.withdraw(own.of) if posted and group is not None else None
            if answer is None:
                with self.index.transaction():
                    return self._finish_batch(own)
        return self._answered(lease, ask, answer)

    def _finish_batch(self, own: Posted) -> tuple[Task, Lease | None]:
        """Under the lock: write `own` finish and what the others posted for its job in one commit."""
        lease, ask, result = own.lease, own.ask, own.result
        assert lease is not None and result is not None
        self._check_lease(lease, own.now)  # refused: LeaseLost, and nothing taken from the others
        snapshot, change, batch = self._write_batch(own, lease.job)
        task, pick = change.tasks[lease.task], batch.picks.get(OWN)
        if pick is None:
            return task, None
        if pick[0] == lease.job:
            return task, granted_lease(snapshot, change, pick[1], ask.owner, own.now + ask.ttl)
        return task, self._claim_chosen(*pick, ask.owner, ask.ttl, own.now)

    def _write_batch(self, own: Posted, job: str) -> tuple[Snapshot, Change, _Batch]:
        """Under the lock: write `own` and the finishes and claims the others posted for `job` in one commit, and
        answer them. NothingToWrite when no claim found a task and there was no finish.

        Should the write fail, nothing is answered: each of the others, finding what it posted taken and not
        answered, writes it itself."""
        batch = _Batch(self, own)
        batch.taken = self.group.take(job) if self.group is not None else []
        for slot, posted in batch.taken:
            try:
                if posted.lease is not None:
                    self._check_lease(posted.lease, posted.now)
                batch.entries.append((slot, posted))
            except LeaseLost as exc:
                batch.refused_first[slot] = str(exc)
        try:
            snapshot, change = self._transition(job, batch.build)
        except NothingToWrite:
            self._answer(batch, None)
            raise
        self._answer(batch, self.index.job_tip(job))
        return snapshot, change, batch

    def _answer(self, batch: _Batch, tip: str | None) -> None:
        """Tell each worker whose post the batch took what became of it (written in `tip`, or refused)."""
        if self.group is None:
            return
        for slot, posted in batch.taken:
            why = batch.refused.get(slot)
            if why is not None:
                self.group.answer(slot, Answer(posted.of, None, lost=why))
                continue
            claimed = batch.picks.get(slot)
            self.group.answer(slot, Answer(posted.of, tip, claimed[1] if claimed else None, posted.now + posted.ask.ttl))

    def _answered(self, lease: Lease, ask: Ask, answer: Answer) -> tuple[Task, Lease | None]:
        """The records another worker wrote for this one's finish, read at the commit it answered."""
        if answer.lost is not None or answer.tip is None:
            raise LeaseLost(answer.lost or f"{lease.job}/{lease.task}: lease {lease.token} is no longer held; result refused")
        snapshot = self.refs.snapshot(lease.job, answer.tip)
        return snapshot.task(lease.task), self._claimed(snapshot, ask, answer)

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


OWN = -1  # the slot of the finish of the worker that holds the lock


class NothingToWrite(Exception):
    """A batch of claims only, none of which found a task: no commit to make."""


class _Batch:
    """The finishes one commit writes, the holder's first, each followed by its worker's next claim in the job;
    and the claims posted alone (a worker's first, or its next after an idle spell)."""

    def __init__(self, ledger: LeaseFinish, own: Posted) -> None:
        self.ledger = ledger
        self.entries: list[tuple[int, Posted]] = [(OWN, own)]
        self.taken: list[tuple[int, Posted]] = []  # what the other workers posted, by slot
        self.refused_first: dict[int, str] = {}  # slot -> why its lease was no longer held
        self.refused: dict[int, str] = {}  # the same, and the finishes that did not apply
        self.picks: dict[int, Pick | None] = {}

    def build(self, snapshot: Snapshot) -> tuple[list[Op], list[Artifact]]:
        """Every finish that applies, in order, on `snapshot` (run again on a new tip should the CAS lose)."""
        ledger = self.ledger
        self.refused, self.picks = dict(self.refused_first), {}
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
            raise NothingToWrite
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
