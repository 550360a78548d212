"""Group commit: the worker that holds the write lock writes the finishes the others posted for its job."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from gitswarm.engine.swarm import Swarm
from gitswarm.model.errors import LeaseLost
from gitswarm.model.ops import Holder, TaskClaimed, TaskFinished
from gitswarm.model.records import TaskSpec
from gitswarm.store.group_commit import Answer, Posted
from gitswarm.store.group_slots import POSTED, SLOT_BYTES, Seat, Slots
from gitswarm.store.holders import this_process
from gitswarm.store.jobs import parse_ops
from gitswarm.store.lease_finish import NothingToWrite
from gitswarm.store.leases import Ask, Lease, Result
from tests.conftest import cli, git, ok, spec_text


def other_holder() -> Holder:
    """A holder that is not this process: the claim made for a worker must name that worker's."""
    return msgspec.structs.replace(this_process(), pid=this_process().pid + 1)


def ops_by_commit(repo: Path, job: str) -> list[list[object]]:
    swarm = Swarm(repo)
    try:
        tip = git(repo, "rev-parse", f"refs/swarm/jobs/{job}").strip()
        return [parse_ops(c, job) for c in swarm.repo.walk(tip)]
    finally:
        swarm.close()


@pytest.fixture
def pair(repo: Path) -> Iterator[tuple[Swarm, Swarm, Slots, str]]:
    """Two workers' ledgers on one repository, seated in one supervisor's slots, and a job of six tasks."""
    a, b = Swarm(repo), Swarm(repo)
    slots = Slots(2)
    a.ledger.group, b.ledger.group = slots.seat(0), slots.seat(1)
    job = a.submit_text(spec_text(*(f'id = "t{i}"\ncommand = "true"' for i in range(6))))
    b.index.refresh(b.refs)
    yield a, b, slots, job
    a.close()
    b.close()


def test_the_holder_of_the_lock_writes_a_posted_finish_with_its_own_in_one_commit(pair, repo: Path) -> None:
    a, b, _, job = pair
    now = time.time()
    lease_a = a.ledger.claim("a", 30, now, job_id=job)
    lease_b = b.ledger.claim("b", 30, now, job_id=job)
    assert lease_a is not None and lease_b is not None
    seat_b = b.ledger.group
    assert isinstance(seat_b, Seat)
    holder_b = other_holder()
    assert seat_b.post(Posted(lease_b, Result(True), now + 1, Ask("b", 30, job), holder_b))
    commits_before = len(ops_by_commit(repo, job))

    task_a, next_a = a.ledger.finish_and_claim(lease_a, Result(True), now + 1, Ask("a", 30, job))

    batches = ops_by_commit(repo, job)
    assert len(batches) == commits_before + 1  # both finishes, both claims: one commit
    last = batches[-1]
    assert [type(op).__name__ for op in last] == ["TaskFinished", "TaskClaimed", "TaskFinished", "TaskClaimed"]
    finished_b, claimed_b = last[2], last[3]
    assert isinstance(finished_b, TaskFinished) and finished_b.task == lease_b.task and finished_b.token == lease_b.token
    assert isinstance(claimed_b, TaskClaimed) and claimed_b.owner == "b" and claimed_b.holder == holder_b
    assert [op.clock for op in last] == list(range(last[0].clock, last[0].clock + 4))  # type: ignore[attr-defined]
    assert task_a.state.value == "succeeded" and next_a is not None and next_a.owner == "a"

    answer = seat_b.withdraw(of(lease_b))  # what b finds once it gets the lock
    assert answer is not None and answer.tip == git(repo, "rev-parse", f"refs/swarm/jobs/{job}").strip()
    snapshot = b.refs.snapshot(job, answer.tip)
    task_b, next_b = snapshot.task(lease_b.task), b.ledger._claimed(snapshot, Ask("b", 30, job), answer)
    assert task_b.state.value == "succeeded" and task_b.id == lease_b.task
    assert next_b is not None and next_b.task == claimed_b.task and next_b.owner == "b" and next_b.token == claimed_b.token
    assert next_b.spec.id == next_b.task and next_b.expires == now + 1 + 30
    assert b.index.lease(job, next_b.task).owner == "b"  # the index knows the lease b now holds
    assert a.index.task_state(job, lease_b.task) == "succeeded"
    assert seat_b.withdraw(of(lease_b)) is None  # an answer is read once


