"""Memory: what accepted results taught, kept for later tasks as an op log of its own.

A memory record is derived, field for field, from one accepted artifact (a
finding, a decision, or a patch as a `change`) and the verdict that accepted
it, so the same result gives the same bytes on every clone. The records live
on one ref as a chain of `remember` / `forget` operations, merged across
clones as jobs are: every operation of both histories replayed from nothing
in (clock, actor, id) order. These are the state-machine rules; the store
writes and reads them (store/memory.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

import msgspec

from gitswarm.model.artifacts import Decision, Finding, Patch
from gitswarm.model.codec import FORMAT
from gitswarm.model.ops import OpBase, canonical

MemoryKind = Literal["finding", "decision", "change"]
TITLE_CHARS = 120
BODY_CHARS = 2000
MAX_PATHS = 64
MAX_KEYWORDS = 48
_WORD = re.compile(r"[a-z][a-z0-9_]{2,31}")
_PATHLIKE = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_./-]*(?:/[A-Za-z0-9_.-]+|\.[A-Za-z0-9]{1,8})")
STOPWORDS = frozenset(
    "the and for with that this from are was were not but you your all any can has have had its into out "
    "our their them then there these they use used using when where which while will would should could "
    "what who why how than also only just more most some such each other been being over under about "
    "after before again does did done make made task tasks file files code change changes".split()
)


class MemoryRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One remembered result with its provenance. `id` is the source artifact's id."""

    v: int = FORMAT
    id: str
    kind: MemoryKind
    title: str
    body: str
    job: str
    task: str
    attempt: int
    commit: str  # the commit the accepting verdict judged: a patch's head, or a reviewed finding's job base
    paths: tuple[str, ...]  # what it is about: a patch's files; paths a finding names that exist at `commit`
    keywords: tuple[str, ...]  # its words, sorted, for matching a later task (see `words`)
    verdict: str  # the id of the verdict that accepted it
    created: float  # when the result was made (the artifact's time): its age counts from here


class Remember(OpBase, tag="remember", kw_only=True, frozen=True):
    record: MemoryRecord


class Forget(OpBase, tag="forget", kw_only=True, frozen=True):
    record: str  # the id of the record forgotten
    reason: str | None = None


MemoryOp = Remember | Forget


class MemoryState(msgspec.Struct, frozen=True, kw_only=True):
    """What the memory ref's tip records beside the records: its clock and counts."""

    v: int = FORMAT
    clock: int = 0  # the largest Lamport clock applied or seen
    ops: int = 0  # operations applied
    records: int = 0  # records held
    updated: float = 0.0  # the last applied op's `at`


@dataclass(frozen=True)
class Replayed:
    state: MemoryState
    records: dict[str, MemoryRecord]
    skipped: int


def op_title(op: MemoryOp) -> str:
    """The first line of the commit that records `op`."""
    target = op.record.id if isinstance(op, Remember) else op.record
    return f"{op.__struct_config__.tag} {target[:12]}"


def apply_op(op: MemoryOp, state: MemoryState, records: dict[str, MemoryRecord]) -> MemoryState | None:
    """Apply one op to `records` in place; the new state, or None when it does not apply
    (remembering a record already held, forgetting one not held)."""
    if isinstance(op, Remember):
        if op.record.id in records:
            return None
        records[op.record.id] = op.record
    else:
        if op.record not in records:
            return None
        del records[op.record]
    return MemoryState(clock=max(state.clock, op.clock), ops=state.ops + 1, records=len(records), updated=op.at)


def replay(ops: Iterable[MemoryOp]) -> Replayed:
    """All operations once each, from nothing, in (clock, actor, id) order. One that does not
    apply at its turn changes nothing but the clock, so the result depends only on the set."""
    state, skipped = MemoryState(), 0
    records: dict[str, MemoryRecord] = {}
    for op in canonical(ops):
        applied = apply_op(op, state, records)
        if applied is None:
            skipped += 1
            if op.clock > state.clock:
                state = msgspec.structs.replace(state, clock=op.clock)
            continue
        state = applied
    return Replayed(state, records, skipped)


def words(text: str) -> set[str]:
    """The words of a text that can match: lowercase, 3 to 32 characters, no stopwords."""
    return {w for w in _WORD.findall(text.lower()) if w not in STOPWORDS}


def keywords(text: str) -> tuple[str, ...]:
    """A record's words, longest first (most telling), at most MAX_KEYWORDS, sorted."""
    found = sorted(words(text), key=lambda w: (-len(w), w))[:MAX_KEYWORDS]
    return tuple(sorted(found))


def named_paths(text: str, exists: Callable[[str], bool]) -> list[str]:
    """Paths a text names (`src/a.py`, `setup.cfg`) that exist, in order of first mention."""
    seen: list[str] = []
    for token in _PATHLIKE.findall(text):
        path = token.strip("./") if token.startswith("./") else token.rstrip(".")
        if path and path not in seen and ".." not in path.split("/") and exists(path):
            seen.append(path)
    return seen[:MAX_PATHS]


def derive(
    artifact_id: str,
    artifact: Finding | Decision | Patch,
    commit: str,
    verdict: str,
    instruction: str,
    exists: Callable[[str], bool],
    patch_files: Iterable[str] = (),
) -> MemoryRecord:
    """The memory record of an accepted artifact: every field follows from its inputs.

    `instruction`: the task's prompt (or command), the title of a patch's record;
    `exists`: whether a path is in `commit`'s tree; `patch_files`: the files of the
    accepted patch whose verdict accepted a finding or decision of its task.
    """
    if isinstance(artifact, Patch):
        kind: MemoryKind = "change"
        lines = [line.strip() for line in instruction.splitlines() if line.strip()]
        title = lines[0] if lines else f"change by task {artifact.task}"
        body = instruction.strip()
        paths = [f.path for f in artifact.files]
    else:
        kind = "finding" if isinstance(artifact, Finding) else "decision"
        title = artifact.title.strip()
        body = (artifact.body if isinstance(artifact, Finding) else artifact.rationale).strip()
        paths = [*patch_files, *named_paths(f"{title}\n{body}", exists)]
    title, body = _cut(title, TITLE_CHARS), _cut(body, BODY_CHARS)
    unique = list(dict.fromkeys(paths))[:MAX_PATHS]
    return MemoryRecord(
        id=artifact_id, kind=kind, title=title, body=body, job=artifact.job, task=artifact.task or "",
        attempt=artifact.attempt, commit=commit, paths=tuple(unique),
        keywords=keywords(" ".join([title, body, *unique])), verdict=verdict, created=artifact.created,
    )


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
