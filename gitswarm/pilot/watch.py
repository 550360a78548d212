"""What `wait` watches: a job's (or one task's) states, and the cheap signal that they may have moved.

Every change to a job is a new commit on its ref, so the ref's tip, read
from the ref files (no repository opened), tells when to look again; only
then are the states read from the index.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from gitswarm.engine.swarm import Swarm
from gitswarm.model.records import FINISHED, TERMINAL
from gitswarm.store import layout, reffiles

POLL_SECONDS = 0.1  # how often `wait` reads the job's ref tip


@dataclass(frozen=True)
class Seen:
    job: str
    task: str | None
    tip: str | None
    status: str  # the job's
    states: dict[str, str]  # task id -> state (only the watched task when one is named)

    @property
    def done(self) -> bool:
        if self.task is None:
            return self.status in FINISHED
        return self.states.get(self.task) in TERMINAL


def resolve(repo: Path, target: str) -> tuple[str, str | None, Path]:
    """(job id, task id or None, git common dir) of JOB or JOB/TASK."""
    with closing(Swarm(repo, create=False)) as swarm:
        job, task = swarm.resolve_target(target)
        return job, task, swarm.common_dir


def tip(common_dir: Path, job: str) -> str | None:
    """The job ref's tip from the ref files; None when they cannot be read that way (then states are read each time)."""
    return reffiles.read_ref(common_dir, layout.job_ref(job))


def look(repo: Path, job: str, task: str | None) -> Seen:
    with closing(Swarm(repo, create=False)) as swarm:
        common = swarm.common_dir
        view = swarm.status(job)
    states = {t["id"]: t["state"] for t in view["tasks"] if task is None or t["id"] == task}
    return Seen(job, task, tip(common, job), view["status"], states)


def changes(before: Seen, after: Seen) -> dict:
    """What moved between two looks: the job's status and each task whose state changed."""
    moved = {
        task: {"from": before.states.get(task), "to": state}
        for task, state in sorted(after.states.items())
        if before.states.get(task) != state
    }
    out: dict = {"tasks": moved}
    if before.status != after.status:
        out["job"] = {"from": before.status, "to": after.status}
    return out


def wait(
    repo: Path, target: str, timeout: float, until: str, progress: Callable[[int, str], None], cancelled: threading.Event,
) -> dict:
    """Block until JOB (or JOB/TASK) changes state (`until` "change") or is finished ("done"), `timeout`
    passes or the call is cancelled; `progress` hears each change meanwhile. Returns what changed."""
    job, task, common = resolve(repo, target)
    first = look(repo, job, task)
    start = time.monotonic()
    seen, moved = first, 0
    while not seen.done:  # a finished job or task changes no more (until a retry: wait again then)
        left = timeout - (time.monotonic() - start)
        if left <= 0 or cancelled.wait(min(POLL_SECONDS, left)):
            break
        now_tip = tip(common, job)
        if now_tip is not None and now_tip == seen.tip:
            continue
        now = look(repo, job, task)
        step = changes(seen, now)
        seen = now
        if not step["tasks"] and "job" not in step:
            continue
        moved += 1
        progress(moved, progress_line(step))
        if until == "change":
            break
    return {
        "job": job, "task": task, "status": seen.status, "states": seen.states, "done": seen.done,
        "timed_out": not (seen.done or (until == "change" and moved)), "changed": changes(first, seen),
        "waited": round(time.monotonic() - start, 3),
    }


def progress_line(step: dict) -> str:
    """One change as a line: `delegate: queued -> running; job: queued -> running`."""
    parts = [f"{t}: {c['from']} -> {c['to']}" for t, c in step["tasks"].items()]
    if "job" in step:
        parts.append(f"job: {step['job']['from']} -> {step['job']['to']}")
    return "; ".join(parts)