def test_a_worker_waiting_on_the_lock_finds_its_finish_written_and_goes_on(pair, repo: Path) -> None:
    """The whole path: b posts and waits on the lock a holds; a writes both; b reads its answer."""
    a, _, slots, job = pair
    now = time.time()
    lease_a = a.ledger.claim("a", 30, now, job_id=job)
    b_out: list[object] = []

    def worker_b() -> None:  # its own connection, in its own thread (SQLite connections stay in theirs)
        b = Swarm(repo)
        b.ledger.group = slots.seat(1)
        try:
            lease_b = b.ledger.claim("b", 30, now, job_id=job)
            ready.set()
            go.wait(10)
            b_out.append(b.ledger.finish_and_claim(lease_b, Result(True), now + 1, Ask("b", 30, job)))
        finally:
            b.close()

    ready, go = threading.Event(), threading.Event()
    thread = threading.Thread(target=worker_b)
    thread.start()
    assert ready.wait(10)
    with a.index.write_lock():  # a holds the lock: b posts, then waits for it
        go.set()
        deadline = time.monotonic() + 10
        while slots.flag(1) != POSTED:
            assert time.monotonic() < deadline, "b never posted its finish"
            time.sleep(0.001)
        a.ledger.finish_and_claim(lease_a, Result(True), now + 1, Ask("a", 30, job))
    thread.join(10)
    [(task_b, next_b)] = b_out
    assert task_b.state.value == "succeeded" and next_b is not None and next_b.owner == "b"
    last = ops_by_commit(repo, job)[-1]
    assert sorted(op.task for op in last if isinstance(op, TaskFinished)) == sorted([lease_a.task, task_b.id])
    assert slots.flag(1) == 0


def test_a_posted_finish_whose_lease_ran_out_is_refused_and_stops_no_other(pair, repo: Path) -> None:
    a, b, _, job = pair
    now = time.time()
    lease_a = a.ledger.claim("a", 30, now, job_id=job)
    lease_b = b.ledger.claim("b", 1, now, job_id=job)
    seat_b = b.ledger.group
    assert seat_b.post(Posted(lease_b, Result(True), now + 5, Ask("b", 30, job), other_holder()))  # past its expiry
    a.ledger.finish_and_claim(lease_a, Result(True), now + 5, Ask("a", 30, job))
    last = ops_by_commit(repo, job)[-1]
    assert [(type(op).__name__, op.task) for op in last] == [("TaskFinished", lease_a.task), ("TaskClaimed", last[1].task)]
    answer = seat_b.withdraw(of(lease_b))
    assert answer is not None and answer.tip is None and "no longer held" in (answer.lost or "")
    assert a.index.task_state(job, lease_b.task) == "running"  # its lease runs out as any other


def test_a_finish_posted_for_another_job_is_left_for_its_worker(pair, repo: Path) -> None:
    a, b, slots, job = pair
    other = a.submit_text(spec_text('id = "x"\ncommand = "true"'))
    b.index.refresh(b.refs)
    now = time.time()
    lease_a = a.ledger.claim("a", 30, now, job_id=job)
    lease_b = b.ledger.claim("b", 30, now, job_id=other)
    assert b.ledger.group.post(Posted(lease_b, Result(True), now, Ask("b", 30, other), other_holder()))
    a.ledger.finish_and_claim(lease_a, Result(True), now, Ask("a", 30, job))
    assert slots.flag(1) == POSTED  # not taken
    assert b.ledger.group.withdraw(of(lease_b)) is None  # so b writes it itself
    task_b, _ = b.ledger.finish_and_claim(lease_b, Result(True), now, Ask("b", 30, other))
    assert task_b.state.value == "succeeded"


def test_a_posted_claim_is_written_with_the_holders_finish_and_answered_with_its_lease(pair, repo: Path) -> None:
    """A worker's first claim (or its next after an idle spell) rides in the commit of whoever holds the lock."""
    a, b, _, job = pair
    now = time.time()
    lease_a = a.ledger.claim("a", 30, now, job_id=job)
    own = Posted(None, None, now, Ask("b", 30, job), other_holder())
    assert b.ledger.group.post(own)
    a.ledger.finish_and_claim(lease_a, Result(True), now, Ask("a", 30, job))
    last = ops_by_commit(repo, job)[-1]
    assert [type(op).__name__ for op in last] == ["TaskFinished", "TaskClaimed", "TaskClaimed"]
    claimed_b = last[2]
    assert claimed_b.owner == "b" and claimed_b.holder == own.holder
    answer = b.ledger.group.withdraw(own.of)
    assert answer is not None and answer.claimed == claimed_b.task
    lease_b = b.ledger._claimed(b.refs.snapshot(job, answer.tip), own.ask, answer)
    assert lease_b is not None and (lease_b.task, lease_b.owner, lease_b.token) == (claimed_b.task, "b", claimed_b.token)


