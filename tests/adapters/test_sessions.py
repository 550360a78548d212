"""Kept agent sessions (for `follow-up --resume-session`): kept, resumed, and removed once unused for KEEP_DAYS."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from gitswarm.adapters.agentspec import ResumeSpec
from gitswarm.adapters.sessions import KEEP_DAYS, _sessions_lock, keep, prune, restore, sessions_root

RESUME = ResumeSpec(args=["--resume", "{session}"], keep=[".claude/projects"])
DAY = 86400.0


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return sessions_root()


def run_home(tmp_path: Path, session: str) -> Path:
    home = tmp_path / f"home-{session}"
    (home / ".claude" / "projects").mkdir(parents=True)
    (home / ".claude" / "projects" / f"{session}.jsonl").write_text("the transcript\n")
    return home


def age(path: Path, days: float) -> None:
    then = time.time() - days * DAY
    os.utime(path, (then, then))


def test_keeping_a_session_removes_those_unused_for_keep_days(state: Path, tmp_path: Path) -> None:
    keep(RESUME, "old-one", run_home(tmp_path, "old-one"))
    keep(RESUME, "recent", run_home(tmp_path, "recent"))
    age(state / "old-one", KEEP_DAYS + 1)
    age(state / "recent", KEEP_DAYS - 1)
    keep(RESUME, "new", run_home(tmp_path, "new"))
    assert sorted(p.name for p in state.iterdir() if not p.name.startswith(".")) == ["new", "recent"]
    assert (state / "new" / ".claude" / "projects" / "new.jsonl").read_text() == "the transcript\n"


def test_a_resumed_session_counts_as_used(state: Path, tmp_path: Path) -> None:
    keep(RESUME, "s1", run_home(tmp_path, "s1"))
    age(state / "s1", KEEP_DAYS + 1)
    fresh_home = tmp_path / "resuming"
    fresh_home.mkdir()
    assert restore(RESUME, "s1", fresh_home)
    assert (fresh_home / ".claude" / "projects" / "s1.jsonl").is_file()
    assert prune(state, time.time() - KEEP_DAYS * DAY) == []


def test_a_session_kept_again_in_place_counts_as_kept_now(state: Path, tmp_path: Path) -> None:
    keep(RESUME, "s1", run_home(tmp_path, "s1"))
    age(state / "s1", KEEP_DAYS + 1)
    (tmp_path / "again").mkdir()
    keep(RESUME, "s1", run_home(tmp_path / "again", "s1"))
    assert prune(state, time.time() - KEEP_DAYS * DAY) == []


def test_prune_touches_only_session_folders_and_never_follows_a_symlink(state: Path, tmp_path: Path) -> None:
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "work.txt").write_text("mine\n")
    state.mkdir(parents=True)
    (state / "linked").symlink_to(outside, target_is_directory=True)
    (state / "..hidden").mkdir()
    (state / "a-file").write_text("not a folder\n")
    (state / "stale").mkdir()
    for name in ("linked", "..hidden", "a-file", "stale"):
        then = time.time() - 400 * DAY
        os.utime(state / name, (then, then), follow_symlinks=False)
    assert prune(state, time.time() - KEEP_DAYS * DAY) == ["stale"]
    assert (outside / "work.txt").read_text() == "mine\n" and (state / "linked").is_symlink()
    assert (state / "..hidden").is_dir() and (state / "a-file").is_file()
    assert prune(tmp_path / "never-made", time.time()) == []


def test_a_prune_while_a_session_is_resumed_waits_for_the_next_keep(state: Path, tmp_path: Path) -> None:
    keep(RESUME, "s1", run_home(tmp_path, "s1"))
    age(state / "s1", KEEP_DAYS + 1)
    with _sessions_lock(state, exclusive=False):  # a resume (or keep) going on in another worker
        assert prune(state, time.time() - KEEP_DAYS * DAY) == []
    assert prune(state, time.time() - KEEP_DAYS * DAY) == ["s1"]

