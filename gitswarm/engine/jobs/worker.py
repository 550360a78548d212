"""A worker: claim a task, run its adapter while renewing the lease, write the result.

One iteration per `step()` call, with an injectable clock, so the loop can be
driven and tested a step at a time. A worker that loses its lease, or whose
supervisor is gone, kills its adapter's process group at once and writes
nothing. A query that fails on the index (a damaged, truncated or deleted
file) has the index rebuilt from the refs, and the work goes on.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from gitswarm.adapters.base import Invocation, Outcome, RunContext, execute
from gitswarm.adapters.process import ProcessResult, run_process
from gitswarm.adapters.registry import Registry, repo_registry
from gitswarm.engine.config import worktree_root
from gitswarm.model.artifacts import BlobRef
from gitswarm.model.errors import BadInput, CorruptRecord, LeaseLost, NotFound
from gitswarm.model.limits import DEFAULT_LEASE_SECONDS, DEFAULT_OUTPUT_CAP
from gitswarm.model.records import runs_in_users_tree
from gitswarm.model.stacking import stacked_on
from gitswarm.store.gitrepo import GitCommandError
from gitswarm.store.index import IndexBroken
from gitswarm.store.kept_results import KeptResults
from gitswarm.store.leases import Ask, Lease, Leases, Result
from gitswarm.store.worktrees import Worktrees

if TYPE_CHECKING:  # for annotations only: neither is loaded by a run of shell tasks
    from gitswarm.engine.jobs.agent_attempt import AgentAttempt
    from gitswarm.engine.machines.claim_ahead import Pipeline

CANCEL_POLL_SECONDS = 0.25
MIN_RENEW_SECONDS = 0.75  # a lease nearly out is renewed at most every 0.25 s (a third of this)
RENEW_RETRY_SECONDS = 1.0  # after a remote renewal that did not land
INDEX_RECOVERIES = 3  # index failures in a row that are rebuilt before giving up


class WorkerOptions(msgspec.Struct, frozen=True):
    lease: float = DEFAULT_LEASE_SECONDS
    output_cap: int = DEFAULT_OUTPUT_CAP
    job: str | None = None
    exclude: frozenset[str] = frozenset()  # adapters whose preflight failed: never leased here
    skip_jobs: frozenset[str] = frozenset()  # pulled jobs not trusted here: never leased
    trusted_remotes: frozenset[str] = frozenset()  # `work --trust REMOTE`: jobs pulled from these may run


class StepResult(msgspec.Struct, frozen=True):
    """What one step did: nothing to claim (lease None), or ran a task to this end."""

    lease: Lease | None
    accepted: bool = False
    ok: bool = False
    error: str | None = None


class IndexGuard:
    """Rebuild the index when a query on it fails; after a few failures with no
    success in between, raise IndexBroken rather than loop for ever."""

    def __init__(self, ledger: Leases, tries: int = INDEX_RECOVERIES) -> None:
        self.ledger = ledger
        self.tries = tries
        self.failures = 0

    def recover(self, exc: sqlite3.DatabaseError) -> None:
        """The index failed with `exc`: rebuild it from the refs (or reopen the one another process rebuilt)."""
        while True:
            self.failures += 1
            if self.failures > self.tries:
                raise IndexBroken(f"the index {self.ledger.index.path} kept failing after {self.tries} rebuilds: {exc}") from exc
            try:
                self.ledger.index.recover(self.ledger.refs)
                return
            except sqlite3.DatabaseError as again:
                exc = again

    def ok(self) -> None:
        """A query went through: the count of failures in a row starts again."""
        self.failures = 0


class Worker:
    def __init__(
        self,
        ledger: Leases,
        workdir: Path,
        owner: str,
        options: WorkerOptions = WorkerOptions(),
        clock: Callable[[], float] = time.time,
        write_blob: Callable[[bytes], str] | None = None,
        on_adapter: Callable[[int], None] = lambda pgid: None,
        registry: Registry | None = None,
        worktrees: Worktrees | None = None,
        supervised: Callable[[], bool] = lambda: True,
        pipeline: Pipeline | None = None,
    ) -> None:
        self.ledger = ledger
        self.pipeline = pipeline  # `work --remote`: round trips while tasks run (engine/machines/claim_ahead.py)
        self.workdir = workdir
        self.owner = owner
        self.options = options
        self.clock = clock
        repo = ledger.refs.repo
        self.write_blob = write_blob or repo.write_blob
        self.on_adapter = on_adapter  # told each adapter's process group id, and 0 when it is gone
        self.registry = registry or repo_registry(repo.workdir)
        self._worktrees = worktrees  # resolved when first needed: a bad [worktrees] root fails a task, not the worker
        self.next_lease: Lease | None = None  # claimed together with the last finish
        self.supervised = supervised  # False once the supervisor is gone: stop, write nothing
        self.guard = IndexGuard(ledger)
        self._agents: AgentAttempt | None = None

    @property
    def worktrees(self) -> Worktrees:
        """Where delegations and read-only checkouts go (reads `.gitswarm.toml` once; BadInput if it is invalid)."""
        if self._worktrees is None:
            repo = self.ledger.refs.repo
            self._worktrees = Worktrees(repo.workdir or repo.common_dir, repo.common_dir, worktree_root(repo.workdir, repo.common_dir))
        return self._worktrees

    def step(self) -> StepResult:
        """Claim one task and run it to the end; StepResult(None) when nothing is claimable."""
        lease, self.next_lease = self.next_lease, None
        if lease is None and self.pipeline is not None:
            lease = self.pipeline.next_lease()
        elif lease is not None and self.pipeline is not None:
            self.pipeline.took(lease)  # claimed with the last finish
        elif lease is None:
            lease = self.ledger.claim(
                self.owner,
                self.options.lease,
                self.clock(),
                job_id=self.options.job,
                exclude=self.options.exclude,
                skip_jobs=self.options.skip_jobs,
            )
        if lease is None:
            return StepResult(None)
        return self.execute(lease)

    def execute(self, lease: Lease) -> StepResult:
        spec = lease.spec
        background = self.pipeline.background if self.pipeline is not None else None
        heartbeat = _Heartbeat(self.ledger, lease, self.clock, self.options.lease, self.guard, self.supervised, background)
        try:
            if runs_in_users_tree(spec.mode, spec.adapter, self._stacked(lease)):
                ctx = RunContext(job=lease.job, task=lease.task, attempt=lease.attempt, workdir=self.workdir, base_env=os.environ)
                outcome = execute(self.registry.get(spec.adapter), spec, ctx, self._runner(heartbeat), self._store_blob, self.clock)
            else:
                outcome = self.agents().run(lease, self._runner(heartbeat), lambda: heartbeat.lost is not None)
        except (BadInput, GitCommandError) as exc:
            outcome = Outcome(ok=False, error=str(exc), retryable=isinstance(exc, GitCommandError))
        if heartbeat.lost:
            if self.pipeline is not None:  # never run again by this worker; on the remote, free at once
                self.pipeline.give_up(lease)
            return StepResult(lease, accepted=False, error=heartbeat.lost)
        if self.pipeline is not None:
            if self.pipeline.hold(lease, outcome):  # pushed while the next task runs
                return StepResult(lease, accepted=True, ok=outcome.ok, error=outcome.error)
            self.pipeline.flush()
        return self._finish(lease, outcome)

    def _stacked(self, lease: Lease) -> bool:
        """Whether a shell analyze task depends on implement tasks: it runs on a clean checkout of their
        patches (engine/delegation/combined.py), not in the user's tree."""
        spec = lease.spec
        if not spec.depends_on or spec.mode == "implement" or spec.adapter != "shell":
            return False
        snapshot = self.ledger.refs.snapshot(lease.job, self.ledger.index.job_tip(lease.job))
        return bool(stacked_on(spec, lambda task_id: snapshot.task(task_id).spec))

    def agents(self) -> AgentAttempt:
        """What runs this worker's agent tasks (and shell implement tasks), made when the first one comes."""
        if self._agents is None:
            # Deferred: the agent stack (delegations, the packet's knowledge, routing; ~40 ms of imports) is
            # loaded by the worker that meets an agent task, never by a run of shell tasks.
            from gitswarm.engine.jobs.agent_attempt import AgentAttempt

            self._agents = AgentAttempt(
                self.ledger, self.workdir, self.registry, lambda: self.worktrees, self._store_blob, self.clock,
                self.options.exclude,
            )
        return self._agents

    def _runner(self, heartbeat: _Heartbeat) -> Callable[[Invocation], ProcessResult]:
        def run(invocation: Invocation) -> ProcessResult:
            try:
                return run_process(
                    invocation.argv,
                    cwd=invocation.cwd,
                    env=invocation.env,
                    stdin=invocation.stdin,
                    timeout=invocation.timeout,
                    output_cap=self.options.output_cap,
                    on_tick=heartbeat.tick,
                    on_start=self.on_adapter,
                    tick=CANCEL_POLL_SECONDS,
                )
            finally:
                self.on_adapter(0)

        return run

    def _finish(self, lease: Lease, outcome: Outcome) -> StepResult:
        """Write the result and, in the same critical section, claim the next task.

        If the index fails under the write, it is rebuilt and the write made
        once more: the fencing token refuses it if the lease did not survive
        the rebuild (or if the first write had reached the ref after all).
        """
        try:
            try:
                self.next_lease = self._write(lease, outcome)
            except sqlite3.DatabaseError as exc:
                self.guard.recover(exc)
                self.next_lease = self._write(lease, outcome)
        except (NotFound, CorruptRecord) as exc:  # the job's ref was deleted, or no longer holds a commit
            return self._keep(lease, outcome, str(exc))
        except LeaseLost as exc:
            if self.ledger.index.job(lease.job) is None:  # refused because another worker found the job's ref gone
                return self._keep(lease, outcome, f"job {lease.job} is gone")
            if self.pipeline is not None:  # never taken up again by this worker, should the remote still hold it
                self.pipeline.give_up(lease)
            return StepResult(lease, accepted=False, ok=outcome.ok, error=str(exc))
        if outcome.ok and lease.spec.mode == "implement":  # its verdict accepted: memory, if `[memory] auto`
            self.agents().accepted(lease)
        return StepResult(lease, accepted=True, ok=outcome.ok, error=outcome.error)

    def _keep(self, lease: Lease, outcome: Outcome, why: str) -> StepResult:
        """The job's ref is gone from under the attempt: keep its result beside the repository, say so
        once, forget the job in the index (its ref decides), and go on (store/kept_results.py)."""
        refs = self.ledger.refs
        path = KeptResults(refs.repo.common_dir).keep(
            lease.job, lease.task, lease.token, self.owner, self.clock(), outcome.ok, outcome.error, outcome.artifacts, why
        )
        print(f"gitswarm: {lease.job}/{lease.task}: its result could not be written ({why}); kept in {path}: "
              "gitswarm recover records it once the job is back", file=sys.stderr)
        self.ledger.index.refresh(refs, [lease.job])
        return StepResult(lease, accepted=False, ok=outcome.ok, error=f"kept: {why}")

    def _write(self, lease: Lease, outcome: Outcome) -> Lease | None:
        o = self.options
        result = Result(outcome.ok, outcome.error, outcome.artifacts, outcome.retryable, outcome.base, outcome.skipped_because)
        _, next_lease = self.ledger.finish_and_claim(lease, result, self.clock(), Ask(self.owner, o.lease, o.job, o.exclude, o.skip_jobs))
        return next_lease

    def _store_blob(self, data: bytes, dropped: int) -> BlobRef:
        return BlobRef(oid=self.write_blob(data), size=len(data) + dropped, truncated=dropped)


