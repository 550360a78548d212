"""The prompt section of a follow-up attempt: the work it continues, how it was judged, what to do now.

The task's own contract (its prompt and checks) is already in the packet;
this adds the patch the follow-up continues, its verdict with the output
tails of the checks that failed, and the new instruction.
"""

from __future__ import annotations

from collections.abc import Callable

from gitswarm.adapters.shell import tail
from gitswarm.model.artifacts import Check, Patch, Verdict
from gitswarm.model.late_instructions import FollowUp
from gitswarm.model.records import Task
from gitswarm.store.jobs import Snapshot

EARLIER = "# Your earlier work on this task"
INSTRUCTION = "# Follow-up instruction"
TAIL_LINES = 40
FILES_SHOWN = 20


def continuation(snapshot: Snapshot, task: Task, read_blob: Callable[[str], bytes]) -> str:
    """The follow-up section for the task's next attempt, or "" when it carries no follow-up."""
    follow = task.follow_up
    if follow is None:
        return ""
    lines = ["", EARLIER, ""]
    if follow.patch is None:
        lines.append("It left no patch: you start again from the base, as the task above asks.")
    else:
        patch = snapshot.artifact(follow.patch, Patch)
        files = ", ".join(f"{f.path} (+{f.added}/-{f.deleted})" for f in patch.files[:FILES_SHOWN])
        more = f" and {len(patch.files) - FILES_SHOWN} more" if len(patch.files) > FILES_SHOWN else ""
        lines.append(f"Patch {follow.patch[:12]} (commit {patch.head[:12]} on base {patch.base[:12]}) changed {files}{more}.")
        lines += _verdict_lines(snapshot, task, follow, read_blob)
        lines.append(f"Your worktree holds that commit ({patch.head[:12]}): continue from it; do not start over.")
    lines += ["", INSTRUCTION, "", follow.instruction.strip(), ""]
    return "\n".join(lines)


def _verdict_lines(snapshot: Snapshot, task: Task, follow: FollowUp, read_blob: Callable[[str], bytes]) -> list[str]:
    verdicts = [v for a in task.artifacts if isinstance(v := snapshot.artifact(a), Verdict) and v.head == follow.head]
    if not verdicts:
        return ["It was not verified (the task has no checks and no auditor)."]
    verdict = verdicts[-1]
    said = "accepted" if verdict.accepted else "rejected"
    lines = [f"Its verdict: {said} ({verdict.status}/{verdict.integrity}/{verdict.contract}, by {verdict.reviewer})."]
    for check_id in verdict.checks:
        check = snapshot.artifact(check_id, Check)
        if check.passed:
            continue
        output = b"".join(read_blob(ref.oid) for ref in (check.stderr, check.stdout) if ref is not None)
        shown = check.command if isinstance(check.command, str) else " ".join(check.command)
        how = "timed out" if check.timed_out else f"exit {check.exit_code}"
        lines += [f"The check `{shown}` failed ({how}):", "```", tail(output, TAIL_LINES), "```"]
    return lines