def test_a_claim_that_finds_nothing_writes_nothing_and_answers_no_task(pair, repo: Path) -> None:
    a, b, _, job = pair
    now = time.time()
    leases = [a.ledger.claim(f"w{i}", 30, now, job_id=job) for i in range(6)]  # every task taken
    assert all(leases)
    before = ops_by_commit(repo, job)
    own = Posted(None, None, now, Ask("b", 30, job), other_holder())
    assert b.ledger.group.post(own)
    assert a.ledger.claim("a", 30, now, job_id=job) is None  # (the pre-check finds nothing queued: no lock taken)
    with a.index.write_lock(), a.index.transaction():  # a holder whose own claim finds nothing either
        with pytest.raises(NothingToWrite) as nothing:
            a.ledger._write_batch(Posted(None, None, now, Ask("a", 30, job), this_process()), job)
        a.ledger._answer(nothing.value.batch, None)
    assert ops_by_commit(repo, job) == before
    answer = b.ledger.group.withdraw(own.of)
    assert answer is not None and answer.tip is None and answer.claimed is None


def test_a_write_that_fails_after_the_ref_moved_answers_nobody(pair, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The holder's index write fails: the others find what they posted taken and unanswered, and write it
    themselves; a finish that landed after all is refused by its token, never recorded twice."""
    a, b, _, job = pair
    now = time.time()
    lease_a = a.ledger.claim("a", 30, now, job_id=job)
    lease_b = b.ledger.claim("b", 30, now, job_id=job)
    assert b.ledger.group.post(Posted(lease_b, Result(True), now, Ask("b", 30, job), other_holder()))

    def broken(*args: object, **kwargs: object) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(a.index, "record", broken)
    with pytest.raises(sqlite3.OperationalError):
        a.ledger.finish_and_claim(lease_a, Result(True), now, Ask("a", 30, job))
    monkeypatch.undo()
    assert b.ledger.group.withdraw(of(lease_b)) is None  # taken, never answered
    with pytest.raises(LeaseLost, match="stale"):  # its finish is in the ref already
        b.ledger.finish_and_claim(lease_b, Result(True), now, Ask("b", 30, job))
    finished = [op.task for ops in ops_by_commit(repo, job) for op in ops if isinstance(op, TaskFinished)]
    assert sorted(finished) == sorted([lease_a.task, lease_b.task])  # each once


def test_a_budget_spent_in_a_batch_stops_the_job_and_the_later_claims(repo: Path) -> None:
    a, b = Swarm(repo), Swarm(repo)
    try:
        slots = Slots(2)
        a.ledger.group, b.ledger.group = slots.seat(0), slots.seat(1)
        spec = 'goal = "g"\n[budget]\nmax_attempts = 2\n' + "".join(f'[[tasks]]\nid = "t{i}"\ncommand = "true"\n' for i in range(4))
        job = a.submit_text(spec)
        now = time.time()
        lease_a = a.ledger.claim("a", 30, now, job_id=job)
        lease_b = b.ledger.claim("b", 30, now, job_id=job)
        posted = Posted(lease_b, Result(True), now, Ask("b", 30, job), other_holder())
        assert b.ledger.group.post(posted)
        _, next_a = a.ledger.finish_and_claim(lease_a, Result(True), now, Ask("a", 30, job))
        assert next_a is None
        last = ops_by_commit(repo, job)[-1]
        assert [type(op).__name__ for op in last] == ["TaskFinished", "BudgetStopped", "TaskFinished"]
        answer = b.ledger.group.withdraw(posted.of)
        assert answer is not None and answer.tip is not None and answer.claimed is None and answer.lost is None
        others = {f"t{i}" for i in range(4)} - {lease_a.task, lease_b.task}
        assert {a.index.task_state(job, t) for t in others} == {"cancelled"}  # stopped: none claimed after it
    finally:
        a.close()
        b.close()


def test_a_finish_too_large_for_a_slot_is_not_posted(pair) -> None:
    _, b, _, job = pair
    now = time.time()
    lease = b.ledger.claim("b", 30, now, job_id=job)
    huge = Result(False, error="x" * (SLOT_BYTES + 1))
    assert not b.ledger.group.post(Posted(lease, huge, now, Ask("b", 30, job), this_process()))
    task, _ = b.ledger.finish_and_claim(lease, huge, now, Ask("b", 30, job))  # written by its worker
    assert task.state.value in ("queued", "failed")


def of(lease: Lease) -> tuple[str, str, int]:
    return (lease.job, lease.task, lease.token)


def lease_of(task: str, token: int) -> Lease:
    return Lease("job", task, token, "w", 0.0, 1, TaskSpec(id=task, seq=0, command="true"))


class SlotsProtocol(RuleBasedStateMachine):
    """Random interleavings of posts, a holder's takes and answers, workers withdrawing and workers replaced
    (an answer may come after the slot went to a new worker): a worker gets an answer only to the finish it
    posted, and only once a holder answered it; a holder takes only what is posted, once."""

    def __init__(self) -> None:
        super().__init__()
        self.slots = Slots(3)
        self.seats = [self.slots.seat(i) for i in range(3)]
        self.state: dict[int, tuple[str, Lease | None]] = {i: ("empty", None) for i in range(3)}  # the model
        self.waiting: dict[int, Lease] = {}  # slot -> the finish its worker posted and waits with
        self.pending: list[tuple[int, Lease]] = []  # finishes holders took and have yet to answer
        self.tokens = 0

    @precondition(lambda self: len(self.waiting) < 3)
    @rule(data=st.data())
    def post(self, data: st.DataObject) -> None:
        slot = data.draw(st.sampled_from([s for s in range(3) if s not in self.waiting]))
        self.tokens += 1
        lease = lease_of(f"t{slot}", self.tokens)
        assert self.seats[slot].post(Posted(lease, Result(True), 0.0, Ask("w", 1), this_process()))
        self.state[slot] = ("posted", lease)
        self.waiting[slot] = lease

    @rule(holder=st.integers(0, 2))
    def take(self, holder: int) -> None:
        found = self.seats[holder].take("job")
        expected = {s: lease for s, (flag, lease) in self.state.items() if flag == "posted" and s != holder}
        assert {slot: posted.lease for slot, posted in found} == expected
        for slot, lease in expected.items():
            assert lease is not None
            self.state[slot] = ("taken", lease)
            self.pending.append((slot, lease))

    @precondition(lambda self: bool(self.pending))
    @rule(data=st.data())
    def answer(self, data: st.DataObject) -> None:
        slot, lease = self.pending.pop(data.draw(st.integers(0, len(self.pending) - 1)))
        self.seats[0].answer(slot, Answer((lease.job, lease.task, lease.token), "tip"))
        self.state[slot] = ("answered", lease)

    @precondition(lambda self: bool(self.waiting))
    @rule(data=st.data())
    def withdraw(self, data: st.DataObject) -> None:
        slot = data.draw(st.sampled_from(sorted(self.waiting)))
        lease = self.waiting.pop(slot)
        got = self.seats[slot].withdraw(of(lease))
        if self.state[slot] == ("answered", lease):
            assert got is not None and got.of == (lease.job, lease.task, lease.token) and got.tip == "tip"
        else:
            assert got is None  # still posted, taken by a holder that died, or an answer to another lease
        self.state[slot] = ("empty", None)

    @rule(slot=st.integers(0, 2))
    def replace_worker(self, slot: int) -> None:
        """The worker died; the supervisor clears the slot for the next one (an answer may still come)."""
        self.slots.clear(slot)
        self.state[slot] = ("empty", None)
        self.waiting.pop(slot, None)


TestSlotsProtocol = SlotsProtocol.TestCase
TestSlotsProtocol.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)


def test_a_run_of_many_workers_writes_some_finishes_together_and_each_once(repo: Path) -> None:
    body = "".join(f'[[tasks]]\nid = "t{i:03d}"\ncommand = "true"\n' for i in range(60))
    (repo / "job.toml").write_text('goal = "many"\n' + body)
    out = ok(cli(repo, "--json", "run", "job.toml", "-j", "4"))
    job = json.loads(out.out)["id"]
    batches = ops_by_commit(repo, job)
    finishes = [op for ops in batches for op in ops if isinstance(op, TaskFinished)]
    assert sorted(op.task for op in finishes) == [f"t{i:03d}" for i in range(60)]  # each finished once
    assert any(sum(isinstance(op, TaskFinished) for op in ops) > 1 for ops in batches)  # some written together
    holders: dict[str, set[int]] = {}
    for ops in batches:
        for op in ops:
            if isinstance(op, TaskClaimed) and op.holder is not None:
                holders.setdefault(op.owner, set()).add(op.holder.pid)
    assert len(holders) == 4 and all(len(pids) == 1 for pids in holders.values())  # each claim names its worker
    assert len({pid for pids in holders.values() for pid in pids}) == 4
