"""`gitswarm delegate`: one implement task as its own job, worked to the end."""

from __future__ import annotations

import os

from gitswarm.engine.config import load_config
from gitswarm.engine.delegation.patches import delegation_spec
from gitswarm.engine.delegation.similar import active_implement_tasks, looks_alike
from gitswarm.engine.events import EventSink
from gitswarm.engine.jobs.run import work
from gitswarm.engine.jobs.supervisor import WorkOptions
from gitswarm.engine.sandbox_gate import require_sandbox
from gitswarm.engine.swarm import Swarm
from gitswarm.model.evidence import UNVERIFIED


def delegate(swarm: Swarm, instruction: str, adapter: str, checks: list[str], base: str | None, options: WorkOptions, on_event: EventSink) -> dict:
    """One implement task as its own job, worked to the end; the job's summary view. Says (a notice)
    when unfinished work on the same base looks like the same change."""
    require_sandbox(swarm.repo.workdir, os.environ)  # before the job is submitted: mode bwrap without one, nothing runs
    pinned, _ = swarm.pin_base(base, True)
    checks = checks or list(load_config(swarm.repo.workdir).audit.checks)
    if not checks:  # said first, not only at the end: the agent's work will stand unverified
        swarm.notices.append(UNVERIFIED)
    for alike in looks_alike(instruction, pinned, active_implement_tasks(swarm)):
        swarm.notices.append(
            f"task {alike['job'][:12]}/{alike['task']} ({alike['state']}) looks like the same change: {'; '.join(alike['why'])}"
        )
    job_id = swarm.submit_text(delegation_spec(instruction, adapter, checks, base), "delegate")
    on_event({"event": "submitted", "job": job_id})
    for notice in swarm.notices:
        on_event({"event": "notice", "message": notice})
    work(swarm, WorkOptions(workers=1, job=job_id, worker=options.worker), on_event)
    shown = swarm.show(job_id)
    shown["unverified"] = not checks
    return shown
