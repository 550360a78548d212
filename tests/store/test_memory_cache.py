"""The decoded-records cache of the memory ref: the same records as the blobs say, whatever the file holds."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitswarm.model import codec
from gitswarm.model.memory import MemoryRecord, MemoryState
from gitswarm.store.git import PygitRepo, open_repo
from gitswarm.store.memory import MEMORY_REF, STATE_PATH, MemoryLog, raw_records, record_path
from gitswarm.store.memory_cache import Cached, cache_path

NOW = 1_700_000_000.0


def record(n: int, title: str = "") -> MemoryRecord:
    return MemoryRecord(
        id=hashlib.sha256(str(n).encode()).hexdigest(), kind="finding", title=title or f"rule {n}", body="", job="0" * 26, task="scan", attempt=1,
        commit="a" * 40, paths=(), keywords=(), verdict="b" * 64, created=NOW,
    )


def put(repo: PygitRepo, records: list[MemoryRecord]) -> str:
    """A memory commit holding exactly `records` (as a history of remember ops would leave them), on the ref."""
    files = {record_path(r.id): repo.write_blob(codec.encode(r)) for r in records}
    files[STATE_PATH] = repo.write_blob(codec.encode(MemoryState(clock=len(records), ops=len(records), records=len(records), updated=NOW)))
    tip = repo.commit(repo.update_tree(None, files), [], "test\n\n", ("gitswarm", "test@gitswarm"), NOW)
    repo.cas_ref(MEMORY_REF, tip, repo.read_ref(MEMORY_REF))
    return tip


def decoded_from_blobs(repo: PygitRepo, tip: str) -> dict[str, MemoryRecord]:
    return {r.id: r for r in (codec.decode(data, MemoryRecord, "test") for data in raw_records(repo, tip))}


class CountingRepo(PygitRepo):
    """The real repository, counting the blobs it reads."""

    blobs_read = 0

    def read_blob(self, oid: str) -> bytes:
        self.blobs_read += 1
        return super().read_blob(oid)


def make_repo(tmp_path: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(tmp_path / "r")], check=True)
    return tmp_path / "r"


def test_a_second_read_decodes_no_record_blob_and_a_new_tip_only_its_changed_fans(tmp_path: Path) -> None:
    path = make_repo(tmp_path)
    repo = CountingRepo(path)
    records = [record(n) for n in range(600)]  # every one of the 256 fans holds some
    put(repo, records)
    log = MemoryLog(repo, lambda: "me")
    first = log.read()
    assert repo.blobs_read == 601 and first.records == {r.id: r for r in records}
    assert cache_path(repo.common_dir).is_file()

    repo.blobs_read = 0
    assert MemoryLog(repo, lambda: "me").read().records == first.records
    assert repo.blobs_read == 1  # the state alone

    changed = record(5, "rule 5, corrected")
    tip = put(repo, [changed, *records[:5], *records[6:], record(10_000)])
    repo.blobs_read = 0
    after = log.read()
    read = repo.blobs_read
    assert after.records == decoded_from_blobs(repo, tip) and after.records[changed.id].title == "rule 5, corrected"
    fans = {record_path(r.id).split("/")[0] for r in (changed, record(10_000))}
    in_those_fans = sum(1 for r in after.records.values() if record_path(r.id).split("/")[0] in fans)
    assert 2 <= in_those_fans < 30 and read == 1 + in_those_fans  # the state, and the blobs of the fans that changed


def test_a_damaged_or_foreign_cache_file_is_ignored_and_written_again(tmp_path: Path) -> None:
    repo = open_repo(make_repo(tmp_path))
    tip = put(repo, [record(n) for n in range(40)])
    truth = decoded_from_blobs(repo, tip)
    cache = cache_path(repo.common_dir)
    for damage in (b"", b"\x00garbage", msgspec.msgpack.encode({"format": 99, "fans": {}}), msgspec.msgpack.encode([1, 2, 3])):
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_bytes(damage)
        assert MemoryLog(repo, lambda: "me").read().records == truth
        assert cache.read_bytes() != damage
    cache.write_bytes(cache.read_bytes()[:-7])  # cut short
    assert MemoryLog(repo, lambda: "me").read().records == truth


def test_a_cache_that_cannot_be_written_costs_only_speed(tmp_path: Path) -> None:
    repo = open_repo(make_repo(tmp_path))
    tip = put(repo, [record(n) for n in range(10)])
    blocker = cache_path(repo.common_dir).parent
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("a file where the cache folder would go\n")
    assert MemoryLog(repo, lambda: "me").read().records == decoded_from_blobs(repo, tip)
    assert blocker.is_file()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sets(st.integers(0, 3000), max_size=40), min_size=1, max_size=6))
def test_through_any_sequence_of_tips_the_cache_reads_what_the_blobs_say(tmp_path_factory, generations: list[set[int]]) -> None:  # type: ignore[no-untyped-def]
    repo = open_repo(make_repo(tmp_path_factory.mktemp("m")))
    log = MemoryLog(repo, lambda: "me")
    for n, ids in enumerate(generations):
        tip = put(repo, [record(i, f"rule {i} as of generation {n % 2}") for i in sorted(ids)])
        assert log.read().records == decoded_from_blobs(repo, tip)


def test_a_planted_symlink_or_fifo_in_place_of_the_cache_costs_nothing(tmp_path: Path) -> None:
    """The cache folder is not watched while agents run: what one plants there is ignored, never followed."""
    repo = open_repo(make_repo(tmp_path))
    tip = put(repo, [record(n) for n in range(10)])
    cache = cache_path(repo.common_dir)
    cache.parent.mkdir(parents=True)
    for plant in ("symlink", "fifo"):
        if plant == "symlink":
            cache.symlink_to("/dev/zero")
        else:
            os.mkfifo(cache)  # a read would block forever
        assert MemoryLog(repo, lambda: "me").read().records == decoded_from_blobs(repo, tip)
        assert cache.is_file() and not cache.is_symlink()  # replaced by a rename, never written through
        cache.unlink()


def test_a_cached_fan_that_does_not_match_its_tree_is_read_from_the_blobs(tmp_path: Path) -> None:
    """Right tree ids, wrong records (none, fewer, altered, of a newer format): each fan is read again."""
    path = make_repo(tmp_path)
    repo = CountingRepo(path)
    tip = put(repo, [record(n) for n in range(40)])
    truth = decoded_from_blobs(repo, tip)
    cache = cache_path(repo.common_dir)
    MemoryLog(repo, lambda: "me").read()
    good = cache.read_bytes()
    alterations = (
        lambda rs: rs.clear(),
        lambda rs: rs.pop(),
        lambda rs: rs.__setitem__(0, msgspec.structs.replace(rs[0], title="forged")),
        lambda rs: rs.__setitem__(0, msgspec.structs.replace(rs[0], v=99)),
    )
    for alter in alterations:
        cached = msgspec.msgpack.decode(good, type=Cached)
        for fan in cached.fans.values():
            if fan.records:
                alter(fan.records)
        cache.write_bytes(msgspec.msgpack.encode(cached))
        repo.blobs_read = 0
        assert MemoryLog(repo, lambda: "me").read().records == truth
        assert repo.blobs_read > 1  # the altered fans' blobs were read again
        assert MemoryLog(repo, lambda: "me").read().records == truth  # and the file written right again


def test_a_cache_folder_swapped_for_a_symlink_is_never_written_through(tmp_path: Path) -> None:
    repo = open_repo(make_repo(tmp_path))
    tip = put(repo, [record(n) for n in range(10)])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    folder = cache_path(repo.common_dir).parent
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.symlink_to(elsewhere, target_is_directory=True)
    assert MemoryLog(repo, lambda: "me").read().records == decoded_from_blobs(repo, tip)
    assert list(elsewhere.iterdir()) == [] and folder.is_symlink()


def test_a_file_of_many_fans_is_refused_at_once(tmp_path: Path) -> None:
    repo = open_repo(make_repo(tmp_path))
    tip = put(repo, [record(n) for n in range(10)])
    cache = cache_path(repo.common_dir)
    cache.parent.mkdir(parents=True)
    cache.write_bytes(msgspec.msgpack.encode({"format": 1, "fans": {f"x{n}": ["t", []] for n in range(200_000)}}))
    assert MemoryLog(repo, lambda: "me").read().records == decoded_from_blobs(repo, tip)
