"""An agent task's attempt, from the worker's lease to its outcome: routed, told, run where it may.

The worker (engine/jobs/worker.py) runs shell analyze tasks itself, in the
user's tree; everything else comes here: the route (adapter, model, tier),
the prompt packet (the job's prefix, skills, memory, what dependencies
left, a follow-up's continuation, the steers delivered now), and the place
the agent runs: its own worktree for an implement task (engine/delegation),
a read-only checkout for an analyze task. The worker loads this module only
when it meets such a task, so that a run of shell tasks never pays for it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec

from gitswarm.adapters.base import Invocation, Outcome, RunContext
from gitswarm.adapters.process import ProcessResult
from gitswarm.adapters.registry import Registry
from gitswarm.engine.config import Config, load_config
from gitswarm.engine.delegation.attempt import Delegation
from gitswarm.engine.delegation.combined import InCheckout
from gitswarm.engine.delegation.confine import check_decision, decision
from gitswarm.engine.delegation.readonly import ReadOnly
from gitswarm.engine.delegation.stack import Refused, Stacked, stack_for
from gitswarm.engine.jobs.steering import deliver
from gitswarm.engine.knowledge.followup_section import continuation
from gitswarm.engine.knowledge.memory import auto_promote, notes_of
from gitswarm.engine.knowledge.memory_section import memory_section
from gitswarm.engine.knowledge.packet import build_packet
from gitswarm.engine.knowledge.skills import skills_section
from gitswarm.engine.routing.route import route
from gitswarm.model.artifacts import BlobRef, Patch, Run
from gitswarm.model.errors import BadInput
from gitswarm.model.routing import Route
from gitswarm.store.jobs import Snapshot
from gitswarm.store.leases import Lease, Leases
from gitswarm.store.worktrees import Worktrees

Runner = Callable[[Invocation], ProcessResult]


@dataclass(frozen=True)
class AgentAttempt:
    """What an agent attempt uses of its worker: the leases, where it may work, how it stores output."""

    leases: Leases
    workdir: Path
    registry: Registry
    worktrees: Callable[[], Worktrees]  # resolved when first needed: a bad [worktrees] root fails the task
    store_blob: Callable[[bytes, int], BlobRef]
    clock: Callable[[], float]
    exclude: frozenset[str]

    def run(self, lease: Lease, runner: Runner, lost: Callable[[], bool]) -> Outcome:
        """Run the leased attempt of an agent task (or of a shell implement task, or of a shell task stacked on
        implement tasks) to its outcome."""
        spec = lease.spec
        if spec.mode == "implement" and spec.adapter != "shell":
            refused = self._refused_follow_up(lease)
            if refused is not None:  # pulled instructions from elsewhere: nothing runs for them
                return Outcome(ok=False, error=refused, retryable=False)
        stacked = self._stacked(lease)
        if isinstance(stacked, Refused):  # an unverified upstream (skipped), or upstreams that conflict (failed)
            return Outcome(ok=False, error=stacked.error, retryable=False, skipped_because=stacked.skipped_because)
        base = stacked.base if stacked is not None else lease.base
        outcome = self._run_from(lease, base, runner, lost)
        if stacked is not None:
            outcome.base = stacked.base
        return outcome

    def _run_from(self, lease: Lease, base: str | None, runner: Runner, lost: Callable[[], bool]) -> Outcome:
        spec = lease.spec
        if spec.mode != "implement" and spec.adapter == "shell":  # stacked: the worker runs the others in the user's tree
            if base is None:
                raise BadInput(f"task {spec.id}: the job has no base commit")
            ctx = RunContext(job=lease.job, task=lease.task, attempt=lease.attempt, workdir=self.workdir, base_env=os.environ)
            repo = self.leases.refs.repo
            in_checkout = InCheckout(repo.workdir or repo.common_dir, self.worktrees().root, self.store_blob, self.clock)
            return in_checkout.run(self.registry.get(spec.adapter), ctx, base, spec, runner)
        # Read once per attempt, and only for an agent's: the packet and the routing share it.
        config = Config() if spec.adapter == "shell" else load_config(self.leases.refs.repo.workdir)
        routed = self._route(lease, config)
        adapter = self.registry.get(routed.adapter if routed is not None else spec.adapter)
        ctx = msgspec.structs.replace(self._context(lease, config), route=routed)
        if spec.mode == "implement":
            if base is None:
                raise BadInput(f"task {spec.id}: the job has no base commit for an implement task")
            auditor = self.registry.get(spec.auditor) if spec.auditor else None
            pulled = lease.job not in self.leases.trust.local_jobs()
            delegation = Delegation(
                self.leases.refs.repo, self.worktrees(), self.store_blob, self.clock, auditor, lambda n: self._steer(lease, n),
                sandbox=decision(config, adapter, os.environ) if spec.adapter != "shell" else None,
                checks_sandbox=check_decision(
                    config if spec.adapter != "shell" else load_config(self.leases.refs.repo.workdir), pulled, os.environ),
                auditor_sandbox=decision(config, auditor, os.environ) if auditor is not None else None,
            )
            follow = None if spec.adapter == "shell" else self._snapshot(lease).task(lease.task).follow_up
            if follow is not None and follow.resume_session:
                ctx = msgspec.structs.replace(ctx, session=follow.session)
            return delegation.run(adapter, ctx, base, spec, runner, lost, follow)
        if base is None:
            raise BadInput(
                f"task {spec.id}: the job has no base commit for a read-only analyze task "
                "(submitted by an older gitswarm?): submit it again"
            )
        readonly = ReadOnly(self.leases.refs.repo, self.worktrees().root, self.store_blob, self.clock,
                            decision(config, adapter, os.environ))
        return readonly.run(adapter, ctx, base, spec, runner)

    def _stacked(self, lease: Lease) -> Stacked | Refused | None:
        """Where a task that depends on implement tasks starts (engine/delegation/stack.py); None: the job's base."""
        if not lease.spec.depends_on:
            return None
        repo = self.leases.refs.repo
        return stack_for(repo, self._snapshot(lease), lease.task, notes_of(repo).weigh)

    def _refused_follow_up(self, lease: Lease) -> str | None:
        """Why the follow-up this attempt would carry out may not run here, or None (no follow-up, or one that may).

        A follow-up decides where an agent starts and what it is told. It runs when this clone made it, or
        when it continues from the job's base or from a patch of this very task that a verdict counted here
        judged (accepted or rejected): never from a commit anyone with push access merely named.
        """
        snapshot = self._snapshot(lease)
        follow = snapshot.task(lease.task).follow_up
        if follow is None or follow.op in self.leases.trust.ops_made_here() or follow.head is None:
            return None
        task = snapshot.task(lease.task)
        patch = snapshot.artifact(follow.patch) if follow.patch in task.artifacts else None
        if isinstance(patch, Patch) and patch.head == follow.head and patch.task == lease.task:
            judged = notes_of(self.leases.refs.repo).weigh(patch.head)
            if any(w.counted and w.verdict.producer == "gitswarm" and w.verdict.patch == follow.patch for w in judged):
                return None
        return (
            f"refused: follow-up {follow.op[:12]} was not made by this clone and does not continue a patch of "
            f"{lease.task} that a verdict here judged (its head {follow.head[:12]}); nothing ran"
        )

    def accepted(self, lease: Lease) -> None:
        """The attempt's result was written and it succeeded: an implement task's patch may become memory."""
        if lease.spec.mode == "implement":
            auto_promote(self.leases.refs.repo, self.leases.refs, lease.job, lease.task, self.clock)

    def _context(self, lease: Lease, config: Config) -> RunContext:
        """Where the agent runs, its prompt packet and what it may still spend."""
        ctx = RunContext(job=lease.job, task=lease.task, attempt=lease.attempt, workdir=self.workdir, base_env=os.environ)
        if lease.spec.adapter == "shell":  # a shell implement task: a command, no prompt
            return ctx
        snapshot = self._snapshot(lease)
        budget = snapshot.job.budget
        left = None if budget is None or budget.max_usd is None else max(budget.max_usd - snapshot.state.spent_usd, 0.0)
        repo = self.leases.refs.repo
        recalled = memory_section(repo, self.leases.refs, snapshot.job, lease.spec, lease.base, config.memory, self.clock())
        skills, chosen = skills_section(repo.workdir, lease.spec, config.skills)
        packet = build_packet(snapshot, lease.spec, repo.read_blob, memory=recalled, skills=skills)
        # A follow-up's continuation and the steering delivered to this attempt come last: they are its newest word.
        task = snapshot.task(lease.task)
        sections = continuation(snapshot, task, repo.read_blob) + deliver(self.leases, lease, snapshot, 0, self.clock())
        return msgspec.structs.replace(ctx, prompt=packet + sections, budget_usd=left, skills=chosen)

    def _route(self, lease: Lease, config: Config) -> Route | None:
        """The adapter and model of this attempt, and why (engine/routing/route.py); None for a shell task.
        After an attempt that failed for a provider reason, `[routing] fallback` may send it elsewhere."""
        if lease.spec.adapter == "shell":
            return None
        previous = None
        if lease.attempt > 1:
            snapshot = self._snapshot(lease)
            runs = reversed(snapshot.task(lease.task).artifacts)
            previous = next((r for a in runs if isinstance(r := snapshot.artifact(a), Run)
                             and r.routing is not None and r.attempt == lease.attempt - 1), None)
        return route(lease.spec, self.registry, config.routing, previous, self.exclude, config.adapters.disabled,
                     config.browser.models)

    def _snapshot(self, lease: Lease) -> Snapshot:
        return self.leases.refs.snapshot(lease.job, self.leases.index.job_tip(lease.job))

    def _steer(self, lease: Lease, round_: int) -> str:
        """The steering delivered to repair round `round_` of the leased attempt ("" when none waits)."""
        return deliver(self.leases, lease, self._snapshot(lease), round_, self.clock())
