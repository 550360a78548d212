"""A hypothesis state machine of leases whose holders crash, over the Ledger of a real repository.

Workers are real processes (each a sleeping child: its pid and start time are
the holder a claim records). In random order they claim tasks, finish them (ok,
failed, or with a lease no longer current), crash (kill -9, and a new process
takes the worker's place), and the clock runs leases out; `release_dead` and
`expire` end what died or ran out. Throughout: an attempt is counted only for
a real failure (a crash or a lease run out gives it back, so a task never fails
for them), every running task has exactly one lease whose holder is the process
that claimed it, a live holder is never released, and a result under a token
that is no longer current is refused and changes nothing.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
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
from gitswarm.model.errors import LeaseLost
from gitswarm.model.ops import Holder
from gitswarm.model.records import Task, TaskState
from gitswarm.store.holders import process_holder
from gitswarm.store.leases import LAPSED, Lease
from tests.conftest import spec_text

START = 1_700_000_000.0
WORKERS = 3
TTL = 60.0


def sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])


@dataclass
class Held:
    """A lease as the model knows it: which worker slot claimed it, as which process."""

    lease: Lease
    slot: int
    holder: Holder
    expires: float


class CrashMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.path = Path(tempfile.mkdtemp(prefix="gitswarm-crash-"))
        subprocess.run(["git", "init", "-q", str(self.path)], check=True, capture_output=True)
        self.now = START
        self.swarm = Swarm(self.path, clock=lambda: self.now)
        self.ledger = self.swarm.ledger
        self.procs = [sleeper() for _ in range(WORKERS)]
        self.holders = [process_holder(p.pid) for p in self.procs]
        self.job = ""
        self.max_attempts: dict[str, int] = {}
        self.failures: dict[str, int] = {}  # real failures per task: what attempts may count
        self.fatal: set[str] = set()  # tasks that failed without a retry
        self.granted: list[Held] = []
        self.turn = 0  # the worker slot that claims next

    # -- reading -----------------------------------------------------------------------------

    def tasks(self) -> dict[str, Task]:
        return {t.id: t for t in self.swarm.refs.snapshot(self.job).tasks()}

    def current(self, held: Held, tasks: dict[str, Task] | None = None) -> bool:
        task = (tasks or self.tasks())[held.lease.task]
        return task.state is TaskState.RUNNING and task.claims == held.lease.token

    def current_leases(self, live: bool | None = None) -> list[Held]:
        tasks = self.tasks() if self.job else {}
        return [
            h for h in self.granted
            if h.lease.task in tasks and self.current(h, tasks) and (live is None or (self.holders[h.slot] == h.holder) == live)
        ]

    def frozen(self) -> tuple:
        return (self.swarm.refs.snapshot(self.job).tip, self.swarm.index.leases())

    # -- setup -------------------------------------------------------------------------------

    @initialize(limits=st.lists(st.integers(1, 3), min_size=2, max_size=5))
    def submit(self, limits: list[int]) -> None:
        bodies = [f'id = "t{n}"\ncommand = "true"\nmax_attempts = {m}' for n, m in enumerate(limits)]
        self.job = self.swarm.submit_text(spec_text(*bodies))
        self.max_attempts = {f"t{n}": m for n, m in enumerate(limits)}
        self.failures = dict.fromkeys(self.max_attempts, 0)

    # -- rules -------------------------------------------------------------------------------

    @precondition(lambda self: self.current_leases(live=True))
    @rule()
    def crash(self) -> None:
        """kill -9 of the worker that holds the newest lease; another process takes its place (a new pid,
        a new holder). (No arguments, as claim.)"""
        slot = self.current_leases(live=True)[-1].slot
        self.procs[slot].kill()
        self.procs[slot].wait()
        self.procs[slot] = sleeper()
        self.holders[slot] = process_holder(self.procs[slot].pid)

    @precondition(lambda self: self.current_leases(live=False))
    @rule()
    def release_dead(self) -> None:
        tasks = self.tasks()
        dead = sorted(h.lease.task for h in self.current_leases(live=False))
        released = self.ledger.release_dead(self.now)
        assert sorted(r.task for r in released) == dead, "released other than exactly the dead holders' leases"
        after = self.tasks()
        for task_id in dead:
            assert after[task_id].state is TaskState.QUEUED
            assert after[task_id].attempts == tasks[task_id].attempts - 1 == self.failures[task_id]
            assert after[task_id].claims == tasks[task_id].claims

    # No arguments (the workers take turns): hypothesis leans towards rules with fewer, and claims move a job along.
    @rule()
    def claim(self) -> None:
        slot, self.turn = self.turn % WORKERS, self.turn + 1
        self.ledger.holder = self.holders[slot]
        lease = self.ledger.claim(f"w{slot}", TTL, self.now, job_id=self.job)
        if lease is None:
            return
        self.granted.append(Held(lease, slot, self.holders[slot], self.now + TTL))
        assert lease.attempt == self.failures[lease.task] + 1, "an attempt number counts only real failures"

    @rule(seconds=st.sampled_from([1.0, 5.0, 30.0, TTL + 1]), this_job=st.booleans())
    def expire(self, seconds: float, this_job: bool) -> None:
        """The clock runs on; leases past their deadline are expired (dead holders' or not)."""
        self.now += seconds
        due = sorted(h.lease.task for h in self.current_leases() if h.expires < self.now)
        expired = self.ledger.expire(self.now, job_id=self.job if this_job else None)
        assert sorted(task for _, task in expired) == due
        after = self.tasks()
        for task_id in due:
            assert (after[task_id].state, after[task_id].error, after[task_id].attempts) == (
                TaskState.QUEUED, LAPSED, self.failures[task_id],
            )

    @precondition(lambda self: self.current_leases(live=True))
    @rule(outcome=st.sampled_from(["ok", "failed", "failed", "fatal"]))
    def finish(self, outcome: str) -> None:
        """The oldest live lease's worker reports: success, a failure, or a failure not worth retrying."""
        held = self.current_leases(live=True)[0]
        ok, retryable = outcome == "ok", outcome != "fatal"
        task = self.ledger.finish(held.lease, ok, self.now, error=None if ok else "boom", retryable=retryable)
        if not ok:
            self.failures[held.lease.task] += 1
            if not retryable:
                self.fatal.add(held.lease.task)
        assert task.state is TaskState.SUCCEEDED if ok else task.state in (TaskState.QUEUED, TaskState.FAILED)

    @precondition(lambda self: any(not self.current(h) for h in self.granted))
    @rule(data=st.data(), ok=st.booleans())
    def finish_stale(self, data: st.DataObject, ok: bool) -> None:
        """A result under a token that is no longer current (released, expired, finished): refused, no change."""
        stale = [h for h in self.granted if not self.current(h)]
        held = data.draw(st.sampled_from(stale), label="stale lease")
        before = self.frozen()
        try:
            self.ledger.finish(held.lease, ok, self.now)
        except LeaseLost:
            pass
        else:
            raise AssertionError(f"a stale lease finished its task: {held.lease}")
        assert self.frozen() == before

    # -- invariants --------------------------------------------------------------------------

    @invariant()
    def attempts_count_only_real_failures(self) -> None:
        if not self.job:
            return
        for task_id, task in self.tasks().items():
            running = task.state is TaskState.RUNNING
            ongoing = running or task.state is TaskState.SUCCEEDED  # the attempt under way, or the one that succeeded
            assert task.attempts == self.failures[task_id] + ongoing, f"{task_id}: {task.attempts} attempts"
            gave_up = self.failures[task_id] >= self.max_attempts[task_id] or task_id in self.fatal
            assert (task.state is TaskState.FAILED) == (gave_up and not running and task.state is not TaskState.SUCCEEDED)

    @invariant()
    def one_lease_per_running_task_held_by_its_claimer(self) -> None:
        if not self.job:
            return
        tasks = self.tasks()
        rows = {(r.job, r.task): r for r in self.swarm.index.held_by_processes()}
        assert len(self.swarm.index.leases()) == len(rows), "a lease without its holder"
        for task_id, task in tasks.items():
            row = rows.get((self.job, task_id))
            assert (row is not None) == (task.state is TaskState.RUNNING)
            if row is not None:
                [held] = [h for h in self.granted if h.lease.task == task_id and h.lease.token == task.claims]
                assert (row.token, row.owner, row.holder) == (task.claims, f"w{held.slot}", held.holder)

    def teardown(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()
        self.swarm.close()
        shutil.rmtree(self.path, ignore_errors=True)


def test_leases_with_crashing_holders() -> None:
    run_state_machine_as_test(
        CrashMachine,
        settings=settings(max_examples=40, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]),
    )
