"""One worker process, forked by the supervisor (engine/jobs/supervisor.py): it loops claim, run, finish
on its own until its job is done, and the options a supervisor runs with (`WorkOptions`)."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from gitswarm.engine.child_signals import die_with_parent, stop_on_sigterm
from gitswarm.engine.jobs.worker import Worker, WorkerOptions
from gitswarm.engine.swarm import Swarm
from gitswarm.model.errors import DiskFull, GitswarmError
from gitswarm.model.limits import DEFAULT_CLOCK_SKEW_SECONDS
from gitswarm.model.records import FINISHED
from gitswarm.store.group_slots import Seat
from gitswarm.store.index import IndexBroken
from gitswarm.store.leases import Ask, Leases

if TYPE_CHECKING:  # for annotations only: a local run never loads the many-machines modules
    from types import ModuleType

    from gitswarm.engine.machines.crew import Crew

IDLE_MIN_SECONDS = 0.002
IDLE_MAX_SECONDS = 0.2
REMOTE_IDLE_MAX_SECONDS = 0.05
EXIT_DISK_FULL = 75  # a worker found the disk full (EX_TEMPFAIL): the run stops


class WorkOptions(msgspec.Struct, frozen=True):
    workers: int = 4
    job: str | None = None
    until_idle: bool = False
    worker: WorkerOptions = WorkerOptions()
    remote: str | None = None  # `work --remote`: this remote arbitrates every claim (engine/machines/remote_leases.py)
    clock_skew: float = DEFAULT_CLOCK_SKEW_SECONDS  # how far past its deadline another machine's lease is expired


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


def remote_work_module() -> ModuleType:
    """engine/machines/remote_work.py, loaded the first time a run is given a remote."""
    from gitswarm.engine.machines import remote_work  # deferred: ~45 ms of imports a local run never needs

    return remote_work


def worker_main(
    path: str, owner: str, options: WorkOptions, adapter_pgid: Any, done: Any, supervisor: int | None = None,
    crew: Crew | None = None, stopped_by: Any = None, group: Seat | None = None,
) -> None:
    """The body of one worker process; `adapter_pgid` and the `done` event are shared with the supervisor.

    The first worker to find the work done sets `done`, which wakes the idle
    ones at once instead of after their backoff sleep. `supervisor` is the pid
    of the process that forked this one: the worker does not outlive it. A
    full disk ends the worker with EXIT_DISK_FULL and its message in the shared
    `stopped_by` buffer: the supervisor stops the run and says it once. `group`
    is its slot for finishes the workers write for each other (store/group_commit.py).
    """
    stop_on_sigterm()  # first: the parent-death signal must land here
    if supervisor is not None and not die_with_parent(supervisor):
        return  # the supervisor died before we asked to die with it
    supervised = (lambda: True) if supervisor is None else (lambda: os.getppid() == supervisor)
    swarm = Swarm(path)
    swarm.ledger.trusted_remotes = options.worker.trusted_remotes
    swarm.ledger.group = group if options.remote is None else None  # through a remote, the remote ledger's
    workdir = swarm.repo.workdir or Path(path)

    def on_adapter(pgid: int) -> None:
        adapter_pgid.value = pgid

    ledger: Leases = swarm.ledger
    pipeline = None
    worker_options = msgspec.structs.replace(options.worker, job=options.job)
    if options.remote is not None:  # this machine's workers claim for each other, and say why pushes do not land
        o = worker_options
        ask = Ask(owner, o.lease, o.job, o.exclude, o.skip_jobs)
        ledger, pipeline = remote_work_module().worker_leases(swarm, options.remote, options.clock_skew, ask, crew, group)
    worker = Worker(ledger, workdir, owner, worker_options, on_adapter=on_adapter, supervised=supervised, pipeline=pipeline)
    idle = IDLE_MIN_SECONDS
    # A sibling may claim for an idle worker through the remote: it looks for that task often.
    idle_max = IDLE_MAX_SECONDS if crew is None else REMOTE_IDLE_MAX_SECONDS
    try:
        while supervised():
            try:
                swarm.index.check_file()
                claimed = worker.step().lease is not None
                finished = not claimed and is_done(swarm, options)
            except sqlite3.DatabaseError as exc:
                worker.guard.recover(exc)
                continue
            worker.guard.ok()
            if claimed:
                idle = IDLE_MIN_SECONDS
                continue
            if finished:
                done.set()
                return
            if done.wait(idle):
                return
            idle = min(idle * 2, idle_max)
    except KeyboardInterrupt:
        return
    except IndexBroken as exc:
        raise SystemExit(f"gitswarm: worker {owner}: {exc}") from None
    except DiskFull as exc:  # its lease is released by the supervisor, which stops the run
        if stopped_by is not None:
            stopped_by.value = str(exc).encode(errors="surrogateescape")[: len(stopped_by) - 1]  # a path's own bytes
        raise SystemExit(EXIT_DISK_FULL) from None
    finally:
        # Stopping already: a second SIGTERM (the supervisor's, after the group's) must not turn the way out into
        # a traceback. The supervisor still SIGKILLs a worker that does not exit in time.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if worker.pipeline is not None:  # a finished result still waiting for its push: one more try
            with contextlib.suppress(GitswarmError, sqlite3.DatabaseError, KeyboardInterrupt):
                worker.pipeline.flush(patient=False)
        swarm.close()
