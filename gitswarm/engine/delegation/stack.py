"""Stacked tasks: the commit a task that depends on implement tasks starts from.

Its base is its upstreams' verified patch heads (model/stacking.py says
which upstreams) merged in spec order: one head alone is that head; a head
the stack already contains adds nothing; a head that contains the stack
replaces it; two that diverge are merged in memory into a commit gitswarm
makes, the same commit whichever task or clone asks (its author, time and
message follow from the heads). A conflict among them fails the task,
naming the files; an upstream without a patch whose deciding verdict counts
here and accepts it skips the task (`skipped_because`). The merge train
(engine/delegation/train.py) stacks patches on a target with `stack_on` too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gitswarm.engine.delegation.merge import WHO, mergeable
from gitswarm.model.artifacts import Patch
from gitswarm.model.provenance import Weighed
from gitswarm.model.stacking import stacked_on
from gitswarm.store.gitrepo import GitRepo
from gitswarm.store.jobs import Snapshot

Weigh = Callable[[str], list[Weighed]]  # the verdicts noted on a commit, weighed here (store/verdicts.py)


@dataclass(frozen=True)
class Upstream:
    task: str
    patch: str  # the verified patch's artifact id
    head: str


@dataclass(frozen=True)
class Stacked:
    """Where a stacked task starts: `base`, made of its upstreams' verified patches."""

    base: str
    upstreams: tuple[Upstream, ...]


@dataclass(frozen=True)
class Refused:
    """Why a stacked task cannot start: an unverified upstream (`skipped_because`: it is skipped) or a conflict."""

    error: str
    skipped_because: str | None = None


@dataclass(frozen=True)
class Stepped:
    """`stack_on`'s answer: the new stack, or the conflicting files (commit None)."""

    commit: str | None
    conflicts: tuple[str, ...] = ()


def stack_on(repo: GitRepo, ours: str, theirs: str, message: str, parts: Sequence[str] = ()) -> Stepped:
    """`theirs` stacked on `ours`: `ours` when it contains `theirs`; `theirs` when it contains `ours`, or every
    commit of `parts` (those `ours` was stacked from: a head stacked on them replaces their merge); else a
    merge commit of the two (parents `ours`, `theirs`; made in memory, its time the later of theirs)."""
    if ours == theirs or repo.is_ancestor(theirs, ours):
        return Stepped(ours)
    if repo.is_ancestor(ours, theirs) or (parts and all(repo.is_ancestor(part, theirs) for part in parts)):
        return Stepped(theirs)
    tree, conflicts = repo.merge_in_memory(ours, theirs)
    if tree is None:
        return Stepped(None, tuple(conflicts))
    when = max(repo.commit_info(ours).time, repo.commit_info(theirs).time)
    return Stepped(repo.commit(tree, [ours, theirs], message, WHO, when))


def verified_patch(snapshot: Snapshot, task_id: str, weigh: Weigh) -> tuple[str, Patch] | None:
    """The task's last patch when the verdict that decides here accepts it (merge.mergeable), else None."""
    for artifact in reversed(snapshot.task(task_id).artifacts):
        found = snapshot.artifact(artifact)
        if isinstance(found, Patch) and found.task == task_id:
            return (artifact, found) if mergeable(weigh(found.head), artifact) else None
    return None


def stack_for(repo: GitRepo, snapshot: Snapshot, task_id: str, weigh: Weigh) -> Stacked | Refused | None:
    """Where `task_id` starts: None when it depends on no implement task (the job's base), else its stack."""
    spec = snapshot.task(task_id).spec
    if not spec.depends_on:
        return None
    names = stacked_on(spec, lambda upstream: snapshot.task(upstream).spec)
    if not names:
        return None
    upstreams: list[Upstream] = []
    for name in names:
        found = verified_patch(snapshot, name, weigh)
        if found is None:
            return Refused(
                f"upstream {name} left no patch whose verdict accepts it here (unverified, or rejected): there is "
                f"nothing verified to start from; verify its patch (gitswarm verify PATCH), then gitswarm retry "
                f"{snapshot.job_id}/{task_id}",
                skipped_because=name,
            )
        patch_id, patch = found
        if not repo.has_object(patch.head):
            return Refused(f"upstream {name}'s head {patch.head[:12]} is not in this repository; fetch its branch")
        upstreams.append(Upstream(name, patch_id, patch.head))
    base = upstreams[0].head
    for n, upstream in enumerate(upstreams[1:], start=1):
        below = ", ".join(u.task for u in upstreams[:n])
        message = (
            f"gitswarm: stack {upstream.task} on {below} (job {snapshot.job_id})\n\n"
            f"The verified patches of {below} and {upstream.task}, merged for the tasks that depend on them.\n\n"
            f"Gitswarm-Job: {snapshot.job_id}\nGitswarm-Stack: {' '.join(u.task for u in upstreams[: n + 1])}\n"
        )
        step = stack_on(repo, base, upstream.head, message, [u.head for u in upstreams[:n]])
        if step.commit is None:
            return Refused(
                f"conflict: the patches of its upstreams {below} and {upstream.task} do not merge, in "
                f"{len(step.conflicts)} file(s): {', '.join(step.conflicts)}; nothing ran"
            )
        base = step.commit
    return Stacked(base, tuple(upstreams))
