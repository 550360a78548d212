"""A finish and the worker's next claim on the same job share one commit."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from gitswarm.engine.swarm import Swarm
from gitswarm.model.errors import CorruptRecord, LeaseLost
from gitswarm.model.ops import TaskClaimed, TaskFinished
from gitswarm.store.gitrepo import CommitInfo
from gitswarm.store.jobs import parse_ops
from gitswarm.store.leases import Ask, Result
from tests.conftest import cli, git, spec_text


def commits(repo: Path, job: str) -> list[str]:
    return git(repo, "rev-list", f"refs/swarm/jobs/{job}").split()


def test_finish_and_next_claim_are_one_commit_with_both_ops(swarm: Swarm, repo: Path) -> None:
    job = swarm.submit_text(spec_text('id = "a"\ncommand = "true"', 'id = "b"\ncommand = "true"'))
    now = time.time()
    lease = swarm.ledger.claim("w", 30, now)
    assert lease is not None
    before = commits(repo, job)
    task, nxt = swarm.ledger.finish_and_claim(lease, Result(True), now + 1, Ask("w", 30))
    assert task.state.value == "succeeded"
    assert nxt is not None and nxt.task != lease.task and nxt.token == 1
    after = commits(repo, job)
    assert len(after) == len(before) + 1  # one commit for both operations
    message = git(repo, "log", "-1", "--format=%B", f"refs/swarm/jobs/{job}")
    assert message.splitlines()[0] == f"finished {lease.task}; claimed {nxt.task}"
    ops = [op for _, op in swarm.refs.history(job)]
    assert [type(op) for op in ops[-2:]] == [TaskFinished, TaskClaimed]
    assert ops[-1].clock == ops[-2].clock + 1
    # The index mirrors both: the first task's lease is gone, the second's is held.
    assert swarm.index.lease(job, lease.task) is None
    assert swarm.index.lease(job, nxt.task).token == nxt.token
    log = cli(repo, "--json", "log", job)
    assert log.code == 0
    events = json.loads(log.out)["events"]
    assert [e["op"] for e in events][-2:] == ["finished", "claimed"]
    assert events[-1]["commit"] == events[-2]["commit"] == after[0]


def test_the_next_claim_sees_the_dependent_the_finish_unblocks(swarm: Swarm) -> None:
    job = swarm.submit_text(
        spec_text('id = "a"\ncommand = "true"', 'id = "b"\ncommand = "true"\ndepends_on = ["a"]\npriority = 5',
                  'id = "c"\ncommand = "true"')
    )
    now = time.time()
    lease = swarm.ledger.claim("w", 30, now, job_id=job)
    while lease is not None and lease.task != "a":  # take c out of the way if it came first
        lease = swarm.ledger.finish_and_claim(lease, Result(True), now, Ask("w", 30))[1]
    assert lease is not None and lease.task == "a"
    _, nxt = swarm.ledger.finish_and_claim(lease, Result(True), now + 1, Ask("w", 30))
    assert nxt is not None and nxt.task == "b"  # unblocked by this finish, and of the higher priority
    assert swarm.index.task_state(job, "b") == "running"


def test_a_refused_finish_claims_nothing_and_writes_nothing(swarm: Swarm, repo: Path) -> None:
    job = swarm.submit_text(spec_text('id = "a"\ncommand = "true"', 'id = "b"\ncommand = "true"'))
    now = time.time()
    lease = swarm.ledger.claim("w", 1, now)
    before = commits(repo, job)
    with pytest.raises(LeaseLost):
        swarm.ledger.finish_and_claim(lease, Result(True), now + 5, Ask("w", 30))  # past its expiry
    assert commits(repo, job) == before
    assert swarm.index.task_state(job, "b" if lease.task == "a" else "a") == "queued"


def test_a_commit_that_records_no_operation_is_corrupt() -> None:
    commit = CommitInfo(oid="0" * 40, tree="1" * 40, parents=(), message="finished a\n\n", time=0)
    with pytest.raises(CorruptRecord, match="records no operation"):
        parse_ops(commit, "refs/swarm/jobs/x")
