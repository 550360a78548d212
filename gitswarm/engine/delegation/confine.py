"""Which runs are sandboxed, and what a sandboxed run in a worktree or checkout is given.

The decision: `[sandbox]` of `.gitswarm.toml` over the adapter spec's own
(adapters/sandbox.py); mode `bwrap` with no working bwrap is bad input, said
once before anything runs; mode `auto` without one says so once and runs as
before. A run in a worktree (an implement task's, an analyze task's clean
checkout, a check's) gets: the worktree writable, its `.git` file read-only,
a private git dir in place of the worktree's own (store/private_git.py), the
repository's git dir read-only and gitswarm's files in it hidden. After an
implement run the private branch's head is brought back into the repository.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

import msgspec

from gitswarm.adapters.agent import AgentAdapter
from gitswarm.adapters.base import Adapter, RunContext
from gitswarm.adapters.sandbox import Decision, SandboxTable, Unavailable, decide, say_once
from gitswarm.engine.config import Config
from gitswarm.model.errors import BadInput
from gitswarm.store.private_git import PrivateGit, bring_back, changes, make_private_git

GITSWARM_DIR = "gitswarm"  # gitswarm's own files in the git common dir: trust, keys, the index


def decision(config: Config, adapter: Adapter | None, env: Mapping[str, str]) -> Decision:
    """The sandbox of a run of `adapter` (None: a check, which has no spec); BadInput when
    `[sandbox] mode = "bwrap"` and there is no bwrap that works."""
    spec: SandboxTable | None = adapter.spec.sandbox if isinstance(adapter, AgentAdapter) else None
    try:
        found = decide(config.sandbox, spec, env.get("PATH"), env.get("HOME"))
    except Unavailable as exc:
        raise BadInput(str(exc)) from None
    if found.sandbox is None and config.sandbox.mode != "off" and (spec is None or spec.mode != "off"):
        say_once(found.why)
    return found


def check_decision(config: Config, pulled: bool, env: Mapping[str, str]) -> Decision | None:
    """The sandbox of the checks that verify a patch: `[sandbox] checks`, by default only for a job
    pulled from another clone; None when they run as before."""
    wanted = config.sandbox.checks if config.sandbox.checks is not None else pulled
    return decision(config, None, env) if wanted else None


class Confined:
    """A run in `workdir` (a linked worktree) confined by `found`: `ctx` is the context to run it with.
    With no sandbox, `ctx` only records why not. Leave it with `close()` (or as a context manager)."""

    def __init__(self, common: Path, found: Decision, ctx: RunContext, workdir: Path) -> None:
        self.private: PrivateGit | None = None
        self.workdir = workdir
        box = found.sandbox
        if box is None:
            self.ctx = msgspec.structs.replace(ctx, sandbox=found)
            return
        self.private = make_private_git(workdir)
        box = box.adding(
            read=[common],
            hide=[common / GITSWARM_DIR],
            write=[workdir],
            over=[(self.private.path, self.private.admin)],
            protect=[self.private.dotgit],
        )
        self.ctx = msgspec.structs.replace(ctx, sandbox=msgspec.structs.replace(found, sandbox=box))

    def bring_back(self) -> None:
        """An implement run's commits, from its private git dir into the repository (store/private_git.py)."""
        if self.private is not None:
            bring_back(self.private, self.workdir)

    def changes(self) -> list[str]:
        """What the agent changed of its private git dir (HEAD, refs, the index): for a read-only run."""
        return changes(self.private, self.workdir) if self.private is not None else []

    def close(self) -> None:
        if self.private is not None:
            self.private.remove()
            self.private = None

    def __enter__(self) -> Confined:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.close()
