"""What a person adds to a job after submission: steering text and follow-up instructions.

Both are recorded as operations (model/ops.py) before anything acts on them,
and the reducer keeps what is still pending in the task (or job) record:
`Guidance` waits for the next safe point of its task (the next attempt or
repair round) or, job-wide, for the next task of the job to start;
`FollowUp` is the continuation the task's next attempts carry out.
"""

from __future__ import annotations

import msgspec

from gitswarm.model.errors import BadInput

MAX_GUIDANCE_CHARS = 32_768  # a steer's text or a follow-up's instruction


class Guidance(msgspec.Struct, frozen=True, kw_only=True):
    """A steer not yet delivered: the op that recorded it, its text, when."""

    op: str
    text: str
    at: float


class FollowUp(msgspec.Struct, frozen=True, kw_only=True):
    """The follow-up a task's attempts carry out since the op `op` requeued it.

    `patch` and `head` are the patch it continues (None: the task left none,
    so the attempt starts from the job's base); `session` is the agent
    session to resume when `resume_session` was asked for and the patch's
    run reported one.
    """

    op: str
    instruction: str
    patch: str | None = None
    head: str | None = None
    resume_session: bool = False
    session: str | None = None
    at: float = 0.0


def check_text(text: str, what: str) -> str:
    """A steer's text or a follow-up's instruction as given: not blank, no NUL, bounded (BadInput)."""
    if not text.strip():
        raise BadInput(f"{what}: empty")
    if "\0" in text:
        raise BadInput(f"{what}: holds a NUL byte")
    if len(text) > MAX_GUIDANCE_CHARS:
        raise BadInput(f"{what}: {len(text)} characters; at most {MAX_GUIDANCE_CHARS}")
    return text
