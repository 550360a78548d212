"""`gitswarm approve`: a person lets a job run here.

Two things may wait for a person, and one approval grants both: a job pulled
from another clone (trust, store/trust.py), and the tasks that act outside the
repository which a pilot asked for (model/approval.py). The second is recorded
on the job itself as an `approved` operation: what, by whom, how.
"""

from __future__ import annotations

from gitswarm.engine.swarm import Swarm
from gitswarm.model.approval import BY_COMMAND
from gitswarm.model.ops import Approved
from gitswarm.store.jobs import Snapshot
from gitswarm.store.leases import Built
from gitswarm.store.repoconfig import person


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
