"""A hypothesis state machine over the Ledger of a real repository.

One random DAG job is submitted, then workers claim, renew and finish (ok,
failed, or with a stale lease), leases expire as a fake clock advances, and
tasks and the job are cancelled and retried. After every step the refs
(`swarm.refs.snapshot(job)`, read from the ref itself) and the SQLite index
(`swarm.status`, `swarm.index.leases`) must agree, and the dependency and
lease invariants must hold on both. Every transition is also checked against
a small model of what it should have done, and a refused one must change
nothing at all.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from gitswarm.engine.swarm import Swarm
from gitswarm.model.errors import InvalidTransition, LeaseLost
from gitswarm.model.records import POISON, TERMINAL, Task, TaskState
from gitswarm.store.leases import LAPSED, Lease
from tests.conftest import spec_text

START = 1_700_000_000.0
WORKERS = ("w1", "w2", "w3")
TTLS = (10.0, 60.0, 600.0)
TERMINAL_JOB = {"succeeded", "failed", "cancelled"}

# Index row columns that come from the task's spec rather than the task record.
SPEC_COLUMNS = {"seq", "priority", "max_attempts", "adapter", "mode"}


@st.composite
def dags(draw: st.DrawFn, min_tasks: int = 3, max_tasks: int = 8) -> list[tuple[str, list[str], int, int]]:
    """(task id, deps on earlier tasks, max_attempts, priority) for 3-8 tasks."""
    n = draw(st.integers(min_tasks, max_tasks))
    tasks = []
    for i in range(n):
        deps = sorted(draw(st.sets(st.integers(0, i - 1), max_size=3))) if i else []
        tasks.append((f"t{i}", [f"t{d}" for d in deps], draw(st.integers(1, 3)), draw(st.integers(0, 1))))
    return tasks


def dag_spec(dag: list[tuple[str, list[str], int, int]], goal: str = "stateful") -> str:
    bodies = []
    for task_id, deps, max_attempts, priority in dag:
        body = f'id = "{task_id}"\ncommand = "true"\nmax_attempts = {max_attempts}\npriority = {priority}'
        if deps:
            body += "\ndepends_on = [" + ", ".join(f'"{d}"' for d in deps) + "]"
        bodies.append(body)
    return spec_text(*bodies, goal=goal)


def new_repo(prefix: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    subprocess.run(["git", "init", "-q", str(path)], check=True, capture_output=True)
    return path


def index_value(task: Task, column: str) -> object:
    """What the index row's `column` must hold for `task` as the ref records it."""
    if column in SPEC_COLUMNS:
        return getattr(task.spec, column)
    if column == "id":
        return task.id
    if column == "depends_on":
        return list(task.spec.depends_on)
    if column == "artifacts":
        return len(task.artifacts)
    if column == "unverified":  # status's view of the verdicts, not a stored column: shell tasks make no patch
        return False
    return getattr(task, column)


# -- what each transition should do, on a {task id: state} map ------------------------------


def skip_from(states: dict[str, TaskState], tasks: dict[str, Task], root: str) -> None:
    """Every non-terminal task downstream of `root` becomes skipped."""
    pending = list(tasks[root].spec.dependents)
    while pending:
        dep = pending.pop()
        if states[dep].terminal:
            continue
        states[dep] = TaskState.SKIPPED
        pending.extend(tasks[dep].spec.dependents)


def unblock_from(states: dict[str, TaskState], tasks: dict[str, Task], root: str) -> None:
    for dep in tasks[root].spec.dependents:
        if states[dep] is TaskState.BLOCKED and all(states[d] is TaskState.SUCCEEDED for d in tasks[dep].spec.depends_on):
            states[dep] = TaskState.QUEUED


def revive_from(states: dict[str, TaskState], tasks: dict[str, Task], root: str) -> None:
    pending = list(tasks[root].spec.dependents)
    while pending:
        dep = pending.pop(0)
        if states[dep] is not TaskState.SKIPPED:
            continue
        if any(states[d] in POISON for d in tasks[dep].spec.depends_on):
            continue
        states[dep] = TaskState.BLOCKED
        pending.extend(tasks[dep].spec.dependents)


class LedgerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.path = new_repo("gitswarm-stateful-")
        self.now = START
        self.swarm = Swarm(self.path, clock=lambda: self.now)
        self.ledger = self.swarm.ledger
        self.job: str | None = None
        self.granted: list[Lease] = []  # every lease ever granted, in order
        self.latest: dict[str, Lease] = {}  # the newest lease per task
        self.expiry: dict[tuple[str, int], float] = {}  # the model's expiry of each (task, token)
        self.clean = True  # False while a step runs; teardown only drives a run that passed

    # -- reading both sides -----------------------------------------------------------------

    def ref_tasks(self) -> dict[str, Task]:
        assert self.job is not None
        return {t.id: t for t in self.swarm.refs.snapshot(self.job).tasks()}

    def ref_tip(self) -> str:
        assert self.job is not None
        return self.swarm.refs.snapshot(self.job).tip

    def states(self) -> dict[str, TaskState]:
        return {task_id: t.state for task_id, t in self.ref_tasks().items()}

    def frozen(self) -> tuple:
        """Everything a refused transition must leave alone: ref tip, index status, leases."""
        return (self.ref_tip(), self.swarm.status(self.job), self.swarm.index.leases())

    def live(self, lease: Lease, tasks: dict[str, Task] | None = None) -> bool:
        """Whether the ledger must accept this lease's result now, by the model."""
        task = (tasks if tasks is not None else self.ref_tasks())[lease.task]
        return (
            task.state is TaskState.RUNNING
            and task.claims == lease.token
            and self.expiry[(lease.task, lease.token)] >= self.now
        )

    def stale_leases(self) -> list[Lease]:
        if self.job is None:
            return []
        tasks = self.ref_tasks()
        return [lease for lease in self.granted if not self.live(lease, tasks)]

    def begin(self) -> None:
        self.clean = False

    # -- setup ------------------------------------------------------------------------------

    @initialize(dag=dags())
    def submit(self, dag: list[tuple[str, list[str], int, int]]) -> None:
        self.begin()
        self.job = self.swarm.submit_text(dag_spec(dag))
        tasks = self.ref_tasks()
        assert list(tasks) == [task_id for task_id, *_ in dag]
        for task_id, deps, max_attempts, priority in dag:
            task = tasks[task_id]
            assert task.state is (TaskState.BLOCKED if deps else TaskState.QUEUED)
            assert (list(task.spec.depends_on), task.spec.max_attempts, task.spec.priority) == (deps, max_attempts, priority)

    # -- rules ------------------------------------------------------------------------------

    @rule(seconds=st.sampled_from([1, 3, 15, 70, "to expiry", "past expiry"]))
    def tick(self, seconds: int | str) -> None:
        """Advance the clock; or to exactly the first expiry of a live lease (where it is still
        held) or just past it (run out, but not yet recovered)."""
        self.begin()
        self.advance(seconds)

    def advance(self, seconds: int | str) -> None:
        live = self.live_leases()
        if isinstance(seconds, int) or not live:
            self.now += seconds if isinstance(seconds, int) else 1
            return
        expires = min(self.expiry[(lease.task, lease.token)] for lease in live)
        assert expires >= self.now
        self.now = expires + (0.5 if seconds == "past expiry" else 0.0)

    # One argument, not two, for the same reason as finish_ok.
    @rule(worker=st.tuples(st.sampled_from(WORKERS), st.sampled_from(TTLS)))
    def claim(self, worker: tuple[str, float]) -> None:
        self.begin()
        owner, ttl = worker
        before = self.ref_tasks()
        cancelled = self.swarm.refs.snapshot(self.job).state.cancelled
        claimable = [
            t for t in before.values()
            if t.state is TaskState.QUEUED and getattr(t, "not_before", 0.0) <= self.now and not cancelled
        ]
        lease = self.ledger.claim(owner, ttl, self.now, job_id=self.job)
        if not claimable:
            assert lease is None, f"claimed {lease} with nothing claimable"
            return
        assert lease is not None, f"claim returned None with {[t.id for t in claimable]} claimable"
        assert lease.task in {t.id for t in claimable}
        assert before[lease.task].spec.priority == max(t.spec.priority for t in claimable)
        old, new = before[lease.task], self.ref_tasks()[lease.task]
        assert new.state is TaskState.RUNNING
        assert new.claims == old.claims + 1 == lease.token
        assert new.attempts == old.attempts + 1 == lease.attempt
        assert (new.owner, new.lease_expires) == (owner, self.now + ttl)
        assert (lease.owner, lease.expires, lease.job) == (owner, self.now + ttl, self.job)
        self.granted.append(lease)
        self.latest[lease.task] = lease
        self.expiry[(lease.task, lease.token)] = self.now + ttl

    @precondition(lambda self: self.latest)
    @rule(data=st.data(), ttl=st.sampled_from(TTLS))
    def renew(self, data: st.DataObject, ttl: float) -> None:
        self.begin()
        lease = self.pick_lease(data)
        if not self.live(lease):
            before = self.frozen()
            try:
                self.ledger.renew(lease, ttl, self.now)
            except LeaseLost:
                pass
            else:
                raise AssertionError(f"renewed a lease that is no longer held: {lease}")
            assert self.frozen() == before
            return
        tip = self.ref_tip()
        renewed = self.ledger.renew(lease, ttl, self.now)
        assert (renewed.token, renewed.expires) == (lease.token, self.now + ttl)
        assert self.ref_tip() == tip, "a renewal is index-only; it must not write the ref"
        self.expiry[(lease.task, lease.token)] = self.now + ttl

    def _finish(self, lease: Lease, ok: bool, retryable: bool) -> None:
        if not self.live(lease):
            before = self.frozen()
            try:
                self.ledger.finish(lease, ok, self.now, error=None if ok else "boom", retryable=retryable)
            except LeaseLost:
                pass
            else:
                raise AssertionError(f"finish accepted a lease that is no longer held: {lease}")
            assert self.frozen() == before, "a refused finish changed the job"
            return
        tasks = self.ref_tasks()
        expected = {task_id: t.state for task_id, t in tasks.items()}
        task = tasks[lease.task]
        if ok:
            expected[lease.task] = TaskState.SUCCEEDED
            unblock_from(expected, tasks, lease.task)
        elif retryable and task.attempts < task.spec.max_attempts:
            expected[lease.task] = TaskState.QUEUED
        else:
            expected[lease.task] = TaskState.FAILED
            skip_from(expected, tasks, lease.task)
        result = self.ledger.finish(lease, ok, self.now, error=None if ok else "boom", retryable=retryable)
        assert result.state is expected[lease.task]
        assert self.states() == expected
        if not ok:
            assert self.ref_tasks()[lease.task].error == "boom"

    def live_leases(self) -> list[Lease]:
        if self.job is None:
            return []
        tasks = self.ref_tasks()
        return [lease for lease in self.granted if self.live(lease, tasks)]

    def current_leases(self) -> list[Lease]:
        """Leases whose task still runs under their token: live, or run out by the clock but
        not yet recovered (whose results the ledger must refuse all the same)."""
        if self.job is None:
            return []
        tasks = self.ref_tasks()
        return [
            lease for lease in self.granted
            if tasks[lease.task].state is TaskState.RUNNING and tasks[lease.task].claims == lease.token
        ]

    def pick_lease(self, data: st.DataObject) -> Lease:
        """Most often a current lease; otherwise the newest lease of some task, which may have
        been revoked (cancel) or used up (finished, expired)."""
        newest = sorted(self.latest.values(), key=lambda lease: lease.task)
        current = self.current_leases()
        choices = st.sampled_from(current) | st.sampled_from(newest) if current else st.sampled_from(newest)
        return data.draw(choices, label="lease")

    # No arguments (the oldest current lease reports success): hypothesis orders rules by their
    # number of arguments and leans towards the first valid one, and finishing moves a job along.
    @precondition(lambda self: self.current_leases())
    @rule()
    def finish_ok(self) -> None:
        self.begin()
        self._finish(self.current_leases()[0], True, True)

    @precondition(lambda self: self.current_leases())
    @rule(data=st.data(), retryable=st.booleans())
    def finish_failed(self, data: st.DataObject, retryable: bool) -> None:
        self.begin()
        self._finish(data.draw(st.sampled_from(self.current_leases()), label="lease"), False, retryable)

    @precondition(lambda self: self.stale_leases())
    @rule(data=st.data(), ok=st.booleans())
    def finish_stale(self, data: st.DataObject, ok: bool) -> None:
        """A result from a lease kept from before: refused, and nothing changes."""
        self.begin()
        stale = self.stale_leases()
        # Most interesting are the newest lease of a task: just run out, revoked or used up.
        newest = [lease for lease in stale if self.latest[lease.task] == lease]
        choices = st.sampled_from(newest) | st.sampled_from(stale) if newest else st.sampled_from(stale)
        lease = data.draw(choices, label="stale lease")
        before = self.frozen()
        try:
            self.ledger.finish(lease, ok, self.now, error=None if ok else "late")
        except LeaseLost:
            pass
        else:
            raise AssertionError(f"a stale lease finished its task: {lease}")
        assert self.frozen() == before, "a refused stale finish changed the job"

    @rule(advance=st.sampled_from([0, 5, 30, "to expiry"]), this_job=st.booleans())
    def expire(self, advance: int | str, this_job: bool) -> None:
        """Recover expired leases, `advance` seconds on (as a supervisor polling now and then)
        or at exactly the first expiry of a live lease, of every job or of this one."""
        self.begin()
        self.advance(advance)
        tasks = self.ref_tasks()
        due = sorted(
            t.id for t in tasks.values()
            if t.state is TaskState.RUNNING and self.expiry[(t.id, t.claims)] < self.now
        )
        expected = {task_id: t.state for task_id, t in tasks.items()}
        for task_id in due:  # a lease that ran out is no failure of the task's: queued again, never failed
            expected[task_id] = TaskState.QUEUED
        expired = self.ledger.expire(self.now, job_id=self.job if this_job else None)
        assert sorted(expired) == [(self.job, task_id) for task_id in due]
        assert self.states() == expected
        for task_id in due:
            after = self.ref_tasks()[task_id]
            assert (after.error, after.attempts, after.claims) == (LAPSED, tasks[task_id].attempts - 1, tasks[task_id].claims)

    def pick_task(self, data: st.DataObject, tasks: dict[str, Task], preferred: Iterable[TaskState]) -> str:
        """A task, most often one in a `preferred` state (where the transition does something)."""
        ordered = sorted(tasks, key=lambda t: tasks[t].spec.seq)
        wanted = [t for t in ordered if tasks[t].state in set(preferred)]
        choices = st.sampled_from(wanted) | st.sampled_from(ordered) if wanted else st.sampled_from(ordered)
        return data.draw(choices, label="task")

    @rule(data=st.data(), reason=st.sampled_from([None, "not needed"]))
    def cancel_task(self, data: st.DataObject, reason: str | None) -> None:
        self.begin()
        tasks = self.ref_tasks()
        task_id = self.pick_task(data, tasks, (TaskState.BLOCKED, TaskState.QUEUED, TaskState.RUNNING))
        if tasks[task_id].state.terminal:
            before = self.frozen()
            try:
                self.ledger.cancel(self.job, task_id, self.now, reason)
            except InvalidTransition:
                pass
            else:
                raise AssertionError(f"cancelled {task_id}, which was already {tasks[task_id].state.value}")
            assert self.frozen() == before
            return
        expected = {t: task.state for t, task in tasks.items()}
        expected[task_id] = TaskState.CANCELLED
        skip_from(expected, tasks, task_id)
        self.ledger.cancel(self.job, task_id, self.now, reason)
        assert self.states() == expected
        assert self.ref_tasks()[task_id].error == reason

    # Only once the job got somewhere, and while there is something left to cancel.
    @precondition(lambda self: len(self.granted) >= 4 and not all(t.state.terminal for t in self.ref_tasks().values()))
    @rule(reason=st.sampled_from([None, "abandoned"]))
    def cancel_job(self, reason: str | None) -> None:
        self.begin()
        tasks = self.ref_tasks()
        if all(t.state.terminal for t in tasks.values()):
            before = self.frozen()
            try:
                self.ledger.cancel(self.job, None, self.now, reason)
            except InvalidTransition:
                pass
            else:
                raise AssertionError("cancelled a job whose tasks had all finished")
            assert self.frozen() == before
            return
        expected = {t: TaskState.CANCELLED if not task.state.terminal else task.state for t, task in tasks.items()}
        self.ledger.cancel(self.job, None, self.now, reason)
        assert self.states() == expected
        assert self.swarm.refs.snapshot(self.job).state.cancelled
        assert self.ledger.claim("w1", 10.0, self.now, job_id=self.job) is None

    @precondition(lambda self: self.job is not None and any(t.state in POISON for t in self.ref_tasks().values()))
    @rule(data=st.data())
    def retry(self, data: st.DataObject) -> None:
        self.begin()
        tasks = self.ref_tasks()
        task_id = self.pick_task(data, tasks, POISON)
        task = tasks[task_id]
        allowed = task.state in POISON and not any(tasks[d].state in POISON for d in task.spec.depends_on)
        before = self.frozen()
        try:
            self.ledger.retry(self.job, task_id, self.now)
        except InvalidTransition:
            assert not allowed, f"retry of {task_id} ({task.state.value}) refused"
            assert self.frozen() == before, "a refused retry changed the job"
            return
        assert allowed, f"retry of {task_id} ({task.state.value}, deps {task.spec.depends_on}) accepted"
        expected = {t: other.state for t, other in tasks.items()}
        ready = all(tasks[d].state is TaskState.SUCCEEDED for d in task.spec.depends_on)
        expected[task_id] = TaskState.QUEUED if ready else TaskState.BLOCKED
        revive_from(expected, tasks, task_id)
        assert self.states() == expected
        after = self.ref_tasks()[task_id]
        assert (after.attempts, after.error, after.skipped_because) == (0, None, None)
        assert not self.swarm.refs.snapshot(self.job).state.cancelled

    # -- invariants -------------------------------------------------------------------------

    @invariant()
    def invariants_hold(self) -> None:
        """Run after every step; only a step that passed them lets teardown drive the job on."""
        if self.job is None:
            return
        self.index_and_refs_agree()
        self.leases_match_running_tasks()
        self.dependencies_respected()
        self.clean = True

    def index_and_refs_agree(self) -> None:
        snapshot = self.swarm.refs.snapshot(self.job)
        tasks = snapshot.tasks()
        assert self.swarm.index.job_tip(self.job) == snapshot.tip
        status = self.swarm.status(self.job)
        rows = status["tasks"]
        assert [r["id"] for r in rows] == [t.id for t in tasks]
        for row, task in zip(rows, tasks):
            for column, value in row.items():
                assert value == index_value(task, column), f"{task.id}.{column}: index {value!r}, ref {index_value(task, column)!r}"
        counts = Counter(t.state.value for t in tasks)
        assert status["counts"] == dict(sorted(counts.items()))
        assert snapshot.state.counts == status["counts"]
        assert status["status"] == snapshot.state.status()

    def leases_match_running_tasks(self) -> None:
        tasks = {t.id: t for t in self.swarm.refs.snapshot(self.job).tasks()}
        rows = [r for r in self.swarm.index.leases() if r.job == self.job]
        per_task = Counter(task_id for _, task_id, *_ in rows)
        assert all(n == 1 for n in per_task.values()), f"two leases on one task: {rows}"
        leased = {task_id: (owner, token, expires) for _, task_id, owner, token, expires in rows}
        for task in tasks.values():
            if task.state is TaskState.RUNNING:
                assert task.id in leased, f"running task {task.id} has no lease"
                owner, token, expires = leased[task.id]
                assert token == task.claims, f"{task.id}: lease token {token}, task claims {task.claims}"
                assert owner == task.owner
                assert expires == self.expiry[(task.id, token)]
            else:
                assert task.id not in leased, f"{task.id} is {task.state.value} but still leased: {leased[task.id]}"
                assert task.owner is None and task.lease_expires is None
        # Fencing: at most one granted lease per task would be accepted now, and tokens only grow.
        live = Counter(lease.task for lease in self.granted if self.live(lease, tasks))
        assert all(n == 1 for n in live.values()), f"two live leases on one task: {live}"
        for task_id, task in tasks.items():
            tokens = [lease.token for lease in self.granted if lease.task == task_id]
            assert tokens == sorted(set(tokens)), f"{task_id}: fencing tokens reused or out of order: {tokens}"
            assert task.claims == len(tokens)

    def dependencies_respected(self) -> None:
        tasks = {t.id: t for t in self.swarm.refs.snapshot(self.job).tasks()}
        index_states = {r["id"]: r["state"] for r in self.swarm.status(self.job)["tasks"]}
        for task in tasks.values():
            deps = [tasks[d].state for d in task.spec.depends_on]
            all_done = all(s is TaskState.SUCCEEDED for s in deps)
            poisoned = [d for d in task.spec.depends_on if tasks[d].state in POISON]
            where = f"{task.id} ({task.state.value}, deps {dict(zip(task.spec.depends_on, map(str, deps)))})"
            assert index_states[task.id] == task.state.value
            if task.state in (TaskState.QUEUED, TaskState.RUNNING, TaskState.SUCCEEDED):
                assert all_done, f"{where}: not all dependencies succeeded"
            if task.state is TaskState.BLOCKED:
                assert not all_done, f"{where}: blocked although every dependency succeeded"
            if poisoned:
                assert task.state in TERMINAL, f"{where}: a dependency did not succeed, yet it is not terminal"
            if task.state is TaskState.SKIPPED and task.skipped_because is not None:
                assert task.skipped_because in tasks
            assert 0 <= task.attempts <= task.spec.max_attempts, f"{where}: {task.attempts} attempts"

    # -- the end ----------------------------------------------------------------------------

    def drive_to_end(self) -> None:
        """Expire every lease with a large jump, then finish everything that can run."""
        for _ in range(3):
            self.now += 100_000
            self.ledger.expire(self.now)
            tasks = self.ref_tasks()
            for lease in self.granted:
                if self.live(lease, tasks):  # none can be: every lease has run out
                    raise AssertionError(f"{lease} survived a {100_000} s jump")
            while (lease := self.ledger.claim("closer", 60.0, self.now, job_id=self.job)) is not None:
                self.granted.append(lease)
                self.expiry[(lease.task, lease.token)] = self.now + 60.0
                self.ledger.finish(lease, True, self.now)
            self.invariants_hold()
            if all(t.state.terminal for t in self.ref_tasks().values()):
                break
        tasks = self.ref_tasks()
        assert all(t.state in TERMINAL for t in tasks.values()), {t: s.state.value for t, s in tasks.items()}
        status = self.swarm.status(self.job)
        assert sum(status["counts"].values()) == len(tasks)
        assert set(status["counts"]) <= {s.value for s in TERMINAL}
        assert status["status"] in TERMINAL_JOB
        assert [r for r in self.swarm.index.leases() if r.job == self.job] == []
        if all(t.state is TaskState.SUCCEEDED for t in tasks.values()):
            assert status["status"] == "succeeded"

    def teardown(self) -> None:
        try:
            if self.job is not None and self.clean:
                self.drive_to_end()
        finally:
            self.swarm.close()
            shutil.rmtree(self.path, ignore_errors=True)


def test_ledger_state_machine() -> None:
    run_state_machine_as_test(
        LedgerMachine,
        settings=settings(
            max_examples=25,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )


def test_dag_spec_round_trips(tmp_path: Path) -> None:
    """The generator's spec text is what the machine thinks it submits."""
    path = tmp_path / "r"
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    swarm = Swarm(path, clock=lambda: START)
    try:
        dag = [("t0", [], 1, 0), ("t1", ["t0"], 2, 1), ("t2", ["t0", "t1"], 3, 0)]
        job = swarm.submit_text(dag_spec(dag))
        tasks = swarm.refs.snapshot(job).tasks()
        assert [(t.id, list(t.spec.depends_on), t.spec.max_attempts, t.spec.priority) for t in tasks] == [
            (i, d, m, p) for i, d, m, p in dag
        ]
        assert [t.spec.dependents for t in tasks] == [("t1", "t2"), ("t2",), ()]
    finally:
        swarm.close()

