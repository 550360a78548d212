"""Which memory records a task's packet carries: chosen deterministically, within a budget.

The same records, query, budget and time always give the same selection, byte
for byte. A record too old is dropped; the rest are ranked by the paths the
task touches or names that the record is about (a path equal to one of its
paths, or a directory of one, or under one), then by the words they share,
then newest first, then by id. A record that shares neither is never chosen,
and only the best CONSIDERED are considered.
Entries are taken in that order while they fit the budget; `counts` can
refuse one (a record whose verdict does not count here), and the next is tried.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gitswarm.model.memory import MemoryRecord

DAY = 24 * 3600.0
CONSIDERED = 500  # only the best this many records are rendered and weighed for a packet


@dataclass(frozen=True)
class Query:
    """What a task is about: the paths it touches or names, and its words."""

    paths: frozenset[str]
    words: frozenset[str]


@dataclass(frozen=True)
class Ranked:
    record: MemoryRecord
    path_hits: int
    word_hits: int


def _ancestors(paths: frozenset[str]) -> frozenset[str]:
    """Every directory above the paths: a record about `src/` is about `src/a.py`."""
    found: set[str] = set()
    for path in paths:
        parts = path.split("/")
        found.update("/".join(parts[:n]) for n in range(1, len(parts)))
    return frozenset(found)


def rank(records: Iterable[MemoryRecord], query: Query, now: float, max_age: float, top: int = CONSIDERED) -> list[Ranked]:
    """The `top` best records young enough that share a path or a word with the query, best first."""
    oldest = now - max_age
    wanted, words = query.paths, query.words
    dirs = tuple(p.rstrip("/") + "/" for p in wanted)
    above = _ancestors(wanted)
    keyed: list[tuple[int, int, float, str, MemoryRecord]] = []
    for record in records:
        if record.created < oldest:
            continue
        path_hits = 0
        if wanted:
            for path in record.paths:
                if path in wanted or path in above or path.startswith(dirs):
                    path_hits += 1
        if words.isdisjoint(record.keywords):
            if path_hits:
                keyed.append((-path_hits, 0, -record.created, record.id, record))
            continue
        keyed.append((-path_hits, -len(words.intersection(record.keywords)), -record.created, record.id, record))
    best = heapq.nsmallest(top, keyed, key=_order)  # ids are unique: records are never compared
    return [Ranked(k[4], -k[0], -k[1]) for k in best]


def _order(key: tuple[int, int, float, str, MemoryRecord]) -> tuple[int, int, float, str]:
    return key[0], key[1], key[2], key[3]


def select(
    ranked: Iterable[Ranked],
    render: Callable[[Ranked], str],
    budget_chars: int,
    counts: Callable[[MemoryRecord], bool] = lambda _: True,
    limit: int = 50,
) -> list[str]:
    """The rendered entries of the best records that count and fit the budget, in rank order."""
    kept: list[str] = []
    used = 0
    for entry in ranked:
        if len(kept) >= limit or budget_chars - used < 80:
            break
        text = render(entry)
        if used + len(text) > budget_chars or not counts(entry.record):
            continue
        kept.append(text)
        used += len(text) + 1
    return kept
