"""The scripted stand-in ships as the adapter `scripted`: a repository with no adapter spec of its own delegates to it."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import cli, git, ok, rev


def test_delegate_to_the_shipped_scripted_adapter_in_a_fresh_repository_works_end_to_end(repo: Path) -> None:
    assert not (repo / ".gitswarm").exists()  # no spec of its own, no interpreter path written anywhere
    base = rev(repo)
    done = ok(cli(repo, "--json", "delegate", "write hello.txt: hello", "--adapter", "scripted", "--check", "true"))
    view = done.json()
    assert view["status"] == "succeeded" and view["tasks"][0]["adapter"] == "scripted"
    (patch,) = view["summary"]["patches"]
    assert patch["verified"] and patch["files"] == 1
    assert git(repo, "show", f"{patch['head']}:hello.txt") == "hello\n"
    merged = ok(cli(repo, "--json", "merge", patch["id"])).json()
    assert (merged["old"], merged["new"]) == (base, patch["head"])
    assert (repo / "hello.txt").read_text() == "hello\n" and git(repo, "status", "--porcelain") == ""
