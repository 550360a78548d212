"""One machine's finishes pushed together (engine/machines/finish_group.py): two workers of clone a, each with
its own Swarm and RemoteLedger, sharing the group-commit slots and the push lock as forked workers do, and a
second clone b as another machine; a bare repository on disk as the remote, real pushes and fetches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Collection, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitswarm.engine.machines import finish_group
from gitswarm.engine.machines.arbiter import Arbiter, Offered
from gitswarm.engine.machines.remote_leases import RemoteLedger, RemoteUnavailable
from gitswarm.engine.swarm import Swarm
from gitswarm.model.errors import LeaseLost
from gitswarm.model.records import Task
from gitswarm.store import layout
from gitswarm.store.group_commit import Posted
from gitswarm.store.group_slots import EMPTY, POSTED, TAKEN, Slots
from gitswarm.store.jobs import parse_ops
from gitswarm.store.lease_types import Ask, Lease, Result
from gitswarm.store.locks import held
from tests.conftest import isolation_env
from tests.engine.machines.test_remote_leases import Clock, bare_remote, make_clones

WORKERS = 3


class Machine:
    """Clone a's workers (slots 0..WORKERS-1) and clone b's ledger, over one remote."""

    def __init__(self, root: Path) -> None:
        self.clock = Clock()
        self.bare, (a, b), self.job = make_clones(root, self.clock)
        self.swarms = [a, b] + [Swarm(root / "a", clock=self.clock) for _ in range(WORKERS - 1)]
        self.slots = Slots(WORKERS)
        self.workers: list[RemoteLedger] = []
        for slot, swarm in enumerate([a, *self.swarms[2:]]):
            ledger = RemoteLedger(swarm.ledger, Arbiter(swarm, "origin", sleep=lambda s: None), clock_skew=2.0, clock=self.clock)
            ledger.group = self.slots.seat(slot)
            ledger.busy_siblings = lambda: 0  # nobody waited for: each test posts what it wants taken before
            self.workers.append(ledger)
        self.other = RemoteLedger(b.ledger, Arbiter(b, "origin", sleep=lambda s: None), clock_skew=2.0, clock=self.clock)

    def close(self) -> None:
        for swarm in self.swarms:
            swarm.close()

    def owner(self, slot: int) -> str:
        return f"host.a.w{slot}"

    def claim(self, slot: int) -> Lease:
        lease = self.workers[slot].claim(self.owner(slot), 30.0, self.clock(), job_id=self.job)
        assert lease is not None
        return lease

    def ask(self, slot: int) -> Ask:
        return Ask(self.owner(slot), 30.0, self.job)

    def post(self, slot: int, lease: Lease) -> Posted:
        """What worker `slot` posts before it waits for the push lock (as finish_grouped does)."""
        posted = Posted(lease, Result(ok=True), self.clock(), self.ask(slot), self.workers[slot].holder)
        assert self.slots.seat(slot).post(posted)
        return posted

    def remote_commits(self) -> list[list[tuple[str, str]]]:
        """The operations of each commit of the job on the remote that records any: (tag, task) each."""
        swarm = Swarm(self.bare)
        try:
            tips = [swarm.repo.read_ref(layout.job_ref(self.job)), *swarm.repo.list_refs(f"{layout.CLAIMS_PREFIX}{self.job}/").values()]
            commits = {commit.oid: commit for tip in tips if tip for commit in swarm.repo.walk(tip)}
            found = [[(str(op.__struct_config__.tag), getattr(op, "task", None) or "") for op in parse_ops(c, layout.job_ref(self.job))] for c in commits.values()]
            return [ops for ops in found if ops]
        finally:
            swarm.close()

    def expire_elsewhere(self) -> int:
        """Every lease runs out; the other machine expires them, and clone a fetches that: how many it expired."""
        self.other.arbiter.sync([self.job])
        self.clock.now += 60
        expired = len(self.other.expire(self.clock()))
        self.workers[0].arbiter.sync([self.job])
        return expired

    def finishes(self) -> list[str]:
        return sorted(task for ops in self.remote_commits() for tag, task in ops if tag == "finished")


def offers_of(ledger: RemoteLedger) -> list[frozenset[str]]:
    """The tasks whose refs each push `ledger` offers from now on moves (filled as it pushes)."""
    offered: list[frozenset[str]] = []
    offer = ledger.arbiter.offer

    def counted(job_id: str, tip: str, branch: tuple[str, str] | None = None, tasks: Collection[str] = ()) -> Offered:
        offered.append(frozenset(tasks))
        return offer(job_id, tip, branch, tasks)

    ledger.arbiter.offer = counted  # type: ignore[method-assign]
    return offered


@pytest.fixture
def machine(tmp_path: Path) -> Iterator[Machine]:
    made = Machine(tmp_path)
    yield made
    made.close()


def test_the_siblings_finishes_and_next_claims_travel_in_one_push(machine: Machine) -> None:
    leases = [machine.claim(slot) for slot in range(WORKERS)]
    machine.post(1, leases[1])
    machine.post(2, leases[2])
    done, after = machine.workers[0].finish_and_claim(leases[0], Result(ok=True), machine.clock(), machine.ask(0))
    assert done.state.value == "succeeded" and after is not None
    together = [ops for ops in machine.remote_commits() if ("finished", leases[0].task) in ops]
    assert len(together) == 1
    ops = together[0]
    assert sorted(task for tag, task in ops if tag == "finished") == sorted(lease.task for lease in leases)
    claimed = [task for tag, task in ops if tag == "claimed"]
    assert after.task in claimed and len(claimed) == len(set(claimed))  # each worker's next task, none twice
    # Each sibling finds its answer under the lock: the commit, and the task claimed for it.
    for slot in (1, 2):
        answer = machine.slots.seat(slot).withdraw((machine.job, leases[slot].task, leases[slot].token))
        assert answer is not None and answer.lost is None and answer.tip == machine.workers[0].index.job_tip(machine.job)
        assert answer.claimed is None or answer.claimed in claimed
    assert machine.finishes() == sorted(lease.task for lease in leases)


def test_a_sibling_waiting_on_the_lock_gets_its_finish_pushed_and_its_next_lease(machine: Machine) -> None:
    """Both workers post and wait for the lock (held here); whichever gets it pushes both: one commit, and each
    returns its task finished and a lease of its own claimed with it."""
    leases = [machine.claim(slot) for slot in range(2)]

    def finish(slot: int) -> tuple[Task, Lease | None]:
        return machine.workers[slot].finish_and_claim(leases[slot], Result(ok=True), machine.clock(), machine.ask(slot))

    with ThreadPoolExecutor(2) as pool:
        with held(machine.workers[0].push_lock()):
            futures = []
            for slot in range(2):
                futures.append(pool.submit(finish, slot))
                deadline = time.monotonic() + 10
                while machine.slots.flag(slot) != POSTED and time.monotonic() < deadline:
                    time.sleep(0.005)
                assert machine.slots.flag(slot) == POSTED
        results = [future.result(timeout=30) for future in futures]  # (re-raises what a worker raised)
    for slot, (done, after) in enumerate(results):
        assert done.state.value == "succeeded" and after is not None and after.owner == machine.owner(slot)
    assert results[0][1] is not None and results[1][1] is not None and results[0][1].task != results[1][1].task
    finishing = [ops for ops in machine.remote_commits() if any(tag == "finished" for tag, _ in ops)]
    assert len(finishing) == 1 and machine.finishes() == sorted(lease.task for lease in leases)


def test_a_sibling_whose_lease_was_expired_elsewhere_is_told_so_and_the_others_land(machine: Machine) -> None:
    leases = [machine.claim(slot) for slot in range(2)]
    assert machine.expire_elsewhere() == 2
    lease = machine.claim(0)  # worker 0 claims again (the other machine's expiry fetched); worker 1 does not know yet
    machine.post(1, leases[1])
    machine.workers[0].finish_and_claim(lease, Result(ok=True), machine.clock(), machine.ask(0))
    answer = machine.slots.seat(1).withdraw((machine.job, leases[1].task, leases[1].token))
    assert answer is not None and answer.lost is not None and "no longer held" in answer.lost
    assert machine.finishes() == [lease.task]


def test_the_holder_s_own_lost_lease_leaves_it_out_and_its_sibling_s_finish_lands(machine: Machine) -> None:
    leases = [machine.claim(slot) for slot in range(2)]
    assert machine.expire_elsewhere() == 2
    fresh = machine.claim(1)
    machine.post(1, fresh)
    with pytest.raises(LeaseLost):
        machine.workers[0].finish_and_claim(leases[0], Result(ok=True), machine.clock(), machine.ask(0))
    answer = machine.slots.seat(1).withdraw((machine.job, fresh.task, fresh.token))
    assert answer is not None and answer.lost is None
    assert machine.finishes() == [fresh.task]


def test_a_holder_whose_lease_alone_was_posted_pushes_nothing(machine: Machine) -> None:
    lease = machine.claim(0)
    assert machine.expire_elsewhere() == 1
    before = machine.remote_commits()
    with pytest.raises(LeaseLost):
        machine.workers[0].finish_and_claim(lease, Result(ok=True), machine.clock(), machine.ask(0))
    assert machine.remote_commits() == before


def test_an_unanswered_remote_hands_each_sibling_its_finish_back(machine: Machine, tmp_path: Path) -> None:
    leases = [machine.claim(slot) for slot in range(2)]
    machine.post(1, leases[1])
    away = tmp_path / "away.git"
    machine.bare.rename(away)
    with pytest.raises(RemoteUnavailable):
        machine.workers[0].finish_and_claim(leases[0], Result(ok=True), machine.clock(), machine.ask(0), patient=False)
    assert machine.slots.flag(1) == TAKEN  # taken, not answered: worker 1 finds it so and pushes its own
    assert machine.slots.seat(1).withdraw((machine.job, leases[1].task, leases[1].token)) is None
    away.rename(machine.bare)
    for slot in (1, 0):
        done, _ = machine.workers[slot].finish_and_claim(leases[slot], Result(ok=True), machine.clock(), machine.ask(slot))
        assert done.state.value == "succeeded"
    assert machine.finishes() == sorted(lease.task for lease in leases)


def test_the_holder_waits_a_moment_for_a_busy_sibling_to_post(machine: Machine, monkeypatch: pytest.MonkeyPatch) -> None:
    leases = [machine.claim(slot) for slot in range(2)]
    machine.workers[0].busy_siblings = lambda: 1
    monkeypatch.setattr(finish_group, "GATHER_SECONDS", 5.0)  # (a loaded machine may run the timer late; taken, it ends the wait)
    timer = threading.Timer(0.05, machine.post, (1, leases[1]))  # posts while the holder gathers
    timer.start()
    machine.workers[0].finish_and_claim(leases[0], Result(ok=True), machine.clock(), machine.ask(0))
    timer.join()
    answer = machine.slots.seat(1).withdraw((machine.job, leases[1].task, leases[1].token))
    assert answer is not None and answer.lost is None
    assert [sorted(t for tag, t in ops if tag == "finished") for ops in machine.remote_commits() if ("finished", leases[0].task) in ops] == [
        sorted(lease.task for lease in leases)
    ]


def test_a_heartbeat_waits_for_the_push_lock_a_second_at_most_and_takes_its_post_back(machine: Machine) -> None:
    """From a running task's heartbeat (not patient), a busy lock is waited for TURN_SECONDS; then the post is
    taken back and the finish kept for a later beat, which pushes it."""
    lease = machine.claim(0)
    with held(machine.workers[0].push_lock()):
        started = time.monotonic()
        with pytest.raises(RemoteUnavailable):
            machine.workers[0].finish_and_claim(lease, Result(ok=True), machine.clock(), machine.ask(0), patient=False)
        waited = time.monotonic() - started
    assert finish_group.TURN_SECONDS <= waited < finish_group.TURN_SECONDS + 5
    assert machine.slots.flag(0) == EMPTY and machine.finishes() == []
    done, _ = machine.workers[0].finish_and_claim(lease, Result(ok=True), machine.clock(), machine.ask(0), patient=False)
    assert done.state.value == "succeeded" and machine.finishes() == [lease.task]


def test_a_heartbeat_finds_the_answer_a_holder_left_after_it_gave_up_waiting(machine: Machine) -> None:
    """A heartbeat gave up on the lock while a holder had taken its post: the holder pushes it and answers, and
    the next beat finds that answer instead of pushing the finish again."""
    leases = [machine.claim(slot) for slot in range(2)]
    machine.post(1, leases[1])
    machine.workers[0].finish_and_claim(leases[0], Result(ok=True), machine.clock(), machine.ask(0))  # takes and answers it
    pushes = offers_of(machine.workers[1])
    done, after = machine.workers[1].finish_and_claim(leases[1], Result(ok=True), machine.clock(), machine.ask(1), patient=False)
    assert done.state.value == "succeeded" and pushes == []
    assert after is None or after.owner == machine.owner(1)


def test_a_refused_group_commit_claims_again_from_what_the_refusal_brought(machine: Machine) -> None:
    """The other machine claims the task the group's first build claimed: refused, the commit is built again on
    what the refusal fetched, with the finishes and a claim of the task still queued (the job has four), in one
    more push; the sibling, for whom none is left, is answered with no claim."""
    leases = [machine.claim(slot) for slot in range(2)]
    machine.post(1, leases[1])
    wanted = machine.workers[0]._pick(machine.clock(), machine.job)
    assert wanted is not None
    assert machine.other._claim_chosen(*wanted, "host.b.w1", 30.0, machine.clock()) is not None  # gets there first
    offered = offers_of(machine.workers[0])
    done, after = machine.workers[0].finish_and_claim(leases[0], Result(ok=True), machine.clock(), machine.ask(0))
    assert done.state.value == "succeeded" and after is not None and after.task != wanted[1]
    answer = machine.slots.seat(1).withdraw((machine.job, leases[1].task, leases[1].token))
    assert answer is not None and answer.lost is None and answer.claimed is None
    finished = {leases[0].task, leases[1].task}
    assert len(offered) == 2 and wanted[1] in offered[0] and offered[1] == finished | {after.task}
    assert machine.finishes() == sorted(finished)


def test_a_group_commit_refused_twice_carries_the_finishes_alone(machine: Machine) -> None:
    """Before each of the group's first two pushes the other machine claims a task that push claims: refused
    twice, the third build carries the finishes alone (at a job's end a finish is not held back by claims that
    keep losing); the sibling is answered with no claim, and claims apart."""
    leases = [machine.claim(slot) for slot in range(2)]
    finished = frozenset({leases[0].task, leases[1].task})
    machine.post(1, leases[1])
    arbiter = machine.workers[0].arbiter
    offer = arbiter.offer
    offered: list[frozenset[str]] = []

    def beaten(job_id: str, tip: str, branch: tuple[str, str] | None = None, tasks: Collection[str] = ()) -> Offered:
        offered.append(frozenset(tasks))
        if len(offered) <= finish_group.CLAIM_BUILDS:
            claimed = sorted(set(tasks) - finished)[0]
            assert machine.other._claim_chosen(machine.job, claimed, "host.b.w1", 30.0, machine.clock()) is not None
        return offer(job_id, tip, branch, tasks)

    arbiter.offer = beaten  # type: ignore[method-assign]
    done, after = machine.workers[0].finish_and_claim(leases[0], Result(ok=True), machine.clock(), machine.ask(0))
    assert done.state.value == "succeeded" and after is None
    assert len(offered) == 3 and all(tasks > finished for tasks in offered[:2]) and offered[2] == finished
    answer = machine.slots.seat(1).withdraw((machine.job, leases[1].task, leases[1].token))
    assert answer is not None and answer.lost is None and answer.claimed is None
    assert machine.finishes() == sorted(finished)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(posting=st.lists(st.booleans(), min_size=WORKERS - 1, max_size=WORKERS - 1), lost=st.lists(st.booleans(), min_size=WORKERS - 1, max_size=WORKERS - 1))
def test_every_finish_lands_once_or_is_told_lost(tmp_path_factory: pytest.TempPathFactory, posting: list[bool], lost: list[bool]) -> None:
    """Whichever siblings post, and whichever of their leases the other machine expired first: each live finish
    lands on the remote exactly once, in the holder's commit; each lost one is answered lost and lands nowhere."""
    machine = Machine(tmp_path_factory.mktemp("group"))
    try:
        leases = [machine.claim(slot) for slot in range(WORKERS)]
        gone = [slot for slot in range(1, WORKERS) if lost[slot - 1]]
        if gone:
            assert machine.expire_elsewhere() == WORKERS
            leases[0] = machine.claim(0)
            for slot in range(1, WORKERS):
                if slot not in gone:  # still its: claimed again, as it would have been renewed
                    leases[slot] = machine.claim(slot)
        for slot in range(1, WORKERS):
            if posting[slot - 1]:
                machine.post(slot, leases[slot])
        machine.workers[0].finish_and_claim(leases[0], Result(ok=True), machine.clock(), Ask(machine.owner(0), 30.0, machine.job))
        landed = [leases[0].task]
        for slot in range(1, WORKERS):
            answer = machine.slots.seat(slot).withdraw((machine.job, leases[slot].task, leases[slot].token))
            if not posting[slot - 1]:
                assert answer is None
            elif slot in gone:
                assert answer is not None and answer.lost is not None
            else:
                assert answer is not None and answer.lost is None
                landed.append(leases[slot].task)
        assert machine.finishes() == sorted(landed)
    finally:
        machine.close()


