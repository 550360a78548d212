"""What `diff`, `verify`, `merge`, `delegate` and `worktrees list` do with patches and worktrees (`worktrees gc`: gc.py)."""

from __future__ import annotations

import os
from pathlib import Path

from gitswarm.adapters.base import BlobWriter, Invocation, RunContext
from gitswarm.adapters.process import ProcessResult, run_process
from gitswarm.adapters.registry import repo_registry
from gitswarm.engine.config import load_config, worktree_root
from gitswarm.engine.delegation.check_view import check_view
from gitswarm.engine.delegation.confine import check_decision, decision
from gitswarm.engine.delegation.merge import (
    ConflictError,
    Mode,
    apply_merge,
    conflict_decision,
    merge_lock,
    mergeable,
    merged_decision,
    plan_merge,
    recheck,
    target_worktree,
)
from gitswarm.engine.delegation.verify import Sandboxes, rules_of, verify
from gitswarm.engine.knowledge.memory import auto_promote
from gitswarm.engine.notify.notifier import Notifier
from gitswarm.engine.results import MergeResult, Verified
from gitswarm.engine.swarm import Swarm
from gitswarm.model.artifacts import BlobRef, Patch
from gitswarm.model.errors import BadInput, CorruptRecord, WorkFailed
from gitswarm.model.evidence import held_for_review, judges_line, why_rejected
from gitswarm.model.ids import check_branch_ref
from gitswarm.model.provenance import count_hint, latest_by_gitswarm
from gitswarm.model.spec import toml_string
from gitswarm.store.jobs import Snapshot
from gitswarm.store.trust import Trust
from gitswarm.store.workspace import has_tracked_changes
from gitswarm.store.worktrees import Worktrees, branch_name


def run_plain(invocation: Invocation) -> ProcessResult:
    return run_process(invocation.argv, cwd=invocation.cwd, env=invocation.env, stdin=invocation.stdin, timeout=invocation.timeout)


def worktrees_of(swarm: Swarm) -> Worktrees:
    common = swarm.repo.common_dir
    return Worktrees(swarm.repo.workdir or common, common, worktree_root(swarm.repo.workdir, common))


def find_patch(swarm: Swarm, prefix: str) -> tuple[str, Patch, Snapshot]:
    found = swarm.artifact(prefix)
    if found["record"].get("kind") != "patch":
        raise BadInput(f"artifact {found['id'][:12]} is a {found['record'].get('kind')}, not a patch")
    snapshot = swarm.refs.snapshot(found["job"], swarm.index.job_tip(found["job"]))
    patch = snapshot.artifact(found["id"])
    assert isinstance(patch, Patch)
    return found["id"], patch, snapshot


def task_of(patch: Patch) -> str:
    """The task that made a patch: every patch is a task's, so one that names none is a corrupt record."""
    if patch.task is None:
        raise CorruptRecord(f"a patch of job {patch.job[:12]} names no task")
    return patch.task


def require_commits(swarm: Swarm, patch_id: str, patch: Patch) -> None:
    """A patch pulled from another clone names commits that only its branch carries."""
    for commit in (patch.base, patch.head):
        if not swarm.repo.has_object(commit):
            raise BadInput(
                f"patch {patch_id[:12]}: commit {commit[:12]} is not in this repository; fetch its branch "
                f"{branch_name(patch.job, task_of(patch))} from the clone that made it"
            )


def patch_diff(swarm: Swarm, prefix: str) -> bytes:
    _, patch, _ = find_patch(swarm, prefix)
    return swarm.repo.read_blob(patch.diff.oid)


def store_of(swarm: Swarm) -> BlobWriter:
    def store(data: bytes, dropped: int) -> BlobRef:
        return BlobRef(oid=swarm.repo.write_blob(data), size=len(data) + dropped, truncated=dropped)

    return store


def refuse_untrusted(swarm: Swarm, job_id: str, doing: str) -> None:
    """The checks of a job pulled from another clone are instructions from elsewhere: they run
    here only once the job is approved."""
    why = Trust(swarm.repo.common_dir).why_not(job_id)
    if why is not None:
        raise BadInput(f"{doing}: job {job_id} runs its own checks and may not run here ({why}); approve it first (gitswarm approve {job_id})")


