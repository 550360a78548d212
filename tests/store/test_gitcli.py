"""The git CLI seam's own questions (store/gitcli.py)."""

from __future__ import annotations

import subprocess

import pytest

from gitswarm.store.gitcli import git_version


def test_git_version_is_what_git_says() -> None:
    said = subprocess.run(["git", "--version"], capture_output=True, text=True, check=True).stdout.strip()
    assert git_version() == said and said.startswith("git version ")


def test_no_git_on_path_is_none(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert git_version() is None
