"""Where error logs go (store/errorlogs.py): the git common dir, found as git finds it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitswarm.store.errorlogs import find_common_dir, write_log
from tests.conftest import git


def test_a_linked_worktree_logs_in_the_common_dir(repo: Path, tmp_path: Path) -> None:
    git(repo, "commit", "-q", "--allow-empty", "-m", "more")
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "--detach", str(linked))
    assert find_common_dir(linked / ".") == (repo / ".git").resolve()


def test_git_dir_in_the_environment_is_asked_of_git(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert find_common_dir(elsewhere) == (repo / ".git").resolve()


def test_a_deleted_working_directory_logs_in_the_state_dir(isolated_env: Path) -> None:
    path = write_log("text", None)
    assert path.parent == isolated_env / ".local" / "state" / "gitswarm" / "logs" and path.read_text() == "text"
