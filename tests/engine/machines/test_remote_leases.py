"""The remote-arbitrated ledger, step by step: two clones of one bare repository, each with its own
RemoteLedger, claiming, renewing, expiring and finishing through real pushes and fetches.

The remote is a bare repository on disk (the transport is the same git CLI; tests/engine/
test_many_machines.py drives the network one). The hypothesis state machine that interleaves
machines' operations (three of them) is in test_claim_refs.py.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Collection, Iterator
from pathlib import Path

import msgspec
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gitswarm.engine.jobs.run import write_summary
from gitswarm.engine.machines.arbiter import Arbiter, Backoff, Offered, refusal
from gitswarm.engine.machines.crew import BUSY, IDLE, PROBLEM_BYTES, RESERVATION_SECONDS, RESERVED, Siblings
from gitswarm.engine.machines.remote_leases import RemoteLedger
from gitswarm.engine.machines.task_order import claim_order, home_worker
from gitswarm.engine.swarm import Swarm
from gitswarm.model.errors import LeaseLost
from gitswarm.model.ops import TaskClaimed
from gitswarm.store import layout
from gitswarm.store.holders import this_process
from gitswarm.store.jobs import Snapshot, parse_ops
from gitswarm.store.lease_ends import dead_holders
from gitswarm.store.lease_types import Ask, Built, Result
from tests.conftest import git

TASKS = 4
SPEC = 'goal = "g"\n' + "".join(f'[[tasks]]\nid = "t{i}"\ncommand = "true"\n' for i in range(TASKS))


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def bare_remote(root: Path) -> Path:
    """A bare repository at root/remote.git whose main branch holds one commit."""
    bare = root / "remote.git"
    git(root, "init", "-q", "--bare", "-b", "main", str(bare))
    seed = root / "seed"
    seed.mkdir()
    git(seed, "init", "-q", "-b", "main")
    (seed / "README.md").write_text("x\n")
    git(seed, "add", "-A")
    git(seed, "commit", "-qm", "init")
    git(seed, "push", "-q", str(bare), "main")
    return bare


def make_clones(root: Path, clock: Clock, spec: str = SPEC) -> tuple[Path, list[Swarm], str]:
    """A bare remote holding one job (of TASKS shell tasks, or `spec`), and two clones that know it."""
    bare = bare_remote(root)
    swarms = []
    for name in ("a", "b"):
        git(root, "clone", "-q", str(bare), name)
        swarms.append(Swarm(root / name, clock=clock))
    (root / "spec.toml").write_text(spec)
    job = swarms[0].submit_file(root / "spec.toml")
    Arbiter(swarms[0], "origin").publish([job])
    Arbiter(swarms[1], "origin").sync()
    swarms[1].ledger.trusted_remotes = frozenset({"origin"})
    return bare, swarms, job


def remote_ops(bare: Path, job: str) -> list:
    """Every operation of the job's history on the remote (its ref and its tasks' claim refs), each once,
    in the order the job's history applies them (read with the remote's own git)."""
    swarm = Swarm(bare)
    try:
        tips = [swarm.repo.read_ref(layout.job_ref(job)), *swarm.repo.list_refs(f"{layout.CLAIMS_PREFIX}{job}/").values()]
        ops = {op.id: op for tip in tips if tip for commit in swarm.repo.walk(tip) for op in parse_ops(commit, layout.job_ref(job))}
        return sorted(ops.values(), key=lambda op: op.order_key())
    finally:
        swarm.close()


@pytest.fixture
def clones(tmp_path: Path) -> Iterator[tuple[Path, list[RemoteLedger], str, Clock]]:
    clock = Clock()
    bare, swarms, job = make_clones(tmp_path, clock)
    ledgers = [RemoteLedger(s.ledger, Arbiter(s, "origin", sleep=lambda s: None), clock_skew=2.0, clock=clock) for s in swarms]
    yield bare, ledgers, job, clock
    for swarm in swarms:
        swarm.close()


def test_of_two_clones_claiming_the_last_task_one_gets_it(clones: tuple) -> None:
    bare, (a, b), job, clock = clones
    leases = []
    for _ in range(TASKS):
        leases.append(a.claim("a.w1", 30.0, clock(), job_id=job))
    assert b.claim("b.w1", 30.0, clock(), job_id=job) is None  # b's view was stale: refused, fetched, nothing left
    assert all(lease is not None for lease in leases)
    claims = [op for op in remote_ops(bare, job) if op.__struct_config__.tag == "claimed"]
    assert sorted(op.task for op in claims) == [f"t{i}" for i in range(TASKS)]


def test_a_finish_whose_claim_lost_a_race_claims_another_on_its_next_push(clones: tuple) -> None:
    """A finish carries the worker's next claim; refused because another machine claimed that task first, the
    finish is pushed again with a claim of another task, picked from what the refusal fetched."""
    bare, (a, b), job, clock = clones
    lease = a.claim("a.w1", 30.0, clock(), job_id=job)
    assert lease is not None
    wanted = a._pick(clock(), job)  # what a's (stale) view claims next
    assert wanted is not None
    assert b._claim_chosen(*wanted, "b.w1", 30.0, clock()) is not None  # b gets there first
    offers = []
    offer = a.arbiter.offer
    a.arbiter.offer = lambda *args, **kw: offers.append(args[3] if len(args) > 3 else kw.get("tasks")) or offer(*args, **kw)
    done, after = a.finish_and_claim(lease, Result(ok=True), clock(), Ask("a.w1", 30.0, job))
    assert done.state.value == "succeeded" and after is not None and after.task not in (lease.task, wanted[1])
    assert [sorted(tasks) for tasks in offers] == [sorted([lease.task, wanted[1]]), sorted([lease.task, after.task])]
    claims = sorted(op.task for op in remote_ops(bare, job) if op.__struct_config__.tag == "claimed")
    assert claims == sorted([lease.task, wanted[1], after.task])


def test_a_finish_whose_claims_lost_twice_lands_alone_on_its_next_push(clones: tuple) -> None:
    """Refused twice because another machine claimed, each time, the task the finish's commit claimed: the finish
    is pushed alone (its own ref is uncontended), not held back while claims keep losing (a job's end)."""
    bare, (a, b), job, clock = clones
    lease = a.claim("a.w1", 30.0, clock(), job_id=job)
    assert lease is not None
    offers: list[frozenset[str]] = []
    offer = a.arbiter.offer

    def beaten(job_id: str, tip: str, branch: tuple[str, str] | None = None, tasks: Collection[str] = ()) -> Offered:
        offers.append(frozenset(tasks))
        if len(offers) <= 2:  # b claims, first, the task this push claims
            assert b._claim_chosen(job_id, sorted(set(tasks) - {lease.task})[0], "b.w1", 30.0, clock()) is not None
        return offer(job_id, tip, branch, tasks)

    a.arbiter.offer = beaten
    done, after = a.finish_and_claim(lease, Result(ok=True), clock(), Ask("a.w1", 30.0, job))
    assert done.state.value == "succeeded" and after is None  # a task is still queued: none claimed with it
    assert len(offers) == 3 and all(len(tasks) == 2 for tasks in offers[:2]) and offers[2] == {lease.task}
    finishes = [op for op in remote_ops(bare, job) if op.__struct_config__.tag == "finished"]
    assert [op.task for op in finishes] == [lease.task]


def test_a_claim_is_on_the_remote_before_it_is_here(clones: tuple) -> None:
    bare, (a, _), job, clock = clones
    lease = a.claim("a.w1", 30.0, clock(), job_id=job)
    assert lease is not None
    remote_tip = git(bare, "rev-parse", layout.claim_ref(job, lease.task)).strip()  # the task's claim ref
    assert a.refs.repo.read_ref(layout.job_ref(job)) == remote_tip
    # the lease is the task's timeout plus the grace, at most --lease
    assert lease.expires == clock() + 30.0


def test_a_finish_after_another_clone_expired_the_lease_is_refused(clones: tuple) -> None:
    bare, (a, b), job, clock = clones
    lease = a.claim("a.w1", 6.0, clock(), job_id=job)
    assert lease is not None
    b.arbiter.sync([job])
    assert b.expire(clock()) == []  # not past its deadline
    clock.now += 7.0
    assert b.expire(clock()) == []  # past it, but within the clock skew (2 s)
    clock.now += 1.5
    assert b.expire(clock()) == [(job, lease.task)]
    with pytest.raises(LeaseLost):
        a.finish(lease, True, clock())
    ops = [op.__struct_config__.tag for op in remote_ops(bare, job)]
    assert ops.count("expired") == 1 and "finished" not in ops


def test_a_renewal_keeps_the_lease_from_being_expired(clones: tuple) -> None:
    bare, (a, b), job, clock = clones
    lease = a.claim("a.w1", 6.0, clock(), job_id=job)
    clock.now += 4.0
    renewed = a.renew(lease, 6.0, clock())
    assert renewed.expires == clock() + 6.0
    clock.now += 5.0  # past the first deadline, not the renewed one
    b.arbiter.sync([job])
    assert b.expire(clock()) == []
    a.finish(renewed, True, clock())
    ops = [op.__struct_config__.tag for op in remote_ops(bare, job)]
    assert ops[-3:] == ["claimed", "renewed", "finished"]


def test_a_renewal_is_held_here_past_the_first_deadline(clones: tuple) -> None:
    """The renewing clone's own index takes the renewed deadline (its heartbeat asks it every tick)."""
    _, (a, _), job, clock = clones
    lease = a.claim("a.w1", 6.0, clock(), job_id=job)
    clock.now += 3.0
    renewed = a.renew(lease, 6.0, clock())
    clock.now += 4.0  # past the claim's deadline, inside the renewal's
    assert a.held(renewed, clock())
    clock.now += 3.0  # past the renewal's: not held, though the others wait the skew too
    assert not a.held(renewed, clock())


def test_a_push_the_remote_refuses_for_good_is_said_and_not_retried_as_a_race(clones: tuple) -> None:
    bare, (a, _), job, clock = clones
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'no pushes today' >&2\nexit 1\n")
    hook.chmod(0o755)
    heard: list[str] = []
    a.on_problem = heard.append
    syncs = []
    fetch = a.arbiter.try_sync
    a.arbiter.try_sync = lambda jobs=None: syncs.append(jobs) or fetch(jobs)  # type: ignore[method-assign]
    assert a.claim("a.w1", 30.0, clock(), job_id=job) is None
    assert syncs == [] and heard and "refused the push" in heard[-1] and "hook declined" in heard[-1]
    hook.unlink()
    assert a.claim("a.w1", 30.0, clock(), job_id=job) is not None
    assert heard[-1] == ""  # pushes land again: said so


def test_a_stale_lock_on_the_remote_is_said_not_taken_for_a_lost_race(clones: tuple) -> None:
    """A crashed git left the claim refs' locks on the server: every push says "cannot lock ref", as a lost
    race would, but nobody moved the ref. Said at once, not retried 64 times in silence."""
    bare, (a, _), job, clock = clones
    locks = [bare / f"{layout.claim_ref(job, f't{i}')}.lock" for i in range(TASKS)]
    for lock in locks:
        lock.parent.mkdir(parents=True, exist_ok=True)
        lock.write_text("")
    heard: list[str] = []
    a.on_problem = heard.append
    offers = []
    offer = a.arbiter.offer
    a.arbiter.offer = lambda *args, **kw: offers.append(args) or offer(*args, **kw)  # type: ignore[method-assign]
    assert a.claim("a.w1", 30.0, clock(), job_id=job) is None
    assert len(offers) == 1 and heard and "refused the push" in heard[-1]  # receive-pack: "atomic transaction failed"
    for lock in locks:
        lock.unlink()
    assert a.claim("a.w1", 30.0, clock(), job_id=job) is not None and heard[-1] == ""


def test_claims_for_siblings_go_in_one_push(clones: tuple) -> None:
    bare, (a, _), job, clock = clones
    before = int(git(bare, "rev-list", "--count", layout.job_ref(job)))
    leases = a.claim_for(["a.w1", "a.w2", "a.w3"], 30.0, clock(), job)
    assert [lease.owner for lease in leases] == ["a.w1", "a.w2", "a.w3"]
    assert len({lease.task for lease in leases}) == 3
    # One commit, pushed to the three tasks' claim refs at once.
    tips = {git(bare, "rev-parse", layout.claim_ref(job, lease.task)).strip() for lease in leases}
    assert len(tips) == 1 and int(git(bare, "rev-list", "--count", tips.pop())) == before + 1
    assert a.assigned("a.w2") is not None and a.assigned("a.w2").task == leases[1].task  # type: ignore[union-attr]


def test_an_unreachable_remote_is_said_and_nothing_moves(clones: tuple, tmp_path: Path) -> None:
    bare, (a, _), job, clock = clones
    tip = a.refs.repo.read_ref(layout.job_ref(job))
    bare.rename(tmp_path / "gone.git")
    assert a.claim("a.w1", 30.0, clock(), job_id=job) is None
    assert a.refs.repo.read_ref(layout.job_ref(job)) == tip
    assert a.arbiter.offer(job, tip) is Offered.UNREACHABLE and a.arbiter.said


@pytest.mark.parametrize(
    ("lines", "raced"),
    [
        (["!\tabc:refs/swarm/jobs/j\t[rejected] (fetch first)"], True),
        (["!\tabc:refs/swarm/jobs/j\t[rejected] (non-fast-forward)"], True),
        (["!\tabc:refs/swarm/branches/j/t\t[rejected] (stale info)", "!\tabc:refs/swarm/jobs/j\t[rejected] (atomic push failed)"], True),
        (["!\tabc:refs/swarm/jobs/j\t[remote rejected] (atomic transaction failed)"], True),  # the server's CAS under its lock
        (["!\tabc:refs/swarm/jobs/j\t[remote rejected] (cannot lock ref 'refs/swarm/jobs/j': is at 1 but expected 2)"], True),
        (["!\tabc:refs/swarm/jobs/j\t[remote rejected] (pre-receive hook declined)"], False),
        (["!\tabc:refs/swarm/jobs/j\t[remote rejected] (protected branch hook declined)"], False),
    ],
)
def test_a_refused_push_is_a_lost_race_only_when_it_says_so(lines: list[str], raced: bool) -> None:
    assert refusal(lines)[0] is raced


def test_backoff_is_jittered_and_capped() -> None:
    backoff = Backoff(base=0.1, cap=1.0)
    waits = [backoff.next() for _ in range(8)]
    assert 0.05 <= waits[0] <= 0.1 and all(w <= 1.0 for w in waits) and waits[-1] >= 0.5
    backoff.reset()
    assert backoff.next() <= 0.1


def test_backoff_after_hours_of_failures_still_waits_its_cap() -> None:
    backoff = Backoff(base=0.5, cap=5.0, failures=5000)  # 2.0**5000 would overflow a float
    assert 2.5 <= backoff.next() <= 5.0


def test_siblings_reserve_idle_workers_once() -> None:
    siblings = Siblings(3)
    for slot, name in enumerate(("x.w1", "x.w2", "x.w3")):
        siblings.seat(slot, name)
    siblings.idle(1)
    siblings.idle(2)
    assert siblings.reserve(0) == [1, 2] and siblings.state(1) == RESERVED
    assert siblings.reserve(1) is None  # a sibling claims for it: it waits for that claim
    assert siblings.reserve(2) is None
    siblings.release([1, 2])
    assert [siblings.state(i) for i in range(3)] == [BUSY, IDLE, IDLE]
    assert siblings.name(2) == "x.w3"


def test_what_a_forked_worker_says_of_its_pushes_its_supervisor_reads() -> None:
    siblings = Siblings(2)
    siblings.seat(0, "x.w1")
    siblings.seat(1, "x.w2")
    pid = os.fork()
    if pid == 0:  # worker 1: lost two races, and its pushes stopped landing (a message longer than the slot)
        try:
            siblings.lost_race(1)
            siblings.lost_race(1)
            siblings.report(1, "remote refused the push: " + "x" * 2000)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert siblings.races() == 2
    said = siblings.problem()
    assert said.startswith("remote refused the push: x") and len(said) == PROBLEM_BYTES - 1
    assert siblings.name(1) == "x.w2" and siblings.state(0) == BUSY  # its neighbours in memory untouched
    siblings.report(1, "")
    assert siblings.problem() == ""
    siblings.seat(1, "x.w3")  # a replacement: the last one's name and problem go
    assert siblings.name(1) == "x.w3"


def test_a_reservation_whose_claimer_died_is_taken_back(monkeypatch: pytest.MonkeyPatch) -> None:
    siblings = Siblings(2)
    siblings.seat(0, "x.w1")
    siblings.seat(1, "x.w2")
    siblings.idle(1)
    assert siblings.reserve(0) == [1]  # worker 0 claims for 1, then dies before it releases it
    assert siblings.reserve(1) is None
    later = time.monotonic() + RESERVATION_SECONDS + 1
    monkeypatch.setattr(time, "monotonic", lambda: later)
    assert siblings.reserve(1) == []  # taken back: it claims for itself


def test_the_remote_tip_is_what_the_clones_hold_after_a_sync(clones: tuple) -> None:
    bare, (a, b), job, clock = clones
    lease = a.claim("a.w1", 30.0, clock(), job_id=job)
    a.finish(lease, True, clock())
    b.arbiter.sync([job])
    tip = subprocess.run(["git", "rev-parse", layout.claim_ref(job, lease.task)], cwd=bare, capture_output=True, text=True).stdout.strip()
    assert a.refs.repo.read_ref(layout.job_ref(job)) == tip == b.refs.repo.read_ref(layout.job_ref(job))


def test_machines_finishing_a_job_together_record_one_summary(clones: tuple) -> None:
    bare, (a, b), job, clock = clones
    for _ in range(TASKS):
        lease = a.claim("a.w1", 30.0, clock(), job_id=job)
        a.finish(lease, True, clock())
    b.arbiter.sync([job])  # both clones see the job finished; neither has a summary yet
    first = write_summary(a.arbiter.swarm, job, a)
    assert first is not None
    # b built its summary on what it last fetched: its push is refused, and what that brings holds a's
    assert write_summary(b.arbiter.swarm, job, b) == first
    summaries = [op for op in remote_ops(bare, job) if op.__struct_config__.tag == "artifacts"]
    assert [op.artifacts for op in summaries] == [(first,)]
    remote_tip = git(bare, "rev-parse", layout.job_ref(job)).strip()
    for ledger in (a, b):  # each holds the remote's tip, and knows it does: the publish that ends a run pushes nothing
        assert ledger.refs.repo.read_ref(layout.job_ref(job)) == remote_tip
        assert ledger.arbiter.publish([job]) == []


def test_a_job_retried_elsewhere_since_it_was_seen_finished_is_not_summarized(clones: tuple) -> None:
    bare, (a, b), job, clock = clones
    for n in range(TASKS):
        lease = a.claim("a.w1", 30.0, clock(), job_id=job)
        a.finish(lease, n > 0, clock(), error=None if n else "broke", retryable=False)
    b.arbiter.sync([job])  # b sees the job failed
    failed = next(t for t in a.refs.snapshot(job).tasks() if t.state.value == "failed")
    a.retry(job, failed.id, clock())  # a retries the failed task and publishes it: the job runs again
    assert a.arbiter.publish([job]) == [job]
    # b's offer of a summary is refused (the job's ref moved), and the fetch brings a job no longer finished
    assert write_summary(b.arbiter.swarm, job, b) is None
    assert [op for op in remote_ops(bare, job) if op.__struct_config__.tag == "artifacts"] == []


@settings(max_examples=80, deadline=None)
@given(
    workers=st.lists(st.text("abcdefgh.-0123", min_size=3, max_size=12), min_size=1, max_size=8, unique=True),
    joining=st.text("abcdefgh.-0123", min_size=3, max_size=12),
)
def test_a_worker_joining_takes_tasks_only_from_the_others_shares(workers: list[str], joining: str) -> None:
    """Rendezvous hashing (task_order.home_worker): a task's home is one of the workers, the same whatever
    their order, and a worker joining takes tasks from the others without moving any between them."""
    tasks = [f"t{n}" for n in range(200)]
    before = {task: home_worker(workers, task) for task in tasks}
    assert set(before.values()) <= set(workers)
    assert before == {task: home_worker(list(reversed(workers)), task) for task in tasks}
    after = {task: home_worker([*workers, joining], task) for task in tasks}
    assert all(after[task] in (before[task], joining) for task in tasks)
    if len(set(workers)) == 1 and joining not in workers:
        assert 40 < sum(1 for task in tasks if after[task] == joining) < 160  # about half of one worker's


names = st.text("abcdefgh.-0123", min_size=3, max_size=12)


@settings(max_examples=80, deadline=None)
@given(me=names, owner=names, count=st.integers(1, 80), taken=st.integers(0, 79), lag=st.integers(0, 80), mine=st.integers(0, 3))
def test_a_worker_takes_its_own_tasks_first_and_another_s_from_the_end_of_its_order(
    me: str, owner: str, count: int, taken: int, lag: int, mine: int,
) -> None:
    """claim_order: a worker's own tasks before any other's; of another worker's, the last in that worker's order.
    The owner took its first `taken` tasks and the thief's view still holds the last `lag` of them: whatever the
    lag, the thief never takes a task the owner took, while the owner has one left."""
    assume(me != owner and taken < count)
    tasks = [f"job/t{n}" for n in range(count)]
    own = [f"job/m{n}" for n in range(mine)]
    if own:
        assert min([*tasks, *own], key=lambda task: claim_order(me, me if task in own else owner, task)) in own
    owners_order = sorted(tasks, key=lambda task: claim_order(owner, owner, task))  # the owner works from the front
    view = owners_order[max(0, taken - lag) :]
    stolen = min(view, key=lambda task: claim_order(me, owner, task))
    assert stolen == owners_order[-1] and stolen not in owners_order[:taken]


def test_thieves_spread_over_the_workers_they_take_from() -> None:
    victims = [f"host.abc{n}.w0" for n in range(8)]
    preferred = {min(victims, key=lambda v: claim_order(thief, v, "job/t")[:2]) for thief in (f"host.xyz{n}.w1" for n in range(40))}
    assert len(preferred) >= 5  # rendezvous over (thief, owner): not every thief after the same worker's tasks


def test_a_claim_another_machine_made_in_a_worker_s_name_here_is_not_taken_as_assigned(clones: tuple) -> None:
    """A worker takes a lease a sibling claimed for it by its name; another machine (an allowed key, and what
    it pushes is its own to write) that claims a task naming a worker of this machine is not a sibling: the
    lease is held by that machine's key, and a worker here that ran it would finish it in a commit signed by
    another key, which every clone refuses."""
    _, (a, b), job, clock = clones
    lease = b._claim_chosen(job, "t1", "a.w2", 30.0, clock())  # b's claim, in the name of a's worker
    assert lease is not None and lease.owner == "a.w2"
    a.arbiter.sync([job])
    assert a.index.lease(job, "t1") is not None  # a sees it held, as it is: by b's key
    assert a.assigned("a.w2") is None
    # A sibling's claim for the same worker, beside it, is still found.
    mine = a.claim_for(["a.w1", "a.w2"], 30.0, clock(), job)
    assert [lease.owner for lease in mine] == ["a.w1", "a.w2"]
    found = a.assigned("a.w2")
    assert found is not None and found.task == mine[1].task != "t1"


def test_a_worker_here_that_stops_expires_only_the_leases_its_machine_s_key_claimed(clones: tuple) -> None:
    """A stopped worker's leases are expired at once, no attempt used; another machine's claim in that worker's
    name is not among them (its expiry, before its deadline and signed by another key, every clone refuses)."""
    bare, (a, b), job, clock = clones
    assert b._claim_chosen(job, "t1", "a.w2", 30.0, clock()) is not None  # b's lease, in a's worker's name
    mine = a.claim_for(["a.w1", "a.w2"], 30.0, clock(), job)[1]
    assert mine.owner == "a.w2"
    assert a.expire(clock(), owner="a.w2") == [(job, mine.task)]
    expired = [op.task for op in remote_ops(bare, job) if op.__struct_config__.tag == "expired"]
    assert expired == [mine.task]
    b.arbiter.sync([job])  # what a pushed passes b's checks
    assert b.index.lease(job, "t1") is not None and job not in b.arbiter.refused_jobs()


def test_a_local_run_never_ends_a_lease_another_machine_s_key_claimed(clones: tuple) -> None:
    """Another machine's claim (naming its key) that copies a local worker's name and a holder process of this
    machine that is dead: this clone's own ledger (a local run, `recover`) ends neither by the name nor by the
    dead process, and writes nothing; ended here before its deadline, unsigned, every clone would refuse the job."""
    _, (a, b), job, clock = clones
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead_here = msgspec.structs.replace(this_process(), pid=gone.pid, start=1)

    def build(s: Snapshot) -> Built:  # b's claim, naming its key, and a holder (b's own claims name none)
        return b.refs.next_op(
            TaskClaimed, s, clock(), task="t1", token=1, owner="w-local01", lease_expires=clock() + 30.0,
            key=b.arbiter.machine.public, holder=dead_here,
        ), ()

    b.offer(job, build)
    a.arbiter.sync([job])
    swarm = a.arbiter.swarm  # this clone's own ledger and index: what a local run and `recover` end leases with
    swarm.rebuild_index()  # (a pull takes no holder into the index; a rebuild reads the claims')
    tip = a.refs.repo.read_ref(layout.job_ref(job))
    assert dead_holders(swarm.index) == []  # a holder a keyed claim names is not taken: it was copied
    assert swarm.recover()["expired"] == []
    assert swarm.ledger.expire(clock(), owner="w-local01") == []
    assert a.refs.repo.read_ref(layout.job_ref(job)) == tip


def test_a_finish_built_again_judges_its_next_claim_at_the_time_of_that_build(tmp_path: Path) -> None:
    """A finish refused for its claim is built again with a claim of another task, judged when built again: the
    job's wall-time budget ran out meanwhile (its push waited, say, for an outage), so the rebuilt finish claims
    nothing, though the budget was not spent when the worker finished."""
    clock = Clock()
    _, swarms, job = make_clones(tmp_path, clock, SPEC.replace('goal = "g"\n', 'goal = "g"\n[budget]\nmax_wall = "60s"\n'))
    try:
        a, b = (RemoteLedger(s.ledger, Arbiter(s, "origin", sleep=lambda s: None), clock_skew=2.0, clock=clock) for s in swarms)
        lease = a.claim("a.w1", 30.0, clock(), job_id=job)
        assert lease is not None
        wanted = a._pick(clock(), job)
        assert wanted is not None and b._claim_chosen(*wanted, "b.w1", 30.0, clock()) is not None  # a's claim will lose
        finished_at = clock()
        offers: list[frozenset[str]] = []
        offer = a.arbiter.offer

        def late(job_id: str, tip: str, branch: tuple[str, str] | None = None, tasks: Collection[str] = ()) -> Offered:
            offers.append(frozenset(tasks))
            clock.now += 120  # the budget's 60 s run out while this push is on its way
            return offer(job_id, tip, branch, tasks)

        a.arbiter.offer = late  # type: ignore[method-assign]
        done, after = a.finish_and_claim(lease, Result(ok=True), finished_at, Ask("a.w1", 30.0, job))
        assert done.state.value == "succeeded" and after is None
        assert len(offers) == 2 and wanted[1] in offers[0] and offers[1] == {lease.task}
    finally:
        for swarm in swarms:
            swarm.close()
