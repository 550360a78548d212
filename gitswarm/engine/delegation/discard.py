"""`worktrees discard JOB/TASK`: remove a finished task's worktree and its branch, on purpose.

`worktrees gc` stays conservative (engine/delegation/gc.py: merged work, clean
worktrees; unmerged branches only with --force); a failed delegation's branch
and worktree are removed when the user asks, one task at a time. Only
ever the task's own branch `swarm/<job>/<task>` (moved by compare-and-swap
from the tip that was checked) and the task's own worktree; refused, with
nothing removed, for a task that may still run, a branch that was merged
(by gitswarm, or by hand into any branch outside `swarm/`), a branch checked
out anywhere but the task's worktree, and a worktree holding uncommitted work
(unless `--force`). The discard is recorded on the task as a `decision`.
"""

from __future__ import annotations

from pathlib import Path

from gitswarm.engine.delegation.patches import worktrees_of
from gitswarm.engine.swarm import Swarm
from gitswarm.model.artifacts import Decision
from gitswarm.model.errors import BadInput, NotFound
from gitswarm.model.records import TERMINAL
from gitswarm.store.jobs import Snapshot
from gitswarm.store.refs import branches_containing, delete_ref
from gitswarm.store.worktrees import BRANCH_PREFIX, Worktrees, branch_name


def discard(swarm: Swarm, target: str, force: bool = False) -> dict:
    """Remove the worktree and the branch of a finished, unmerged task; what was removed."""
    job, task = swarm.resolve_task(target)
    state = swarm.index.task_state(job, task)
    if state not in TERMINAL:
        raise BadInput(f"task {job}/{task} is {state}: it may still run; cancel it first (gitswarm cancel {job}/{task})")
    branch = branch_name(job, task)
    ref = f"refs/heads/{branch}"
    if not branch.startswith(BRANCH_PREFIX) or branch.count("/") != 2:
        raise BadInput(f"refusing to delete {ref}: not a task branch")  # never main, never anything else
    snapshot = swarm.refs.snapshot(job, swarm.index.job_tip(job))
    head = swarm.repo.resolve(ref)
    merged = merged_into(swarm, snapshot, task, head)
    if merged:
        raise BadInput(f"{branch} was merged ({merged}); nothing to discard: gitswarm worktrees gc removes its clean worktree")
    trees = worktrees_of(swarm)
    path = trees.find(job, task)
    elsewhere = [e["path"] for e in trees.every(main=True) if e["branch"] == branch and (path is None or Path(e["path"]) != path)]
    if elsewhere:
        raise BadInput(f"{branch} is checked out in {elsewhere[0]}, not the task's worktree; switch it to another branch first")
    if path is None and head is None:
        raise NotFound(f"task {job}/{task} has no worktree and no branch {branch}: nothing to discard")
    if path is not None:
        _remove_worktree(trees, path, force)
    if head is not None:
        delete_ref(trees.repo_dir, ref, head)  # refused if the branch moved since it was checked
    decision = Decision(
        job=job,
        task=task,
        created=swarm.clock(),
        producer="gitswarm",
        title=f"discarded branch {branch}",
        rationale=f"head {head or 'none'}; worktree {path or 'none'} removed" + ("; uncommitted work dropped (--force)" if force else ""),
    )
    swarm.ledger.record_artifacts(job, task, [decision], swarm.clock())
    return {"job": job, "task": task, "branch": branch, "head": head, "worktree": None if path is None else str(path)}


def merged_into(swarm: Swarm, snapshot: Snapshot, task: str, head: str | None) -> str | None:
    """Where the task's work was merged: by gitswarm (a `merged patch` decision), or by hand (a branch outside
    `swarm/` contains its head, which is more than the job's base); None when it was not."""
    for artifact_id in snapshot.task(task).artifacts:
        artifact = snapshot.artifact(artifact_id)
        if isinstance(artifact, Decision) and artifact.title.startswith("merged patch"):
            return artifact.title
    if head is None or head == snapshot.job.base:
        return None
    found = branches_containing(swarm.repo.workdir or swarm.repo.common_dir, head)
    others = [ref for ref in found if not ref.startswith(f"refs/heads/{BRANCH_PREFIX}")]
    return f"{others[0].removeprefix('refs/heads/')} contains its head {head[:12]}" if others else None


def _remove_worktree(trees: Worktrees, path: Path, force: bool) -> None:
    if not path.is_dir():
        trees.prune()  # deleted by hand: only git's record is left
        return
    if not force and not trees.is_clean(path):
        raise BadInput(f"{path} holds uncommitted work; commit or copy it, or pass --force to drop it")
    trees.remove(path, force=force)
