"""The supervisor: keep N worker processes busy until the job (or the queue) is done.

Workers are forked processes that loop claim → run → finish on their own.
A local run starts as many as the machine has cores (at most N), and the
rest of its N once every worker holds a task and another is queued: tasks
shorter than a poll never wait for one, and a worker forked for them would
only take cores from the others.

The supervisor reaps them: a worker that died has its adapter's process
group killed and its leases expired at once, and is replaced while work
remains; one killed by a signal uses no attempt, one that failed with an
exit code of its own does. At its start and at every poll it also releases
the leases of dead workers it does not know (another supervisor's, killed
with -9: their claims name them, store/holders.py) and expires leases that
ran out, saying each (`requeued` events), and reports progress as events.

Workers die with their supervisor, kill -9 included: on Linux the kernel
sends them SIGTERM when it dies (PR_SET_PDEATHSIG), and every worker also
watches its parent pid. Either way it kills its adapter's process group and
exits without writing; the next run, `gitswarm recover` or `status` on this
machine finds it dead and requeues its tasks at once, no attempt used.
SIGTERM to the supervisor stops it as Ctrl-C does (workers stopped, their
tasks requeued), then raises Terminated.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import select
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING

from gitswarm.engine import recovery
from gitswarm.engine.events import EventSink
from gitswarm.engine.jobs.worker import IndexGuard
from gitswarm.engine.jobs.worker_process import EXIT_DISK_FULL, WorkOptions, is_done, remote_work_module, worker_main
from gitswarm.engine.swarm import Swarm
from gitswarm.model import codec
from gitswarm.model.errors import DiskFull, GitswarmError, WorkFailed
from gitswarm.model.ids import new_id
from gitswarm.model.records import Job, JobState, Task
from gitswarm.store.group_slots import Slots
from gitswarm.store.leases import LAPSED
from gitswarm.store.shared_memory import SharedBytes, SharedInt

if TYPE_CHECKING:  # for annotations only: a local run never loads the many-machines modules

    from gitswarm.engine.machines.crew import Siblings
    from gitswarm.engine.machines.remote_watch import RemoteState, RemoteWatch

POLL_SECONDS = 0.05
EXIT_TERMINATED = 143  # 128 + SIGTERM, what a shell reports for a process SIGTERM ended
STOPPED_BY_BYTES = 1024

_fork = multiprocessing.get_context("fork")


def wait(sentinels: Sequence[int], timeout: float) -> list[int]:
    """The worker sentinels (pipes a worker holds open until it exits) that are readable within `timeout`:
    multiprocessing.connection.wait for file descriptors, without importing that module (~2 ms)."""
    poller = select.poll()
    for fd in sentinels:
        poller.register(fd, select.POLLIN)
    return [fd for fd, _ in poller.poll(max(timeout, 0.0) * 1000)]


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def exit_cause(owner: str, process: BaseProcess) -> tuple[str, bool]:
    """Why a reaped worker's leases end, and whether its attempt counts: killed by a signal (kill -9, the
    OOM killer) or stopped is no failure of the task's; an exit code of its own is gitswarm failing under
    the task, counted so that such a task cannot loop for ever (a full disk is neither: the run stops)."""
    code, who = process.exitcode, f"its worker {owner} (pid {process.pid})"
    if code is None or code < 0:
        try:
            name = signal.Signals(-(code or 0)).name
        except ValueError:
            name = f"signal {-(code or 0)}"
        return f"{who} was killed by {name}", False
    if code == EXIT_DISK_FULL:
        return f"{who} found the disk full", False
    if code == 0:
        return f"{who} exited", False
    return f"{who} failed (exit {code})", True


class Terminated(GitswarmError):
    """SIGTERM stopped the run: its workers were stopped and their tasks requeued."""

    exit_code = EXIT_TERMINATED


class Supervisor:
    def __init__(self, swarm: Swarm, options: WorkOptions, on_event: EventSink = lambda e: None) -> None:
        self.swarm = swarm
        self.options = options
        self.on_event = on_event
        self.workers: dict[str, BaseProcess] = {}
        self.adapter_pgids: dict[str, SharedInt] = {}  # owner -> its running adapter's group (0: none)
        # (job, task) -> what was last said of it: state, attempt, and the worker running it (with --remote a task
        # may move to another machine's worker with neither changed: an expiry gives its attempt back, the claim
        # after it takes one, both seen in one fetch)
        self.seen: dict[tuple[str, str], tuple[str, int, str | None]] = {}
        # One job: report all its tasks. The whole queue: only what changes from now on,
        # not every task the repository ever ran.
        self.since = 0.0 if options.job else swarm.clock()
        self.path = str(swarm.repo.workdir or swarm.repo.common_dir)
        self.done = _fork.Event()
        # Each worker's own buffer for why it stopped the run (a full disk): read once it exited, never written by two.
        self.stopped_by: dict[str, SharedBytes] = {}
        self.guard = IndexGuard(swarm.ledger)
        self.terminated = False  # set by SIGTERM; the next poll stops the run
        self.ledger = swarm.ledger
        self.watch: RemoteWatch | None = None
        self.siblings: Siblings | None = None
        self.slots: dict[str, int] = {}  # worker owner -> its seat among its siblings, or its group-commit slot
        # Where the workers post finishes and claims for each other to write (store/group_commit.py; through a
        # remote, finishes for each other to push: engine/machines/finish_group.py).
        self.group = Slots(options.workers)
        self.remote_state: RemoteState | None = None
        # The workers to keep: all N with a remote (each claim waits on a push), else as many as there are cores
        # until every one holds a task with more queued (_more_wanted).
        self.wanted = options.workers if options.remote is not None else min(options.workers, usable_cores())
        self.push_problem = ""
        self.races_said = 0  # lost races said so far (`remote` events with `what` "race")
        if options.remote is not None:
            remote = remote_work_module()
            self.ledger = remote.remote_leases(swarm, options.remote, options.clock_skew)
            self.siblings = remote.Siblings(options.workers)
            self.watch = remote.RemoteWatch(
                self.path, options.remote, options.clock_skew, options.job, swarm.ledger.trusted_remotes, self.siblings,
            )
            self.remote_state = remote.RemoteState()

    def _start_worker(self) -> None:
        owner = f"w-{new_id()[-8:]}"
        if self.options.remote is not None:  # seen by every machine: say whose worker it is
            owner = remote_work_module().machine_owner(self.swarm.actor, owner)
        pgid, stopped_by = SharedInt(), SharedBytes(STOPPED_BY_BYTES)
        slot = min(set(range(self.options.workers)) - set(self.slots.values()))
        self.slots[owner] = slot
        crew = group = None
        if self.siblings is not None:
            self.siblings.seat(slot, owner)
            crew = remote_work_module().Crew(self.siblings, slot)
        if self.group is not None:
            self.group.clear(slot)
            group = self.group.seat(slot)
        args = (self.path, owner, self.options, pgid, self.done, os.getpid(), crew, stopped_by, group)
        process = _fork.Process(target=worker_main, args=args, name=owner, daemon=False)
        # Frozen, what exists at the fork is never walked by the worker's collector: its pages stay shared with this
        # process instead of being copied (less work per worker). This process unfreezes its own at once.
        gc.freeze()
        try:
            process.start()
        finally:
            gc.unfreeze()
        self.workers[owner] = process
        self.adapter_pgids[owner] = pgid
        self.stopped_by[owner] = stopped_by

    def run(self) -> set[str]:
        """Work until done; the jobs whose tasks changed meanwhile.

        Ctrl-C, SIGTERM (raised as Terminated) and any error stop every worker
        and requeue what they held.
        """
        started = time.monotonic()
        machine = remote_work_module().machine_name(self.swarm.actor) if self.options.remote is not None else None
        self.on_event({"event": "start", "job": self.options.job, "workers": self.options.workers, "machine": machine})
        with self._sigterm_stops():
            finished = False
            if self.watch is not None:
                self.watch.start()
            try:
                if self.watch is None:  # what a killed run left behind is queued again before anyone claims
                    with contextlib.suppress(sqlite3.DatabaseError):  # the first poll recovers the index, and does it
                        self._end_leases()
                codec.prepare(Job, JobState, Task)  # once, before the fork: not in every worker's first step
                for _ in range(self.wanted):
                    self._start_worker()
                self._supervise()
                finished = True
            finally:
                if self.watch is not None:
                    self.watch.stop()
                if not finished:
                    self.stop()
                    with contextlib.suppress(sqlite3.DatabaseError):  # an index that failed for good has nothing to say
                        self._report()
        self._report()
        self.on_event({"event": "done", "job": self.options.job, "wall": round(time.monotonic() - started, 3)})
        return {job for job, _ in self.seen}

    def _supervise(self) -> None:
        """Poll until the work is done. An index that fails is rebuilt and the polling goes on."""
        while not self.terminated:
            try:
                self.swarm.index.check_file()
                self._reap()
                if self.watch is None:
                    self._end_leases()
                else:
                    self._remote_events()
                self._report()
                done = is_done(self.swarm, self.options)
                if not done and self._more_wanted():
                    self.wanted = self.options.workers
            except sqlite3.DatabaseError as exc:
                self.guard.recover(exc)
                continue
            self.guard.ok()
            if done:
                self.done.set()
                if not any(p.is_alive() for p in self.workers.values()):
                    return
            else:
                while len(self.workers) < self.wanted:  # replace the workers that died, start the ones now wanted
                    self._start_worker()
            # Wake early when a worker exits: the last one out ends the run. Its pipe closes before the kernel
            # has it exited: wait for that (a moment) rather than poll again and again meanwhile.
            exiting = wait([p.sentinel for p in self.workers.values()], timeout=POLL_SECONDS)
            for process in self.workers.values():
                if process.sentinel in exiting:
                    process.join(POLL_SECONDS)
        raise Terminated("terminated by SIGTERM: workers stopped, their tasks requeued")

    def _more_wanted(self) -> bool:
        """Start the rest of the N workers: every one started holds a task, and another task could be claimed."""
        if self.wanted >= self.options.workers or not self.workers:
            return False
        if self.swarm.index.owners_holding(self.workers) != set(self.workers):
            return False
        worker = self.options.worker
        return self.swarm.ledger.claimable(self.swarm.clock(), self.options.job, worker.exclude, worker.skip_jobs)

    @contextlib.contextmanager
    def _sigterm_stops(self) -> Iterator[None]:
        """While supervising, SIGTERM stops the run at the next poll, as Ctrl-C does, instead
        of killing the supervisor and leaving its workers' leases to run out."""
        if threading.current_thread() is not threading.main_thread():
            yield  # only the main thread can handle signals
            return
        previous = signal.signal(signal.SIGTERM, self._on_sigterm)
        try:
            yield
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)

    def _on_sigterm(self, signum: int, frame: object) -> None:
        self.terminated = True

    def _reap(self) -> None:
        for owner, process in list(self.workers.items()):
            if process.is_alive():
                continue
            process.join()
            why, attempt_used = exit_cause(owner, process)
            requeued = self.release(owner, why, attempt_used)  # should the index fail here, the next poll releases it again
            del self.workers[owner]
            del self.slots[owner]
            stopped_by = self.stopped_by.pop(owner)
            if process.exitcode != 0 or requeued:
                self.on_event({"event": "worker_exit", "worker": owner, "code": process.exitcode, "requeued": requeued,
                               "why": why, "attempt_used": attempt_used})
            if process.exitcode == EXIT_DISK_FULL:  # every other worker would meet it too: stop, release, say it
                said = stopped_by.value.decode(errors="surrogateescape")
                raise DiskFull(said or f"disk full under {self.swarm.common_dir}")

    def release(self, owner: str, why: str | None = None, attempt_used: bool = False) -> list[str]:
        """A worker is gone: kill the adapter it left running and requeue its tasks (`why`; by default, it was
        stopped), the attempt counted only when `attempt_used`."""
        shared = self.adapter_pgids.pop(owner, None)
        if shared is not None and shared.value:
            try:
                os.killpg(shared.value, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        expired = self.ledger.expire(self.swarm.clock(), owner=owner, why=why, attempt_used=attempt_used)
        return [f"{job}/{task}" for job, task in expired]

    def _end_leases(self) -> None:
        """Release what dead workers of this machine held, and expire what ran out; say each (a `requeued` event)."""
        ledger, now = self.swarm.ledger, self.swarm.clock()
        ended = recovery.release_dead(self.swarm.index, lambda: ledger, now)
        ended += [recovery.ended(self.swarm.index, job, task, LAPSED, False) for job, task in ledger.expire(now)]
        for task in ended:
            self.on_event({"event": "requeued", **task})

    def stop(self) -> None:
        """SIGTERM every worker (each kills its adapter's group), then requeue what they held."""
        for process in self.workers.values():
            if process.is_alive():
                process.terminate()
        for process in self.workers.values():
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join()
        for owner in list(self.workers):
            # With an index that failed for good, or no room left to write, the leases run out instead:
            # `gitswarm recover` requeues them.
            with contextlib.suppress(sqlite3.DatabaseError, DiskFull):
                self.release(owner)
        self.workers.clear()
        self.slots.clear()
        self.stopped_by.clear()

    def _remote_events(self) -> None:
        """Say when the remote stops or starts answering, and which leases were expired elsewhere's."""
        assert self.watch is not None and self.remote_state is not None
        state = self.watch.state()
        if state.expired:
            self.on_event({"event": "expired", "tasks": list(state.expired)})
        for job, why in state.refused:
            if job not in dict(self.remote_state.refused):
                self.on_event({"event": "refused", "job": job, "remote": self.options.remote, "why": why})
            if job == self.options.job:
                raise WorkFailed(f"job {job}: what {self.options.remote} holds is refused here: {why}")
        if (state.reachable, state.said) != (self.remote_state.reachable, self.remote_state.said):
            self.on_event({"event": "remote", "remote": self.options.remote, "what": "fetch", "reachable": state.reachable,
                           "said": state.said, "retry_in": state.retry_in})
        self.remote_state = state
        races = self.siblings.races() if self.siblings is not None else 0
        if races > self.races_said:  # not a problem: said so that a machine that gets little work shows why
            self.on_event({"event": "remote", "remote": self.options.remote, "what": "race", "reachable": True,
                           "said": f"lost {races} race(s) for a task to another machine; fetched and picked again", "lost": races,
                           "retry_in": 0.0})
            self.races_said = races
        problem = self.siblings.problem() if self.siblings is not None else ""
        if problem != self.push_problem:  # the workers' pushes stopped landing (a hook, no push rights, down), or land again
            self.push_problem = problem
            self.on_event({"event": "remote", "remote": self.options.remote, "what": "push", "reachable": not problem,
                           "said": problem, "retry_in": 0.0})

    def _report(self) -> None:
        for job, task, state, attempts, error, updated, owner in self.swarm.index.changed_tasks(self.since, self.options.job):
            self.since = max(self.since, updated)
            key = (job, task)
            owner = owner if state == "running" else None
            if self.seen.get(key) == (state, attempts, owner):
                continue
            self.seen[key] = (state, attempts, owner)
            self.on_event({"event": "task", "job": job, "task": task, "state": state, "attempt": attempts, "error": error, "owner": owner})
