"""The git CLI transport: which protocol a fetch speaks (store/remote.py, ONE_ROUND_TRIP)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitswarm.store.remote import GitTransport
from tests.conftest import bare_remote, commit_file, git


def fetch_traced(repo: Path, monkeypatch: pytest.MonkeyPatch, trace: Path, one_round_trip: bool) -> str:
    monkeypatch.setenv("GIT_TRACE_PACKET", str(trace))
    GitTransport(repo).fetch("origin", ["+refs/heads/*:refs/gitswarm/fetched/*"], one_round_trip=one_round_trip)
    monkeypatch.delenv("GIT_TRACE_PACKET")
    return trace.read_text()


@pytest.mark.parametrize("one_round_trip", [True, False])
def test_a_repeated_fetch_asks_for_no_ref_list_first(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_round_trip: bool) -> None:
    remote = bare_remote(tmp_path)
    git(repo, "remote", "add", "origin", str(remote))
    tip = commit_file(repo, "a.txt", "a\n")
    git(repo, "push", "-q", "origin", "HEAD:refs/heads/main")
    said = fetch_traced(repo, monkeypatch, tmp_path / f"trace-{one_round_trip}", one_round_trip)
    # protocol v2 asks for the refs (ls-refs) and then fetches: a round trip more than v0, whose answer lists them
    assert ("command=ls-refs" in said) is not one_round_trip
    assert git(repo, "rev-parse", "refs/gitswarm/fetched/main").strip() == tip
