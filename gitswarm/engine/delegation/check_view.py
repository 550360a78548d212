"""What a person needs to see of a check: the command, how it ended and, when it failed,
the last lines it printed (read from the check's stdout and stderr blobs)."""

from __future__ import annotations

from collections.abc import Callable

from gitswarm.engine.swarm import Swarm
from gitswarm.model.artifacts import BlobRef, Check, Verdict

TAIL_LINES = 10  # of stdout, then as many of stderr


def check_view(check: Check, read_blob: Callable[[str], bytes]) -> dict:
    """{"command", "exit_code", "passed", "timed_out", "tail"}: `tail` holds the last lines of
    stdout then of stderr when the check failed, one string per line; [] when it passed."""
    return {
        "command": check.command,
        "exit_code": check.exit_code,
        "passed": check.passed,
        "timed_out": check.timed_out,
        "tail": [] if check.passed else [*_tail(check.stdout, read_blob), *_tail(check.stderr, read_blob)],
    }


def _tail(ref: BlobRef | None, read_blob: Callable[[str], bytes]) -> list[str]:
    if ref is None:
        return []
    text = read_blob(ref.oid).decode("utf-8", errors="replace").rstrip("\n")
    return text.splitlines()[-TAIL_LINES:] if text else []


def with_tails(swarm: Swarm, result: dict) -> dict:
    """`verify_now`'s result with each check as check_view gives it, read from the verdict it
    recorded on the patch's task (the checks it made, in its order)."""
    found = swarm.artifact(result["patch"])
    snapshot = swarm.refs.snapshot(found["job"], swarm.index.job_tip(found["job"]))
    task = found["record"].get("task")
    if task is None:
        return result
    for artifact_id in reversed(snapshot.task(task).artifacts):
        verdict = snapshot.artifact(artifact_id)
        if isinstance(verdict, Verdict) and verdict.patch == result["patch"] and verdict.head == result["head"]:
            checks = [snapshot.artifact(c) for c in verdict.checks]
            views = [check_view(c, swarm.repo.read_blob) for c in checks if isinstance(c, Check)]
            return {**result, "checks": views} if len(views) == len(result["checks"]) else result
    return result
