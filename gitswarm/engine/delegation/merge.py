"""`gitswarm merge`: only a patch verified for its exact head SHA reaches a branch.

If the target moved since the patch's base, the three-way merge is done in
memory first: conflicts change nothing and are listed; a clean merge has its
checks run again on the merged tree before the target moves (unless told
not to). The target ref moves by compare-and-swap, merges into one
repository are serialized, and a worktree that has the target checked out is
updated if clean; a dirty one makes the merge refuse.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gitswarm.adapters.base import BlobWriter, RunContext, Runner
from gitswarm.adapters.sandbox import Decision as SandboxDecision
from gitswarm.engine.delegation.verify import clean_checkout, drop_checkout, run_checks
from gitswarm.model.artifacts import Decision, Patch
from gitswarm.model.errors import BadInput, RefConflict, WorkFailed
from gitswarm.model.evidence import held_for_review
from gitswarm.model.provenance import Weighed, accepted_by_gitswarm, deciding, latest_by_gitswarm
from gitswarm.store.gitrepo import GitCommandError, GitRepo
from gitswarm.store.locks import held
from gitswarm.store.workspace import move_files
from gitswarm.store.worktrees import worktree_of_branch

Mode = Literal["merge", "squash", "rebase"]
WHO = ("gitswarm", "gitswarm@localhost")


@dataclass(frozen=True)
class MergePlan:
    patch_id: str
    patch: Patch
    target: str  # full ref name
    old: str
    new: str
    fast_forward: bool


def mergeable(weighed: list[Weighed], patch_id: str) -> bool:
    """A head merges only when the verdict that decides here accepts it and gitswarm's own
    checks, counted here, accepted this very patch; or, for a patch that changes what judges it,
    when gitswarm held it for review and a person's counted review accepted it since.
    Uncounted verdicts (forged, unsigned, signed by a key not allowed) play no part."""
    decider = deciding(weighed)
    if decider is None or not decider.verdict.accepted:
        return False
    if accepted_by_gitswarm(weighed, patch_id):
        return True
    # The person reviewed this very patch, after gitswarm's latest verdict on it, which held it (not one
    # that rejected it since: a newer rejection is never overridden by an older review).
    latest = latest_by_gitswarm(weighed, patch_id)
    return (
        latest is not None
        and held_for_review(latest)
        and decider.verdict.producer == "person"
        and decider.verdict.patch == patch_id
        and decider.verdict.created >= latest.created
    )


def merge_lock(common_dir: Path) -> AbstractContextManager[None]:
    """Merges into one repository go one at a time."""
    return held(common_dir / "gitswarm" / "merge.lock")


def target_worktree(repo_dir: Path, target: str) -> Path | None:
    """The worktree that has `target` checked out, if any."""
    return worktree_of_branch(repo_dir, target)


def plan_merge(repo: GitRepo, patch: Patch, patch_id: str, branch_tip: str | None, target: str, mode: Mode) -> MergePlan:
    """Decide the new target commit, in memory; WorkFailed on a conflict."""
    if branch_tip is not None and branch_tip != patch.head:
        raise WorkFailed(f"the patch's branch moved to {branch_tip[:12]} after {patch.head[:12]} was verified; verify again")
    old = repo.resolve(target)
    if old is None:
        raise BadInput(f"--into: no branch {target.removeprefix('refs/heads/')}")
    if repo.is_ancestor(patch.head, old):
        raise WorkFailed(f"{target.removeprefix('refs/heads/')} already contains {patch.head[:12]}")
    head_tree = repo.commit_info(patch.head).tree
    message = f"gitswarm: {patch.job}/{patch.task} (patch {patch_id[:12]})\n\nBase {patch.base}\nHead {patch.head}\n"
    if repo.is_ancestor(old, patch.head):
        if mode == "squash":
            return MergePlan(patch_id, patch, target, old, repo.commit(head_tree, [old], message, WHO, patch.created), True)
        return MergePlan(patch_id, patch, target, old, patch.head, True)
    tree, conflicts = repo.merge_in_memory(old, patch.head)
    if tree is None:
        raise ConflictError(conflicts)
    parents = [old, patch.head] if mode == "merge" else [old]
    return MergePlan(patch_id, patch, target, old, repo.commit(tree, parents, message, WHO, patch.created), False)


class ConflictError(WorkFailed):
    def __init__(self, paths: list[str]) -> None:
        super().__init__(f"conflicts in {len(paths)} file(s): {', '.join(paths)}")
        self.paths = paths


def recheck(
    repo_dir: Path, root: Path, plan: MergePlan, checks: tuple[str, ...], ctx: RunContext, timeout: float, run: Runner, store: BlobWriter, now: Callable[[], float],
    sandbox: SandboxDecision | None = None, common: Path | None = None,
) -> list:
    """The checks again on a clean checkout of the merged commit (in `sandbox`, when given: `[sandbox] checks`)."""
    checkout = clean_checkout(repo_dir, root, plan.new)
    try:
        return run_checks(checks, checkout, ctx, timeout, run, store, now, root, sandbox=sandbox, common=common)
    finally:
        drop_checkout(repo_dir, checkout)


def apply_merge(repo: GitRepo, repo_dir: Path, plan: MergePlan, checked_out: Path | None) -> None:
    """Move the target by CAS, bringing a clean worktree that has it checked out along.

    The worktree goes first: if it cannot take the merge (an untracked file in
    the way) nothing has moved. If the CAS then loses, the worktree is put back.
    """
    move_target(repo, plan.target, plan.old, plan.new, checked_out, f"gitswarm: merge patch {plan.patch_id[:12]}")


def move_target(repo: GitRepo, target: str, old: str, new: str, checked_out: Path | None, reason: str) -> None:
    """`target` moved from `old` to `new` by one CAS (its reflog says `reason`), a clean worktree that has it
    checked out brought along first (`read-tree -m -u`: it refuses to lose anything) and put back on a lost CAS."""
    if checked_out is not None:
        try:
            move_files(checked_out, old, new)
        except GitCommandError as exc:
            raise WorkFailed(f"{checked_out} cannot take the merge: {exc}; nothing merged") from None
    try:
        repo.cas_ref(target, new, old, reason)
    except RefConflict:
        if checked_out is not None:
            move_files(checked_out, new, old)
        raise WorkFailed(f"{target.removeprefix('refs/heads/')} moved while merging; nothing merged") from None


def merged_decision(plan: MergePlan, now: float) -> Decision:
    return Decision(
        job=plan.patch.job,
        task=plan.patch.task,
        created=now,
        producer="gitswarm",
        title=f"merged patch {plan.patch_id[:12]} into {plan.target.removeprefix('refs/heads/')}",
        rationale=f"{plan.old} -> {plan.new}; head {plan.patch.head}",
    )


def conflict_decision(patch: Patch, patch_id: str, target: str, paths: list[str], now: float) -> Decision:
    return Decision(
        job=patch.job,
        task=patch.task,
        created=now,
        producer="gitswarm",
        title=f"conflicted: patch {patch_id[:12]} does not merge into {target.removeprefix('refs/heads/')}",
        rationale="conflicting files: " + ", ".join(paths),
    )
