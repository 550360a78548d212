"""`worktrees gc [--force]`: the worktrees, branches and clean checkouts that hold nothing left to lose.

A task's work is **merged** when gitswarm merged its head (a `merged patch`
decision naming that head) or a branch outside `swarm/` contains it. gc
removes the clean worktree of a finished task whose work was merged or
whose task was cancelled, and deletes a task branch `swarm/<job>/<task>`
(by compare-and-swap from the tip it checked) when its work was merged or
it holds nothing beyond its job's base; a job that is gone leaves only the
second test. Never an unmerged branch, unless `--force`: then also the
clean worktrees and the branches of finished tasks and gone jobs, each
deletion recorded on its task as a `decision` (as `worktrees discard`
does). Never a task that may still run, a worktree holding uncommitted
work, or a branch checked out anywhere. What is kept is said, with why.
The idle clean checkouts kept for checks go too: they hold only a copy of
a commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gitswarm.engine.delegation.patches import worktree_list, worktrees_of
from gitswarm.engine.swarm import Swarm
from gitswarm.model.artifacts import Decision
from gitswarm.model.ids import GENERATED_ID, TASK_ID
from gitswarm.model.records import TERMINAL, TaskState
from gitswarm.store.checkouts import CHECKOUTS_DIR, Checkouts
from gitswarm.store.gitrepo import GitCommandError
from gitswarm.store.jobs import Snapshot
from gitswarm.store.refs import branches_containing, delete_ref
from gitswarm.store.worktrees import BRANCH_PREFIX, Worktrees

FORCE_HINT = "--force deletes it"


@dataclass(frozen=True)
class Fate:
    """What gc does with one task's worktree or branch, and why."""

    goes: bool
    why: str
    forced: bool = False  # it goes only because of --force: commits no other branch holds are dropped


def worktree_gc(swarm: Swarm, force: bool = False) -> dict:
    """Remove what holds nothing left to lose (see the module's note); what was removed, what was kept and why."""
    trees = worktrees_of(swarm)
    judge = _Judge(swarm, force)
    removed, kept = [], []
    for entry in worktree_list(swarm)["worktrees"]:
        fate = judge.worktree(entry["job"], entry["task"], entry["head"])
        if fate.goes and not entry["clean"]:
            fate = Fate(False, "holds uncommitted work")
        if not fate.goes:
            kept.append({"path": entry["path"], "why": fate.why})
            continue
        trees.remove(Path(entry["path"]))
        removed.append({"path": entry["path"], "why": fate.why})
    checkouts = [path for root in sorted(_checkout_roots(trees)) for path in Checkouts(trees.repo_dir, root).clear()]
    trees.prune()
    return {"removed": removed, "kept": kept, "checkouts": checkouts, "branches": _branch_gc(swarm, trees, judge)}


def _branch_gc(swarm: Swarm, trees: Worktrees, judge: _Judge) -> dict:
    """Delete the task branches whose work is merged (or, with --force, finished); the rest kept, with why."""
    checked_out = {e["branch"]: e["path"] for e in trees.every(main=True) if e["branch"]}
    deleted, kept = [], []
    for ref, head in sorted(swarm.repo.list_refs(f"refs/heads/{BRANCH_PREFIX}").items()):
        branch = ref.removeprefix("refs/heads/")
        job, _, task = branch.removeprefix(BRANCH_PREFIX).partition("/")
        if not (GENERATED_ID.fullmatch(job) and TASK_ID.fullmatch(task)):
            fate = Fate(False, "not a task branch (swarm/JOB/TASK)")
        elif branch in checked_out:
            fate = Fate(False, f"checked out in {checked_out[branch]}")
        else:
            fate = judge.branch(job, task, head)
        if fate.goes:
            try:
                delete_ref(trees.repo_dir, ref, head)  # refused if it moved since it was read
            except GitCommandError:
                fate = Fate(False, "it moved while gc ran")
        if not fate.goes:
            kept.append({"branch": branch, "head": head, "why": fate.why})
            continue
        if fate.forced and judge.known(job, task):
            judge.record_discard(job, task, branch, head)
        deleted.append({"branch": branch, "head": head, "why": fate.why})
    return {"deleted": deleted, "kept": kept}


