"""`gitswarm work` and `gitswarm run`: supervise workers, then stitch the summary."""

from __future__ import annotations

import os

from gitswarm.engine.stitch import build_summary
from gitswarm.engine.supervisor import FINISHED, EventSink, Supervisor, WorkOptions
from gitswarm.engine.swarm import Swarm
from gitswarm.model.artifacts import artifact_id


def write_summary(swarm: Swarm, job_id: str) -> str | None:
    """Record the summary of a finished job's current outcome; returns its id.

    Summaries are content-addressed, so stitching an outcome already
    summarized writes nothing; a job that finished again after a retry gets
    a new summary, and `show` prints the latest.
    """
    job = swarm.index.job(job_id)
    if job is None or job["status"] not in FINISHED:
        return None
    snapshot = swarm.refs.snapshot(job_id, swarm.index.job_tip(job_id))
    summary = build_summary(snapshot, swarm.repo.read_blob, swarm.clock())
    summary_id = artifact_id(summary)
    if summary_id in snapshot.state.artifacts:
        return summary_id
    return swarm.ledger.record_artifacts(job_id, None, [summary], swarm.clock())[0]


def work(swarm: Swarm, options: WorkOptions, on_event: EventSink) -> dict:
    """Run workers until done; stitch every job that this run moved and that has finished."""
    touched = Supervisor(swarm, options, on_event).run()
    jobs = [options.job] if options.job else sorted(touched)
    stitched = [job for job in jobs if write_summary(swarm, job)]
    return {"jobs": stitched}


def run(swarm: Swarm, spec: str | os.PathLike[str], options: WorkOptions, on_event: EventSink) -> dict:
    """Submit a job, work it to the end, return its summary view."""
    job_id = swarm.submit_file(spec)
    on_event({"event": "submitted", "job": job_id})
    for notice in swarm.notices:
        on_event({"event": "notice", "message": notice})
    work(swarm, WorkOptions(workers=options.workers, job=job_id, worker=options.worker), on_event)
    return swarm.show(job_id)
