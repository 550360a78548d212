"""Analyze tasks of agent adapters: read-only, on a throwaway checkout of the job's pinned base.

An analyze task answers; it does not edit. Real agents wrote files anyway
when run in the user's checkout (and the task succeeded), so an agent's
analyze task runs in a clean detached checkout of the base from the pool
(store/checkouts.py), never in the user's tree. When it exits, the checkout
must be exactly as it was handed out: `git status --porcelain
--untracked-files=all --ignored` lists nothing (a fresh checkout lists
nothing) and HEAD is still the base, detached. Anything else fails the task
as an integrity violation, not retried, and the checkout is removed rather
than kept for reuse. The integrity watch of delegations (engine/delegation/integrity.py)
covers the rest: the user's tree, refs, the git dir.

Shell analyze tasks (`pytest`, a build) are not agents: they run in the
user's checkout as before (the worker decides; `model/records.runs_in_users_tree`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec

from gitswarm.adapters.base import Adapter, BlobWriter, Outcome, RunContext, Runner, execute
from gitswarm.adapters.sandbox import Decision
from gitswarm.engine.delegation.confine import Confined
from gitswarm.engine.delegation.integrity import LISTED_CHANGES, Watch, describe, snapshot, violations
from gitswarm.model.paths import quote_path
from gitswarm.model.records import TaskSpec
from gitswarm.store.checkouts import Checkouts
from gitswarm.store.gitrepo import GitRepo
from gitswarm.store.workspace import head_of, status_entries

STATUS_VERBS = {b"??": "created", b"!!": "created (ignored)", b"D": "removed", b"A": "added", b"R": "renamed"}


@dataclass
class ReadOnly:
    repo: GitRepo
    root: Path  # the worktree root: the checkout comes from <root>/checkouts
    store: BlobWriter
    now: Callable[[], float]
    sandbox: Decision | None = None  # the agent's sandbox (engine/delegation/confine.py); None: none, none recorded

    def run(self, adapter: Adapter, ctx: RunContext, base: str, spec: TaskSpec, run: Runner) -> Outcome:
        pool = Checkouts(self.repo.workdir or self.repo.common_dir, self.root)
        checkout = pool.take(base)
        clean = False
        try:
            watch = Watch(self.repo.workdir, self.repo.common_dir, checkout.path, self.root)
            before = snapshot(watch, self.now())
            ctx = msgspec.structs.replace(ctx, workdir=checkout.path)
            in_git: list[str] = []
            if self.sandbox is None:
                said = execute(adapter, spec, ctx, run, self.store, self.now)
            else:  # what it does to git stays in its private git dir, is named here, and is thrown away
                with Confined(self.repo.common_dir, self.sandbox, ctx, checkout.path) as confined:
                    said = execute(adapter, spec, confined.ctx, run, self.store, self.now)
                    in_git = confined.changes()
            escaped = violations(watch, before, snapshot(watch, self.now()))
            if escaped:
                return Outcome(ok=False, error=describe(escaped), artifacts=said.artifacts, retryable=False)
            written = changed(checkout.path, base, in_git)
            if written:
                error = f"integrity: an analyze task is read-only, and the agent changed its checkout of {base[:12]}: {written}"
                return Outcome(ok=False, error=error, artifacts=said.artifacts, retryable=False)
            clean = True
            return said
        finally:
            (pool.give_back if clean else pool.discard)(checkout)


def changed(path: Path, base: str, in_git: list[str] | None = None) -> str | None:
    """What differs in a checkout of `base` from a fresh one, the first few for a message; None when nothing.
    `in_git`: what a sandboxed agent changed of its private git dir (engine/delegation/confine.py)."""
    found = list(in_git or [])
    head_ref, head = head_of(path)
    if head_ref:
        found.append(f"HEAD attached to {head_ref}")
    if head != base:
        found.append(f"HEAD moved to {head[:12] or 'nothing'}")
    for code, name in status_entries(path):
        verb = STATUS_VERBS.get(code) or STATUS_VERBS.get(code.strip()) or "changed"
        found.append(f"{quote_path(name)} {verb}")
    if not found:
        return None
    more = f" and {len(found) - LISTED_CHANGES} more" if len(found) > LISTED_CHANGES else ""
    return ", ".join(found[:LISTED_CHANGES]) + more
