"""Merging two clones' histories of one job: replay every operation since the merge base.

Both sides' operations since the merge base are replayed, once each (by op
id), in ascending (clock, actor, id) order, on the state at the merge base.
An operation that does not apply at its turn changes nothing but stays in the
history; so does a finish whose claim lost to the other side's (both carry the
same token, so the claim's actor tells them apart). The order depends only on
the operations, so merging is commutative and loses nothing. Artifact records
and output blobs are content-addressed: the merged tree has both sides'.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitswarm.model import codec
from gitswarm.model.errors import CorruptRecord, InvalidTransition, LeaseLost
from gitswarm.model.ops import Op, TaskClaimed, TaskFinished
from gitswarm.model.records import JobState, Task
from gitswarm.model.reducer import apply
from gitswarm.store import layout
from gitswarm.store.gitrepo import GitRepo
from gitswarm.store.jobs import COMMITTER, Snapshot, parse_ops

MERGED_KINDS = (layout.ARTIFACTS_FANS, layout.BLOBS_FANS)


@dataclass(frozen=True)
class Merged:
    tip: str
    local: str  # the local tip it was merged from
    replayed: int  # operations since the merge base, both sides
    skipped: int  # of those, the ones that did not apply at their turn
    state: JobState  # the merged job state
    tasks: list[Task]  # every task either side changed since the merge base, as merged


def ops_since(repo: GitRepo, tip: str, base: str, where: str) -> list[Op]:
    """Every operation in commits reachable from `tip` but not from `base`."""
    return [op for commit in repo.walk(tip, hide=base) for op in parse_ops(commit, where)]


def merge_job(repo: GitRepo, job_id: str, local: str, remote: str, actor: str, base: str | None = None) -> Merged:
    """Commit the merge of two diverged tips (parents: local, remote); the caller moves the ref."""
    where = layout.job_ref(job_id)
    base = base or repo.merge_base(local, remote)
    if base is None:
        raise CorruptRecord(f"{where}: the two histories share no commit (not the same job)")
    ops = {op.id: op for tip in (local, remote) for op in ops_since(repo, tip, base, where)}
    ordered = sorted(ops.values(), key=lambda op: op.order_key())
    start = Snapshot(repo, job_id, base)
    state, changed, skipped = start.state, {}, 0
    lost_claims: set[tuple[str, int, str]] = set()

    def lookup(task_id: str) -> Task:
        found = changed.get(task_id)
        return found if found is not None else start.task(task_id)

    for op in ordered:
        if isinstance(op, TaskFinished) and (op.task, op.token, op.actor) in lost_claims:
            skipped += 1
            continue
        try:
            change = apply(op, state, lookup, start.task_ids)
        except (InvalidTransition, LeaseLost):
            if isinstance(op, TaskClaimed):
                lost_claims.add((op.task, op.token, op.actor))
            skipped += 1
            continue
        state = change.state
        changed.update(change.tasks)
    paths: dict[str, str | None] = {layout.STATE_PATH: repo.write_blob(codec.encode(state))}
    for task in changed.values():
        paths[layout.task_path(task.id)] = repo.write_blob(codec.encode(task))
    for tip in (local, remote):
        tree = repo.commit_info(tip).tree
        for fan, fan_oid, is_tree in repo.tree_items(tree):
            if is_tree and fan.startswith(MERGED_KINDS):
                for name, oid, _ in repo.tree_items(fan_oid):
                    paths[f"{fan}/{name}"] = oid
    new_tree = repo.update_tree(start.tree, paths)
    when = max((op.at for op in ordered), default=0.0)
    message = f"merge {len(ordered)} ops\n"
    tip = repo.commit(new_tree, [local, remote], message, (COMMITTER, f"{actor}@gitswarm"), when)
    return Merged(tip=tip, local=local, replayed=len(ordered), skipped=skipped, state=state, tasks=list(changed.values()))


def tasks_differing(repo: GitRepo, old: str, new: str) -> list[str]:
    """The ids of the tasks whose records differ between two commits of a job (by tree, no decoding)."""
    def fans(commit: str) -> dict[str, str]:
        tree = repo.commit_info(commit).tree
        return {name: oid for name, oid, is_tree in repo.tree_items(tree) if is_tree and name.startswith(layout.TASKS_FANS)}

    before, after = fans(old), fans(new)
    differing = []
    for fan in sorted(set(before) | set(after)):
        if before.get(fan) == after.get(fan):
            continue
        a = {name: oid for name, oid, _ in repo.tree_items(before[fan])} if fan in before else {}
        b = {name: oid for name, oid, _ in repo.tree_items(after[fan])} if fan in after else {}
        differing += [task for task in sorted(set(a) | set(b)) if a.get(task) != b.get(task)]
    return differing
