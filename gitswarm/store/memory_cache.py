"""The memory's records, decoded, kept beside the repository: a packet need not decode 10,000 blobs.

    <git common dir>/gitswarm/cache/memory.msgpack

For the memory tip last read it holds each record fan's tree id (the
`records.<xx>` trees of store/memory.py) and the records decoded from it.
A read of any tip reuses a fan whose tree id it still has, once each of
its records encodes to exactly the blob its tree names (so the file can
hold nothing the tree does not say); the other fans' blobs are read and
decoded. Then the file is replaced whole (write, rename).

It is derived data: a file that is missing, unreadable, of another format,
or that does not match the tree is ignored and written again, and one that
cannot be written costs only the speed. The folder is not watched while
agents run (engine/delegation/integrity.py), so everything in it is treated as an
agent may have left it: the file and the folder are opened without
following symlinks, the file is read only when it is a regular file of a
bounded size, and its content is checked as above.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import msgspec
from msgspec import Meta

from gitswarm.model import codec
from gitswarm.model.memory import MemoryRecord
from gitswarm.store.gitrepo import GitRepo
from gitswarm.store.layout import MEMORY_RECORDS_FANS

CACHE_FORMAT = 1
CACHE_NAME = "memory.msgpack"
MAX_CACHE_BYTES = 64 * 1024 * 1024  # 10,000 records take ~3 MB
FanName = Annotated[str, Meta(pattern=r"^records\.[0-9a-f]{2}$")]


class Fan(msgspec.Struct, array_like=True):
    tree: str
    records: list[MemoryRecord]


class Cached(msgspec.Struct):
    format: int
    fans: Annotated[dict[FanName, Fan], Meta(max_length=256)]


_decoder = msgspec.msgpack.Decoder(Cached)
_encoder = msgspec.msgpack.Encoder()


def cache_path(common_dir: Path) -> Path:
    return common_dir / "gitswarm" / "cache" / CACHE_NAME


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
            entries = {entry: blob for entry, blob, _ in repo.tree_items(oid)}
            known = cached.get(name)
            if known is not None and known.tree == oid and _matches(repo, known.records, entries):
                fans[name] = known
            else:
                fans[name] = Fan(oid, [codec.decode(repo.read_blob(blob), MemoryRecord, f"{where}:records") for blob in entries.values()])
        if fans.keys() != cached.keys() or any(fans[n] is not cached[n] for n in fans):
            self._store(fans)
        return {record.id: record for fan in fans.values() for record in fan.records}

    def _load(self) -> dict[str, Fan]:
        try:
            with _folder(self.path.parent, create=False) as folder:
                cached = _decoder.decode(_read_regular_file(folder, self.path.name, MAX_CACHE_BYTES))
        except (OSError, msgspec.DecodeError):  # missing, unreadable, or not ours: read the blobs again
            return {}
        return cached.fans if cached.format == CACHE_FORMAT else {}

    def _store(self, fans: dict[str, Fan]) -> None:
        data = _encoder.encode(Cached(CACHE_FORMAT, fans))
        try:
            with _folder(self.path.parent, create=True) as folder:
                temp = f".{self.path.name}.{secrets.token_hex(8)}.tmp"
                fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=folder)
                try:
                    with os.fdopen(fd, "wb") as out:
                        out.write(data)
                    os.replace(temp, self.path.name, src_dir_fd=folder, dst_dir_fd=folder)
                finally:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(temp, dir_fd=folder)  # left only when the write or the rename failed
        except OSError:
            return  # a cache that cannot be written costs speed, never a read


def _matches(repo: GitRepo, records: list[MemoryRecord], entries: dict[str, str]) -> bool:
    """Whether `records` are exactly what the fan's entries (name -> blob id) hold: one each, by id,
    each encoding to its entry's blob, of a format this gitswarm reads."""
    if len(records) != len(entries):
        return False
    for record in records:
        if entries.get(record.id) != repo.blob_id(codec.encode(record)) or record.v > codec.FORMAT:
            return False
    return True


@contextlib.contextmanager
def _folder(path: Path, create: bool) -> Iterator[int]:
    """The cache folder opened as a directory, never through a symlink (made first when `create`)."""
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)  # a symlink of that name is not followed: FileExistsError, then refused below
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        yield fd
    finally:
        os.close(fd)


def _read_regular_file(folder: int, name: str, limit: int) -> bytes:
    """The bytes of `name` in `folder` when it is a regular file (a symlink is not followed) of at most
    `limit` bytes; OSError otherwise: a planted symlink to /dev/zero, a fifo or a huge file costs nothing."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            raise OSError(f"{name}: not a regular file of at most {limit} bytes")
        return handle.read(limit + 1)
