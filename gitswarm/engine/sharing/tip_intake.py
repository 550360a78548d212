"""Taking one pulled tip of a job into its live ref: planned first (checked as hostile input, merged by the
op-log rules where both sides moved), then applied by compare-and-swap under the index's write lock.

A job worked by many machines takes other machines' claim tips again and again (engine/sharing/share.py,
`_integrate_claims`). For those, this process keeps which commits the job's local history holds, brought
forward as the ref moves, so that each tip costs the commits it adds: no merge base, no walk that hides the
local tip (each reads back through the whole history), and a fast-forward checked from the kept replay.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass

from gitswarm.engine.swarm import Swarm
from gitswarm.model.errors import CorruptRecord
from gitswarm.model.ids import GENERATED_ID, TASK_ID
from gitswarm.store import layout
from gitswarm.store.gitrepo import CommitInfo, GitRepo
from gitswarm.store.job_merge import Merged, check_ahead, check_tip, merge_job
from gitswarm.store.oplog import commits_beyond
from gitswarm.store.pulled_jobs import Intake


@dataclass(frozen=True)
class Plan:
    """What a pull will do to one job, decided and checked before anything local moves."""

    job: str
    outcome: str  # new, updated, merged or unchanged
    ours: str | None  # the local tip the plan was made against
    theirs: str  # the pulled tip
    tip: str  # what the live ref will point at
    merged: Merged | None = None
    # As _plan_beyond found them: the commits of `theirs` beyond what the local history held, and those of `ours`
    # that `tip` may not hold (merge commits alone). Once the ref moved, what held_here knows is brought along.
    beyond: frozenset[str] | None = None
    dropped: frozenset[str] = frozenset()


# (git common dir, job) -> the commits this process knows the job's local history holds: every commit of it
# as of the local tip it last walked from (_WALKED), and the claim ref tips it merged since. The local ref only
# ever moves to a history that holds its last one, so a commit held once stays held: a sync then plans only
# the claim tips that are new to the job here, each walked once, instead of a merge base per tip (most are the
# machine's own, taken when pushed). Cleared when the job's ref is gone.
_CONTAINED: dict[tuple[str, str], set[str]] = {}
_WALKED: dict[tuple[str, str], str] = {}
_HOLDS_ALL_READS = 256  # merge commits _merges_only reads back at most before it answers no (a merge is made)


def _key(repo: GitRepo, job_id: str) -> tuple[str, str]:
    return str(repo.common_dir), job_id


def held_here(repo: GitRepo, job_id: str, tip: str) -> set[str]:
    """_CONTAINED for the job, brought up to its local `tip` (the commits since the last walk added). A tip
    that does not hold the last one walked (the ref set back or remade by hand) starts the set anew.
    CorruptRecord when `tip` is not a commit."""
    key = _key(repo, job_id)
    known = _CONTAINED.setdefault(key, set())
    walked = _WALKED.get(key)
    if walked == tip:
        return known
    new: list[CommitInfo] = []
    if walked is not None:
        new, stopped = commits_beyond(repo, tip, known)
        # The local ref moves only forward, so the last tip walked is nearly always a parent of a commit made
        # since; where it is not (the ref moved to a claim tip merged before, or set back by hand), ask git.
        if walked not in stopped and not (repo.has_object(walked) and repo.is_ancestor(walked, tip)):
            known.clear()
            walked = None
    if walked is None:
        new = list(repo.walk(tip))
    known.update(commit.oid for commit in new)
    _WALKED[key] = tip
    return known


def _went_ahead(repo: GitRepo, plan: Plan) -> None:
    """The local ref moved from `plan.ours` to `plan.tip`, which holds every commit of ours but `plan.dropped`
    and `plan.beyond` besides: what held_here knows is brought along with no walk and no ancestry query."""
    key = _key(repo, plan.job)
    if plan.ours is not None and _WALKED.get(key) == plan.ours and plan.beyond is not None:
        known = _CONTAINED[key]
        known.difference_update(plan.dropped)
        known.update(plan.beyond)
        known.add(plan.tip)
        _WALKED[key] = plan.tip


def plan_tip(swarm: Swarm, intake: Intake, job_id: str, theirs: str, incremental: bool = False) -> Plan:
    """What taking `theirs` does to the job's live ref. `incremental`: walk only what the local history
    (as this process knows it: held_here) lacks, for a job merged with other machines' claims again and again."""
    repo = swarm.repo
    if not TASK_ID.fullmatch(job_id) or not GENERATED_ID.fullmatch(job_id):
        raise CorruptRecord(f"ref name {job_id!r} is not a job id")
    where = layout.job_ref(job_id)
    ours = repo.read_ref(where)
    if ours is not None and theirs in repo.commit_info(ours).parents:  # what the last pull merged: no walk needed
        return Plan(job_id, "unchanged", ours, theirs, theirs)
    if incremental and ours is not None and ours != theirs:
        return _plan_beyond(swarm, intake, job_id, ours, theirs)
    if ours is not None and _key(repo, job_id) in _WALKED and theirs in held_here(repo, job_id, ours):
        # A job this process merges claim tips into: its remote ref, which moves only with a publish, is held
        # already (no merge base sought: it reads back through the whole history, at every sync).
        return Plan(job_id, "unchanged", ours, theirs, theirs)
    base = repo.merge_base(ours, theirs) if ours is not None and ours != theirs else ours
    if ours == theirs or base == theirs:
        return Plan(job_id, "unchanged", ours, theirs, theirs)
    brought = intake.check_job(job_id, theirs, ours)
    if ours is None or base == ours or _holds_all_of(repo, theirs, ours):
        check_tip(repo, job_id, theirs, brought if ours is None else None, intake.parsed)  # a new job's commits are all brought
        return Plan(job_id, "new" if ours is None else "updated", ours, theirs, theirs)
    merged = merge_job(repo, job_id, ours, theirs, swarm.actor, base, remote_only=brought, parsed=intake.parsed)
    return Plan(job_id, "merged", ours, theirs, merged.tip, merged)


