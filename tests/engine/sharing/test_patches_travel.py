"""Sharing carries the code: `push` sends each patch's head with the state, `pull` fetches it.

Clone A runs a job whose implement task leaves a patch and pushes; clone B
pulls, approves the job (it runs its checks here), verifies and merges the
patch with no git by hand.
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

import pytest

from gitswarm.engine.sharing.share import patch_heads, remote_key
from gitswarm.engine.swarm import Swarm
from tests.conftest import cli, clone_of, git, ok, seeded_remote, spec_text
from tests.forge import hash_object, run_git

FIX = 'id = "fix"\nmode = "implement"\ncommand = "echo good > code.txt"\nchecks = ["grep -qx good code.txt"]\nmax_attempts = 1'


def test_a_patch_pushed_by_one_clone_is_verified_and_merged_by_another_with_no_git_by_hand(tmp_path: Path) -> None:
    remote = seeded_remote(tmp_path)
    a, b = clone_of(tmp_path, "a", remote), clone_of(tmp_path, "b", remote)
    (a / "fix.toml").write_text(spec_text(FIX))
    ran = ok(cli(a, "--json", "run", "fix.toml")).json()
    patch = next(x["id"] for x in ran["artifacts"] if x["kind"] == "patch")
    head = git(a, "rev-parse", f"refs/heads/swarm/{ran['id']}/fix").strip()
    pushed = ok(cli(a, "--json", "push")).json()["pushed"]
    assert f"refs/swarm/patches/{patch}" in pushed
    assert git(remote, "rev-parse", f"refs/swarm/patches/{patch}").strip() == head

    ok(cli(b, "pull"))
    assert git(b, "cat-file", "-t", head).strip() == "commit"  # the code came with the state
    ok(cli(b, "approve", ran["id"]))
    merged = ok(cli(b, "--json", "merge", patch[:12])).json()  # verified here first: nothing counted yet
    assert merged["into"] == "main"
    assert (b / "code.txt").read_text() == "good\n"

    again = ok(cli(a, "--json", "push")).json()  # an unchanged patch ref costs the next push nothing
    assert f"refs/swarm/patches/{patch}" not in again["pushed"]
    ok(cli(a, "pull"))  # the remote holds it now, as a fetch saw: no longer named at all
    with closing(Swarm(a)) as swarm:
        assert patch_heads(swarm, remote_key(swarm, "origin")) == []


def test_merge_approve_says_what_it_approves_then_verifies_and_merges_and_uncounted_reviews_say_what_would_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "300")
    remote = seeded_remote(tmp_path)
    a, b = clone_of(tmp_path, "a", remote), clone_of(tmp_path, "b", remote)
    (a / "fix.toml").write_text(spec_text(FIX))
    ran = ok(cli(a, "--json", "run", "fix.toml")).json()
    patch = next(x["id"] for x in ran["artifacts"] if x["kind"] == "patch")
    ok(cli(a, "review", patch[:12], "--accept"))
    ok(cli(a, "push"))
    ok(cli(b, "pull"))

    status = ok(cli(b, "status", ran["id"])).out
    assert "NOT COUNTED (unsigned)" in status
    assert "unsigned verdicts count here once signed" in status and "gpg.ssh.allowedSignersFile" in status
    refused = cli(b, "merge", patch[:12])
    assert refused.code == 2 and refused.err.count("\n") == 1
    assert "gitswarm approve" in refused.err and "merge --approve" in refused.err and "once signed" in refused.err

    merged = cli(b, "--json", "merge", "--approve", patch[:12])
    assert merged.code == 0, merged.err
    assert merged.err.startswith(f"gitswarm: approving job {ran['id'][:12]} (pulled from origin: 'test goal'); its checks run here: grep -qx good code.txt")
    assert merged.json()["into"] == "main" and (b / "code.txt").read_text() == "good\n"


def test_a_forged_patch_ref_never_changes_what_merges(tmp_path: Path) -> None:
    """Someone with push access points `refs/swarm/patches/<id>` at a commit of their own (plumbing only):
    the ref only carries objects; what verify and merge take is the head the patch record names."""
    remote = seeded_remote(tmp_path)
    a, b, evil = (clone_of(tmp_path, name, remote) for name in ("a", "b", "evil"))
    (a / "fix.toml").write_text(spec_text(FIX))
    ran = ok(cli(a, "--json", "run", "fix.toml")).json()
    patch = next(x["id"] for x in ran["artifacts"] if x["kind"] == "patch")
    ok(cli(a, "push"))
    forged = run_git(evil, "commit-tree", run_git(evil, "mktree", input=f"100644 blob {hash_object(evil, b'evil')}\tcode.txt\n".encode()),
                     "-p", "HEAD", "-m", "forged")
    run_git(evil, "push", "-q", "--force", "origin", f"{forged}:refs/swarm/patches/{patch}")
    ok(cli(b, "pull"))
    before = run_git(b, "rev-parse", "HEAD")
    refused = cli(b, "merge", "--approve", patch[:12])  # the real head never reached b: refused, in one line
    assert refused.code == 2 and "is not in this repository" in refused.err.splitlines()[-1]
    assert run_git(b, "rev-parse", "HEAD") == before and not (b / "code.txt").exists()
    run_git(a, "push", "-q", "origin", f"refs/heads/swarm/{ran['id']}/fix")  # the real head, under another name
    ok(cli(b, "pull"))
    run_git(b, "fetch", "-q", "origin", f"refs/heads/swarm/{ran['id']}/fix")
    ok(cli(b, "merge", patch[:12]))
    assert (b / "code.txt").read_text() == "good\n"  # the patch record's head, never the forged commit
