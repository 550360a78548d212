"""After `delegate`, `audit` and `verify`: what happened in words, and the command to run next."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import cli, commit_file, register_scripted

FIX = "edit README.md: replace hello with world"
PASSES = "grep -qx world README.md"
FAILS = "echo checking README.md; for n in 1 2 3 4 5 6 7 8 9 10 11 12; do echo line $n; done; echo 'no world in README.md' >&2; exit 3"


@pytest.fixture
def project(repo: Path) -> Path:
    return register_scripted(repo)


def next_lines(err: str) -> list[str]:
    """The lines after `next:` on stderr (progress there is JSON lines, one per event)."""
    lines = err.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("next: "))
    return [line.strip() for line in lines[start:] if not line.startswith("{")]


def test_a_verified_delegation_says_how_to_merge_it(project: Path) -> None:
    done = cli(project, "delegate", FIX, "--adapter", "scripted", "--check", PASSES)
    assert done.code == 0, done.err
    patch = cli(project, "--json", "show", done.out.split("`")[1]).json()["summary"]["patches"][-1]["id"]
    assert next_lines(done.err) == [f"next: gitswarm merge {patch[:12]}    (the patch passed its checks)"]
    assert cli(project, "merge", patch[:12]).code == 0


def test_a_rejected_delegation_says_how_to_look_and_how_to_discard(project: Path) -> None:
    done = cli(project, "delegate", "append notes.txt: one more line", "--adapter", "scripted", "--check", "false")
    assert done.code == 1
    job = done.out.split("`")[1][:12]
    patch = cli(project, "--json", "show", job).json()["summary"]["patches"][-1]["id"][:12]
    assert next_lines(done.err) == [
        f"next: gitswarm show {job}    (what happened)",
        f"gitswarm output {job}/delegate    (what its last run or check printed)",
        f"gitswarm diff {patch}    (the change it made, not verified)",
        f"gitswarm worktrees discard {job}/delegate    (throw the attempt away)",
    ]
    assert cli(project, "output", f"{job}/delegate").code == 0
    assert cli(project, "--json", "delegate", FIX, "--adapter", "scripted", "--check", PASSES).err.count("next:") == 0


def test_a_rejected_audit_names_the_check_and_shows_its_last_lines(repo: Path) -> None:
    head = commit_file(repo, "x.txt", "x\n", "something")
    audit = cli(repo, "audit", "--check", "true", "--check", FAILS)
    assert audit.code == 1
    lines = audit.out.splitlines()
    assert lines[0] == f"{head[:12]}: REJECTED (incomplete/clean/needs_revision, checks)"
    assert lines[1] == f"{FAILS} failed (exit 3); its last lines:"
    assert lines[2:] == [f"    line {n}" for n in range(3, 13)] + ["    no world in README.md"]  # 10 of stdout, then stderr
    checks = cli(repo, "--json", "audit", "--check", "true", "--check", "exit 4").json()["checks"]
    assert checks == [
        {"command": "true", "exit_code": 0, "passed": True, "timed_out": False, "tail": []},
        {"command": "exit 4", "exit_code": 4, "passed": False, "timed_out": False, "tail": []},
    ]
    assert cli(repo, "audit", "--check", "exit 4").out.splitlines()[1] == "exit 4 failed (exit 4), printing nothing"


def test_a_rejected_verify_names_the_check_and_shows_its_last_lines(project: Path, tmp_path: Path) -> None:
    flag = tmp_path / "flag"
    flag.write_text("")
    check = f"test -f {flag} || {{ echo 'the flag is gone'; exit 5; }}"
    done = cli(project, "--json", "delegate", FIX, "--adapter", "scripted", "--check", check)
    assert done.code == 0, done.err
    patch = done.json()["summary"]["patches"][-1]["id"]
    accepted = cli(project, "--json", "verify", patch)
    assert accepted.code == 0 and accepted.json()["checks"] == [
        {"command": check, "exit_code": 0, "passed": True, "timed_out": False, "tail": []}
    ]
    flag.unlink()
    rejected = cli(project, "verify", patch[:12])
    assert rejected.code == 1
    # The base's result is cached from the first verification: it passed there, so this is a regression.
    assert rejected.out.splitlines()[1:] == [
        f"  pass->fail: {check}", "  proof: regression", f"{check} failed (exit 5); its last lines:", "    the flag is gone"
    ]
    assert cli(project, "--json", "verify", patch).json()["checks"][0]["tail"] == ["the flag is gone"]
