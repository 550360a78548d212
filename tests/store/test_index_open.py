"""Opening the index: a new, an older-format or a damaged file is made anew on the connection that is
returned, which then has the index's durability (WAL, synchronous NORMAL) whatever the file was."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from gitswarm.store.index.connection import IndexConnection
from gitswarm.store.index.schema import INDEX_FORMAT, index_path

NORMAL = 1


def durability(db: sqlite3.Connection) -> tuple[str, int]:
    return db.execute("PRAGMA journal_mode").fetchone()[0], db.execute("PRAGMA synchronous").fetchone()[0]


def older_format(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE jobs (id TEXT)")
    db.execute(f"PRAGMA user_version = {INDEX_FORMAT - 1}")
    db.commit()
    db.close()


def damaged(path: Path) -> None:
    path.write_bytes(b"not a database" * 512)


@pytest.mark.parametrize("before", [None, older_format, damaged], ids=["new", "older format", "damaged"])
def test_an_index_made_anew_is_current_and_durable_on_the_connection_returned(tmp_path: Path, before) -> None:
    path = index_path(tmp_path)
    if before is not None:
        path.parent.mkdir(parents=True)
        before(path)
    index = IndexConnection(tmp_path)
    try:
        assert index.db.execute("PRAGMA user_version").fetchone()[0] == INDEX_FORMAT
        assert index.db.execute("SELECT count(*) FROM tasks").fetchone()[0] == 0
        assert durability(index.db) == ("wal", NORMAL)
        with index.immediate() as db:  # and it takes writes
            db.execute("INSERT INTO artifacts VALUES ('a', 'j', NULL, 'run')")
    finally:
        index.close()
    reopened = IndexConnection(tmp_path)
    try:
        assert reopened.db.execute("SELECT id FROM artifacts").fetchall() == [("a",)]
        assert durability(reopened.db) == ("wal", NORMAL)
    finally:
        reopened.close()


def test_what_a_process_that_ends_without_closing_its_connection_wrote_is_read_back(tmp_path: Path) -> None:
    """`gitswarm` ends with os._exit (cli/main.py): its connection is never closed nor its WAL checkpointed."""
    child = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from gitswarm.store.index.connection import IndexConnection\n"
        "index = IndexConnection(Path(sys.argv[1]))\n"
        "with index.immediate() as db:\n"
        "    db.execute(\"INSERT INTO artifacts VALUES ('a', 'j', NULL, 'run')\")\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", child, str(tmp_path)], check=True)
    assert index_path(tmp_path).with_name("index.sqlite-wal").stat().st_size > 0  # left as a crash leaves it
    index = IndexConnection(tmp_path)
    try:
        assert index.db.execute("SELECT id FROM artifacts").fetchall() == [("a",)]
    finally:
        index.close()
