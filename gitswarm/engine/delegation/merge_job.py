"""`gitswarm merge JOB` (and the MCP `merge_job` tool): a job's verified patches landed in one move.

The patches are each implement task's last patch, in dependency order (spec
order where the dependencies allow), taken only when the verdict that
decides here accepts it (merge.mergeable) and the task's branch still points
at its head; the others are reported (`unverified`), as are the heads the
target already contains (`merged_before`). The train (engine/delegation/train.py)
stacks them on the target's tip, checks the stack once and bisects a red
one. Then the target moves once, by compare-and-swap: a fast-forward when
the stack's head is a patch's head, else one merge commit whose parents are
the old tip and the landed heads no other landed head contains, and whose
message names the job. As with one patch (engine/delegation/merge.py):
merges into a repository go one at a time, a worktree that has the target
checked out with uncommitted changes to tracked files refuses the train
before anything runs, and a clean one is brought along (an untracked file in
the way refuses the move). Each landed task gets a `merged patch` decision,
each conflicted or culprit one a decision saying so.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Literal, cast

from gitswarm.adapters.base import RunContext
from gitswarm.engine.delegation.merge import WHO, merge_lock, mergeable, move_target, target_worktree
from gitswarm.engine.delegation.patches import merge_target, refuse_untrusted, run_plain, store_of, worktrees_of
from gitswarm.engine.delegation.train import BROKE_STACK, CONFLICTED, LANDED, Car, Ride, ride
from gitswarm.engine.delegation.verify import clean_checkout, drop_checkout, run_checks
from gitswarm.engine.results import TrainCar, TrainResult
from gitswarm.engine.swarm import Swarm
from gitswarm.model.artifacts import Artifact, Check, Decision, Patch, artifact_id
from gitswarm.model.errors import Ambiguous, NotFound, WorkFailed
from gitswarm.model.ops import ArtifactsRecorded
from gitswarm.model.provenance import Weighed
from gitswarm.model.records import Task
from gitswarm.store.jobs import Snapshot
from gitswarm.store.leases import Built
from gitswarm.store.workspace import has_tracked_changes
from gitswarm.store.worktrees import branch_name

Status = Literal["landed", "conflicted", "broke_stack", "held_back", "unverified", "merged_before"]


def merge_job(swarm: Swarm, job: str, into: str | None, no_recheck: bool = False) -> TrainResult:
    """Land the job's verified patches on `into` (default: the branch the job started from) in one move."""
    job_id = swarm.resolve_job(job)
    snapshot = swarm.refs.snapshot(job_id, swarm.index.job_tip(job_id))
    target = merge_target(swarm, snapshot, into)
    branch = target.removeprefix("refs/heads/")
    repo, repo_dir = swarm.repo, swarm.repo.workdir or swarm.repo.common_dir
    recorded: dict[str, list[Artifact]] = {}
    with merge_lock(swarm.repo.common_dir):
        checked_out = target_worktree(repo_dir, target)
        if checked_out is not None and has_tracked_changes(checked_out):
            raise WorkFailed(f"{checked_out} has {branch} checked out with uncommitted changes; nothing merged")
        old = repo.resolve(target)
        if old is None:
            raise WorkFailed(f"no branch {branch}")
        cars, report = _cars(swarm, snapshot, old)
        if not cars:
            said = "; ".join(f"{r.task}: {r.status}" + (f" ({r.why})" if r.why else "") for r in report) or "it made no patch"
            raise WorkFailed(f"job {job_id}: no verified patch to merge into {branch} ({said}); nothing merged")
        if not no_recheck:
            refuse_untrusted(swarm, job_id, "merge (the checks run on the stacked patches)")
        check = _checker(swarm, job_id, snapshot, repo_dir, recorded, no_recheck)
        merged = [c for r in report if r.status == "merged_before" for c in snapshot.task(r.task).spec.checks]
        train = ride(repo, old, cars, check, job_id, merged)
        new, fast_forward = _final(swarm, snapshot, train, branch)
        if train.landed:
            move_target(repo, target, old, new, checked_out, f"gitswarm: merge job {job_id}")
    now = swarm.clock()
    for car in cars:
        status, why = train.left_out.get(car.patch, (LANDED, None))
        report.append(TrainCar(task=car.task, patch=car.patch, head=car.head, status=cast(Status, status), why=why))
        decision = _decision(job_id, car, status, why, branch, old, new, now)
        if decision is not None:
            recorded.setdefault(car.task, []).append(decision)
    _record(swarm, job_id, recorded, now)
    order = {task.id: task.spec.seq for task in snapshot.tasks()}
    report.sort(key=lambda r: order.get(r.task, 0))
    return TrainResult(
        job=job_id, into=branch, old=old, new=new, fast_forward=fast_forward, check_runs=train.runs, patches=report
    )


