"""Ids: generation, validation and prefix resolution.

Job and op ids are 26 characters of lowercase Crockford base32: 10 for the
millisecond timestamp (so they sort by time), 16 random. Task ids come from
the spec. Every id is validated before it reaches a ref name or a path.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable

from gitswarm.model.errors import Ambiguous, BadInput, NotFound

ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
GENERATED_ID = re.compile(r"[0-9a-hjkmnp-tv-z]{26}")
TASK_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
ARTIFACT_ID = re.compile(r"[0-9a-f]{64}")
PREFIX = re.compile(r"[0-9a-z][0-9a-z._-]{0,63}")
MAX_LISTED = 8


def _base32(value: int, width: int) -> str:
    chars = []
    for _ in range(width):
        chars.append(ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_id(now: float | None = None) -> str:
    """A fresh time-sortable id."""
    millis = int((time.time() if now is None else now) * 1000)
    return _base32(millis, 10) + _base32(int.from_bytes(os.urandom(10), "big"), 16)


def check_task_id(task_id: str, where: str = "task id") -> str:
    if not TASK_ID.fullmatch(task_id) or ".." in task_id or task_id.endswith((".", ".lock")):
        raise BadInput(f"{where}: invalid task id {task_id!r} (want [a-z0-9][a-z0-9._-]{{0,63}}, no '..')")
    return task_id


def check_job_id(job_id: str) -> str:
    if not GENERATED_ID.fullmatch(job_id):
        raise BadInput(f"invalid job id {job_id!r}")
    return job_id


def check_prefix(prefix: str, what: str) -> str:
    if not PREFIX.fullmatch(prefix) or ".." in prefix:
        raise BadInput(f"invalid {what} id {prefix!r}")
    return prefix


def resolve_prefix(prefix: str, candidates: Iterable[str], what: str) -> str:
    """The one candidate equal to or starting with prefix; otherwise a clear error."""
    check_prefix(prefix, what)
    matches = []
    for candidate in candidates:
        if candidate == prefix:
            return candidate
        if candidate.startswith(prefix):
            matches.append(candidate)
    if not matches:
        raise NotFound(f"no {what} matches {prefix!r}")
    if len(matches) > 1:
        shown = ", ".join(sorted(matches)[:MAX_LISTED])
        more = f" and {len(matches) - MAX_LISTED} more" if len(matches) > MAX_LISTED else ""
        raise Ambiguous(f"{what} id {prefix!r} is ambiguous: {shown}{more}")
    return matches[0]


def split_task_ref(ref: str) -> tuple[str | None, str]:
    """Split `JOB/TASK` into (job prefix, task id); `TASK` alone gives (None, task id)."""
    job, sep, task = ref.partition("/")
    if not sep:
        return None, check_task_id(job)
    if "/" in task:
        raise BadInput(f"invalid task reference {ref!r} (want JOB/TASK)")
    return check_prefix(job, "job"), check_task_id(task)


_REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")


def check_branch_ref(ref: str, where: str = "branch") -> str:
    """A full branch name, `refs/heads/<name>`, that git's check-ref-format accepts.

    Only branches: a merge moves nothing else (never a job's state ref, a tag
    or a note), whatever a pulled record names.
    """
    name = ref.removeprefix("refs/heads/")
    parts = name.split("/")
    bad = (
        not ref.startswith("refs/heads/")
        or not name
        or len(ref) > 255
        or _REF_FORBIDDEN.search(name) is not None
        or ".." in name
        or "@{" in name
        or name == "@"
        or name.endswith((".", "/"))
        or any(not part or part.startswith(".") or part.endswith(".lock") for part in parts)
    )
    if bad:
        raise BadInput(f"{where}: {ref!r} is not a branch (want refs/heads/<name>, a valid git branch name)")
    return ref