def pulled(swarm: Swarm, job_id: str) -> bool:
    """Whether the job was pulled from another clone (its checks then run sandboxed by default: docs/sandbox.md)."""
    return job_id not in Trust(swarm.repo.common_dir).local_jobs()


def verify_now(swarm: Swarm, prefix: str) -> Verified:
    """Run the patch's verification again now; the verdict and checks are recorded on its task."""
    patch_id, patch, snapshot = find_patch(swarm, prefix)
    refuse_untrusted(swarm, patch.job, "verify")
    require_commits(swarm, patch_id, patch)
    spec = snapshot.task(task_of(patch)).spec
    auditor = repo_registry(swarm.repo.workdir).get(spec.auditor) if spec.auditor else None
    repo_dir = swarm.repo.workdir or swarm.repo.common_dir
    ctx = RunContext(patch.job, task_of(patch), patch.attempt, repo_dir, os.environ)
    config = load_config(swarm.repo.workdir)
    sandboxes = Sandboxes(check_decision(config, pulled(swarm, patch.job), os.environ),
                          decision(config, auditor, os.environ) if auditor is not None else None)
    result = verify(
        swarm.repo, repo_dir, worktrees_of(swarm).root, patch, spec, ctx, run_plain, store_of(swarm), swarm.clock, auditor,
        rules_of(swarm.repo.workdir, spec), sandboxes=sandboxes,
    )
    recorded = swarm.ledger.record_artifacts(patch.job, patch.task, [*result.checks, result.verdict], swarm.clock())
    verdict = result.verdict
    Notifier.of(swarm).verdict(verdict, recorded[-1])
    if verdict.accepted:
        auto_promote(swarm.repo, swarm.refs, patch.job, patch.task, swarm.clock)
    return Verified(
        patch=patch_id, head=patch.head, accepted=verdict.accepted,
        verdict=f"{verdict.status}/{verdict.integrity}/{verdict.contract}",
        checks=[check_view(c, swarm.repo.read_blob) for c in result.checks],
        judges=list(verdict.judges), transitions=dict(verdict.transitions), flags=list(verdict.flags),
        proof=verdict.evidence.get("proof"),
    )


def merge(swarm: Swarm, prefix: str, into: str | None, mode: Mode, no_recheck: bool, repair: bool = False) -> MergeResult:
    patch_id, patch, snapshot = find_patch(swarm, prefix)
    target = merge_target(swarm, snapshot, into)
    require_commits(swarm, patch_id, patch)
    weighed = swarm.verdict_notes().weigh(patch.head)
    if not mergeable(weighed, patch_id):
        latest = latest_by_gitswarm(weighed, patch_id)
        if latest is not None and held_for_review(latest):
            raise WorkFailed(
                f"patch {patch_id[:12]} {judges_line(latest.judges)}: its checks alone never accept it; "
                f"a person must review that change (gitswarm diff {patch_id[:12]}; gitswarm review {patch_id[:12]} --accept)"
            )
        if latest is not None and not latest.accepted:
            raise WorkFailed(f"patch {patch_id[:12]} has no accepted verdict: verification rejected it ({why_rejected(latest)}); nothing merged")
        if any(w.counted for w in weighed):
            raise WorkFailed(
                f"patch {patch_id[:12]} has no accepted verdict of gitswarm's checks for its head {patch.head[:12]} that counts here; "
                f"run gitswarm verify {patch_id[:12]}, or gitswarm merge --approve {patch_id[:12]} to verify and merge"
            )
        # No verdict counts here (none, or only unsigned ones / unknown signers): verify here first.
        hints = sorted({h for w in weighed if (h := count_hint(w.provenance))})
        refuse_untrusted(swarm, patch.job, "merge (no verdict that counts here, so it must be verified here"
                         + "".join(f"; {h}" for h in hints) + "; gitswarm merge --approve does both)")
        if not verify_now(swarm, patch_id).accepted:
            raise WorkFailed(f"patch {patch_id[:12]} has no accepted verdict: verification here rejected its head {patch.head[:12]}; nothing merged")
    repo_dir = swarm.repo.workdir or swarm.repo.common_dir
    with merge_lock(swarm.repo.common_dir):
        checked_out = target_worktree(repo_dir, target)
        if checked_out is not None and has_tracked_changes(checked_out):
            raise WorkFailed(f"{checked_out} has {target.removeprefix('refs/heads/')} checked out with uncommitted changes")
        branch_tip = swarm.repo.resolve(f"refs/heads/{branch_name(patch.job, task_of(patch))}")
        try:
            plan = plan_merge(swarm.repo, patch, patch_id, branch_tip, target, mode)
        except ConflictError as exc:
            swarm.ledger.record_artifacts(
                patch.job, patch.task, [conflict_decision(patch, patch_id, target, exc.paths, swarm.clock())], swarm.clock()
            )
            if repair:
                job_id = queue_repair(swarm, snapshot, patch, target, exc.paths)
                raise WorkFailed(f"{exc}; queued repair job {job_id} (run gitswarm work)") from None
            raise
        spec = snapshot.task(task_of(patch)).spec
        if not plan.fast_forward and not no_recheck and spec.checks:
            refuse_untrusted(swarm, patch.job, "merge (its checks run again on the merged tree)")
            ctx = RunContext(patch.job, task_of(patch), patch.attempt, repo_dir, os.environ)
            boxed = check_decision(load_config(swarm.repo.workdir), pulled(swarm, patch.job), os.environ)
            checks = recheck(repo_dir, worktrees_of(swarm).root, plan, spec.checks, ctx, spec.timeout, run_plain, store_of(swarm), swarm.clock,
                             boxed, swarm.repo.common_dir)
            swarm.ledger.record_artifacts(patch.job, patch.task, checks, swarm.clock())
            failed = [c.command for c in checks if not c.passed]
            if failed:
                raise WorkFailed(f"checks failed on the merged tree: {', '.join(map(str, failed))}; nothing merged")
        apply_merge(swarm.repo, repo_dir, plan, checked_out)
    swarm.ledger.record_artifacts(patch.job, patch.task, [merged_decision(plan, swarm.clock())], swarm.clock())
    return MergeResult(patch=patch_id, into=target.removeprefix("refs/heads/"), old=plan.old, new=plan.new, fast_forward=plan.fast_forward)