def _cars(swarm: Swarm, snapshot: Snapshot, old: str) -> tuple[list[Car], list[TrainCar]]:
    """The patches that ride, in dependency order, and the report of those that do not."""
    weigh = swarm.verdict_notes().weigh
    cars: list[Car] = []
    report: list[TrainCar] = []
    for task in dependency_order(snapshot.tasks()):
        found = _last_patch(snapshot, task) if task.spec.mode == "implement" else None
        if found is None:
            continue
        patch_id, patch = found
        status, why = _why_not_riding(swarm, snapshot, task, patch_id, patch, old, weigh)
        if status is None:
            cars.append(Car(task=task.id, patch=patch_id, head=patch.head, checks=task.spec.checks))
        else:
            report.append(TrainCar(task=task.id, patch=patch_id, head=patch.head, status=status, why=why))
    return cars, report


def _why_not_riding(
    swarm: Swarm, snapshot: Snapshot, task: Task, patch_id: str, patch: Patch, old: str, weigh: Callable[[str], list[Weighed]]
) -> tuple[Literal["unverified", "merged_before"] | None, str | None]:
    """Why a task's last patch does not ride the train ((None, None): it rides)."""
    repo = swarm.repo
    if not repo.has_object(patch.head):
        return "unverified", f"its head {patch.head[:12]} is not in this repository; fetch its branch"
    if not mergeable(weigh(patch.head), patch_id):
        return "unverified", "no verdict that counts here accepts it (gitswarm verify PATCH)"
    if repo.is_ancestor(patch.head, old):
        return "merged_before", "the target already contains its head"
    tip = repo.resolve(f"refs/heads/{branch_name(snapshot.job_id, task.id)}")
    if tip is not None and tip != patch.head:
        return "unverified", f"its branch moved to {tip[:12]} after {patch.head[:12]} was verified; verify again"
    return None, None


def dependency_order(tasks: list[Task]) -> list[Task]:
    """`tasks` with each after its dependencies, spec order otherwise."""
    by_id = {task.id: task for task in tasks}
    done: set[str] = set()
    ordered: list[Task] = []
    pending = sorted(tasks, key=lambda task: task.spec.seq)
    while pending:
        ready = next(t for t in pending if all(d in done or d not in by_id for d in t.spec.depends_on))
        pending.remove(ready)
        done.add(ready.id)
        ordered.append(ready)
    return ordered


def _last_patch(snapshot: Snapshot, task: Task) -> tuple[str, Patch] | None:
    for artifact in reversed(task.artifacts):
        found = snapshot.artifact(artifact)
        if isinstance(found, Patch) and found.task == task.id:
            return artifact, found
    return None


