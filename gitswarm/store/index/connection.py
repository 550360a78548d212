"""One connection to the index: opened (a damaged or old-format file is made anew), the
writers' flock, short write transactions, and noticing a file replaced underneath."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from gitswarm.model.errors import DiskFull, InternalError
from gitswarm.store.diskspace import full
from gitswarm.store.index.schema import (
    INDEX_FORMAT,
    create_tables,
    drop_tables,
    index_path,
    is_current,
    open_file,
    open_memory,
    scan_every_btree,
    synced,
)
from gitswarm.store.readonly import refusal, refused, unwritable


class IndexReplaced(sqlite3.DatabaseError):
    """The index file was deleted or replaced under an open connection (which would
    otherwise go on reading the orphaned file without an error)."""


class IndexBroken(InternalError):
    """The index failed and could not be rebuilt from the refs."""


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file at `path`, or None when there is none."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino


class IndexConnection:
    """The connection and its lock. Writers use `immediate()` for a short BEGIN IMMEDIATE transaction.

    With `create=False` and no index on disk yet, the index is made in memory
    and nothing is written: read commands in a fresh clone leave `.git` as it
    was. So it is in a repository that cannot be written (a read-only mount:
    `read_only` says why); there `create=True` raises ReadOnlyRepository
    before anything is written. Leases live only in the index, so whatever
    takes them opens it with `create=True`.
    """

    _file: tuple[int, int] | None = None  # (device, inode) of the file this connection opened

    def __init__(self, common_dir: Path, create: bool = True) -> None:
        self.path = index_path(common_dir)
        self.rebuilt = False
        self.read_only: str | None = None  # in a repository that cannot be written: why (`cannot write to ...`)
        self.in_memory = not create and not self.path.exists()
        self._lock: int | None = None  # nobody else can reach an index in memory: no lock to queue on
        if self.in_memory:
            self.read_only = unwritable(self.path.parent)
            self.db = open_memory()
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock = os.open(self.path.with_name("index.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            self.db = self._connect()
        except (OSError, sqlite3.Error) as exc:
            why = refusal(self.path.parent, exc)
            if why is None:
                raise
            if self._lock is not None:
                os.close(self._lock)
                self._lock = None
            if create:
                raise refused(why) from None
            self.read_only, self.in_memory, self.db = why, True, open_memory()

    def _connect(self) -> sqlite3.Connection:
        """A connection to the index file, its tables made first when it has none (a new file, an older format).

        The tables are made on the connection that is returned: closing it and opening another cost a
        checkpoint with two fsyncs on each close. A file made anew is switched to WAL, given its tables and
        checkpointed without any fsync (schema.open_file, `fresh`).
        """
        fresh = not self.path.exists()
        db: sqlite3.Connection | None = None
        try:
            db = open_file(self.path, fresh)
            current = is_current(db)
            if current:
                scan_every_btree(db)
        except sqlite3.DatabaseError:
            if db is not None:
                with contextlib.suppress(sqlite3.Error):
                    db.close()
            self._remove_files()
            db, current = open_file(self.path, fresh=True), False
        try:
            if not current:
                self._create(db)
                # Into the file itself, as closing the connection used to: were its tables only in the WAL, a file
                # truncated under a run would go unnoticed by the processes that have it open (they read the WAL),
                # then read as empty, its WAL ignored. Without fsyncs on a new file (`synchronous` is still off).
                db.execute("PRAGMA wal_checkpoint")
            synced(db)
        except BaseException:
            db.close()
            raise
        self._file = _identity(self.path)
        return db

    def _remove_files(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    def _create(self, db: sqlite3.Connection) -> None:
        """(Re)create the schema on `db` under an exclusive lock; another process may be racing us."""
        db.execute("BEGIN EXCLUSIVE")
        try:
            if db.execute("PRAGMA user_version").fetchone()[0] != INDEX_FORMAT:
                drop_tables(db)
                create_tables(db)
                self.rebuilt = True
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    def reopen_new_file(self) -> None:
        """Drop the connection to a file that failed and open a new one, emptied or rebuilt by
        another process meanwhile.

        The file is replaced under the writers' flock, so that one process
        replaces it and the others, finding a new file, reopen that one instead
        of deleting it again.
        """
        if self._file is None or self._lock is None:
            raise IndexBroken("the index in memory failed")
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        try:
            with contextlib.suppress(sqlite3.Error):  # a connection to a damaged file is dropped either way
                self.db.close()
            if _identity(self.path) in (self._file, None):
                self._remove_files()  # still the file that failed, or the -wal and -shm of a deleted one
            self.db = self._connect()
        except (sqlite3.Error, OSError) as exc:
            raise IndexBroken(f"the index {self.path} failed and could not be rebuilt: {exc}") from exc
        finally:
            fcntl.flock(self._lock, fcntl.LOCK_UN)

    def close(self) -> None:
        self.db.close()
        if self._lock is not None:
            os.close(self._lock)

    def destroy(self) -> None:
        """Close and delete the index files; the next Index() rebuilds from the refs."""
        self.close()
        if not self.in_memory:
            self._remove_files()

    def check_file(self) -> None:
        """Raise IndexReplaced if the index file was deleted or replaced since this connection opened it."""
        if self._file is not None and _identity(self.path) != self._file:
            raise IndexReplaced(f"{self.path} was deleted or replaced")

    @contextlib.contextmanager
    def immediate(self) -> Iterator[sqlite3.Connection]:
        """One short write transaction; every lease operation runs inside one.

        Writers queue on an flock first: the kernel wakes the next one the
        moment the lock is free, where SQLite's busy handler would sleep in
        steps of up to 100 ms. The lock dies with its process. A full disk is
        DiskFull, nothing of the transaction kept: no damage to rebuild from.
        """
        with self.write_lock(), self.transaction() as db:
            yield db

    @contextlib.contextmanager
    def write_lock(self) -> Iterator[None]:
        """The writers' flock alone: a worker whose finish another wrote (store/group_commit.py) needs no transaction."""
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if self._lock is not None:
                fcntl.flock(self._lock, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT, under the write lock the caller holds."""
        try:
            self.check_file()
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
                self.db.execute("COMMIT")
            except BaseException:
                if self.db.in_transaction:  # (a COMMIT that failed for want of room may have ended it already)
                    self.db.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", None) != sqlite3.SQLITE_FULL:
                raise
            raise full(self.path.parent, exc) or DiskFull(f"disk full: cannot write the index {self.path}: {exc}") from None
