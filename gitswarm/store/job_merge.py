"""Merging two clones' histories of one job: replay every operation of both.

This module walks commits: it collects the operations of both histories,
each once (by op id: store/oplog.py), and commits what replaying them gives. The rules of
the replay itself (the order, what a skipped op still does, a finish whose
claim lost) are state-machine rules and live with the reducer, in
model/replay.py. Artifact records and output blobs are content-addressed:
the merged tree has both sides'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gitswarm.model import codec
from gitswarm.model.errors import CorruptRecord
from gitswarm.model.ops import JobCreated, Op
from gitswarm.model.records import JobState, Task
from gitswarm.model.replay import Replay, Replayed, replay
from gitswarm.store import layout
from gitswarm.store.gitrepo import CommitInfo, GitRepo
from gitswarm.store.jobs import COMMITTER, parse_ops
from gitswarm.store.oplog import NOTHING_PARSED, Found, HistoryOps, Parsed, add_ops, unique_ops

MERGED_KINDS = (layout.ARTIFACTS_FANS, layout.BLOBS_FANS)


@dataclass(frozen=True)
class Merged:
    tip: str
    state: JobState  # the merged job state
    tasks: list[Task]  # the task records that differ from the local tip's


LOCAL_OPS = HistoryOps(Op)  # the operations of each job's local history, kept by this process
# Per (repository, job): the replay of a local history this process made last, with the tip and the operations
# it is of, so that the next one replays only what sorts after the newest of them (model/replay.py, Replay).
_REPLAYS: dict[tuple[str, str], tuple[str, Found, Replay]] = {}
_KEEP_REPLAYS = 16


def _both(
    repo: GitRepo, local: str, remote: str, where: str, remote_only: list[CommitInfo] | None, parsed: Parsed,
) -> tuple[Found, Found]:
    """(the local history's operations, those of both histories)."""
    ours = LOCAL_OPS.at(repo, where, local)
    found = dict(ours)
    theirs = remote_only if remote_only is not None else list(repo.walk(remote, hide=local))
    add_ops(found, theirs, where, Op, parsed)
    return ours, found


def _replay_of(repo: GitRepo, where: str, tip: str, found: Found) -> tuple[Replay, bool]:
    """The replay of the local history at `tip` (its operations: `found`), from the one this process kept when
    that one's operations are all among these (the same bodies): only the others are replayed, in their places.
    With it, whether it was made from nothing (no replay of this history kept)."""
    key = (str(repo.common_dir), where)
    kept = _REPLAYS.pop(key, None)
    fresh = False
    if kept is not None and kept[0] == tip:
        made = kept[2]
    elif kept is not None and all(found.get(op_id, ("",))[0] == line for op_id, (line, _) in kept[1].items()):
        made = kept[2].adding([op for op_id, (_, op) in found.items() if op_id not in kept[1]], where)
    else:
        made, fresh = Replay.of([op for _, op in found.values()], where), True
    _keep_replay(repo, where, tip, found, made)
    return made, fresh


def _keep_replay(repo: GitRepo, where: str, tip: str, found: Found, made: Replay) -> None:
    key = (str(repo.common_dir), where)
    _REPLAYS.pop(key, None)
    _REPLAYS[key] = (tip, found, made)
    while len(_REPLAYS) > _KEEP_REPLAYS:
        _REPLAYS.pop(next(iter(_REPLAYS)))


def record_oids(repo: GitRepo, result: Replayed) -> dict[str, str]:
    """Tree path -> blob id of the state and every task record of a replay, hashed without writing."""
    oids = {layout.STATE_PATH: repo.blob_id(codec.encode(result.state))}
    oids.update((layout.task_path(t.id), repo.blob_id(codec.encode(t))) for t in result.tasks.values())
    return oids


def _records_redone(before: Replay | None, after: Replay) -> dict[str, Any]:
    """Tree path -> record of the state and of each task record `after` made anew (every one, with no
    `before`): a record it took as it was from `before`'s fold (the same object) is the one the local tree
    holds already, written from `before`. (Replay.adding re-folds from a checkpoint: only the tasks its
    operations touch get new records.)"""
    redone: dict[str, Any] = {layout.STATE_PATH: after.result.state}
    held = before.result.tasks if before is not None else {}
    redone.update((layout.task_path(t), task) for t, task in after.result.tasks.items() if held.get(t) is not task)
    return redone


def merge_job(
    repo: GitRepo, job_id: str, local: str, remote: str, actor: str, base: str | None = None,
    remote_only: list[CommitInfo] | None = None, parsed: Parsed = NOTHING_PARSED,
) -> Merged:
    """Commit the merge of two diverged tips (parents: local, remote); the caller moves the ref.

    Its tree holds the canonical replay of every operation of both histories,
    so the result depends only on the set of operations, never on the order
    of earlier pushes and pulls.
    """
    where = layout.job_ref(job_id)
    if (base or repo.merge_base(local, remote)) is None:
        raise CorruptRecord(f"{where}: the two histories share no commit (not the same job)")
    ours, found = _both(repo, local, remote, where, remote_only, parsed)
    before, fresh = _replay_of(repo, where, local, ours)
    made = before.adding([op for op_id, (_, op) in found.items() if op_id not in ours], where)
    result = made.result
    local_tree = repo.commit_info(local).tree
    paths: dict[str, str | None] = {}
    # The first merge of a history this process makes compares every record with the local tree (and rewrites
    # one that differs: written by an older gitswarm, or by hand); later ones, only what the replay made anew.
    records = _records_redone(None if fresh else before, made)
    for path, record in records.items():
        encoded = codec.encode(record)
        if repo.tree_entry(local_tree, path) != repo.blob_id(encoded):
            paths[path] = repo.write_blob(encoded)
    remote_tree = repo.commit_info(remote).tree
    local_fans = {fan: oid for fan, oid, is_tree in repo.tree_items(local_tree) if is_tree}
    for fan, fan_oid, is_tree in repo.tree_items(remote_tree):
        if is_tree and fan.startswith(MERGED_KINDS) and local_fans.get(fan) != fan_oid:  # (one both hold adds nothing)
            held = {name: oid for name, oid, _ in repo.tree_items(local_fans[fan])} if fan in local_fans else {}
            paths.update((f"{fan}/{name}", oid) for name, oid, _ in repo.tree_items(fan_oid) if held.get(name) != oid)
    new_tree = repo.update_tree(local_tree, paths)
    total = result.applied + result.skipped
    message = f"merge {total} ops\n"
    tip = repo.commit(new_tree, [local, remote], message, (COMMITTER, f"{actor}@gitswarm"), result.state.updated)
    _keep_replay(repo, where, tip, found, made)  # the next local tip, once the caller moved the ref
    changed = [result.tasks[p.rsplit("/", 1)[1]] for p in paths if p.startswith(layout.TASKS_FANS)]
    return Merged(tip=tip, state=result.state, tasks=changed)


def check_ahead(repo: GitRepo, job_id: str, ours: str, theirs: str, brought: list[CommitInfo], parsed: Parsed = NOTHING_PARSED) -> None:
    """check_tip() for a tip whose operations are those of the local one (`ours`, checked when it was
    taken) and of the commits the caller walked and checked beyond it (`brought`): a tip that descends from
    ours, or that lacks only merge commits of it. What they add is replayed from the replay this process
    kept of the local history, not the whole history from its start."""
    where = layout.job_ref(job_id)
    if any(not commit.parents for commit in brought):
        raise CorruptRecord(f"{where}: the history has more than one root commit")
    if repo.tree_entry(repo.commit_info(theirs).tree, layout.JOB_PATH) != repo.tree_entry(repo.commit_info(ours).tree, layout.JOB_PATH):
        raise CorruptRecord(f"{where}:{layout.JOB_PATH}: the record is not the job its job_created made")
    ours_found, found = _both(repo, ours, theirs, where, brought, parsed)
    made = _replay_of(repo, where, ours, ours_found)[0].adding([op for op_id, (_, op) in found.items() if op_id not in ours_found], where)
    _check_records(repo, where, theirs, record_oids(repo, made.result))
    _keep_replay(repo, where, theirs, found, made)  # the next local tip, once the caller moved the ref


def check_tip(repo: GitRepo, job_id: str, tip: str, commits: list[CommitInfo] | None = None, parsed: Parsed = NOTHING_PARSED) -> None:
    """Refuse a history whose tip does not record the canonical replay of its operations.

    Compares the state record and every task record by blob id: no record is
    decoded, and a forged or corrupt one anywhere is caught. `commits`: every
    commit of the history, oldest first, when the caller already walked them.
    """
    where = layout.job_ref(job_id)
    commits = commits if commits is not None else list(repo.walk(tip))
    created = parse_ops(commits[0], where) if commits else []
    if not created or commits[0].parents or not isinstance(created[0], JobCreated) or created[0].job.id != job_id:
        raise CorruptRecord(f"{where}: history does not start with this job's job_created")
    if any(not commit.parents for commit in commits[1:]):
        raise CorruptRecord(f"{where}: the history has more than one root commit")
    result = replay(unique_ops(commits, where, Op, parsed), where)
    tree = repo.commit_info(tip).tree
    if repo.tree_entry(tree, layout.JOB_PATH) != repo.blob_id(codec.encode(created[0].job)):
        raise CorruptRecord(f"{where}:{layout.JOB_PATH}: the record is not the job its job_created made")
    _check_records(repo, where, tip, record_oids(repo, result))


def _check_records(repo: GitRepo, where: str, tip: str, expected: dict[str, str]) -> None:
    """Refuse a tip whose state and task records are not exactly `expected` (path -> blob id)."""
    tree = repo.commit_info(tip).tree
    for path, oid in expected.items():
        if repo.tree_entry(tree, path) != oid:
            raise CorruptRecord(f"{where}:{path}: the record does not match the job's operations")
    for fan, fan_oid, is_tree in repo.tree_items(tree):
        if is_tree and fan.startswith(layout.TASKS_FANS):
            for name, _, _ in repo.tree_items(fan_oid):
                if f"{fan}/{name}" not in expected:
                    raise CorruptRecord(f"{where}:{fan}/{name}: a task record no operation made")