class _Judge:
    """Whether a task's worktree or branch may go: its task's state, whether its work was merged."""

    def __init__(self, swarm: Swarm, force: bool) -> None:
        self.swarm = swarm
        self.force = force
        self.jobs = set(swarm.index.job_ids())
        self._snapshots: dict[str, Snapshot] = {}

    def known(self, job: str, task: str) -> bool:
        return job in self.jobs and self.swarm.index.task_state(job, task) is not None

    def worktree(self, job: str, task: str, head: str) -> Fate:
        if not self.known(job, task):
            return self._gone(job, head, "worktree")
        state = self.swarm.index.task_state(job, task)
        if state not in TERMINAL:
            return Fate(False, f"task is {state}: it may still run")
        snapshot = self._snapshot(job)
        merged = None if head == snapshot.job.base else self._merged(snapshot, task, head)
        if merged is not None:
            return Fate(True, merged)
        if state == TaskState.CANCELLED:
            return Fate(True, "task cancelled")
        return self._unmerged(f"task {state}", "worktree")

    def branch(self, job: str, task: str, head: str) -> Fate:
        if not self.known(job, task):
            return self._gone(job, head, "branch")
        state = self.swarm.index.task_state(job, task)
        if state not in TERMINAL:
            return Fate(False, f"task is {state}: it may still run")
        snapshot = self._snapshot(job)
        if head == snapshot.job.base:
            return Fate(True, "nothing beyond its job's base")
        merged = self._merged(snapshot, task, head)
        return Fate(True, merged) if merged is not None else self._unmerged(f"task {state}", "branch")

    def record_discard(self, job: str, task: str, branch: str, head: str) -> None:
        """An unmerged branch deleted: said on its task, as `worktrees discard` says it."""
        decision = Decision(
            job=job, task=task, created=self.swarm.clock(), producer="gitswarm", title=f"discarded branch {branch}",
            rationale=f"head {head}; deleted by worktrees gc --force, unmerged",
        )
        self.swarm.ledger.record_artifacts(job, task, [decision], self.swarm.clock())

    def _gone(self, job: str, head: str, what: str) -> Fate:
        gone = "job" if job not in self.jobs else "task"
        where = self._contained(head, None)
        if where is not None:
            return Fate(True, f"its {gone} is gone; {where}")
        return self._unmerged(f"its {gone} is gone", what)

    def _unmerged(self, said: str, what: str) -> Fate:
        if self.force:
            return Fate(True, f"{said}, not merged: {'removed' if what == 'worktree' else 'deleted'} (--force)", forced=True)
        hint = "--force removes it" if what == "worktree" else FORCE_HINT
        return Fate(False, f"{said}, not merged into any branch outside {BRANCH_PREFIX} ({hint})")

    def _merged(self, snapshot: Snapshot, task: str, head: str) -> str | None:
        """How the task's work at `head` was merged: by gitswarm (a decision naming this head), or into a
        branch outside `swarm/` that contains it (the job's own branch named first); None when it was not."""
        for artifact_id in snapshot.task(task).artifacts:
            artifact = snapshot.artifact(artifact_id)
            if isinstance(artifact, Decision) and artifact.title.startswith("merged patch") and artifact.rationale.endswith(
                f"head {head}"
            ):
                return "branch merged"
        return self._contained(head, snapshot.job.base_ref)

    def _contained(self, head: str, target: str | None) -> str | None:
        if not head.strip("0") or not self.swarm.repo.has_object(head):  # a worktree whose branch was deleted by hand
            return None
        repo_dir = self.swarm.repo.workdir or self.swarm.repo.common_dir
        found = [ref for ref in branches_containing(repo_dir, head) if not ref.startswith(f"refs/heads/{BRANCH_PREFIX}")]
        if not found:
            return None
        where = target if target in found else found[0]
        return f"merged: {where.removeprefix('refs/heads/')} contains its head {head[:12]}"

    def _snapshot(self, job: str) -> Snapshot:
        if job not in self._snapshots:
            self._snapshots[job] = self.swarm.refs.snapshot(job, self.swarm.index.job_tip(job))
        return self._snapshots[job]


def _checkout_roots(trees: Worktrees) -> set[Path]:
    """Today's root and every root that still has pooled checkouts (`<root>/checkouts/<n>`, detached)."""
    roots = {trees.root}
    for entry in trees.every():
        path = Path(entry["path"])
        if not entry["branch"] and path.parent.name == CHECKOUTS_DIR and path.name.isdigit():
            roots.add(path.parent.parent)
    return roots
