"""Loose git objects written the way git writes them, and trees built from their entries.

libgit2 writes a loose object to a temporary file in `objects/`, hard-links it
into its fan-out directory and unlinks the temporary, after looking for it in
every pack (a scan of `objects/pack/`) and trying to re-stamp it. On ext4 here
that costs ~150 us an object against ~18 us for git's own way: a temporary file
in the fan-out directory, renamed into place. A transition writes about nine
objects, so gitswarm writes its blobs, trees and commits here; libgit2 still
reads them (and writes the rare objects of merges, notes and signed commits).

The format is git's (gitformat-loose(5)): `<kind> <size>\\0<body>` deflated, at
`objects/<first two hex digits>/<the other 38>`, read-only. An object already
there is not written again; one that only a pack holds is written loose once
more, which git allows (a `git gc` drops the copy). A temporary file left by a
writer that died is named `tmp_obj_*`, which `git prune` removes.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import zlib
from pathlib import Path

from gitswarm.model.errors import CorruptRecord

# An object this small is stored deflated at level 0 (zlib's stored blocks, a valid stream for git): it takes
# the same disk blocks either way, and compressing a job's root tree (mostly object ids) cost ~0.1 ms a write.
# A `git gc` packs it compressed. Larger ones (outputs) are compressed, at the fastest level.
STORED_MAX = 16 * 1024

TREE_MODE = 0o40000
BLOB_MODE = 0o100644

# A tree's entries: name -> (mode, the entry's 20-byte object id).
TreeEntries = dict[bytes, tuple[int, bytes]]

_counter = itertools.count()


def object_id(kind: bytes, body: bytes) -> str:
    """The id git gives an object of `kind` (b"blob", b"tree", b"commit") with `body`."""
    return hashlib.sha1(b"%s %d\0%s" % (kind, len(body), body)).hexdigest()


class LooseObjects:
    """Writes loose objects into one `objects/` directory."""

    def __init__(self, objects: Path) -> None:
        self.objects = os.fspath(objects)

    def write(self, kind: bytes, body: bytes, oid: str | None = None) -> str:
        """Write the object unless it is there loose already; its id (`oid` when the caller computed it)."""
        if oid is None:
            oid = object_id(kind, body)
        fan = f"{self.objects}/{oid[:2]}"
        final = f"{fan}/{oid[2:]}"
        try:
            os.utime(final)  # there already: stamped as new, so that a `git gc` going on does not prune it now
            return oid
        except FileNotFoundError:
            pass
        raw = b"%s %d\0%s" % (kind, len(body), body)
        data = zlib.compress(raw, 0 if len(raw) <= STORED_MAX else 1)
        for attempt in range(3):
            try:
                fd, temporary = self._temporary(fan)
                break
            except FileNotFoundError:  # no fan-out folder yet (or `git prune` just removed an empty one)
                if attempt == 2:
                    raise
                os.makedirs(fan, exist_ok=True)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            os.rename(temporary, final)
        except BaseException:
            with contextlib.suppress(OSError):  # (the error that stopped the write is the one to say)
                os.unlink(temporary)
            raise
        return oid

    @staticmethod
    def _temporary(fan: str) -> tuple[int, str]:
        while True:
            name = f"{fan}/tmp_obj_{os.getpid()}_{next(_counter)}"
            try:
                return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o444), name
            except FileExistsError:  # left by a dead process that had our pid: take the next name
                continue


def parse_tree(data: bytes, where: str) -> TreeEntries:
    """A tree object's body as its entries; CorruptRecord when it is not one."""
    entries: TreeEntries = {}
    pos, end = 0, len(data)
    try:
        while pos < end:
            space = data.index(b" ", pos)
            nul = data.index(b"\0", space)
            oid = data[nul + 1 : nul + 21]
            if len(oid) != 20:
                raise ValueError("truncated entry")
            entries[data[space + 1 : nul]] = (int(data[pos:space], 8), oid)
            pos = nul + 21
    except ValueError as exc:
        raise CorruptRecord(f"tree {where[:12]} is malformed ({exc})") from None
    return entries


def is_tree(mode: int) -> bool:
    """Whether an entry of `mode` is a tree, as git and libgit2 read modes: any 04xxxx (a tree written by
    another tool may carry 40755, say), not only the canonical 40000."""
    return mode & 0o170000 == TREE_MODE


def _order(item: tuple[bytes, tuple[int, bytes]]) -> bytes:
    """git's order of tree entries: by name, a tree's name compared as if it ended in '/'."""
    name, (mode, _) = item
    return name + b"/" if is_tree(mode) else name


def format_tree(entries: TreeEntries) -> bytes:
    """A tree object's body: its entries in git's order, each `<octal mode> <name>\\0<20-byte id>`."""
    return b"".join(b"%o %s\0%s" % (mode, name, oid) for name, (mode, oid) in sorted(entries.items(), key=_order))
