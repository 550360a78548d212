"""Work already under way that looks like a proposed delegation.

A delegation declares no paths, so the paths it is about are the words of its
instruction that look like paths (`src/app.py`, `docs/`, `README.md`). An
active implement task looks like the same work when it branches from the
same base and names a path the proposal names, or when its instruction is
nearly the same text whatever its base. Deterministic and cheap: no model.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from difflib import SequenceMatcher

from gitswarm.engine.swarm import Swarm
from gitswarm.model.coupling import paths_overlap
from gitswarm.model.records import FINISHED, TaskState

ACTIVE = frozenset(s.value for s in TaskState if not s.terminal)  # blocked, queued, running
NEAR_IDENTICAL = 0.85  # SequenceMatcher ratio of the normalised instructions
_PATHLIKE = re.compile(r"(?<![\w./-])((?:[\w.-]+/)+[\w.-]*|[\w-]+\.[A-Za-z][\w]{0,7})(?![\w/-])")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class ActiveTask:
    job: str
    task: str
    state: str
    base: str | None
    instruction: str
    paths: tuple[str, ...] = ()  # declared in its spec


def paths_named(text: str) -> set[str]:
    """The words of `text` that look like repository paths, without a leading `./` or trailing `/`."""
    found = set()
    for match in _PATHLIKE.finditer(text):
        word = match.group(1).removeprefix("./").rstrip("/.")
        if word and not word.startswith(("http", "www.")) and not re.fullmatch(r"[\d.]+", word):
            found.add(word)
    return found


def _overlaps(ours: set[str], theirs: set[str]) -> list[str]:
    """Paths of ours that are, contain, lie in, or match one of theirs."""
    return sorted(p for p in ours if any(paths_overlap(p, q) for q in theirs))


def _normal(text: str) -> str:
    return _SPACE.sub(" ", text.strip().lower())


def looks_alike(instruction: str, base: str | None, active: Iterable[ActiveTask]) -> list[dict]:
    """Each active task that looks like the same work, with why."""
    ours = paths_named(instruction)
    found = []
    for task in active:
        reasons = []
        ratio = SequenceMatcher(None, _normal(instruction), _normal(task.instruction)).ratio()
        if ratio >= NEAR_IDENTICAL:
            reasons.append(f"near-identical instruction ({ratio:.0%} alike)")
        theirs = paths_named(task.instruction) | set(task.paths)
        shared = _overlaps(ours, theirs) if base is not None and task.base == base else []
        if shared:
            reasons.append("same base, names " + ", ".join(shared))
        if reasons:
            found.append({"job": task.job, "task": task.task, "state": task.state, "base": task.base, "why": reasons})
    return found


def active_implement_tasks(swarm: Swarm) -> list[ActiveTask]:
    """Every implement task that is not finished, with its job's base and its instruction."""
    found = []
    for job in swarm.status()["jobs"]:
        if job["status"] in FINISHED:
            continue
        rows = [t for t in swarm.status(job["id"])["tasks"] if t["state"] in ACTIVE]
        if not rows:
            continue
        snapshot = swarm.refs.snapshot(job["id"])
        for row in rows:
            task = snapshot.task(row["id"])
            if task.spec.mode == "implement":
                found.append(ActiveTask(job["id"], row["id"], row["state"], snapshot.job.base, task.spec.prompt or "", task.spec.paths))
    return found