def _plan_beyond(swarm: Swarm, intake: Intake, job_id: str, ours: str, theirs: str) -> Plan:
    """plan_tip() from what this process knows the local history `ours` holds: only the commits of `theirs`
    beyond it are walked and checked, no merge base is sought (each reads back through the whole history),
    and a fast-forward is checked from the kept replay of `ours` (job_merge.check_ahead)."""
    repo = swarm.repo
    held = held_here(repo, job_id, ours)
    if theirs in held:
        return Plan(job_id, "unchanged", ours, theirs, theirs)
    brought, reached = commits_beyond(repo, theirs, held)
    if not reached:
        raise CorruptRecord(f"{layout.job_ref(job_id)}: the two histories share no commit (not the same job)")
    intake.check_job(job_id, theirs, ours, brought)
    beyond = frozenset(commit.oid for commit in brought)
    if ours in reached:
        check_ahead(repo, job_id, ours, theirs, brought, intake.parsed)
        return Plan(job_id, "updated", ours, theirs, theirs, beyond=beyond)
    only_merges = _merges_only(repo, ours, reached | beyond)
    if only_merges is not None:  # theirs holds every operation of ours: its own are those `brought` adds
        check_ahead(repo, job_id, ours, theirs, brought, intake.parsed)
        return Plan(job_id, "updated", ours, theirs, theirs, beyond=beyond, dropped=only_merges)
    merged = merge_job(repo, job_id, ours, theirs, swarm.actor, next(iter(reached)), remote_only=brought, parsed=intake.parsed)
    return Plan(job_id, "merged", ours, theirs, merged.tip, merged, beyond=beyond)


def _holds_all_of(repo: GitRepo, theirs: str, ours: str) -> bool:
    """Whether every commit that records operations in `ours` is in `theirs` too: what ours has beyond it
    are merge commits alone (this clone merging claim refs as it went), so taking theirs loses nothing, and
    the clones of a job that all saw everything come to one tip."""
    return all(len(commit.parents) > 1 for commit in repo.walk(ours, hide=theirs))


def _merges_only(repo: GitRepo, ours: str, behind: Container[str]) -> frozenset[str] | None:
    """_holds_all_of() where `behind` are commits theirs is known to hold: ours is read back only through
    merge commits until it meets them, and the first commit that records operations ends it (None: a merge
    is made, as when theirs truly lacks it). So the answer costs a few commits, not a walk that hides theirs.
    The merge commits read when it holds: every commit of ours that theirs may lack."""
    seen: set[str] = set()
    todo = [ours]
    while todo:
        oid = todo.pop()
        if oid in behind or oid in seen:
            continue
        seen.add(oid)
        parents = repo.commit_info(oid).parents
        if len(parents) < 2 or len(seen) > _HOLDS_ALL_READS:
            return None
        todo.extend(parents)
    return frozenset(seen)


def apply_plan(swarm: Swarm, intake: Intake, plan: Plan, incremental: bool = False) -> str:
    """Move one live job ref as planned (under the write lock), re-planning if it moved meanwhile."""
    if plan.outcome == "unchanged":
        return "unchanged"
    repo, index = swarm.repo, swarm.index
    where = layout.job_ref(plan.job)
    with index.immediate():
        if repo.read_ref(where) != plan.ours:  # a worker wrote to the job since it was planned
            plan = plan_tip(swarm, intake, plan.job, plan.theirs, incremental)
            if plan.outcome == "unchanged":
                return "unchanged"
        repo.cas_ref(where, plan.tip, plan.ours, f"gitswarm: pull ({plan.outcome})")
        _went_ahead(repo, plan)
        if plan.merged is not None:
            # Only the task records that differ from the local tip need re-indexing.
            job = swarm.refs.snapshot(plan.job, plan.tip).job
            index.record(job, plan.merged.state, plan.tip, plan.merged.tasks)
        else:
            index.reindex(swarm.refs.snapshot(plan.job, plan.tip))
    return plan.outcome


def forget(repo: GitRepo, job_id: str) -> None:
    """Drop what this process knows the job's local history holds (its ref is gone, or no machine claims in it)."""
    key = _key(repo, job_id)
    _CONTAINED.pop(key, None)
    _WALKED.pop(key, None)


def remembered_jobs(repo: GitRepo) -> list[str]:
    """The jobs of this repository whose local history this process keeps what it holds of."""
    here = str(repo.common_dir)
    return [job for (where, job) in list(_CONTAINED) if where == here]
