"""How the post-commit hook's audit jobs are named, so that they can be found again.

Such a job's `source` is `post-commit:<branch>`, the branch percent-encoded
(submission keeps only the last path component of a source, and branch names
hold `/`); its goal is `audit <12 hex> on <branch>`. The goal is a cheap first
filter over the index, which has no sources; the source, read from the job
record, decides. A person's job whose goal happens to read the same is not
an audit job.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

SOURCE = "post-commit"
_HEX = frozenset("0123456789abcdef")


def source_for(branch: str) -> str:
    return f"{SOURCE}:{quote(branch, safe='')}"


def goal_for(commit: str, branch: str) -> str:
    return f"audit {commit[:12]} on {branch}"


def is_audit_source(source: str | None) -> bool:
    """A post-commit audit job's source (`post-commit` alone: one made before branches were recorded)."""
    return source is not None and (source == SOURCE or source.startswith(SOURCE + ":"))


def branch_of(source: str | None) -> str | None:
    """The branch a post-commit audit job's source names; None for anything else."""
    if source is None or not source.startswith(SOURCE + ":"):
        return None
    return unquote(source[len(SOURCE) + 1 :])


def looks_like_audit(goal: str) -> bool:
    """Whether a goal reads `audit <12 hex> on <branch>` (branch names hold no spaces)."""
    parts = goal.split(" ")
    return len(parts) == 4 and parts[0] == "audit" and parts[2] == "on" and len(parts[1]) == 12 and _HEX.issuperset(parts[1])
