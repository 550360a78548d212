"""A pull's memory: the pulled memory ref checked as hostile input, then adopted, fast-forwarded
or merged into the live one by compare-and-swap.

A pulled history that does not decode, breaks a bound or whose tip is not
the replay of its operations is refused whole: the live ref is not touched,
and the report names why. Records that pass are data: each counts here only
while its artifact and a counted acceptance agree with it (engine/knowledge/memory.py).
"""

from __future__ import annotations

from gitswarm.engine.knowledge.memory import memory_log
from gitswarm.engine.swarm import Swarm
from gitswarm.model.errors import CorruptRecord, RefConflict
from gitswarm.store.memory import MEMORY_REF
from gitswarm.store.pulled_jobs import Intake

ATTEMPTS = 6


def pull_memory(swarm: Swarm, theirs: str | None, intake: Intake) -> tuple[str, str | None]:
    """(outcome: unchanged, new, updated or merged; why it was refused, or None)."""
    if theirs is None:
        return "unchanged", None
    repo = swarm.repo
    log = memory_log(repo, swarm.refs)
    for _ in range(ATTEMPTS):
        ours = repo.read_ref(MEMORY_REF)
        if ours == theirs or (ours is not None and repo.is_ancestor(theirs, ours)):
            return "unchanged", None
        try:
            brought = log.check_pulled(theirs, ours, intake.charge)
        except CorruptRecord as exc:
            return "invalid", str(exc)
        if ours is None or repo.is_ancestor(ours, theirs):
            tip, outcome = theirs, "new" if ours is None else "updated"
        else:
            tip, outcome = log.merge(ours, theirs, swarm.clock(), brought), "merged"
        try:
            repo.cas_ref(MEMORY_REF, tip, ours, f"gitswarm: pull memory ({outcome})")
        except RefConflict:
            continue  # a remember here meanwhile: plan again on the new tip
        return outcome, None
    return "invalid", f"{MEMORY_REF} kept moving during the pull"
