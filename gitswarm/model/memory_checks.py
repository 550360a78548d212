"""What a pulled memory operation must pass: its record as strictly bounded as a local one.

A remember op pulled from elsewhere may have been written by hand. Decoding
proves its types; these checks add what `derive` guarantees of a local
record (ids well formed, commit ids hex, text within the caps that
`derive` cuts to, keywords as `keywords` makes them), so a record that could
not have been derived is refused before it reaches the live ref. Whether it
then counts (its artifact and verdict here agree with it) is asked when it
is used (engine/knowledge/memory.py).
"""

from __future__ import annotations

import re

from gitswarm.model.codec import FORMAT
from gitswarm.model.errors import CorruptRecord
from gitswarm.model.ids import ARTIFACT_ID, GENERATED_ID, TASK_ID
from gitswarm.model.memory import BODY_CHARS, MAX_KEYWORDS, MAX_PATHS, TITLE_CHARS, MemoryOp, MemoryRecord, Remember
from gitswarm.model.validate import MAX_CLOCK, MAX_TIME, check_plain

_HEX = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
MAX_PATH = 4096


def _need(condition: bool, where: str, why: str) -> None:
    if not condition:
        raise CorruptRecord(f"{where}: {why}")


def check_memory_op(op: MemoryOp, where: str) -> None:
    """One pulled memory operation; CorruptRecord naming the field that fails."""
    check_plain(op, where)
    _need(0 <= op.v <= FORMAT, where, f"format {op.v!r} out of range")
    _need(GENERATED_ID.fullmatch(op.id) is not None, where, f"invalid op id {op.id!r}")
    _need(GENERATED_ID.fullmatch(op.actor) is not None, where, f"invalid actor {op.actor!r}")
    _need(1 <= op.clock <= MAX_CLOCK, where, f"clock {op.clock} out of range")
    _need(0.0 <= op.at <= MAX_TIME, where, f"time {op.at!r} out of range")
    if isinstance(op, Remember):
        check_record(op.record, f"{where}.record")
        return
    _need(ARTIFACT_ID.fullmatch(op.record) is not None, where, f"invalid record id {op.record!r}")
    _need(op.reason is None or len(op.reason) <= BODY_CHARS, f"{where}.reason", "too long")


def check_record(record: MemoryRecord, where: str) -> None:
    _need(0 <= record.v <= FORMAT, where, f"format {record.v!r} out of range")
    _need(ARTIFACT_ID.fullmatch(record.id) is not None, f"{where}.id", "not an artifact id")
    _need(ARTIFACT_ID.fullmatch(record.verdict) is not None, f"{where}.verdict", "not a verdict id")
    _need(GENERATED_ID.fullmatch(record.job) is not None, f"{where}.job", "not a job id")
    _need(TASK_ID.fullmatch(record.task) is not None, f"{where}.task", "not a task id")
    _need(_HEX.fullmatch(record.commit) is not None, f"{where}.commit", "not a commit id")
    _need(bool(record.title.strip()) and len(record.title) <= TITLE_CHARS, f"{where}.title", "empty or too long")
    _need(len(record.body) <= BODY_CHARS, f"{where}.body", "too long")
    _need(0 <= record.attempt <= 10_000, f"{where}.attempt", "out of range")
    _need(0.0 <= record.created <= MAX_TIME, f"{where}.created", "out of range")
    _need(len(record.paths) <= MAX_PATHS and len(set(record.paths)) == len(record.paths), f"{where}.paths", "too many or repeated")
    for path in record.paths:
        parts = path.split("/")
        bad = not path or len(path) > MAX_PATH or path.startswith("/") or any(p in ("", ".", "..") for p in parts)
        _need(not bad, f"{where}.paths", f"not a path inside the repository: {path!r}")
    _need(len(record.keywords) <= MAX_KEYWORDS, f"{where}.keywords", "too many")
    _need(list(record.keywords) == sorted(set(record.keywords)), f"{where}.keywords", "not sorted and unique")
    _need(all(len(w) <= 32 for w in record.keywords), f"{where}.keywords", "a word too long")
