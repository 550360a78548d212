"""The git layer's blob writes and reads, with its small cache of recent blobs."""

from __future__ import annotations

from pathlib import Path

from gitswarm.store.git import _BLOB_CACHE_MAX_SIZE, PygitRepo
from tests.conftest import git


def test_blob_ids_are_gits_and_the_object_is_on_disk(repo: Path) -> None:
    store = PygitRepo(repo)
    data = b"a task record\n"
    oid = store.write_blob(data)
    (repo / "probe").write_bytes(data)
    assert oid == git(repo, "hash-object", "probe").strip()
    assert git(repo, "cat-file", "-p", oid) == data.decode()
    assert store.write_blob(data) == oid  # again: the same id, nothing new
    assert PygitRepo(repo).read_blob(oid) == data  # a fresh process reads it from disk


def test_large_blobs_bypass_the_cache_but_are_written(repo: Path) -> None:
    store = PygitRepo(repo)
    data = b"x" * (_BLOB_CACHE_MAX_SIZE + 1)
    oid = store.write_blob(data)
    assert oid not in store._blobs
    assert PygitRepo(repo).read_blob(oid) == data