def _checker(
    swarm: Swarm, job_id: str, snapshot: Snapshot, repo_dir: Path, recorded: dict[str, list[Artifact]], no_recheck: bool
) -> Callable[[str, tuple[str, ...], Car], list[str]]:
    """The train's check runs: on a pooled clean checkout of the stack's head, recorded on the top patch's task."""
    root = worktrees_of(swarm).root
    timeout = max((task.spec.timeout for task in snapshot.tasks() if task.spec.mode == "implement"), default=600.0)

    def check(commit: str, commands: tuple[str, ...], top: Car) -> list[str]:
        if no_recheck:
            return []
        ctx = RunContext(job_id, top.task, 0, repo_dir, os.environ)
        checkout = clean_checkout(repo_dir, root, commit)
        try:
            ran: list[Check] = run_checks(commands, checkout, ctx, timeout, run_plain, store_of(swarm), swarm.clock, root)
        finally:
            drop_checkout(repo_dir, checkout)
        recorded.setdefault(top.task, []).extend(ran)
        return [c.command if isinstance(c.command, str) else " ".join(c.command) for c in ran if not c.passed]

    return check


def _final(swarm: Swarm, snapshot: Snapshot, train: Ride, branch: str) -> tuple[str, bool]:
    """The target's new commit and whether it is a fast-forward (the old tip when nothing landed)."""
    if not train.landed:
        return train.onto, False
    heads = [car.head for car in train.landed]
    if train.stack in heads:  # a patch's head that contains the tip and every other landed head
        return train.stack, True
    repo = swarm.repo
    tips = [h for h in heads if not any(o != h and repo.is_ancestor(h, o) for o in heads)]
    landed = "\n".join(f"- {car.task}: patch {car.patch[:12]} (head {car.head[:12]})" for car in train.landed)
    left = "".join(f"\n- {patch[:12]}: {status}" for patch, (status, _) in train.left_out.items())
    message = (
        f"Merge job {snapshot.job_id} into {branch}: {snapshot.job.goal.splitlines()[0] if snapshot.job.goal else ''}".rstrip(": ")
        + f"\n\nThe merge train of job {snapshot.job_id} landed {len(train.landed)} patch(es):\n{landed}\n"
        + (f"\nLeft out:{left}\n" if left else "")
        + f"\nGitswarm-Job: {snapshot.job_id}\n"
    )
    return repo.commit(repo.commit_info(train.stack).tree, [train.onto, *tips], message, WHO, swarm.clock()), False


def _decision(job: str, car: Car, status: str, why: str | None, branch: str, old: str, new: str, now: float) -> Decision | None:
    if status == LANDED:
        title = f"merged patch {car.patch[:12]} into {branch}"
        rationale = f"merge train of job {job}: {old} -> {new}; head {car.head}"
    elif status == CONFLICTED:
        title = f"conflicted: patch {car.patch[:12]} does not stack in the merge train into {branch}"
        rationale = why or ""
    elif status == BROKE_STACK:
        title = f"broke the stack: patch {car.patch[:12]} fails the checks of the merge train into {branch}"
        rationale = why or ""
    else:
        return None
    return Decision(job=job, task=car.task, created=now, producer="gitswarm", title=title, rationale=rationale)


def _record(swarm: Swarm, job_id: str, recorded: dict[str, list[Artifact]], now: float) -> None:
    """Every task's new artifacts in one write to the job."""
    if not recorded:
        return
    every = [a for artifacts in recorded.values() for a in artifacts]

    def build(snapshot: Snapshot) -> Built:
        ops = [
            swarm.refs.next_op(ArtifactsRecorded, snapshot, now, after=n, task=task, artifacts=tuple(artifact_id(a) for a in artifacts))
            for n, (task, artifacts) in enumerate(recorded.items())
        ]
        return ops, every

    swarm.ledger.transition(job_id, build)


def names_a_job(swarm: Swarm, prefix: str) -> bool:
    """Whether `merge`'s argument names a job (else a patch); NotFound when it names neither, Ambiguous when both."""
    try:
        swarm.artifact(prefix)
        is_artifact = True
    except NotFound:
        is_artifact = False
    try:
        swarm.resolve_job(prefix)
    except NotFound:
        if not is_artifact:
            raise NotFound(f"no patch or job matches {prefix!r}") from None
        return False
    if is_artifact:
        raise Ambiguous(f"{prefix!r} names both a job and an artifact: give more of the id")
    return True
