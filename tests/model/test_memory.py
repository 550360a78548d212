"""Memory's state machine and selection: replay in any order gives one state; selection is a
function of its inputs, byte for byte; old records drop out; pulled records are bounded."""

from __future__ import annotations

import random

import msgspec
import pytest

from gitswarm.model.artifacts import BlobRef, FileChange, Finding, Patch
from gitswarm.model.errors import CorruptRecord
from gitswarm.model.ids import new_id
from gitswarm.model.memory import Forget, MemoryRecord, Remember, derive, replay
from gitswarm.model.memory_checks import check_memory_op
from gitswarm.model.recall import DAY, Query, rank, select

NOW = 1_700_000_000.0
JOB = new_id(NOW)
ACTORS = [new_id(NOW + n) for n in range(2)]


def record(n: int, paths: tuple[str, ...] = (), text: str = "", created: float = NOW) -> MemoryRecord:
    finding = Finding(job=JOB, task="scan", created=created, title=f"finding {n} {text}".strip(), body=text)
    return derive(f"{n:064x}", finding, "a" * 40, "b" * 64, "", lambda p: p in paths)


def remember(rec: MemoryRecord, clock: int, actor: int = 0) -> Remember:
    return Remember(id=new_id(NOW + clock), clock=clock, at=NOW + clock, actor=ACTORS[actor], record=rec)


def test_replay_gives_one_state_whatever_the_order() -> None:
    a, b, c = record(1), record(2), record(3)
    ops = [
        remember(a, 1), remember(b, 1, actor=1), remember(c, 2),
        Forget(id=new_id(NOW + 9), clock=3, at=NOW + 3, actor=ACTORS[1], record=b.id),
        remember(a, 4, actor=1),  # already held: skipped, but its clock counts
    ]
    first = replay(ops)
    for seed in range(5):
        shuffled = ops[:]
        random.Random(seed).shuffle(shuffled)
        again = replay(shuffled)
        assert again.state == first.state and again.records == first.records
    assert sorted(first.records) == sorted([a.id, c.id])
    assert first.state.clock == 4 and first.state.ops == 4 and first.skipped == 1


def test_a_record_follows_from_its_artifact() -> None:
    patch = Patch(
        job=JOB, task="fix", attempt=1, created=NOW, base="c" * 40, head="d" * 40,
        diff=BlobRef(oid="e" * 40, size=1), sha256="f" * 64, files=(FileChange(path="src/app.py", added=1, deleted=0),),
    )
    made = derive("1" * 64, patch, "d" * 40, "2" * 64, "Fix the parser\nIt drops quotes.", lambda _: False)
    assert made.kind == "change" and made.title == "Fix the parser" and made.paths == ("src/app.py",)
    assert made == derive("1" * 64, patch, "d" * 40, "2" * 64, "Fix the parser\nIt drops quotes.", lambda _: False)
    assert "parser" in made.keywords and "quotes" in made.keywords


def test_selection_is_byte_identical_and_ranks_paths_before_words() -> None:
    records = [record(n, text=f"the cache layer word{n % 7}") for n in range(200)]
    records.append(record(999, paths=("src/cache.py",), text="see src/cache.py for the eviction rule"))
    query = Query(frozenset({"src/cache.py"}), frozenset({"cache", "word3"}))

    def pick() -> list[str]:
        return select(rank(records, query, NOW, 90 * DAY), lambda r: f"- {r.record.title}", 2000)

    first = pick()
    assert first == pick()
    assert first[0] == "- finding 999 see src/cache.py for the eviction rule"
    assert all("word3" in line for line in first[1:4])  # two shared words before one
    assert sum(len(line) + 1 for line in first) <= 2000


def test_records_past_the_age_are_dropped() -> None:
    old, young = record(1, text="cache", created=NOW - 100 * DAY), record(2, text="cache", created=NOW - DAY)
    ranked = rank([old, young], Query(frozenset(), frozenset({"cache"})), NOW, 90 * DAY)
    assert [r.record.id for r in ranked] == [young.id]


def test_a_pulled_record_out_of_bounds_is_refused() -> None:
    good = remember(record(1, text="fine"), 1)
    check_memory_op(good, "op")
    for bad in (
        msgspec.structs.replace(good.record, commit="zz"),
        msgspec.structs.replace(good.record, paths=("../etc/passwd",)),
        msgspec.structs.replace(good.record, keywords=("b", "a")),
        msgspec.structs.replace(good.record, title="x" * 500),
    ):
        with pytest.raises(CorruptRecord):
            check_memory_op(msgspec.structs.replace(good, record=bad), "op")
