"""`gitswarm work` and `gitswarm run`: supervise workers, then stitch the summary."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from msgspec.structs import replace

from gitswarm.engine.events import EventSink
from gitswarm.engine.jobs.summary import build_summary
from gitswarm.engine.jobs.supervisor import Supervisor, WorkOptions
from gitswarm.engine.jobs.worker_process import remote_work_module
from gitswarm.engine.notify.notifier import Notifier, Watch
from gitswarm.engine.sandbox_gate import require_sandbox
from gitswarm.engine.swarm import Swarm
from gitswarm.model.artifacts import Summary, artifact_id
from gitswarm.model.errors import BadInput, WorkFailed
from gitswarm.model.records import FINISHED
from gitswarm.store.kept_results import KeptResults

if TYPE_CHECKING:
    from gitswarm.engine.machines.arbiter import Arbiter
    from gitswarm.engine.machines.remote_leases import RemoteLedger
    from gitswarm.store.jobs import Snapshot

# A local run of shell tasks loads neither the many-machines modules, the sharing ones nor the preflight
# of agent CLIs: each is imported where a remote, a trusted remote or an agent adapter first needs it.


def write_summary(swarm: Swarm, job_id: str, remote: RemoteLedger | None = None) -> str | None:
    """Record the summary of a finished job's current outcome; returns its id.

    Summaries are content-addressed, so stitching an outcome already
    summarized writes nothing; a job that finished again after a retry gets
    a new summary, and `show` prints the latest. With `remote`, the summary is
    offered to the job's ref there: of machines that finish a job together,
    the first one's lands and the others find it, instead of each adding its own.
    """
    job = swarm.index.job(job_id)
    if job is None or job["status"] not in FINISHED:
        return None

    def summary_of(snapshot: Snapshot) -> Summary | str | None:
        if snapshot.state.status() not in FINISHED:  # (through a remote: a retry elsewhere came with the fetch)
            return None
        summary = build_summary(snapshot, swarm.repo.read_blob, swarm.clock())
        return _summarized(snapshot, summary) or summary

    if remote is not None:  # made from the job as this clone holds it, and again from the remote's if refused
        return remote.record_unless_held(job_id, summary_of, swarm.clock())
    made = summary_of(swarm.refs.snapshot(job_id, swarm.index.job_tip(job_id)))
    if made is None or isinstance(made, str):
        return made
    return swarm.ledger.record_artifacts(job_id, None, [made], swarm.clock())[0]


def _summarized(snapshot: Snapshot, summary: Summary) -> str | None:
    """The id of a summary of the same outcome the job holds already (here or from another machine)."""
    summary_id = artifact_id(summary)
    for existing in snapshot.state.artifacts:
        found = snapshot.artifact(existing)
        if existing == summary_id or (isinstance(found, Summary) and (found.text, found.data) == (summary.text, summary.data)):
            return existing
    return None


def check_remote(swarm: Swarm, remote: str, fetch: bool = True) -> dict[str, str]:
    """BadInput for an unknown remote; with `fetch`, bring the remote's jobs here before a command
    names one (WorkFailed when it does not answer). The jobs there that are refused here, and why."""
    arbiter = _arbiter(swarm, remote)
    return arbiter.sync().invalid if fetch else {}


def _arbiter(swarm: Swarm, remote: str) -> Arbiter:
    from gitswarm.engine.machines.arbiter import Arbiter  # deferred: see the note at the imports

    return Arbiter(swarm, remote)


def unusable_adapters(swarm: Swarm, job: str | None, parent_env: Mapping[str, str]) -> dict[str, str]:
    """The adapters of pending tasks whose preflight fails here, with why."""
    names = [name for name in swarm.index.pending_adapters(job) if name != "shell"]
    if not names:
        return {}
    from gitswarm.engine.routing.adapter_checks import preflight_cache  # deferred: see the note at the imports

    cache = preflight_cache(swarm, parent_env)
    failed = {}
    for name in names:
        try:
            result = cache.get(name)
        except BadInput as exc:  # a spec that no longer loads
            failed[name] = str(exc)
            continue
        if not result.ok:
            failed[name] = result.reason or "preflight failed"
    return failed


def work(swarm: Swarm, options: WorkOptions, on_event: EventSink, trust: tuple[str, ...] = ()) -> dict:
    """Run workers until done; stitch every job that this run moved and that has finished.

    Adapters whose preflight fails are never leased to; if only their tasks are
    left, the run stops and says so instead of waiting.
    """
    agents = any(name != "shell" for name in swarm.index.pending_adapters(options.job))
    require_sandbox(swarm.repo.workdir, os.environ, agents)  # mode bwrap without one: nothing runs
    remote = None
    if options.remote is not None:
        remote = remote_work_module().remote_leases(swarm, options.remote, options.clock_skew)
    notifier = Notifier.of(swarm)
    if notifier.command:
        on_event = Watch(swarm, notifier, on_event)
    # Trust is checked again at every claim (store/leases.py): these are only what is known now.
    remotes: frozenset[str] = frozenset()
    if trust:
        from gitswarm.engine.sharing.share import remote_key  # deferred: see the note at the imports

        remotes = frozenset(remote_key(swarm, r) for r in trust)
    swarm.ledger.trusted_remotes = remotes
    untrusted = swarm.ledger.untrusted_jobs()
    if options.job is not None and options.job in untrusted:
        why = swarm.ledger.why_not(options.job, remotes)
        raise BadInput(
            f"job {options.job} may not run here ({why}): approve it (gitswarm approve {options.job}) "
            "or trust its remote (--trust REMOTE) to run it here"
        )
    if untrusted:
        on_event({"event": "untrusted", "jobs": sorted(untrusted)})
    options = replace(options, worker=replace(options.worker, skip_jobs=untrusted, trusted_remotes=remotes))
    unusable = unusable_adapters(swarm, options.job, os.environ)
    for name, reason in sorted(unusable.items()):
        on_event({"event": "adapter_unusable", "adapter": name, "reason": reason})
    if unusable:
        options = replace(options, worker=replace(options.worker, exclude=options.worker.exclude | frozenset(unusable)))
    touched = Supervisor(swarm, options, on_event).run()
    jobs = [options.job] if options.job else sorted(touched)
    # What the other machines finished too, before summing up. A job finished here is summarized from what the
    # watch fetched last (seconds old at most): its summary is offered to the remote, and were the job retried
    # elsewhere since, the next finish of it summarizes it again.
    unfinished = [job for job in jobs if (row := swarm.index.job(job)) is not None and row["status"] not in FINISHED]
    if remote is not None and unfinished:
        remote.arbiter.sync(unfinished)
    stitched = [job for job in jobs if write_summary(swarm, job, remote)]
    if remote is not None:  # the jobs' last local writes (a cancel made here), and the verdicts noted on their patches
        remote.arbiter.publish(jobs)
        remote.arbiter.publish_notes()
    return {"jobs": stitched, "unusable": unusable, "skipped": skipped_jobs(swarm, remotes)}


def skipped_jobs(swarm: Swarm, remotes: frozenset[str] = frozenset()) -> dict[str, str]:
    """Unfinished jobs this clone may not run, and why (pulled and not approved, say)."""
    unfinished = [job["id"] for job in swarm.index.jobs() if job["status"] not in FINISHED]
    ledger = swarm.ledger
    waiting = ledger.trust.untrusted(unfinished, remotes) | (ledger.awaiting_person() & set(unfinished))
    return {job: ledger.why_not(job, remotes) or "" for job in sorted(waiting)}


def run(
    swarm: Swarm, spec: str | os.PathLike[str], options: WorkOptions, on_event: EventSink, approve: bool = False,
    allow_overlap: bool = False,
) -> dict:
    """Submit a job, work it to the end, return its summary view (and which adapters could not run)."""
    require_sandbox(swarm.repo.workdir, os.environ, agents=False)  # mode bwrap without one: refused before the job is submitted
    job_id = swarm.submit_file(spec, approve=approve, allow_overlap=allow_overlap)
    if options.remote is not None:  # on the remote before any machine can claim its tasks
        _arbiter(swarm, options.remote).publish([job_id])
    on_event({"event": "submitted", "job": job_id})
    for notice in swarm.notices:
        on_event({"event": "notice", "message": notice})
    worked = work(swarm, replace(options, job=job_id, until_idle=False), on_event)
    if swarm.index.job(job_id) is None:  # its ref deleted, or made to hold no commit, while it ran
        raise WorkFailed(
            f"job {job_id}: its ref was deleted or broken while it ran; what finished is kept "
            f"in {KeptResults(swarm.common_dir).dir}: gitswarm recover records it once the job is back"
        )
    view = swarm.show(job_id)
    if worked["unusable"]:
        view["unusable"] = worked["unusable"]
    return view
