"""A machine's eye on the remote during `work --remote`: fetch, merge, expire what died elsewhere.

One process per supervisor, with its own Swarm (its own index connection and
repository handle): every `SYNC_SECONDS` while a worker here waits for work
(backing off to `QUIET_SYNC_SECONDS` once fetches brought nothing new for
`PROMPT_SECONDS`; to `BUSY_SYNC_SECONDS` while every worker runs a task,
waking the moment one waits; `IDLE_SYNC_SECONDS` while nothing is queued
or running) it fetches the jobs from the remote
and merges them into the local refs and index, so that idle workers see new
work and finished jobs, then pushes the expiry of every lease whose deadline
passed more than the clock-skew allowance ago, whichever machine held it (a
machine killed with -9 leaves its leases to run out). When the remote does
not answer it backs off with jitter and says so; running tasks go on.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import multiprocessing.queues
import os
import queue
import time
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from typing import Any

from gitswarm.engine.child_signals import die_with_parent, stop_on_sigterm
from gitswarm.engine.machines.arbiter import Arbiter, Backoff, RemoteRefused
from gitswarm.engine.machines.crew import Siblings
from gitswarm.engine.machines.remote_leases import RemoteLedger
from gitswarm.engine.swarm import Swarm
from gitswarm.model.errors import GitswarmError

SYNC_SECONDS = 0.25  # while tasks are queued or running: idle workers see new work, finishing ones the end
QUIET_SYNC_SECONDS = 1.0  # while they are but fetches bring nothing new
# While every worker here runs a task: none could take new work, and its pushes find out what moved when refused,
# so the watch looks only for leases that died elsewhere and for cancels. It wakes as soon as a worker waits.
BUSY_SYNC_SECONDS = 5.0
WAKE_POLL_SECONDS = 0.05  # how often a busy machine's watch looks whether a worker here started waiting
# How long an idle worker's machine keeps looking at SYNC_SECONDS after the last change it fetched: the end of a
# job of short tasks (the others' last finishes) is seen within a quarter second, a long task is not polled for.
PROMPT_SECONDS = 2.0
IDLE_SYNC_SECONDS = 2.0  # while nothing is: a remote service is not polled hard for nothing

_fork = multiprocessing.get_context("fork")


@dataclass(frozen=True)
class RemoteState:
    """What the watcher last found: reachable or not, what the remote said, the wait before the next try."""

    reachable: bool = True
    said: str = ""
    retry_in: float = 0.0
    expired: tuple[str, ...] = ()  # JOB/TASK leases it expired since last asked
    refused: tuple[tuple[str, str], ...] = ()  # (job, why) of the jobs whose history there is refused here


class RemoteWatch:
    """The watch as a child process. Not a thread: the supervisor forks workers while it runs, and a
    fork would inherit the pipe of whatever git command a thread had running (its reader then waits
    for an EOF that comes only when every worker has exited)."""

    def __init__(
        self, path: str, remote: str, clock_skew: float, job: str | None, trusted: frozenset[str], siblings: Siblings | None = None,
    ) -> None:
        self.args = (path, remote, clock_skew, job, trusted, siblings)
        self.stopped = _fork.Event()
        self.reports: multiprocessing.queues.Queue[RemoteState] = _fork.Queue()
        self._state = RemoteState()
        self._process: BaseProcess | None = None

    def start(self) -> None:
        self._process = _fork.Process(
            target=watch_main, args=(*self.args, self.stopped, self.reports, os.getpid()), name="gitswarm-remote", daemon=True
        )
        self._process.start()

    def stop(self) -> None:
        self.stopped.set()
        if self._process is not None:
            self._process.join(timeout=30)
            if self._process.is_alive():
                self._process.kill()
                self._process.join()

    def state(self) -> RemoteState:
        """The latest state, with every lease expired since the last call."""
        expired: list[str] = []
        while True:
            try:
                report = self.reports.get_nowait()
            except queue.Empty:
                break
            expired.extend(report.expired)
            self._state = report
        return dataclasses.replace(self._state, expired=tuple(expired))


def next_wait(busy: bool, all_running: bool, quiet_for: float) -> float:
    """The watch's wait before its next fetch: `busy`, tasks are queued or running; `all_running`, every
    worker here runs one; `quiet_for`, seconds since a fetch last brought something new."""
    if not busy:
        return IDLE_SYNC_SECONDS
    if all_running:
        return BUSY_SYNC_SECONDS  # every worker here runs a task: they push, and fetch when refused
    return SYNC_SECONDS if quiet_for < PROMPT_SECONDS else QUIET_SYNC_SECONDS


def pause(stopped: Any, wait: float, waking: Siblings | None = None) -> bool:
    """Wait `wait` seconds, or less: until told to stop (True), or, with `waking` (the workers here, who were
    all running a task when the wait was chosen), until one of them waits for work; at once if one already does
    (it is to see the others' finishes and new work now, not at the next round)."""
    deadline = time.monotonic() + wait
    while waking is not None and not waking.any_idle():
        left = deadline - time.monotonic()
        if left <= 0:
            return bool(stopped.is_set())
        if stopped.wait(min(WAKE_POLL_SECONDS, left)):
            return True
    if waking is not None:
        return bool(stopped.is_set())
    return bool(stopped.wait(wait))


def watch_main(
    path: str, remote: str, clock_skew: float, job: str | None, trusted: frozenset[str], siblings: Siblings | None,
    stopped: Any, reports: Any, supervisor: int,
) -> None:
    """The body of the watch process: sync, sweep, report, until told to stop or the supervisor is gone."""
    stop_on_sigterm()
    if not die_with_parent(supervisor):
        return
    swarm = Swarm(path)
    try:
        swarm.ledger.trusted_remotes = trusted
        arbiter = Arbiter(swarm, remote)
        ledger = RemoteLedger(swarm.ledger, arbiter, clock_skew)
        backoff = Backoff(base=0.5, cap=5.0)
        wait = SYNC_SECONDS  # the command fetched just before the supervisor started: the workers claim first
        last = RemoteState()
        held: dict[str, str] = {}  # the shadow refs after the last fetch: unchanged, the next one waits longer
        changed = time.monotonic()
        waking: Siblings | None = None  # the workers whose waiting ends the wait: set while they all run a task
        while not pause(stopped, wait, waking) and os.getppid() == supervisor:
            try:
                reached = arbiter.try_sync(None if job is None else [job])
            except RemoteRefused:
                reached = True  # the job is in arbiter.refused: reported below, and the supervisor stops
            if not reached:
                wait, waking = backoff.next(), None  # the backoff is waited out whatever the workers do
                last = RemoteState(False, arbiter.said, round(wait, 1))
                reports.put(last)
                continue
            backoff.reset()
            try:
                expired = ledger.expire(swarm.clock(), job)
            except GitswarmError as exc:  # the sweep goes on at the next round
                expired, said = [], str(exc)
            else:
                said = ""
            refused = tuple(sorted(arbiter.refused.items()))
            state = RemoteState(True, said, 0.0, tuple(f"{j}/{t}" for j, t in expired), refused)
            if state != last:
                reports.put(state)
                last = dataclasses.replace(state, expired=())
            now_held = swarm.repo.list_refs(f"refs/gitswarm/shadow/{arbiter.key}/")
            if now_held != held:
                changed = time.monotonic()
            held = now_held
            busy = swarm.index.busy(job)
            all_running = siblings is not None and not siblings.any_idle()
            wait = next_wait(busy, all_running, time.monotonic() - changed)
            waking = siblings if busy and all_running else None
    except KeyboardInterrupt:
        return
    finally:
        swarm.close()
