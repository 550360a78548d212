"""One suite for every implementation of `Leases` (store/leases.py): the local Ledger, and the
RemoteLedger whose every lease transition a git remote accepts first (engine/machines/remote_leases.py).

A worker only ever talks to `Leases`; whichever it is given, a claim, a renewal, a finish, a finish
with the next claim and an expiry must mean the same thing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gitswarm.engine.machines.arbiter import Arbiter
from gitswarm.engine.machines.remote_leases import RemoteLedger
from gitswarm.engine.swarm import Swarm
from gitswarm.model.errors import LeaseLost
from gitswarm.model.records import TaskState
from gitswarm.store.leases import Ask, Leases, Result
from tests.conftest import clone_of, git, seeded_remote

SPEC = 'goal = "g"\n[[tasks]]\nid = "a"\ncommand = "true"\n[[tasks]]\nid = "b"\ncommand = "true"\n'
TTL = 30.0
LATER = 1000.0  # past any lease's deadline and any clock-skew allowance


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Setup:
    leases: Leases
    job: str
    clock: Clock


@pytest.fixture(params=["local", "remote"])
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Setup]:
    clock = Clock()
    remote = seeded_remote(tmp_path)
    path = clone_of(tmp_path, "clone", remote)
    git(path, "push", "-q", "origin", "HEAD:refs/heads/main")
    swarm = Swarm(path, clock=clock)
    (tmp_path / "spec.toml").write_text(SPEC)
    job = swarm.submit_file(tmp_path / "spec.toml")
    leases: Leases = swarm.ledger
    if request.param == "remote":
        Arbiter(swarm, "origin").publish([job])
        leases = RemoteLedger(swarm.ledger, Arbiter(swarm, "origin", sleep=lambda s: None), clock_skew=2.0, clock=clock)
    yield Setup(leases, job, clock)
    swarm.close()


def test_a_claim_grants_one_holder_each_task_and_then_nothing(setup: Setup) -> None:
    leases, now = setup.leases, setup.clock()
    first = leases.claim("w1", TTL, now, job_id=setup.job)
    second = leases.claim("w2", TTL, now, job_id=setup.job)
    assert first is not None and second is not None
    assert {first.task, second.task} == {"a", "b"} and first.token == second.token == 1
    assert (first.owner, second.owner) == ("w1", "w2")
    assert leases.claim("w3", TTL, now, job_id=setup.job) is None
    assert leases.held(first, now) and leases.held(second, now)


def test_a_renewal_moves_the_deadline_and_a_lease_past_it_is_not_held(setup: Setup) -> None:
    leases, clock = setup.leases, setup.clock
    lease = leases.claim("w1", TTL, clock(), job_id=setup.job)
    assert lease is not None
    clock.now += TTL / 2
    renewed = leases.renew(lease, TTL, clock())
    assert renewed.expires > lease.expires and renewed.token == lease.token
    assert leases.held(renewed, lease.expires + 1)
    assert not leases.held(renewed, renewed.expires + 1)


def test_a_finish_with_the_current_token_is_accepted(setup: Setup) -> None:
    leases, now = setup.leases, setup.clock()
    lease = leases.claim("w1", TTL, now, job_id=setup.job)
    assert lease is not None
    task = leases.finish(lease, True, now + 1)
    assert task.state is TaskState.SUCCEEDED and task.claims == 1
    assert not leases.held(lease, now + 1)


def test_an_expired_lease_is_requeued_and_its_late_finish_refused(setup: Setup) -> None:
    leases, clock = setup.leases, setup.clock
    lease = leases.claim("w1", TTL, clock(), job_id=setup.job)
    assert lease is not None
    clock.now += LATER
    assert (setup.job, lease.task) in leases.expire(clock(), setup.job)
    with pytest.raises(LeaseLost):
        leases.finish(lease, True, clock())
    claimed = [leases.claim("w2", TTL, clock(), job_id=setup.job) for _ in range(2)]
    [again] = [c for c in claimed if c is not None and c.task == lease.task]
    assert again.token == 2  # the same task came round again, fenced by a new token


def test_expiring_an_owner_ends_every_lease_it_holds_whatever_the_deadline(setup: Setup) -> None:
    leases, now = setup.leases, setup.clock()
    held = [leases.claim("dead", TTL, now, job_id=setup.job) for _ in range(2)]
    assert all(lease is not None for lease in held)
    if isinstance(leases, RemoteLedger):
        pytest.skip("through a remote, only a deadline past the clock-skew allowance ends a lease (docs/many-machines.md)")
    assert sorted(leases.expire(now, setup.job, owner="dead")) == [(setup.job, "a"), (setup.job, "b")]


def test_a_finish_claims_the_next_task_with_it_when_asked(setup: Setup) -> None:
    leases, now = setup.leases, setup.clock()
    lease = leases.claim("w1", TTL, now, job_id=setup.job)
    assert lease is not None
    task, nxt = leases.finish_and_claim(lease, Result(True), now + 1, Ask("w1", TTL, setup.job))
    assert task.state is TaskState.SUCCEEDED
    assert nxt is not None and nxt.task != lease.task and nxt.owner == "w1" and leases.held(nxt, now + 1)
    done, none = leases.finish_and_claim(nxt, Result(False, "boom", retryable=False), now + 2, None)
    assert none is None and done.state is TaskState.FAILED and done.error == "boom"


def test_a_refused_finish_claims_nothing(setup: Setup) -> None:
    leases, clock = setup.leases, setup.clock
    lease = leases.claim("w1", TTL, clock(), job_id=setup.job)
    assert lease is not None
    clock.now += LATER
    leases.expire(clock(), setup.job)
    with pytest.raises(LeaseLost):
        leases.finish_and_claim(lease, Result(True), clock(), Ask("w1", TTL, setup.job))
    assert leases.claim("w2", TTL, clock(), job_id=setup.job) is not None  # both tasks are still there to claim
    assert leases.claim("w3", TTL, clock(), job_id=setup.job) is not None


def test_problems_are_reported_to_whoever_listens_and_a_landed_write_says_nothing(setup: Setup) -> None:
    heard: list[str] = []
    setup.leases.report_problems(heard.append)
    lease = setup.leases.claim("w1", TTL, setup.clock(), job_id=setup.job)
    assert lease is not None and heard == []
