"""Claims that do not all fight over one ref: each task's lease history on its own claim ref.

Three clones of one bare remote race through real pushes and fetches, driven
by a hypothesis state machine in any interleaving: each task has one holder
at a time, a stale finish is refused (fencing), a machine that loses a race
gets another task when one is queued (nobody starves), and every clone that
fetched everything holds the same state.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from gitswarm.engine.jobs.run import write_summary
from gitswarm.engine.machines.arbiter import Arbiter, RemoteRefused, machine_owner
from gitswarm.engine.machines.remote_leases import RemoteLedger
from gitswarm.engine.swarm import Swarm
from gitswarm.model.errors import InvalidTransition, LeaseLost
from gitswarm.model.records import TaskState
from gitswarm.model.replay import Replay, replay
from gitswarm.store import job_merge, layout
from gitswarm.store.job_merge import check_tip
from gitswarm.store.lease_types import Ask, Result
from gitswarm.store.leases import Lease
from tests.conftest import git
from tests.engine.machines.test_remote_leases import Clock, make_clones, remote_ops
from tests.forge import commit_tree, hash_object, tree_files, write_tree

MACHINES = 3


def add_clone(root: Path, bare: Path, name: str, clock: Clock) -> Swarm:
    git(root, "clone", "-q", str(bare), name)
    swarm = Swarm(root / name, clock=clock)
    Arbiter(swarm, "origin").sync()
    swarm.ledger.trusted_remotes = frozenset({"origin"})
    return swarm


@pytest.fixture
def three(tmp_path: Path):  # type: ignore[no-untyped-def]
    clock = Clock()
    bare, swarms, job = make_clones(tmp_path, clock)
    swarms.append(add_clone(tmp_path, bare, "c", clock))
    ledgers = [RemoteLedger(s.ledger, Arbiter(s, "origin", sleep=lambda s: None), clock_skew=1.0, clock=clock) for s in swarms]
    yield bare, ledgers, job, clock
    for swarm in swarms:
        swarm.close()


def test_claims_of_different_tasks_never_refuse_each_other(three: tuple) -> None:
    """Each machine claims from a stale view (nobody fetched the others' claims): as long as they picked
    different tasks, every push lands at the first try."""
    bare, ledgers, job, clock = three
    offers: list[int] = []
    for n, ledger in enumerate(ledgers):
        offer = ledger.arbiter.offer
        ledger.arbiter.offer = lambda *a, n=n, offer=offer, **kw: offers.append(n) or offer(*a, **kw)  # type: ignore[method-assign,misc]
    tasks = ["t0", "t1", "t2"]
    for ledger, task in zip(ledgers, tasks, strict=True):
        assert ledger._claim_chosen(job, task, f"{ledger.arbiter.machine.public[-6:]}.w", 30.0, clock()) is not None
    assert offers == [0, 1, 2]  # one push each: no refusal, no retry
    for task in tasks:
        assert git(bare, "rev-parse", "--verify", layout.claim_ref(job, task)).strip()
    assert git(bare, "rev-list", "--count", layout.job_ref(job)).strip() == "1"  # the job's own ref: untouched


def test_two_machines_claiming_one_task_race_for_its_ref_and_the_loser_takes_another(three: tuple) -> None:
    _, (a, b, _), job, clock = three
    assert a._claim_chosen(job, "t0", "a.w", 30.0, clock()) is not None
    with pytest.raises(InvalidTransition):
        b._claim_chosen(job, "t0", "b.w", 30.0, clock())  # built on a stale view of t0: refused, fetched, no longer queued
    lease = b.claim("b.w", 30.0, clock(), job_id=job)
    assert lease is not None and lease.task != "t0"


def test_a_claim_ref_deleted_on_the_remote_refuses_its_job(three: tuple) -> None:
    """gitswarm never deletes a claim ref: one gone while its job is there would let the task's compare-and-swap
    start again from nothing (a claim of a token that already ran), so the job is refused and the ref kept."""
    bare, (a, b, _), job, clock = three
    lease = a.claim("a.w", 30.0, clock(), job_id=job)
    assert lease is not None
    b.arbiter.sync([job])
    git(bare, "update-ref", "-d", layout.claim_ref(job, lease.task))  # what `git push origin :REF` does
    with pytest.raises(RemoteRefused, match=f"claim ref of task {lease.task} was deleted"):
        b.arbiter.sync([job])
    assert job in b.arbiter.refused_jobs()
    assert b.claim("b.w", 30.0, clock(), job_id=job) is None  # no task of the job is claimed from here


class RacingMachines(RuleBasedStateMachine):
    """Three machines claim, renew, finish, expire and fetch in any interleaving, each from its own view."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.TemporaryDirectory()
        self.clock = Clock()
        root = Path(self.dir.name)
        self.bare, self.swarms, self.job = make_clones(root, self.clock)
        self.swarms.append(add_clone(root, self.bare, "c", self.clock))
        self.ledgers = [
            RemoteLedger(s.ledger, Arbiter(s, "origin", sleep=lambda s: None), clock_skew=1.0, clock=self.clock) for s in self.swarms
        ]
        self.leases: list[list[Lease]] = [[] for _ in range(MACHINES)]

    def teardown(self) -> None:
        for swarm in self.swarms:
            swarm.close()
        self.dir.cleanup()

    def union(self):  # type: ignore[no-untyped-def]
        return replay(remote_ops(self.bare, self.job), "job")

    @rule(who=st.integers(0, MACHINES - 1))
    def claim(self, who: int) -> None:
        lease = self.ledgers[who].claim(f"m{who}.w", 5.0, self.clock(), job_id=self.job)
        if lease is None:
            # A claim picks from what the machine last fetched, and fetches only when a push of it is refused: a task
            # queued again elsewhere (a lease another machine expired) is seen at its watch's next fetch, within a
            # second. Done here as the watch does it, then claimed again.
            self.ledgers[who].arbiter.sync([self.job])
            lease = self.ledgers[who].claim(f"m{who}.w", 5.0, self.clock(), job_id=self.job)
        if lease is not None:
            self.leases[who].append(lease)
            return
        # Nobody starves: a machine that fetched gets no task only when none is queued (as the remote holds it).
        queued = [t for t in self.union().tasks.values() if t.state is TaskState.QUEUED and t.not_before <= self.clock()]
        assert not queued, f"m{who} got nothing while {[t.id for t in queued]} were queued"

    @precondition(lambda self: any(self.leases))
    @rule(who=st.integers(0, MACHINES - 1), ok=st.booleans())
    def finish(self, who: int, ok: bool) -> None:
        if self.leases[who]:
            lease = self.leases[who].pop(0)
            try:
                self.ledgers[who].finish(lease, ok, self.clock())
            except LeaseLost:
                pass  # fenced: its lease was expired elsewhere

    @precondition(lambda self: any(self.leases))
    @rule(who=st.integers(0, MACHINES - 1), ok=st.booleans())
    def finish_and_claim_next(self, who: int, ok: bool) -> None:
        """A finish carrying the worker's next claim, as a worker pushes it: refused because another machine
        claimed that task first, it claims another from what the refusal fetched, then goes alone."""
        if self.leases[who]:
            lease = self.leases[who].pop(0)
            try:
                _, after = self.ledgers[who].finish_and_claim(lease, Result(ok), self.clock(), Ask(f"m{who}.w", 5.0, self.job))
            except LeaseLost:
                return  # fenced: its lease was expired elsewhere
            if after is not None:
                self.leases[who].append(after)

    @rule(who=st.integers(0, MACHINES - 1))
    def renew(self, who: int) -> None:
        if self.leases[who]:
            try:
                self.leases[who][0] = self.ledgers[who].renew(self.leases[who][0], 5.0, self.clock())
            except LeaseLost:
                self.leases[who].pop(0)

    @rule(seconds=st.sampled_from([0.5, 3.0, 7.0]))
    def wait(self, seconds: float) -> None:
        self.clock.now += seconds

    @rule(who=st.integers(0, MACHINES - 1))
    def expire(self, who: int) -> None:
        self.ledgers[who].expire(self.clock())

    @rule()
    def converge(self) -> None:
        """Once every clone fetched everything, all hold the same state: the same tree, the canonical replay."""
        for ledger in self.ledgers:
            ledger.arbiter.sync([self.job])
        trees = {ledger.refs.snapshot(self.job).tree for ledger in self.ledgers}
        assert len(trees) == 1

    @invariant()
    def every_local_tip_records_the_replay_of_its_history(self) -> None:
        """The tip each clone holds, however it got there (fetched, merged, claimed through the remote),
        records exactly what replaying every operation of its history gives."""
        for swarm in self.swarms:
            tip = swarm.repo.read_ref(layout.job_ref(self.job))
            if tip is not None:
                check_tip(swarm.repo, self.job, tip)

    @invariant()
    def one_holder_per_task_and_every_accepted_op_applies(self) -> None:
        result = self.union()
        assert result.skipped == 0  # no accepted claim overturned, no accepted finish stale
        holders: dict[str, list[int]] = {}
        for who in range(MACHINES):
            for lease in self.leases[who]:
                task = result.tasks[lease.task]
                if task.state is TaskState.RUNNING and task.claims == lease.token:
                    assert task.owner == lease.owner
                    holders.setdefault(lease.task, []).append(who)
        assert all(len(found) == 1 for found in holders.values()), holders


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(order=st.permutations(range(MACHINES)), fetched=st.lists(st.booleans(), min_size=MACHINES, max_size=MACHINES))
def test_machines_ending_a_job_in_any_order_record_one_summary(order: list[int], fetched: list[bool]) -> None:
    """Every machine sees the job finished, then summarizes it (as `work` ends) in any order, each having
    fetched the others' summaries first or not: the remote holds one summary, and each machine names it."""
    with tempfile.TemporaryDirectory() as scratch:
        clock = Clock()
        root = Path(scratch)
        bare, swarms, job = make_clones(root, clock)
        swarms.append(add_clone(root, bare, "c", clock))
        ledgers = [RemoteLedger(s.ledger, Arbiter(s, "origin", sleep=lambda s: None), clock_skew=1.0, clock=clock) for s in swarms]
        try:
            for n in range(4):  # the tasks run on the machines in turn
                ledger = ledgers[n % MACHINES]
                lease = ledger.claim(f"m{n % MACHINES}.w", 30.0, clock(), job_id=job)
                assert lease is not None
                ledger.finish(lease, True, clock())
            for ledger in ledgers:
                ledger.arbiter.sync([job])
            named = set()
            for who in order:
                if fetched[who]:
                    ledgers[who].arbiter.sync([job])
                named.add(write_summary(swarms[who], job, ledgers[who]))
            recorded = [op for op in remote_ops(bare, job) if op.__struct_config__.tag == "artifacts"]
            assert len(recorded) == 1 and named == set(recorded[0].artifacts), (recorded, named)
        finally:
            for swarm in swarms:
                swarm.close()


TestRacingMachines = RacingMachines.TestCase
TestRacingMachines.settings = settings(
    max_examples=6, stateful_step_count=14, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def _forged_on(bare: Path, parent: str, files: dict[str, str], message: str, *more_parents: str) -> str:
    """A commit made with plumbing in the remote itself (what anyone with push access can write there)."""
    return commit_tree(bare, write_tree(bare, files), message, parent, *more_parents)


@pytest.mark.parametrize("forgery", ["record", "job", "root"])
def test_a_claim_tip_that_fast_forwards_a_machines_history_is_checked_like_any_other(three: tuple, forgery: str) -> None:
    """A machine takes a claim tip that descends from its own history by replaying only what it adds
    (tip_intake._plan_beyond, job_merge.check_ahead): a forged record in its tree, a job record changed, or a
    second root commit merged in is refused by name there too, and the machine's job ref does not move."""
    bare, (a, b, _), job, clock = three
    lease = a.claim("a.w", 30.0, clock(), job_id=job)
    assert lease is not None
    b.arbiter.sync([job])
    swarm = b.arbiter.swarm
    ours = swarm.repo.read_ref(layout.job_ref(job))
    assert ours == git(bare, "rev-parse", layout.claim_ref(job, lease.task)).strip()  # b took a's claim as it is
    files = tree_files(bare, ours)
    message = git(bare, "log", "-1", "--format=%B", ours)  # its operations again: nothing new to replay
    other = next(t for t in ("t0", "t1", "t2") if t != lease.task)
    if forgery == "record":  # the other task says it finished, though no operation made it so
        task_path = layout.task_path(other)
        files[task_path] = hash_object(bare, git(bare, "cat-file", "blob", files[task_path]).replace("queued", "succeeded").encode())
        forged = _forged_on(bare, ours, files, message)
    elif forgery == "job":
        files[layout.JOB_PATH] = hash_object(bare, git(bare, "cat-file", "blob", files[layout.JOB_PATH]).replace('"goal":"', '"goal":"forged ').encode())
        forged = _forged_on(bare, ours, files, message)
    else:
        root = commit_tree(bare, write_tree(bare, files), message)  # parentless, the same tree
        forged = _forged_on(bare, ours, files, "merge 0 ops\n", root)
    assert tree_files(bare, forged) != tree_files(bare, ours) or forgery == "root"
    git(bare, "update-ref", layout.claim_ref(job, other), forged)
    with pytest.raises(RemoteRefused, match=r"record does not match|not the job its job_created made|more than one root"):
        b.arbiter.sync([job])
    assert swarm.repo.read_ref(layout.job_ref(job)) == ours


@pytest.mark.parametrize("forged", [False, True])
def test_a_claim_tip_that_holds_every_operation_of_a_machines_merges_is_taken_or_refused_by_its_records(
    three: tuple, forged: bool
) -> None:
    """A tip that lacks only merge commits of the machine's history (another machine merged the same claims)
    is taken as it is, checked from the kept replay: with the records the operations make it becomes the
    machine's tip; with one record forged it is refused and nothing moves."""
    bare, (a, b, c), job, clock = three
    assert a._claim_chosen(job, "t0", "a.w", 30.0, clock()) is not None
    assert c._claim_chosen(job, "t1", "c.w", 30.0, clock()) is not None
    b.arbiter.sync([job])
    swarm = b.arbiter.swarm
    ours = swarm.repo.read_ref(layout.job_ref(job))
    parents = git(swarm.repo.workdir, "rev-list", "--parents", "-n", "1", ours).split()[1:]
    assert len(parents) == 2  # b merged the two claims
    git(bare, "fetch", "-q", str(swarm.repo.workdir), f"{ours}:refs/tmp/ours")  # the attacker read b's merge somewhere
    files = tree_files(bare, ours)
    if forged:
        path = layout.task_path("t2")
        files[path] = hash_object(bare, git(bare, "cat-file", "blob", files[path]).replace("queued", "succeeded").encode())
    theirs = commit_tree(bare, write_tree(bare, files), "merge 2 ops\n", *reversed(parents))
    git(bare, "update-ref", "-d", "refs/tmp/ours")
    git(bare, "update-ref", layout.claim_ref(job, "t2"), theirs)
    if forged:
        with pytest.raises(RemoteRefused, match="record does not match"):
            b.arbiter.sync([job])
        assert swarm.repo.read_ref(layout.job_ref(job)) == ours
    else:
        b.arbiter.sync([job])
        assert swarm.repo.read_ref(layout.job_ref(job)) == theirs  # the same operations: one tip for every clone


def test_the_first_merge_a_process_makes_rewrites_a_record_the_local_tree_got_wrong(three: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    """A later merge writes only the records its replay made anew; the first one a process makes of a history
    compares every record, so a local record that is not what the operations make (an older gitswarm's, or
    one edited by hand) is written right again rather than carried into every tip the machine pushes."""
    _, (a, b, c), job, clock = three
    monkeypatch.setattr(Replay, "CHECKPOINT", 1)  # a point after every operation: a merge re-folds only what it adds
    assert a._claim_chosen(job, "t0", "a.w", 30.0, clock()) is not None
    b.arbiter.sync([job])
    swarm = b.arbiter.swarm
    here = swarm.repo.workdir
    ours = swarm.repo.read_ref(layout.job_ref(job))
    files = tree_files(here, ours)
    path = layout.task_path("t2")
    files[path] = hash_object(here, git(here, "cat-file", "blob", files[path]).replace('"queued"', '"queued" ').encode())
    drifted = commit_tree(here, write_tree(here, files), git(here, "log", "-1", "--format=%B", ours), ours)
    git(here, "update-ref", layout.job_ref(job), drifted, ours)
    job_merge._REPLAYS.clear()  # what a process starting now knows of it: nothing
    assert c._claim_chosen(job, "t1", "c.w", 30.0, clock()) is not None
    b.arbiter.sync([job])
    merged = swarm.repo.read_ref(layout.job_ref(job))
    assert merged != drifted and len(swarm.repo.commit_info(merged).parents) == 2
    check_tip(swarm.repo, job, merged)  # every record is what the operations make, t2's too


def test_workers_that_know_each_other_share_the_queue_out_and_take_each_others_tasks_only_when_theirs_ran_out(
    three: tuple,
) -> None:
    """Each queued task has one home worker among those seen holding a lease in the job (rendezvous hashing),
    the same on every machine that saw the same workers, so workers picking from the same stale view pick
    different tasks; a worker whose own tasks all ran takes another's rather than idle."""
    _, ledgers, job, clock = three
    owners = [machine_owner(ledger.arbiter.swarm.actor, f"w{n}") for n, ledger in enumerate(ledgers)]
    for n, (ledger, owner) in enumerate(zip(ledgers, owners, strict=True)):  # each worker holds a lease, so all are seen
        assert ledger.claim(owner, 30.0, clock(), job_id=job) is not None, n
    for ledger in ledgers:
        ledger.arbiter.sync([job])
    names = [f"x{n}" for n in range(300)]  # any task's home, as each machine sees it
    homes = [[ledger._home(job)(name) for name in names] for ledger in ledgers]
    assert homes[0] == homes[1] == homes[2]  # one view of whose each task is
    assert sorted(set(homes[0])) == sorted(owners)
    assert all(homes[0].count(owner) > 60 for owner in owners)  # about a third each
    candidates = [(0, job, name) for name in names]  # the same stale view of the queue on every machine
    for ledger, owner in zip(ledgers, owners, strict=True):
        assert homes[0][names.index(ledger._choose(candidates)[2])] == owner  # its own first
    others = [row for row in candidates if homes[0][names.index(row[2])] != owners[0]]
    assert ledgers[0]._choose(others) in others  # none of its own left: another's, rather than nothing


def _finish_all(ledgers: list[RemoteLedger], job: str, clock: Clock) -> None:
    for n in range(4):
        lease = ledgers[n % len(ledgers)].claim(f"m{n}.w", 30.0, clock(), job_id=job)
        assert lease is not None
        ledgers[n % len(ledgers)].finish(lease, True, clock())
    for ledger in ledgers:
        ledger.arbiter.sync([job])


def test_a_job_ref_rewound_by_hand_to_a_commit_every_clone_holds_is_refused_not_taken_as_unchanged(three: tuple) -> None:
    """A sync plans the job's own remote ref from the commits it knows its history holds (tip_intake.plan_tip):
    a ref set back with update-ref to one of them is still a rewind, refused before any plan is made."""
    bare, (a, b, _), job, clock = three
    submitted = git(bare, "rev-parse", layout.job_ref(job)).strip()
    _finish_all([a, b], job, clock)
    assert write_summary(a.arbiter.swarm, job, a) is not None  # the job's ref moves on: the summary, on the whole history
    b.arbiter.sync([job])
    ours = b.arbiter.swarm.repo.read_ref(layout.job_ref(job))
    git(bare, "update-ref", layout.job_ref(job), submitted)  # the attacker rewinds it, to a commit b holds
    with pytest.raises(RemoteRefused, match="rewound"):
        b.arbiter.sync([job])
    assert b.arbiter.swarm.repo.read_ref(layout.job_ref(job)) == ours


def test_a_forged_commit_on_the_job_ref_is_not_summarized_over(three: tuple) -> None:
    """A machine ending a job offers its summary to the job's ref; a forgery pushed there first (by plumbing: the
    tip's operations again, over a changed job record) is refused at the fetch the refusal brings, the summary
    is kept here, and nothing of the forgery is taken."""
    bare, (a, b, _), job, clock = three
    _finish_all([a, b], job, clock)
    tip = git(bare, "rev-parse", layout.job_ref(job)).strip()
    files = tree_files(bare, tip)
    files[layout.JOB_PATH] = hash_object(bare, git(bare, "cat-file", "blob", files[layout.JOB_PATH]).replace('"goal":"', '"goal":"forged ').encode())
    forged = _forged_on(bare, tip, files, git(bare, "log", "-1", "--format=%B", tip))
    git(bare, "update-ref", layout.job_ref(job), forged)
    swarm = b.arbiter.swarm
    summary = write_summary(swarm, job, b)
    assert summary is not None and summary in swarm.refs.snapshot(job).state.artifacts  # recorded here
    assert forged not in {commit.oid for commit in swarm.repo.walk(swarm.repo.read_ref(layout.job_ref(job)))}
    assert git(bare, "rev-parse", layout.job_ref(job)).strip() == forged  # nothing pushed over it
