"""Audits and reviews of commits: verdicts as notes on the commits they judge.

`audit REV` runs the configured checks (and optionally an auditor adapter)
on a clean checkout of REV, the same way a patch is verified, and adds the
verdict to REV's note. `review` adds a person's verdict. Neither changes a
job: a merge still needs gitswarm's own verdict on the patch's task.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import msgspec

from gitswarm.adapters.base import RunContext
from gitswarm.adapters.registry import repo_registry
from gitswarm.engine.config import load_config
from gitswarm.engine.delegation.check_view import check_view
from gitswarm.engine.delegation.patches import find_patch, run_plain, store_of, worktrees_of
from gitswarm.engine.delegation.verify import AUDIT_RULES, nothing_to_check, verify
from gitswarm.engine.knowledge.memory import auto_promote
from gitswarm.engine.results import Audited, Reviewed
from gitswarm.engine.swarm import Swarm, verdict_view
from gitswarm.model.artifacts import BlobRef, Patch, Verdict
from gitswarm.model.errors import BadInput, NotFound
from gitswarm.model.provenance import ABOUT
from gitswarm.model.records import TaskSpec
from gitswarm.model.spec import parse_duration
from gitswarm.store.diffs import binary_diff, root_diff
from gitswarm.store.repoconfig import author_ident

AUDIT = "audit"


def resolve_commit(swarm: Swarm, rev: str) -> str:
    commit = swarm.repo.resolve(rev)
    if commit is None:
        raise BadInput(f"{rev} does not name a commit")
    return commit


def audit(swarm: Swarm, rev: str = "HEAD", checks: list[str] | None = None, auditor: str | None = None) -> Audited:
    """Check REV on a clean checkout; its verdict is added to REV's note."""
    commit = resolve_commit(swarm, rev)
    config = load_config(swarm.repo.workdir).audit
    commands = tuple(checks if checks else config.checks)
    auditor_name = auditor or config.auditor
    if not commands and not auditor_name:
        raise BadInput(nothing_to_check("audit"))
    reviewer = repo_registry(swarm.repo.workdir).get(auditor_name) if auditor_name else None
    repo_dir = swarm.repo.workdir or swarm.repo.common_dir
    parent = swarm.repo.commit_info(commit).parents
    base = parent[0] if parent else commit
    diff = binary_diff(repo_dir, base, commit) if parent else root_diff(repo_dir, commit)
    subject = swarm.repo.commit_info(commit).message.splitlines()[0] if swarm.repo.commit_info(commit).message else commit
    now = swarm.clock()
    patch = Patch(
        job=AUDIT, task=AUDIT, created=now, producer="gitswarm", base=base, head=commit,
        diff=BlobRef(oid=swarm.repo.write_blob(diff), size=len(diff)), sha256=hashlib.sha256(diff).hexdigest(),
    )
    spec = TaskSpec(
        id=AUDIT, seq=0, mode="implement", prompt=f"Commit {commit[:12]}: {subject}", checks=commands,
        timeout=parse_duration(config.timeout, "audit.timeout"),
    )
    ctx = RunContext(AUDIT, AUDIT, 1, repo_dir, os.environ)
    result = verify(
        swarm.repo, Path(repo_dir), worktrees_of(swarm).root, patch, spec, ctx, run_plain, store_of(swarm), swarm.clock, reviewer, AUDIT_RULES
    )
    verdict = result.verdict
    return Audited(
        commit=commit, accepted=verdict.accepted, verdict=f"{verdict.status}/{verdict.integrity}/{verdict.contract}",
        reviewer=verdict.reviewer, checks=[check_view(c, swarm.repo.read_blob) for c in result.checks],
    )


def person(swarm: Swarm) -> str:
    """Who is reviewing: git's author identity, as `git var GIT_AUTHOR_IDENT` gives it."""
    ident = author_ident(swarm.repo.workdir or swarm.repo.common_dir)
    return ident.rsplit(" ", 2)[0] if ident else "unknown"


def review(swarm: Swarm, target: str, accept: bool, note: str | None = None) -> Reviewed:
    """A person's verdict on a patch's head (PATCH is an artifact id prefix), on a finding or a
    decision (noted on its job's base, deciding for that artifact alone), or on a commit."""
    job, task, patch_id = AUDIT, None, None
    evidence = {"note": note} if note else {}
    about = reviewed_artifact(swarm, target)
    if about is not None:  # a finding or decision: noted on its job's base, deciding for it alone
        artifact_id, commit, job, task = about
        evidence[ABOUT] = artifact_id
    else:
        try:
            patch_id, patch, _ = find_patch(swarm, target)
            commit, job, task = patch.head, patch.job, patch.task
        except BadInput:
            commit = resolve_commit(swarm, target)
    who = person(swarm)
    verdict = Verdict(
        job=job, task=task, created=swarm.clock(), producer="person", head=commit,
        status="complete" if accept else "incomplete", integrity="clean", contract="aligned" if accept else "needs_revision",
        accepted=accept, reviewer=who, evidence=evidence, patch=patch_id,
    )
    notes = swarm.verdict_notes()
    notes.add(verdict, swarm.clock())
    remembered = auto_promote(swarm.repo, swarm.refs, job, task, swarm.clock) if accept and job != AUDIT else []
    return Reviewed(
        commit=commit, reviewer=who, accepted=accept, note=note, signed=notes.config.key is not None,
        artifact=about[0] if about else msgspec.UNSET, remembered=list(remembered) if remembered else msgspec.UNSET,
    )


def reviewed_artifact(swarm: Swarm, target: str) -> tuple[str, str, str, str | None] | None:
    """(artifact id, its job's base, job, task) when TARGET names a finding or a decision; else None."""
    try:
        found = swarm.artifact(target)
    except (BadInput, NotFound):
        return None
    if found["record"].get("kind") not in ("finding", "decision"):
        return None
    base = swarm.refs.snapshot(found["job"], swarm.index.job_tip(found["job"])).job.base
    if base is None:
        raise BadInput(f"{found['record']['kind']} {found['id'][:12]}: its job has no base commit to note a review on")
    return found["id"], base, found["job"], found["record"].get("task")


def verdicts_on(swarm: Swarm, commit: str) -> list[dict]:
    """Every verdict in the note on `commit` (gitswarm's, agents', people's), oldest first, with its provenance."""
    return [verdict_view(w) for w in swarm.verdict_notes().weigh(commit)]


def accepted_on(swarm: Swarm, commit: str) -> bool:
    """Whether the deciding verdict on `commit` accepts it: the latest one that counts here
    (made by this clone or signed by an allowed key); uncounted verdicts never decide."""
    found = swarm.verdict_notes().deciding(commit)
    return found is not None and found.verdict.accepted
