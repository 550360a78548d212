"""What became of the tasks whose leases ended without a result, said as it happened.

A lease whose worker died on this machine is released at once, with no
attempt used (store/lease_ends.py); one that ran out is expired the same way.
`recover`, `status`, `show`, `work` and `run` each say so per task: which
worker, which pid, and that no attempt was used, instead of a count of
"expired leases".
"""

from __future__ import annotations

from collections.abc import Callable

from gitswarm.store.holders import describe
from gitswarm.store.index import Index
from gitswarm.store.lease_ends import LAPSED, dead_holders
from gitswarm.store.leases import Ledger


def ended(index: Index, job_id: str, task_id: str, why: str, attempt_used: bool) -> dict:
    """A task whose lease ended without a result: {"task": "JOB/TASK", "why", "state" (what it is now),
    "attempt_used"}."""
    return {"task": f"{job_id}/{task_id}", "why": why, "state": index.task_state(job_id, task_id), "attempt_used": attempt_used}


def release_dead(index: Index, ledger: Callable[[], Ledger], now: float, job_id: str | None = None) -> list[dict]:
    """Requeue the tasks whose worker died on this machine (no attempt used); what happened to each.

    The common case (no dead holder) is a read of the index and of /proc and
    opens no repository (`ledger` is asked for only when there is one to end).
    Nothing in a clone whose index is in memory: a read there writes nothing.
    """
    if index.in_memory or not dead_holders(index):
        return []
    released = ledger().release_dead(now, job_id)
    return [ended(index, r.job, r.task, f"its worker {r.owner} ({describe(r.holder)}) died", False) for r in released]


def recover(index: Index, ledger: Callable[[], Ledger], now: float) -> dict:
    """Dead holders first, then leases that ran out: {"expired": ["JOB/TASK"], "tasks": [ended(...)]}."""
    tasks = release_dead(index, ledger, now)
    tasks += [ended(index, job, task, LAPSED, False) for job, task in ledger().expire(now)]
    return {"expired": [t["task"] for t in tasks], "tasks": tasks}
