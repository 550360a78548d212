"""Whether a result was accepted by a verdict that counts here: what memory rests on.

A patch is accepted when the deciding counted verdict on its head accepts it
as complete, clean and aligned, and gitswarm's own counted checks accepted
that very patch (as `merge` asks). A finding or decision is accepted only
when a person's counted review names it (`review ID --accept`, noted on its
job's base, `evidence.artifact` its id): a verdict counts for the content it
named, never for text added to the same attempt after it (anyone with push
access can append a finding to an accepted attempt). A worker's own claims
never count: only verdicts weighed here do.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitswarm.model.artifacts import Decision, Finding, Patch, Verdict
from gitswarm.model.memory import MemoryRecord, derive
from gitswarm.model.provenance import ABOUT, Weighed, accepted_by_gitswarm, deciding
from gitswarm.store.gitrepo import GitRepo
from gitswarm.store.jobs import Snapshot
from gitswarm.store.verdicts import VerdictNotes

Rememberable = Finding | Decision | Patch


@dataclass(frozen=True)
class Accepted:
    commit: str  # the commit the accepting verdict judged
    verdict: str  # the deciding verdict's id
    patch_files: tuple[str, ...]  # for a finding or decision accepted with its task's patch: that patch's files
    accepting: frozenset[str]  # every counted, clean acceptance on that commit for it (a record may name any)


def clean(verdict: Verdict) -> bool:
    return verdict.accepted and (verdict.status, verdict.integrity, verdict.contract) == ("complete", "clean", "aligned")


def _patch_accepted(weighed: list[Weighed], patch_id: str, head: str, files: tuple[str, ...]) -> Accepted | None:
    decider = deciding(weighed)
    if decider is None or not clean(decider.verdict) or not accepted_by_gitswarm(weighed, patch_id):
        return None
    accepting = frozenset(w.id for w in weighed if w.counted and clean(w.verdict) and ABOUT not in w.verdict.evidence)
    return Accepted(head, decider.id, files, accepting)


def _reviewed(weighed: list[Weighed], artifact_id: str, base: str) -> Accepted | None:
    decider = deciding(weighed, about=artifact_id)
    if decider is None or not clean(decider.verdict):
        return None
    mine = frozenset(w.id for w in weighed if w.counted and clean(w.verdict) and w.verdict.evidence.get(ABOUT) == artifact_id)
    return Accepted(base, decider.id, (), mine)


def acceptance(
    notes: VerdictNotes, snapshot: Snapshot, artifact_id: str, artifact: Rememberable, commit: str | None = None
) -> Accepted | None:
    """How `artifact` was accepted (at `commit`, when given), or None when no counted verdict accepts it."""
    if isinstance(artifact, Patch):
        if commit is not None and commit != artifact.head:
            return None
        return _patch_accepted(notes.weigh(artifact.head), artifact_id, artifact.head, tuple(f.path for f in artifact.files))
    base = snapshot.job.base
    if base is not None and commit in (None, base):
        return _reviewed(notes.weigh(base), artifact_id, base)
    return None


def instruction(snapshot: Snapshot, task_id: str | None) -> str:
    """What the task was asked: its prompt, else its command."""
    if task_id is None:
        return ""
    spec = snapshot.task(task_id).spec
    if spec.prompt:
        return spec.prompt
    return spec.command if isinstance(spec.command, str) else " ".join(spec.command or ())


def record_of(repo: GitRepo, snapshot: Snapshot, artifact_id: str, artifact: Rememberable, accepted: Accepted, verdict: str) -> MemoryRecord:
    """The memory record of an accepted artifact, naming `verdict` as the one that accepted it."""
    tree = repo.commit_info(accepted.commit).tree
    return derive(
        artifact_id, artifact, accepted.commit, verdict, instruction(snapshot, artifact.task),
        lambda path: repo.tree_entry(tree, path) is not None, accepted.patch_files,
    )