def merge_target(swarm: Swarm, snapshot: Snapshot, into: str | None) -> str:
    """The branch a merge moves: --into, else the branch the job started from, else the checked-out one.
    Only ever a branch: a pulled job's base_ref may name anything."""
    if into is not None:
        return check_branch_ref(f"refs/heads/{into}", "--into")
    if snapshot.job.base_ref is not None:
        return check_branch_ref(snapshot.job.base_ref, f"job {snapshot.job_id} base_ref")
    target = swarm.repo.head_branch()
    if target is None:
        raise BadInput("no branch to merge into: pass --into BRANCH")
    return target


def queue_repair(swarm: Swarm, snapshot: Snapshot, patch: Patch, target: str, paths: list[str]) -> str:
    """A new delegation: the same change, redone on the target as it is now."""
    spec = snapshot.task(task_of(patch)).spec
    branch = target.removeprefix("refs/heads/")
    instruction = (
        f"{spec.prompt or spec.command}\n\nAn earlier attempt (commit {patch.head[:12]}) conflicts with {branch}"
        f" in: {', '.join(paths)}. Make the change again on {branch} as it is now."
    )
    return swarm.submit_text(delegation_spec(instruction, spec.adapter, list(spec.checks), branch), "repair")


def worktree_list(swarm: Swarm) -> dict:
    trees = worktrees_of(swarm)
    out = []
    for entry in trees.listing():
        _, job, task = entry["branch"].split("/", 2)
        state = swarm.index.task_state(job, task)
        out.append({**entry, "job": job, "task": task, "state": state, "clean": trees.is_clean(Path(entry["path"]))})
    return {"worktrees": out}


def delegation_spec(instruction: str, adapter: str, checks: list[str], base: str | None) -> str:
    """The one-task job spec of `gitswarm delegate`, every outside value quoted as a TOML string."""
    first = instruction.strip().splitlines()[0] if instruction.strip() else instruction
    lines = [f"goal = {toml_string(first)}"]
    if base is not None:
        lines.append(f"base = {toml_string(base)}")
    lines += [
        "[[tasks]]",
        'id = "delegate"',
        'mode = "implement"',
        f"adapter = {toml_string(adapter)}",
        f"prompt = {toml_string(instruction)}",
        f"checks = [{', '.join(toml_string(c) for c in checks)}]",
        "max_attempts = 1",
    ]
    return "\n".join(lines) + "\n"