class _Heartbeat:
    """Called on every tick of a running process: renew when due, stop if the lease
    or the supervisor is gone (`lost` says which)."""

    def __init__(
        self,
        ledger: Leases,
        lease: Lease,
        clock: Callable[[], float],
        ttl: float,
        guard: IndexGuard,
        supervised: Callable[[], bool] = lambda: True,
        background: Callable[[], None] | None = None,
    ) -> None:
        self.ledger = ledger
        self.lease = lease
        self.background = background  # work done while the task runs (engine/machines/claim_ahead.py)
        self.clock = clock
        self.ttl = ttl
        self.renewed = clock()
        # A third of the lease: of --lease, or of the shorter one a remote claim may carry (engine/machines/remote_leases.py).
        self.interval = max(min(ttl, lease.expires - self.renewed), MIN_RENEW_SECONDS) / 3
        self.guard = guard
        self.supervised = supervised
        self.lost: str | None = None

    def tick(self) -> str | None:
        if not self.supervised():
            self.lost = "supervisor gone"
            return self.lost
        now = self.clock()
        try:
            if now - self.renewed >= self.interval:
                before = self.lease.expires
                self.lease = self.ledger.renew(self.lease, self.ttl, now)
                self.renewed = now
                # Renewed: a third of the new lease. A remote renewal that did not land (the remote did not
                # answer) leaves the deadline where it was: tried again in a second (engine/machines/remote_leases.py).
                extended = self.lease.expires > before
                self.interval = max(min(self.ttl, self.lease.expires - now), MIN_RENEW_SECONDS) / 3 if extended else RENEW_RETRY_SECONDS
            if not self.ledger.held(self.lease, now):  # every tick: the agent stops at the deadline, renewed or not
                raise LeaseLost("lease no longer held")
        except LeaseLost:
            if self.ledger.index.job(self.lease.job) is None:
                # The job's ref is gone (deleted, or no commit): nobody can take the task over, so the run goes on
                # and its result is kept when it cannot be written (Worker._keep).
                return None
            self.lost = "lease lost"
            return self.lost
        except sqlite3.DatabaseError as exc:
            self.guard.recover(exc)  # the next tick asks the rebuilt index whether the lease survived
            return None
        self.guard.ok()
        if self.background is not None:
            self.background()
        return None
