"""How the post-commit hook's audit jobs are named, so that they can be found again.

Such a job's `source` is `post-commit:<branch>`, the branch percent-encoded
(submission keeps only the last path component of a source, and branch names
hold `/`); its goal is `audit <12 hex> on <branch>`, its one task a shell task
`audit`. Before the hook cancels a job as superseded, the source, read from
the job record, decides (and the job must have been made here): a person's
job that reads the same is never touched. `status` leaves such jobs out of
its listing by goal and shape, from the index alone: reading each record
would cost a repository open and a read per audit job at every `status`.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

SOURCE = "post-commit"
_HEX = frozenset("0123456789abcdef")


def source_for(branch: str) -> str:
    return f"{SOURCE}:{quote(branch, safe='')}"


def goal_for(commit: str, branch: str) -> str:
    return f"audit {commit[:12]} on {branch}"


def branch_of(source: str | None) -> str | None:
    """The branch a post-commit audit job's source names; None for anything else."""
    if source is None or not source.startswith(SOURCE + ":"):
        return None
    return unquote(source[len(SOURCE) + 1 :])


def looks_like_audit(goal: str) -> bool:
    """Whether a goal reads `audit <12 hex> on <branch>` (branch names hold no spaces)."""
    parts = goal.split(" ")
    return len(parts) == 4 and parts[0] == "audit" and parts[2] == "on" and len(parts[1]) == 12 and _HEX.issuperset(parts[1])
