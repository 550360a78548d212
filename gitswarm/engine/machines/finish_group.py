"""Group commit through a remote: the finishes of one machine's workers, pushed together (`work --remote`).

A machine's workers run short tasks in step: each pushes a finish (with its
next claim) at about the same moment as its siblings. Pushed apart, every
pair of those pushes costs the remote two receive-packs and the machine a
merge commit: each worker's commit was built on the same local tip, so the
second to land is merged into the first (a tree and a commit, pushed,
unpacked on the remote and fetched by every other machine). Measured on one
machine of two workers, 0.95 merges per task.

So a worker posts its finish (and what it asks to claim next) in its slot
of the supervisor's shared memory (store/group_slots.py) and waits for the
machine's push lock (`<git common dir>/gitswarm/push/<remote key>.lock`, a
flock: released with a worker that dies). The worker that holds the lock
takes every finish posted for its job, waiting up to 10 ms in all for the
siblings that run a task to post theirs, builds one commit of them all (each
finish followed by that worker's next claim) and pushes it, once; then
answers each: the commit, the task it claimed for that worker, or why its
lease was no longer held. A worker that finds its answer is done. One whose
post is still there, or was taken by a holder that failed or died before it
answered, is the holder in its turn: it pushes its own finish, with what
its siblings posted meanwhile.

Each finish is checked against its lease on every build, as alone; one that
no longer applies is left out (the holder's own too: the others' still
land, and the holder is told its lease was lost). A rebuild (a refusal:
another machine claimed one of the tasks first) claims again from what the
refusal fetched; refused again, the finishes go alone, as alone. The lock
is held for one offer that does not wait out an outage: a worker that would
wait does so alone, after the lock, and its siblings' posts go back to them
unanswered. A worker pushing from a running task's heartbeat waits for the
lock one second at most, then takes its post back (unless a holder took it
already) and tries again at a later beat: the heartbeat renews the task's
lease and stops the task at its deadline, and must not stop behind its
siblings' pushes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from gitswarm.engine.machines.arbiter import RemoteRefused, RemoteUnavailable
from gitswarm.model.artifacts import Artifact
from gitswarm.model.errors import InvalidTransition, LeaseLost
from gitswarm.model.ops import Holder, TaskFinished
from gitswarm.model.records import Task
from gitswarm.model.reducer import Change
from gitswarm.store.group_commit import Answer, Posted
from gitswarm.store.group_slots import Seat
from gitswarm.store.index import Index
from gitswarm.store.jobs import JobRefs, Snapshot
from gitswarm.store.lease_finish import OWN, Pending
from gitswarm.store.lease_types import Ask, Built, Lease, Result, granted_lease, require_held
from gitswarm.store.locks import held_within

PUSH_DIR = "push"  # under <git common dir>/gitswarm/: each remote's push lock
GATHER_SECONDS = 0.01  # how long the lock's holder waits for the siblings that run a task to post their finishes
GATHER_POLL_SECONDS = 0.001
# The builds of a finish that carry the worker's next claim: the first, and the one after a refusal (picked again
# from what the refusal fetched). Refused twice, the finish goes alone: at a job's end, where the last queued tasks
# are everyone's to take, a finish is never held back by claims that keep losing.
CLAIM_BUILDS = 2
TURN_SECONDS = 1.0  # the longest a heartbeat waits for the push lock: well inside the lease a renewal leaves

Entry = tuple[int, Posted]


class GroupedFinish:
    """finish_grouped(), mixed into RemoteLedger (engine/machines/remote_leases.py) after Ledger, whose
    methods (and the RemoteLedger's own) the stubs below stand for."""

    refs: JobRefs
    index: Index
    holder: Holder
    group: Seat | None = None  # the slots this machine's workers post their finishes in
    busy_siblings: Callable[[], int] = staticmethod(lambda: 0)  # how many of the others run a task now
    _me: str

    def offer(
        self, job_id: str, build: Callable[[Snapshot], Built], patient: bool = False, branch: tuple[str, str] | None = None,
    ) -> tuple[Snapshot, Change]:
        raise NotImplementedError  # the ledger's: build on the local tip, have the remote accept it

    def push_lock(self) -> Path:
        raise NotImplementedError  # the ledger's: this machine's push lock for its remote

    def _finish_builder(self, lease: Lease, result: Result, now: float) -> Callable[..., tuple[TaskFinished, Sequence[Artifact]]]:
        raise NotImplementedError  # LeaseFinish's (store/lease_finish.py): what builds a finish op on a snapshot

    def _next_claim(self, pending: Pending, ask: Ask, now: float, build: int = 1) -> str | None:
        raise NotImplementedError  # the ledger's: add to `pending` the claim `ask` takes next in its job (the task)

    def finish_grouped(
        self, lease: Lease, result: Result, now: float, ask: Ask, patient: bool = True,
    ) -> tuple[Task, Lease | None]:
        """Push this worker's finish with those its siblings posted, or have a sibling push it: the task as
        finished, and the lease claimed next with it. LeaseLost when its lease was no longer held.

        Not `patient` (from a running task's heartbeat, which must not stop for long: it renews the task's
        lease and stops the task at its deadline), the lock is waited for TURN_SECONDS at most; then the post
        is taken back, or left to the holder pushing it, and RemoteUnavailable says to try again later. What
        the offer raises when the remote does not take the commit now (unreachable, rejected) goes to the
        caller too; the siblings' posts then go back to them unanswered, each to be pushed in its turn."""
        assert self.group is not None
        own = Posted(lease, result, now, ask, self.holder)
        answer = self.group.answered(own.of)  # pushed by a sibling after an earlier try gave up waiting
        if answer is not None:
            return self._answered(lease, ask, answer)
        if not patient and self.group.in_flight(own.of):
            raise RemoteUnavailable(f"{lease.job}/{lease.task}: its finish is being pushed with a sibling's")
        posted = self.group.post(own)
        with held_within(self.push_lock(), None if patient else TURN_SECONDS) as turn:
            if not turn:
                self.group.retract()
                answer = self.group.answered(own.of)
                if answer is not None:
                    return self._answered(lease, ask, answer)
                raise RemoteUnavailable(f"{lease.job}/{lease.task}: this machine's push lock stayed busy")
            answer = self.group.withdraw(own.of) if posted else None
            if answer is not None:
                return self._answered(lease, ask, answer)
            batch = _Batch(self, own, self._gather(lease.job))
            try:
                snapshot, change = self.offer(lease.job, batch.build)
            except (InvalidTransition, RemoteRefused) as exc:  # (as alone: engine/machines/remote_leases.py)
                raise LeaseLost(f"{lease.job}/{lease.task}: {exc}; result refused") from None
            batch.answer(self.group, self.index.job_tip(lease.job), change)
        self._me = ask.owner
        if batch.own_lost is not None:  # the siblings' finishes landed without it
            raise LeaseLost(batch.own_lost)
        claimed = batch.picks.get(OWN)
        if claimed is None:
            return change.tasks[lease.task], None
        return change.tasks[lease.task], granted_lease(snapshot, change, claimed, ask.owner, change.tasks[claimed].lease_expires or now)

    def _gather(self, job: str) -> list[Entry]:
        """The finishes the siblings posted for `job`, each taken; waiting up to GATHER_SECONDS for every sibling
        that runs a task to post its own (one about to finish a short task posts within milliseconds)."""
        assert self.group is not None
        taken = self.group.take(job)
        deadline = time.monotonic() + GATHER_SECONDS
        while len(taken) < self.busy_siblings() and time.monotonic() < deadline:
            time.sleep(GATHER_POLL_SECONDS)
            taken += self.group.take(job)
        return taken

    def _answered(self, lease: Lease, ask: Ask, answer: Answer) -> tuple[Task, Lease | None]:
        """What a sibling pushed for this worker: its finish (LeaseLost: refused) and the lease it claimed for it."""
        if answer.lost is not None or answer.tip is None:
            raise LeaseLost(answer.lost or f"{lease.job}/{lease.task}: lease {lease.token} is no longer held; result refused")
        snapshot = self.refs.snapshot(lease.job, answer.tip)
        if answer.claimed is None:
            return snapshot.task(lease.task), None
        claimed = Change(state=snapshot.state, tasks={answer.claimed: snapshot.task(answer.claimed)})
        return snapshot.task(lease.task), granted_lease(snapshot, claimed, answer.claimed, ask.owner, answer.expires)


class _Batch:
    """One group commit: the holder's finish first, then each sibling's in slot order, each followed by that
    worker's next claim (on the first CLAIM_BUILDS builds: then the finishes go alone)."""

    def __init__(self, ledger: GroupedFinish, own: Posted, taken: list[Entry]) -> None:
        self.ledger = ledger
        self.entries: list[Entry] = [(OWN, own), *taken]
        self.taken = taken
        self.builds = 0
        self.refused: dict[int, str] = {}  # slot -> why its finish did not apply on the last build
        self.picks: dict[int, str | None] = {}  # slot -> the task claimed for it on the last build

    @property
    def own_lost(self) -> str | None:
        """Why the holder's own finish did not apply on the last build (its lease was gone), if it did not."""
        return self.refused.get(OWN)

    def build(self, snapshot: Snapshot) -> Built:
        ledger = self.ledger
        self.builds += 1
        self.refused, self.picks = {}, {}
        pending = Pending(snapshot)
        artifacts: list[Artifact] = []
        for slot, posted in self.entries:
            assert posted.lease is not None and posted.result is not None
            try:
                require_held(snapshot, posted.lease)
                op, written = ledger._finish_builder(posted.lease, posted.result, posted.now)(snapshot, len(pending.ops))
                pending.add(op)
            except (InvalidTransition, LeaseLost) as exc:
                self.refused[slot] = str(exc)
                continue
            artifacts.extend(written)
            # Its next claim, after its finish (docs/format.md, "A job's commits"), while builds carry claims.
            self.picks[slot] = ledger._next_claim(pending, posted.ask, posted.now, self.builds)
        if OWN in self.refused and not pending.ops:  # nothing of anyone's applies: no commit to make
            raise LeaseLost(self.refused[OWN])
        return pending.ops, artifacts

    def answer(self, group: Seat, tip: str | None, change: Change) -> None:
        """Tell each sibling whose finish this commit took what became of it: `tip`, the job's local tip once the
        commit was adopted here (it holds the commit), or why its lease was no longer held."""
        for slot, posted in self.taken:
            why = self.refused.get(slot)
            if why is not None:
                group.answer(slot, Answer(posted.of, None, lost=why))
                continue
            claimed = self.picks.get(slot)
            expires = (change.tasks[claimed].lease_expires or 0.0) if claimed is not None else 0.0
            group.answer(slot, Answer(posted.of, tip, claimed, expires))