def test_a_machine_s_two_workers_push_their_finishes_together(tmp_path: Path) -> None:
    """Through the real CLI: one machine, two workers, short tasks. Their finishes share commits: one push
    carries both workers' finishes."""
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, **isolation_env(home)}
    bare = bare_remote(tmp_path)
    clone = tmp_path / "m"
    subprocess.run(["git", "clone", "-q", str(bare), str(clone)], check=True, env=env, capture_output=True)
    count = 16
    spec = tmp_path / "spec.toml"
    spec.write_text('goal = "g"\n' + "".join(f'[[tasks]]\nid = "t{i:02d}"\ncommand = "true"\n' for i in range(count)))

    def gitswarm(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "gitswarm", *args], cwd=clone, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    job = json.loads(gitswarm("--json", "submit", "--remote", "origin", str(spec)))["id"]
    gitswarm("--json", "work", "--remote", "origin", "-j", "2", "--until-idle", "--job", job)
    events = json.loads(gitswarm("--json", "log", job))["events"]
    finished = [e for e in events if e["op"] == "finished"]
    assert sorted(e["task"] for e in finished) == [f"t{i:02d}" for i in range(count)]
    owners = {e["record"]["owner"] for e in events if e["op"] == "claimed"}
    assert len(owners) == 2
    by_commit: dict[str, set[str]] = {}
    for e in finished:
        by_commit.setdefault(e["commit"], set()).add(e["task"])
    assert max(len(tasks) for tasks in by_commit.values()) >= 2, "no push carried both workers' finishes"
