"""The error boundary (cli/boundary.py): an internal error exits 3, one line says what it was, and a
second names the log file holding its full traceback (under the git dir, else the user's state dir)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gitswarm.engine.swarm import Swarm
from gitswarm.engine.upkeep import demo
from tests.conftest import Result, cli

LOG_LINE = re.compile(r"^gitswarm: the full traceback is in (/.+/error-\d{8}T\d{6}\.\d{6}Z-\d+\.log)$")


def boom(*args: object, **kwargs: object) -> None:
    raise RuntimeError("boom: the engine broke")


def logged(result: Result) -> Path:
    """The log an internal error named, after checking what the boundary printed."""
    assert result.code == 3, result.err
    first, second = result.err.splitlines()
    assert first == "gitswarm: internal error: RuntimeError: boom: the engine broke"
    found = LOG_LINE.match(second)
    assert found, second
    return Path(found.group(1))


def test_an_internal_error_leaves_its_traceback_under_the_git_dir(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Swarm, "recover", boom)
    path = logged(cli(repo, "recover"))
    assert path.parent == (repo / ".git" / "gitswarm" / "logs").resolve()
    text = path.read_text()
    assert "command: gitswarm recover" in text
    assert "Traceback (most recent call last):" in text
    assert 'raise RuntimeError("boom: the engine broke")' in text  # the whole stack, down to the raise
    assert text.rstrip().endswith("RuntimeError: boom: the engine broke")


def test_each_internal_error_gets_its_own_log(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Swarm, "recover", boom)
    first = logged(cli(repo, "recover"))
    again = logged(cli(repo, "--json", "recover"))
    assert first != again and first.parent == again.parent
    assert "command: gitswarm recover" in first.read_text()
    assert "command: gitswarm --json recover" in again.read_text()


def test_the_quick_path_and_minus_c_log_in_the_repository_they_ran_in(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Swarm, "status", boom)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    path = logged(cli(elsewhere, "-C", str(repo), "status"))
    assert path.parent == (repo / ".git" / "gitswarm" / "logs").resolve()


def test_without_a_repository_the_log_goes_to_the_state_dir(tmp_path: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo, "run_demo", boom)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    outside = tmp_path / "no-repo"
    outside.mkdir()
    path = logged(cli(outside, "demo"))
    assert path.parent == isolated_env / ".local" / "state" / "gitswarm" / "logs"
    assert "Traceback" in path.read_text()


def test_a_git_dir_that_cannot_hold_logs_sends_them_to_the_state_dir(repo: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Swarm, "recover", boom)
    (repo / ".git" / "gitswarm").mkdir(exist_ok=True)
    (repo / ".git" / "gitswarm" / "logs").write_text("a file where the directory would go")
    path = logged(cli(repo, "recover"))
    assert path.parent == isolated_env / ".local" / "state" / "gitswarm" / "logs"


def test_when_no_log_can_be_written_it_says_so(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Swarm, "recover", boom)
    blocked = tmp_path / "state-is-a-file"
    blocked.write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocked))
    (repo / ".git" / "gitswarm").mkdir(exist_ok=True)
    (repo / ".git" / "gitswarm" / "logs").write_text("")
    result = cli(repo, "recover")
    assert result.code == 3
    first, second = result.err.splitlines()
    assert first == "gitswarm: internal error: RuntimeError: boom: the engine broke"
    assert second.startswith("gitswarm: the traceback could not be written to a log: ")


def test_errors_that_are_not_internal_write_no_log(repo: Path) -> None:
    result = cli(repo, "status", "no-such-job")
    assert result.code == 2 and len(result.err.splitlines()) == 1
    assert not (repo / ".git" / "gitswarm" / "logs").exists()
