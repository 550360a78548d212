"""`gitswarm follow-up`: continue a finished delegation on its own branch and worktree.

The follow-up is recorded first, as a `followed_up` operation that requeues
the task with the continuation in its record (model/guidance.FollowUp); a
worker then picks the task up like any queued one. So a supervisor killed
at any point loses nothing: its lease runs out, the task is requeued, and
the next attempt is the same follow-up. The attempt starts from the head of
the patch it continues, and its new head is verified again (the old verdict
stays on the old head).
"""

from __future__ import annotations

from gitswarm.adapters.agent import AgentAdapter
from gitswarm.adapters.registry import repo_registry
from gitswarm.engine.delegation.patches import find_patch
from gitswarm.engine.events import EventSink
from gitswarm.engine.jobs.run import work
from gitswarm.engine.jobs.supervisor import WorkOptions
from gitswarm.engine.swarm import Swarm
from gitswarm.model.artifacts import Patch, Run
from gitswarm.model.errors import BadInput
from gitswarm.model.ids import GENERATED_ID
from gitswarm.model.late_instructions import check_text
from gitswarm.model.ops import FollowedUp
from gitswarm.model.records import Task, TaskState
from gitswarm.model.reducer import FOLLOWABLE
from gitswarm.store.jobs import Snapshot
from gitswarm.store.leases import Built


def follow_up(swarm: Swarm, target: str, instruction: str, resume_session: bool = False) -> dict:
    """Record a follow-up of the implement task `target` (`JOB/TASK`, `TASK`, or a PATCH id (prefix) it made):
    its next attempt continues from that patch (by default the task's last) with `instruction`. Returns
    what was recorded; a worker runs it. Nothing is written for bad input (BadInput): an unknown id, a
    task that is not an implement task of an agent or has not finished, an empty or over-long
    instruction or one holding a NUL byte, a session asked for that cannot be resumed."""
    check_text(instruction, "instruction")
    job_id, task_id, patch_id = _target(swarm, target)
    snapshot = swarm.refs.snapshot(job_id, swarm.index.job_tip(job_id))
    task = snapshot.task(task_id)
    _check_task(job_id, task)
    patch_id = patch_id if patch_id is not None else _last_patch(snapshot, task)
    patch = snapshot.artifact(patch_id, Patch) if patch_id is not None else None
    if patch is not None and swarm.repo.resolve(patch.head) is None:
        raise BadInput(f"patch {patch_id and patch_id[:12]}: its head {patch.head[:12]} is not in this repository")
    if resume_session:
        _check_resumable(swarm, task.spec.adapter)
    session = _session(snapshot, task, patch, patch_id) if resume_session else None

    def build(s: Snapshot) -> Built:
        op = swarm.refs.next_op(
            FollowedUp, s, swarm.clock(), task=task_id, instruction=instruction, patch=patch_id,
            head=patch.head if patch is not None else None, resume_session=resume_session, session=session,
        )
        swarm.ledger.trust.made_op(op.id)  # before it is written: this clone's own word, for its workers
        return op, ()

    change = swarm.ledger.transition(job_id, build)
    followed = change.tasks[task_id]
    assert followed.follow_up is not None
    return {
        "job": job_id,
        "task": task_id,
        "op": followed.follow_up.op,
        "patch": patch_id,
        "head": followed.follow_up.head,
        "resume_session": resume_session,
        "session": session,
        "state": followed.state.value,
    }


def run_follow_up(
    swarm: Swarm, target: str, instruction: str, resume_session: bool, options: WorkOptions, on_event: EventSink
) -> dict:
    """follow_up(), then work the job with one worker until it is done (as `delegate` does); the job's
    view with `follow_up` (what was recorded) and `outcome` (the task's state when the work ended)."""
    recorded = follow_up(swarm, target, instruction, resume_session)
    on_event({"event": "followed_up", "job": recorded["job"], "task": recorded["task"], "op": recorded["op"]})
    work(swarm, WorkOptions(workers=1, job=recorded["job"], worker=options.worker), on_event)
    view = swarm.show(recorded["job"])
    outcome = next(t["state"] for t in view["tasks"] if t["id"] == recorded["task"])
    return {**view, "follow_up": recorded, "outcome": outcome}


def _target(swarm: Swarm, target: str) -> tuple[str, str, str | None]:
    """(job, task, patch or None) from `JOB/TASK`, `TASK` or a patch id prefix."""
    if "/" not in target and not GENERATED_ID.fullmatch(target) and swarm.index.artifact_ids(target):
        patch_id, patch, snapshot = find_patch(swarm, target)
        if patch.task is None:
            raise BadInput(f"patch {patch_id[:12]} belongs to no task")
        return snapshot.job_id, patch.task, patch_id
    job_id, task_id = swarm.resolve_task(target)
    return job_id, task_id, None


def _check_task(job_id: str, task: Task) -> None:
    name = f"{job_id[:12]}/{task.id}"
    if task.spec.mode != "implement":
        raise BadInput(f"task {name} is an {task.spec.mode} task: only implement tasks (delegations) are followed up")
    if task.spec.adapter == "shell":
        raise BadInput(f"task {name} runs a shell command: it takes no instruction")
    if task.state not in FOLLOWABLE:
        hint = "steer it instead" if task.state in (TaskState.QUEUED, TaskState.RUNNING, TaskState.BLOCKED) else "retry what it depends on"
        raise BadInput(f"task {name} is {task.state.value}, not finished: {hint}")


def _last_patch(snapshot: Snapshot, task: Task) -> str | None:
    """The last patch the task made, if any."""
    for artifact_id in reversed(task.artifacts):
        if isinstance(snapshot.artifact(artifact_id), Patch):
            return artifact_id
    return None


def _session(snapshot: Snapshot, task: Task, patch: Patch | None, patch_id: str | None) -> str:
    """The agent session that made `patch`: the last run before it (in the task's artifacts) that reported one."""
    if patch is None or patch_id is None:
        raise BadInput(f"task {task.id} made no patch: there is no session to resume")
    before = task.artifacts[: task.artifacts.index(patch_id)] if patch_id in task.artifacts else ()
    runs = [snapshot.artifact(a) for a in before]
    sessions = [r.session_id for r in runs if isinstance(r, Run) and r.attempt == patch.attempt and r.session_id]
    if not sessions:
        raise BadInput(f"the run that made patch {patch_id[:12]} reported no session id: nothing to resume")
    return sessions[-1]


def _check_resumable(swarm: Swarm, adapter: str) -> None:
    """Refuse --resume-session for an adapter whose spec does not say how to resume (`[resume]`)."""
    try:
        found = repo_registry(swarm.repo.workdir).get(adapter)
    except KeyError:
        raise BadInput(f"no adapter {adapter}: it cannot resume a session") from None
    if not isinstance(found, AgentAdapter) or found.spec.resume is None:
        raise BadInput(f"adapter {adapter} cannot resume a session (its spec has no [resume]); follow up without --resume-session")
