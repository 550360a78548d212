"""A shell task stacked on implement tasks (a final check, a build): run on a clean checkout of their patches.

Such a task depends on work that is not merged yet, so the user's tree, which
holds none of it, says nothing about the combined result: it runs on a clean
detached checkout of its stacked base (engine/delegation/stack.py), taken
from the pool (store/checkouts.py) and given back after (what the command
wrote there is cleaned before the checkout's next use), with the checkout's
code first on the import path, as checks run (engine/delegation/check_env.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec

from gitswarm.adapters.base import Adapter, BlobWriter, Outcome, RunContext, Runner, execute
from gitswarm.engine.delegation.check_env import check_env, guard_dir
from gitswarm.model.records import TaskSpec
from gitswarm.store.checkouts import Checkouts


@dataclass
class InCheckout:
    repo_dir: Path
    root: Path  # the worktree root: the checkout comes from <root>/checkouts
    store: BlobWriter
    now: Callable[[], float]

    def run(self, adapter: Adapter, ctx: RunContext, base: str, spec: TaskSpec, run: Runner) -> Outcome:
        """`spec` run by `adapter` on a clean checkout of `base`."""
        pool = Checkouts(self.repo_dir, self.root)
        checkout = pool.take(base)
        try:
            guard = guard_dir(self.root)
            env = check_env(ctx.base_env, checkout.path, None, guard, guard / "unused")
            return execute(adapter, spec, msgspec.structs.replace(ctx, workdir=checkout.path, base_env=env), run, self.store, self.now)
        finally:
            pool.give_back(checkout)
