"""The memory's records, decoded, kept beside the repository: a packet need not read 10,000 blobs.

    <git common dir>/gitswarm/cache/memory.msgpack

For the memory tip last read it holds each record fan's tree id (the
`records.<xx>` trees of store/memory.py) and the records decoded from it.
A read of any tip reuses every fan whose tree id it still has (a tree id
names its content, so the records are the same) and reads and decodes only
the blobs of the others; then the file is replaced whole (write, rename).

It is derived data: a file that is missing, unreadable, or of another
format is ignored and written again, and one that cannot be written costs
only the speed. It is no new trust either: the file sits in the git dir,
and a record still counts for a packet only once it is checked against its
artifact and a counted verdict (engine/memory.py `Believer`).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

import msgspec

from gitswarm.model import codec
from gitswarm.model.memory import MemoryRecord
from gitswarm.store.gitrepo import GitRepo
from gitswarm.store.layout import MEMORY_RECORDS_FANS

CACHE_FORMAT = 1
MAX_CACHE_BYTES = 512 * 1024 * 1024  # far past 10,000 records (~3 MB); anything larger is not ours


class Fan(msgspec.Struct, array_like=True):
    tree: str
    records: list[MemoryRecord]


class Cached(msgspec.Struct):
    format: int
    fans: dict[str, Fan]


_decoder = msgspec.msgpack.Decoder(Cached)
_encoder = msgspec.msgpack.Encoder()


def cache_path(common_dir: Path) -> Path:
    return common_dir / "gitswarm" / "cache" / "memory.msgpack"


class RecordCache:
    """The records of memory trees, read through the cache file at `path`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def records(self, repo: GitRepo, tree: str, where: str) -> dict[str, MemoryRecord]:
        """Every record of the memory tree `tree`, by id; CorruptRecord names `where` for a bad blob."""
        cached = self._load()
        fans: dict[str, Fan] = {}
        for name, oid, is_tree in repo.tree_items(tree):
            if not (is_tree and name.startswith(MEMORY_RECORDS_FANS)):
                continue
            known = cached.get(name)
            if known is not None and known.tree == oid:
                fans[name] = known
            else:
                fans[name] = Fan(oid, [codec.decode(repo.read_blob(blob), MemoryRecord, f"{where}:records")
                                       for _, blob, _ in repo.tree_items(oid)])
        if fans.keys() != cached.keys() or any(fans[n] is not cached[n] for n in fans):
            self._store(fans)
        return {record.id: record for fan in fans.values() for record in fan.records}

    def _load(self) -> dict[str, Fan]:
        try:
            cached = _decoder.decode(_read_regular_file(self.path, MAX_CACHE_BYTES))
        except (OSError, msgspec.DecodeError):  # missing, unreadable, or not ours: read the blobs again
            return {}
        return cached.fans if cached.format == CACHE_FORMAT else {}

    def _store(self, fans: dict[str, Fan]) -> None:
        data = _encoder.encode(Cached(CACHE_FORMAT, fans))
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle, temp = tempfile.mkstemp(dir=self.path.parent, prefix=".memory.", suffix=".tmp")
            try:
                with os.fdopen(handle, "wb") as out:
                    out.write(data)
                os.replace(temp, self.path)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temp)  # left only when the write or the rename failed
        except OSError:
            return  # a cache that cannot be written costs speed, never a read


def _read_regular_file(path: Path, limit: int) -> bytes:
    """The bytes of `path` when it is a regular file (a symlink is not followed) of at most `limit`
    bytes; OSError otherwise. The folder is not watched while agents run: a planted symlink to
    /dev/zero or a huge file must cost nothing."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            raise OSError(f"{path}: not a regular file of at most {limit} bytes")
        return handle.read(limit + 1)
