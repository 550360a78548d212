"""The guard against swarming one coupled change: implement tasks that may run at the same time
and may touch the same files.

Two implement tasks can run at the same time when neither depends on the
other, directly or through other tasks. They may touch the same files when
one of them declares no `paths`, or a path of one is, contains, lies in, or
matches (as a glob) a path of the other. Such a job would have two agents
edit one change from two sides, and one of the patches would conflict.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

import msgspec

from gitswarm.model.records import TaskSpec

NAMED_PAIRS = 3  # pairs a refusal names; the rest are counted


class Coupled(msgspec.Struct, frozen=True):
    first: str
    second: str
    why: str


def coupled_tasks(specs: Sequence[TaskSpec], limit: int = 100) -> list[Coupled]:
    """Pairs of implement tasks that may run at the same time and may touch the same files, in
    spec order; at most `limit` of them (a refusal names a few and counts the rest)."""
    implement = [s for s in specs if s.mode == "implement"]
    if len(implement) < 2:
        return []
    waits = _waits_for(specs, {s.id: n for n, s in enumerate(implement)})
    found = []
    for n, first in enumerate(implement):
        for m in range(n + 1, len(implement)):
            second = implement[m]
            if waits[second.id] >> n & 1 or waits[first.id] >> m & 1:
                continue  # one waits for the other
            why = _may_share(first, second)
            if why is not None:
                found.append(Coupled(first.id, second.id, why))
                if len(found) >= limit:
                    return found
    return found


def refusal(pairs: Sequence[Coupled]) -> str:
    """One line naming the coupled tasks and what to do instead."""
    named = "; ".join(f"{p.first} and {p.second} ({p.why})" for p in pairs[:NAMED_PAIRS])
    more = f" and {len(pairs) - NAMED_PAIRS} more pairs" if len(pairs) > NAMED_PAIRS else ""
    return (
        f"implement tasks that can run at the same time may touch the same files: {named}{more}; "
        "make one depend on the other (depends_on), make them one task, or declare disjoint paths "
        "(--allow-overlap submits it as it is)"
    )


def _may_share(first: TaskSpec, second: TaskSpec) -> str | None:
    if not first.paths or not second.paths:
        silent = [t.id for t in (first, second) if not t.paths]
        return f"{' and '.join(silent)} declare{'s' if len(silent) == 1 else ''} no paths"
    for a in first.paths:
        for b in second.paths:
            if paths_overlap(a, b):
                return f"{a} and {b} overlap" if a != b else f"both name {a}"
    return None


def paths_overlap(a: str, b: str) -> bool:
    """Whether two declared paths (files, folders, or globs) can name one file."""
    a, b = a.rstrip("/"), b.rstrip("/")
    if a == b or a.startswith(b + "/") or b.startswith(a + "/"):
        return True
    return fnmatch.fnmatchcase(a, b) or fnmatch.fnmatchcase(b, a) or _glob_under(a, b) or _glob_under(b, a)


def _glob_under(pattern: str, folder: str) -> bool:
    """A glob whose fixed leading folders lie in `folder`, or contain it (`src/*.py` and `src`)."""
    fixed = []
    for part in pattern.split("/"):
        if any(c in part for c in "*?["):
            break
        fixed.append(part)
    if len(fixed) == len(pattern.split("/")):
        return False
    head = "/".join(fixed)
    return head == folder or head.startswith(folder + "/") or folder.startswith(head + "/") or not head


def _waits_for(specs: Sequence[TaskSpec], implement: dict[str, int]) -> dict[str, int]:
    """For each task, the implement tasks it waits for, directly or not, as a bit set of their
    indexes in `implement` (Kahn's order; the spec has no cycles by now)."""
    direct = {s.id: s.depends_on for s in specs}
    pending = {s.id: len(s.depends_on) for s in specs}
    dependents: dict[str, list[str]] = {s.id: [] for s in specs}
    for spec in specs:
        for dep in spec.depends_on:
            dependents[dep].append(spec.id)
    ready = [s.id for s in specs if not s.depends_on]
    waits: dict[str, int] = {}
    while ready:
        task = ready.pop()
        bits = 0
        for dep in direct[task]:
            bits |= waits[dep] | (1 << implement[dep] if dep in implement else 0)
        waits[task] = bits
        for later in dependents[task]:
            pending[later] -= 1
            if not pending[later]:
                ready.append(later)
    return waits
