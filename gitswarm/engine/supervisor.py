"""The supervisor: keep N worker processes busy until the job (or the queue) is done.

Workers are forked processes that loop claim → run → finish on their own.
The supervisor reaps them: a worker that died has its adapter's process
group killed and its leases expired at once, and is replaced while work
remains. It also expires stale leases of workers it does not know (another
supervisor's, killed with -9), and reports progress as events.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from gitswarm.engine.swarm import Swarm
from gitswarm.engine.worker import Worker, WorkerOptions
from gitswarm.model.ids import new_id

Event = dict[str, Any]
EventSink = Callable[[Event], None]
POLL_SECONDS = 0.05
IDLE_MIN_SECONDS = 0.002
IDLE_MAX_SECONDS = 0.2
FINISHED = ("succeeded", "failed", "cancelled")

_fork = multiprocessing.get_context("fork")


@dataclass(frozen=True)
class WorkOptions:
    workers: int = 4
    job: str | None = None
    until_idle: bool = False
    worker: WorkerOptions = WorkerOptions()


def is_done(swarm: Swarm, options: WorkOptions) -> bool:
    """The job is finished; or, with until_idle, nothing is queued or running anywhere."""
    # Trust as of now: a job pulled while this run goes on is skipped, never waited for.
    exclude, skip = options.worker.exclude, options.worker.skip_jobs | swarm.ledger.untrusted_jobs()
    if options.job is not None:
        job = swarm.index.job(options.job)
        if job is None or job["status"] in FINISHED:
            return True
        return bool(exclude) and swarm.index.stalled(options.job, exclude)
    if options.until_idle:
        return swarm.index.idle() or (bool(exclude or skip) and swarm.index.stalled(None, exclude, skip))
    return False


def worker_main(path: str, owner: str, options: WorkOptions, adapter_pgid: Any, done: Any) -> None:
    """The body of one worker process; `adapter_pgid` and the `done` event are shared with the supervisor.

    The first worker to find the work done sets `done`, which wakes the idle
    ones at once instead of after their backoff sleep.
    """
    signal.signal(signal.SIGTERM, _raise_interrupt)
    swarm = Swarm(path)
    swarm.ledger.trusted_remotes = options.worker.trusted_remotes
    workdir = swarm.repo.workdir or Path(path)

    def on_adapter(pgid: int) -> None:
        adapter_pgid.value = pgid

    worker = Worker(swarm.ledger, workdir, owner, replace(options.worker, job=options.job), on_adapter=on_adapter)
    idle = IDLE_MIN_SECONDS
    try:
        while True:
            if worker.step().lease is not None:
                idle = IDLE_MIN_SECONDS
                continue
            if is_done(swarm, options):
                done.set()
                return
            if done.wait(idle):
                return
            idle = min(idle * 2, IDLE_MAX_SECONDS)
    except KeyboardInterrupt:
        return
    finally:
        swarm.close()


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


class Supervisor:
    def __init__(self, swarm: Swarm, options: WorkOptions, on_event: EventSink = lambda e: None) -> None:
        self.swarm = swarm
        self.options = options
        self.on_event = on_event
        self.workers: dict[str, multiprocessing.Process] = {}
        self.adapter_pgids: dict[str, Any] = {}  # owner -> shared int: its running adapter's group
        self.seen: dict[tuple[str, str], tuple[str, int]] = {}
        # One job: report all its tasks. The whole queue: only what changes from now on,
        # not every task the repository ever ran.
        self.since = 0.0 if options.job else swarm.clock()
        self.path = str(swarm.repo.workdir or swarm.repo.common_dir)
        self.done = _fork.Event()

    def _start_worker(self) -> None:
        owner = f"w-{new_id()[-8:]}"
        pgid = _fork.Value("i", 0, lock=False)
        process = _fork.Process(target=worker_main, args=(self.path, owner, self.options, pgid, self.done), name=owner, daemon=False)
        process.start()
        self.workers[owner] = process
        self.adapter_pgids[owner] = pgid

    def run(self) -> set[str]:
        """Work until done; the jobs whose tasks changed meanwhile. Ctrl-C stops every worker
        and requeues what they held."""
        started = time.monotonic()
        self.on_event({"event": "start", "job": self.options.job, "workers": self.options.workers})
        for _ in range(self.options.workers):
            self._start_worker()
        try:
            while True:
                self._reap()
                self.swarm.ledger.expire(self.swarm.clock())
                self._report()
                if is_done(self.swarm, self.options):
                    self.done.set()
                    if not any(p.is_alive() for p in self.workers.values()):
                        break
                # Wake early when a worker exits: the last one out ends the run.
                wait([p.sentinel for p in self.workers.values()], timeout=POLL_SECONDS)
        except KeyboardInterrupt:
            self.stop()
            raise
        finally:
            self._report()
        self.on_event({"event": "done", "job": self.options.job, "wall": round(time.monotonic() - started, 3)})
        return {job for job, _ in self.seen}

    def _reap(self) -> None:
        done = is_done(self.swarm, self.options)
        for owner, process in list(self.workers.items()):
            if process.is_alive():
                continue
            process.join()
            del self.workers[owner]
            requeued = self.release(owner)
            if process.exitcode != 0 or requeued:
                self.on_event({"event": "worker_exit", "worker": owner, "code": process.exitcode, "requeued": requeued})
            if not done:
                self._start_worker()

    def release(self, owner: str) -> list[str]:
        """A worker is gone: kill the adapter it left running and requeue its tasks."""
        shared = self.adapter_pgids.pop(owner, None)
        if shared is not None and shared.value:
            try:
                os.killpg(shared.value, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        expired = self.swarm.ledger.expire(self.swarm.clock(), owner=owner)
        return [f"{job}/{task}" for job, task in expired]

    def stop(self) -> None:
        for process in self.workers.values():
            if process.is_alive():
                process.terminate()
        for owner, process in list(self.workers.items()):
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join()
            self.release(owner)
        self.workers.clear()

    def _report(self) -> None:
        for job, task, state, attempts, error, updated in self.swarm.index.changed_tasks(self.since, self.options.job):
            self.since = max(self.since, updated)
            key = (job, task)
            if self.seen.get(key) == (state, attempts):
                continue
            self.seen[key] = (state, attempts)
            self.on_event({"event": "task", "job": job, "task": task, "state": state, "attempt": attempts, "error": error})
