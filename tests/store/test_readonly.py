"""store/readonly.py: which failed writes mean a repository that cannot be written, and which do not.

(The repository made read-only for real, a mount or chmod, is tests/cli/test_read_only_repo.py.)
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

import pytest

from gitswarm.model.errors import EXIT_USAGE, ReadOnlyRepository
from gitswarm.store.readonly import read_only, refusal, unwritable


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES, errno.EPERM])
def test_a_refused_write_names_the_folder_and_why(tmp_path: Path, code: int) -> None:
    found = read_only(tmp_path, OSError(code, os.strerror(code)))
    assert isinstance(found, ReadOnlyRepository) and found.exit_code == EXIT_USAGE
    assert str(found) == f"the repository is read-only: cannot write to {tmp_path} ({os.strerror(code)}); nothing was written"


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EISDIR, errno.ENOENT, errno.EIO])
def test_other_failures_are_not_a_read_only_repository(tmp_path: Path, code: int) -> None:
    assert refusal(tmp_path, OSError(code, os.strerror(code))) is None
    assert refusal(tmp_path, ValueError("attempt to write a readonly database")) is None


def test_sqlites_readonly_in_a_folder_that_can_be_written_is_not_the_repositorys(tmp_path: Path) -> None:
    """A database opened read-only says "readonly" too: only a folder that cannot be written makes it ours."""
    sqlite3.connect(tmp_path / "db").close()
    db = sqlite3.connect(f"file:{tmp_path / 'db'}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError, match=r"readonly") as raised:
        db.execute("CREATE TABLE t (x)")
    db.close()
    assert raised.value.sqlite_errorcode & 0xFF == sqlite3.SQLITE_READONLY
    assert refusal(tmp_path, raised.value) is None


def test_a_folder_that_can_be_written_or_made(tmp_path: Path) -> None:
    assert unwritable(tmp_path) is None
    assert unwritable(tmp_path / "not" / "yet") is None  # asked of the folder it would be made in
