"""`gitswarm approve`: let a job pulled from another clone run here."""

from __future__ import annotations

from gitswarm.engine.swarm import Swarm


def approve(swarm: Swarm, prefix: str) -> dict:
    """Record the job `prefix` names as approved in this clone (store/trust.py); what was approved."""
    job_id = swarm.resolve_job(prefix)
    swarm.trust.approve(job_id)
    return {"approved": job_id}
