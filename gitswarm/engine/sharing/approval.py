"""`gitswarm approve`: a person lets a job run here.

Two things may wait for a person, and one approval grants both: a job pulled
from another clone (trust, store/trust.py), and the tasks that act outside the
repository which a pilot asked for (model/approval.py). The second is recorded
on the job itself as an `approved` operation: what, by whom, how.
"""

from __future__ import annotations

from typing import Literal

from gitswarm.engine.delegation import patches
from gitswarm.engine.delegation.merge import mergeable
from gitswarm.engine.results import MergeResult
from gitswarm.engine.swarm import Swarm
from gitswarm.model.approval import BY_COMMAND
from gitswarm.model.errors import WorkFailed
from gitswarm.model.ops import Approved
from gitswarm.store.jobs import Snapshot
from gitswarm.store.leases import Built
from gitswarm.store.repoconfig import person

Mode = Literal["merge", "squash", "rebase"]


def approve(swarm: Swarm, prefix: str, how: str = BY_COMMAND) -> dict:
    """Approve the job `prefix` names here; what was approved."""
    job_id = swarm.resolve_job(prefix)
    swarm.trust.approve(job_id)
    data: dict = {"approved": job_id}
    if job_id in swarm.ledger.awaiting_person():
        by = person(swarm.repo.workdir or swarm.common_dir)
        tasks = swarm.refs.snapshot(job_id).job.awaits_approval

        def build(s: Snapshot) -> Built:
            op = swarm.refs.next_op(Approved, s, swarm.clock(), tasks=tasks, by=by, how=how)
            swarm.trust.made_op(op.id)  # before it is written: only an approval made here counts here
            return op, ()

        change = swarm.ledger.transition(job_id, build)
        data["side_effects"] = {"tasks": list(tasks), "by": by, "how": how, "op": change.state.approvals[-1].op}
    return data


def approval_summary(swarm: Swarm, patch_prefix: str) -> str:
    """What `merge --approve` approves, said before it does: the job, where it came from, what runs here."""
    _, patch, snapshot = patches.find_patch(swarm, patch_prefix)
    origin = swarm.trust.load().origins.get(patch.job)
    spec = snapshot.task(patches.task_of(patch)).spec
    checks = ", ".join(map(str, spec.checks)) or "no checks of its own ([verify] or [audit] checks)"
    where = f"pulled from {origin}" if origin else "made here"
    return f"approving job {patch.job[:12]} ({where}: {snapshot.job.goal!r}); its checks run here: {checks}"


def approve_and_merge(
    swarm: Swarm, patch_prefix: str, into: str | None, mode: Mode, no_recheck: bool, repair: bool = False
) -> MergeResult:
    """`merge --approve`: approve the patch's job here, verify its head here unless a verdict that counts
    here already accepted it, then merge; each step refuses as it does alone."""
    patch_id, patch, _ = patches.find_patch(swarm, patch_prefix)
    approve(swarm, patch.job)
    if not mergeable(swarm.verdict_notes().weigh(patch.head), patch_id):
        verified = patches.verify_now(swarm, patch_id)
        if not verified.accepted:
            raise WorkFailed(f"patch {patch_id[:12]}: verification here rejected its head {patch.head[:12]}; nothing merged")
    return patches.merge(swarm, patch_id, into, mode, no_recheck, repair)
