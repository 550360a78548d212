"""Stacked tasks: which implement tasks a task's work starts from.

A task that depends on implement tasks starts from their patches, not from
the job's base: an implement task's worktree, an analyze or shell task's
clean checkout (engine/delegation/stack.py makes that commit). The
implement tasks it stacks on are the nearest ones up its `depends_on`
(through analyze tasks, which make no patch), in spec order.
"""

from __future__ import annotations

from collections.abc import Callable

from gitswarm.model.records import TaskSpec

IMPLEMENT = "implement"


def stacked_on(spec: TaskSpec, spec_of: Callable[[str], TaskSpec]) -> tuple[str, ...]:
    """The implement tasks `spec` starts from, in spec order: its nearest implement upstreams; () when none.
    `spec_of` gives a task's spec by id (read only for the tasks up its dependencies)."""
    found: dict[str, int] = {}
    seen: set[str] = set()
    pending = list(spec.depends_on)
    while pending:
        task_id = pending.pop()
        if task_id in seen:
            continue
        seen.add(task_id)
        upstream = spec_of(task_id)
        if upstream.mode == IMPLEMENT:
            found[task_id] = upstream.seq
        else:
            pending.extend(upstream.depends_on)
    return tuple(sorted(found, key=found.__getitem__))
