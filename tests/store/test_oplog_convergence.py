"""Two clones and a bare remote working one job at once converge, lose no operation, never force.

A hypothesis state machine: a job is submitted in clone A, pushed, pulled into
clone B and approved there. Then both clones run random operations on it
through the library (claims with explicit `now`, finishes ok or failed,
finishes of leases held from before, cancels, retries, expiries past the
lease, artifact records), interleaved with pushes and pulls in random order.
Operations a clone's reducer refuses (InvalidTransition, LeaseLost,
NotFound) are skipped. Along the way: after every step each clone's SQLite
index agrees with its ref (tip, task states, counts, leases), no pull calls
valid history invalid, and a merge gives the same tree whichever side is
local (the format says merging is commutative). At the end both clones sync (pull, push, pull):
they hold the identical tree for the job, every operation ever made in either
clone is in both histories, and the remote's ref only ever moved forward
(every tip it had is an ancestor of the next, by `git merge-base
--is-ancestor`, both as the test saw them and in the remote's reflog).
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from gitswarm.engine.sharing import share
from gitswarm.engine.swarm import Swarm
from gitswarm.model.artifacts import Finding
from gitswarm.model.errors import InvalidTransition, LeaseLost, NotFound
from gitswarm.model.ops import Op, TaskClaimed, TaskFinished
from gitswarm.model.records import JobState, Task
from gitswarm.model.reducer import apply
from gitswarm.store import layout
from gitswarm.store.git import PygitRepo
from gitswarm.store.job_merge import check_tip, merge_job
from gitswarm.store.leases import Lease
from gitswarm.store.trust import Trust
from tests.conftest import spec_text

START = 1_700_000_000.0
TTL = 30.0
TASKS = ("t0", "t1", "t2", "t3")
SPEC = spec_text(
    'id = "t0"\ncommand = "true"\nmax_attempts = 2',
    'id = "t1"\ncommand = "true"\nmax_attempts = 3',
    'id = "t2"\ncommand = "true"\nmax_attempts = 2\ndepends_on = ["t0"]',
    'id = "t3"\ncommand = "true"\nmax_attempts = 1\ndepends_on = ["t1", "t2"]',
    goal="converge",
)
REFUSED = (InvalidTransition, LeaseLost, NotFound)
# The final state is what replaying every operation in (clock, actor, id) order gives, as the
# format says a merge's result depends only on the operations (a merge replays both whole
# histories, not just what follows the merge base).
CHECK_REPLAY = True
CLONES = st.sampled_from(["a", "b"])


def run_git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def is_ancestor(repo: Path, old: str, new: str) -> bool:
    done = subprocess.run(["git", "merge-base", "--is-ancestor", old, new], check=False, cwd=repo, capture_output=True)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode == 0


def replay(ops: list[Op]) -> tuple[JobState, dict[str, Task]]:
    """Every operation applied once, in (clock, actor, id) order, from nothing: an operation
    that does not apply at its turn is skipped, and so is a finish of a claim that lost."""
    state, tasks, lost = JobState(), {}, set()
    for op in sorted({op.id: op for op in ops}.values(), key=lambda op: op.order_key()):
        if isinstance(op, TaskFinished) and (op.task, op.token, op.actor) in lost:
            continue
        try:
            change = apply(op, state, lambda task_id: tasks[task_id], lambda: list(tasks))
        except REFUSED:
            if isinstance(op, TaskClaimed):
                lost.add((op.task, op.token, op.actor))
            continue
        if isinstance(op, TaskClaimed):
            lost.discard((op.task, op.token, op.actor))  # the token came round again: this claim holds it
        state = change.state
        tasks.update(change.tasks)
    return state, tasks


class Clone:
    def __init__(self, root: Path, name: str, remote: Path) -> None:
        self.name = name
        self.path = root / name
        self.path.mkdir()
        run_git(self.path, "init", "-q")
        (self.path / "README.md").write_text(f"{name}\n")
        run_git(self.path, "add", "README.md")
        run_git(self.path, "commit", "-qm", f"initial {name}")
        run_git(self.path, "remote", "add", "origin", str(remote))
        self.now = START
        self.swarm = Swarm(self.path, clock=lambda: self.now)
        self.held: list[Lease] = []  # leases granted here and not yet finished by the test
        self.made = 0

    def tick(self, seconds: float = 1.0) -> float:
        self.now += seconds
        return self.now


class ConvergenceMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="gitswarm-converge-"))
        self.remote = self.root / "remote.git"
        run_git(self.root, "init", "-q", "--bare", str(self.remote))
        run_git(self.remote, "config", "core.logAllRefUpdates", "always")
        self.clones = {name: Clone(self.root, name, self.remote) for name in ("a", "b")}
        a, b = self.clones["a"], self.clones["b"]
        self.job = a.swarm.submit_text(SPEC)
        self.where = layout.job_ref(self.job)
        self.ever: set[str] = set()  # every op id made in either clone
        self.remote_tips: list[str] = []  # every tip the remote's ref had, as seen after each push
        self.record_ops(a)
        self.push(a)
        assert share.pull(b.swarm, "origin").new == [self.job]
        Trust(b.swarm.repo.common_dir).approve(self.job)
        self.clean = True

    # -- helpers ----------------------------------------------------------------------------

    def clone(self, who: str) -> Clone:
        self.clean = False
        return self.clones[who]

    def tip(self, clone: Clone) -> str:
        found = clone.swarm.repo.read_ref(self.where)
        assert found is not None
        return found

    def history_ids(self, clone: Clone) -> set[str]:
        return {op.id for _, op in clone.swarm.refs.history(self.job)}

    def record_ops(self, clone: Clone) -> None:
        self.ever |= self.history_ids(clone)

    def attempt(self, clone: Clone, action) -> object:
        """Run one ledger transition; one the clone's reducer refuses is skipped."""
        try:
            result = action()
        except REFUSED:
            return None
        self.record_ops(clone)
        return result

    def remote_tip(self) -> str | None:
        return PygitRepo(self.remote).read_ref(self.where)

    def push(self, clone: Clone) -> None:
        done = share.push(clone.swarm, "origin")
        for pulled in done["pulls"]:
            assert pulled["invalid"] == {}, f"push's pull called valid history invalid: {pulled['invalid']}"
        found = self.remote_tip()
        assert found is not None and found == self.tip(clone)
        if not self.remote_tips or self.remote_tips[-1] != found:
            self.remote_tips.append(found)

    def pull(self, clone: Clone) -> None:
        before = self.tip(clone)
        report = share.pull(clone.swarm, "origin")
        assert report.invalid == {}, f"pull called valid history invalid: {report.invalid}"
        after = self.tip(clone)
        if report.merged:
            assert report.merged == [self.job]
            self.check_commutative(clone, after, before)
        assert clone.swarm.index.job_tip(self.job) == after
        # However the pull moved it, the tip records exactly what replaying its whole history gives.
        check_tip(clone.swarm.repo, self.job, after)

    def check_commutative(self, clone: Clone, merged: str, ours: str) -> None:
        repo = clone.swarm.repo
        info = repo.commit_info(merged)
        assert info.parents[0] == ours
        theirs = info.parents[1]
        swapped = merge_job(repo, self.job, theirs, ours, clone.swarm.actor)
        assert repo.commit_info(swapped.tip).tree == info.tree, "merging the other way round gives another tree"

    def finding(self, clone: Clone, task: str | None) -> Finding:
        clone.made += 1
        return Finding(job=self.job, task=task, created=clone.now, title=f"{clone.name} {clone.made}")

    # -- operations -------------------------------------------------------------------------

    @rule(who=CLONES, ok=st.booleans(), retryable=st.booleans())
    def claim_and_finish(self, who: str, ok: bool, retryable: bool) -> None:
        clone = self.clone(who)
        now = clone.tick()
        lease = self.attempt(clone, lambda: clone.swarm.ledger.claim(f"{who}-w", TTL, now, job_id=self.job))
        if lease is None:
            return
        artifacts = [self.finding(clone, lease.task)]
        self.attempt(
            clone,
            lambda: clone.swarm.ledger.finish(
                lease, ok, clone.tick(), error=None if ok else "boom", artifacts=artifacts, retryable=retryable
            ),
        )

    @rule(who=CLONES)
    def claim(self, who: str) -> None:
        """Claim and keep the lease: it may be finished later, after syncs, or expire."""
        clone = self.clone(who)
        now = clone.tick()
        lease = self.attempt(clone, lambda: clone.swarm.ledger.claim(f"{who}-w", TTL, now, job_id=self.job))
        if lease is not None:
            clone.held.append(lease)

    @precondition(lambda self: any(c.held for c in self.clones.values()))
    @rule(data=st.data(), ok=st.booleans())
    def finish_held(self, data: st.DataObject, ok: bool) -> None:
        who = data.draw(st.sampled_from([n for n, c in sorted(self.clones.items()) if c.held]), label="clone")
        clone = self.clone(who)
        lease = clone.held.pop(data.draw(st.integers(0, len(clone.held) - 1), label="lease"))
        now = clone.tick()
        self.attempt(
            clone,
            lambda: clone.swarm.ledger.finish(
                lease, ok, now, error=None if ok else "late", artifacts=[self.finding(clone, lease.task)]
            ),
        )

    @rule(who=CLONES, task=st.sampled_from(TASKS))
    def cancel(self, who: str, task: str) -> None:
        clone = self.clone(who)
        self.attempt(clone, lambda: clone.swarm.ledger.cancel(self.job, task, clone.tick(), "not needed"))

    @rule(who=CLONES, task=st.sampled_from(TASKS))
    def retry(self, who: str, task: str) -> None:
        clone = self.clone(who)
        self.attempt(clone, lambda: clone.swarm.ledger.retry(self.job, task, clone.tick()))

    @rule(who=CLONES)
    def expire(self, who: str) -> None:
        """Recover with a clock past every lease granted so far."""
        clone = self.clone(who)
        now = clone.tick(TTL + 1)
        self.attempt(clone, lambda: clone.swarm.ledger.expire(now, job_id=self.job))

    @rule(who=CLONES, task=st.sampled_from((*TASKS, None)))
    def record_artifacts(self, who: str, task: str | None) -> None:
        clone = self.clone(who)
        now = clone.tick()
        self.attempt(
            clone, lambda: clone.swarm.ledger.record_artifacts(self.job, task, [self.finding(clone, task)], now)
        )

    @rule(who=CLONES)
    def push_rule(self, who: str) -> None:
        self.push(self.clone(who))

    @rule(who=CLONES)
    def pull_rule(self, who: str) -> None:
        self.pull(self.clone(who))

    def index_agrees(self, clone: Clone) -> None:
        """The clone's index mirrors its ref: tip, job status and counts, every task's state and lease."""
        snapshot = clone.swarm.refs.snapshot(self.job)
        tasks = snapshot.tasks()
        status = clone.swarm.status(self.job)
        where = f"clone {clone.name}"
        assert clone.swarm.index.job_tip(self.job) == snapshot.tip, f"{where}: the index has another tip"
        indexed = {t["id"]: t["state"] for t in status["tasks"]}
        recorded = {t.id: t.state.value for t in tasks}
        assert indexed == recorded, f"{where}: index {indexed} but ref {recorded}"
        assert status["counts"] == snapshot.state.counts and status["status"] == snapshot.state.status()
        leased = {task for job, task, *_ in clone.swarm.index.leases() if job == self.job}
        assert leased == {t.id for t in tasks if t.state.value == "running"}, f"{where}: leases {leased}"

    @invariant()
    def step_done(self) -> None:
        """After every step each clone's index agrees with its ref. Only a run whose steps all
        passed has teardown sync the clones and check the end."""
        for clone in self.clones.values():
            self.index_agrees(clone)
        self.clean = True

    # -- the end ----------------------------------------------------------------------------

    def final_sync(self) -> None:
        a, b = self.clones["a"], self.clones["b"]
        for clone in (a, b):  # each: pull, push
            self.pull(clone)
            self.push(clone)
        for clone in (a, b):
            self.pull(clone)
        trees = {name: c.swarm.repo.commit_info(self.tip(c)).tree for name, c in self.clones.items()}
        assert trees["a"] == trees["b"], f"the clones ended on different trees: {trees}"
        for name, clone in self.clones.items():
            ids = self.history_ids(clone)
            assert self.ever <= ids, f"{name} lost ops: {sorted(self.ever - ids)}"
            assert ids == self.ever
            self.index_agrees(clone)
        if CHECK_REPLAY:
            snapshot = a.swarm.refs.snapshot(self.job)
            state, tasks = replay([op for _, op in a.swarm.refs.history(self.job)])
            got = {t.id: t for t in snapshot.tasks()}
            assert got == tasks, f"the merged tasks are not the replay of every op: {[(got[k], tasks[k]) for k in got if got[k] != tasks[k]]}"
            assert snapshot.state.counts == state.counts
        assert self.remote_tip() == self.tip(a) == self.tip(b)
        for old, new in itertools.pairwise(self.remote_tips):
            assert is_ancestor(self.remote, old, new), f"the remote's ref was forced from {old} to {new}"
        reflog = list(reversed(run_git(self.remote, "reflog", "show", "--format=%H", self.where).split()))
        assert reflog[-1] == self.remote_tip()
        for old, new in itertools.pairwise(reflog):
            assert is_ancestor(self.remote, old, new), f"the remote's reflog shows a forced update {old} -> {new}"

    def teardown(self) -> None:
        try:
            if self.clean:
                self.final_sync()
        finally:
            for clone in self.clones.values():
                clone.swarm.close()
            shutil.rmtree(self.root, ignore_errors=True)


def test_two_clones_converge_and_lose_nothing() -> None:
    run_state_machine_as_test(
        ConvergenceMachine,
        settings=settings(
            max_examples=25,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )

