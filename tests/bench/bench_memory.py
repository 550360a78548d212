"""Selecting memory for a packet from 10,000 records: target under 20 ms.

    python tests/bench/bench_memory.py [--records N] [--runs R]

A real repository gets N records on refs/swarm/memory (one commit, as N
`remember` ops would leave them). Measured in the same run, best of R:
reading the N record blobs raw (the baseline), reading and decoding them
(MemoryLog.read), and the selection itself (rank + select + render, as
memory_section runs it on the decoded records) for a task that names a path
and shares words with some records.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import msgspec

from gitswarm.model import codec
from gitswarm.model.ids import new_id
from gitswarm.model.memory import MemoryRecord, MemoryState, keywords
from gitswarm.model.recall import DAY, Query, rank, select
from gitswarm.store.git import open_repo
from gitswarm.store.memory import MEMORY_REF, STATE_PATH, MemoryLog, raw_records, record_path
from gitswarm.store.memory_cache import cache_path
from tests.bench.benchlib import isolate, print_table, scratch_dir

WORDS = "cache parser retry lease index merge branch worktree verdict token budget packet schema socket timeout".split()
TARGET_MS = 20.0


def build(n: int) -> tuple[Path, list[MemoryRecord]]:
    repo_dir = Path(scratch_dir("bench-memory-")) / "repo"
    subprocess.run(["git", "init", "-q", str(repo_dir)], check=True)
    repo = open_repo(repo_dir)
    rng = random.Random(7)
    now = time.time()
    records = []
    for i in range(n):
        picked = rng.sample(WORDS, 3)
        title = f"{picked[0]} {picked[1]} rule {i}"
        body = f"The {picked[2]} in src/{picked[0]}/mod{i % 50}.py must be flushed before the {picked[1]} step."
        paths = (f"src/{picked[0]}/mod{i % 50}.py",)
        records.append(MemoryRecord(
            id=hashlib.sha256(str(i).encode()).hexdigest(), kind="finding", title=title, body=body, job=new_id(now), task="scan", attempt=1,
            commit="a" * 40, paths=paths, keywords=keywords(" ".join([title, body, *paths])), verdict="b" * 64,
            created=now - rng.uniform(0, 120) * DAY,
        ))
    paths = {record_path(r.id): repo.write_blob(codec.encode(r)) for r in records}
    paths[STATE_PATH] = repo.write_blob(codec.encode(MemoryState(clock=n, ops=n, records=n, updated=now)))
    tip = repo.commit(repo.update_tree(None, paths), [], "bench\n\n", ("gitswarm", "bench@gitswarm"), now)
    repo.cas_ref(MEMORY_REF, tip, None)
    return repo_dir, records


def best(runs: int, fn) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    isolate()
    repo_dir, _ = build(args.records)
    repo = open_repo(repo_dir)
    log = MemoryLog(repo, lambda: "bench")
    tip = repo.read_ref(MEMORY_REF)
    assert tip is not None
    records = list(log.read().records.values())
    query = Query(frozenset({"src/cache/mod7.py"}), frozenset({"cache", "flushed", "parser", "timeout"}))
    now = time.time()

    def selection() -> list[str]:
        ranked = rank(records, query, now, 90 * DAY)
        return select(ranked, lambda r: f"- [{r.record.kind}] {r.record.title} ({r.record.paths[0]})\n  {r.record.body}", 4000)

    assert selection() == selection()
    cache = cache_path(repo.common_dir)
    raw = best(args.runs, lambda: raw_records(repo, tip))

    def cold() -> None:
        cache.unlink(missing_ok=True)
        log.read()

    read = best(args.runs, cold)
    warm = best(args.runs, log.read)
    one_more = MemoryRecord(**{**msgspec.structs.asdict(records[0]), "id": "f" * 64, "title": "one more"})
    fresh = repo.commit(
        repo.update_tree(repo.commit_info(tip).tree, {record_path(one_more.id): repo.write_blob(codec.encode(one_more))}),
        [tip], "one more\n\n", ("gitswarm", "bench@gitswarm"), now,
    )

    times: list[float] = []
    for _ in range(args.runs):
        log.read(tip)  # the cache holds the tip before
        started = time.perf_counter()
        log.read(fresh)
        times.append((time.perf_counter() - started) * 1000)
    after_one = min(times)
    chosen = best(args.runs, selection)
    n = f"{args.records:,}"
    print_table(
        ["what", "records", "best ms", ""],
        [
            ["read the record blobs raw (baseline)", n, f"{raw:.1f}", ""],
            ["read and decode, no cache (MemoryLog.read)", n, f"{read:.1f}", f"{read / raw:.2f}x raw"],
            ["read, cache of this tip", n, f"{warm:.1f}", f"{warm / raw:.3f}x raw"],
            ["read, cache of the tip before one remember", n, f"{after_one:.1f}", f"{after_one / raw:.3f}x raw"],
            ["select for a packet (rank+select+render)", n, f"{chosen:.1f}", "ok" if chosen < TARGET_MS else f"OVER {TARGET_MS:.0f} ms"],
        ],
    )
    print(f"selected {len(selection())} entries; target: selection under {TARGET_MS:.0f} ms", file=sys.stderr)


if __name__ == "__main__":
    main()
