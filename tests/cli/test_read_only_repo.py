"""A repository that cannot be written (a mounted checkout, a CI cache): reads work and write nothing;
writes refuse in one line on stderr, exit 2, before anything is written; MCP tools say the same.

The repository is made read-only for real, root included (tests/readonly.py): a
read-only bind mount in a private mount namespace, or chmod -R a-w with the
permissions enforced. One test needs neither: the index's first write failing
with EROFS at its seam, in-process.
"""

from __future__ import annotations

import errno
import gc
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Result, cli, clone_of, git, ok, seeded_remote, spec_text, swarm_refs
from tests.pilot.rawclient import RawClient
from tests.readonly import GITSWARM, ReadOnly, files, read_only

REFUSED = "gitswarm: the repository is read-only: cannot write to "


@pytest.fixture
def jobs(repo: Path) -> dict[str, str]:
    """In `repo`: a job that ran (a check artifact, a summary) and a queued one; its index on disk."""
    (repo / "job.toml").write_text(spec_text('id = "a"\ncommand = "echo out"', goal="ran"))
    ok(cli(repo, "run", "job.toml", "-j", "1"))
    ran = ok(cli(repo, "--json", "status")).json()["jobs"][0]["id"]  # type: ignore[index]
    (repo / "queued.toml").write_text(spec_text('id = "b"\ncommand = "true"', goal="queued"))
    queued = ok(cli(repo, "submit", "queued.toml")).out.strip()
    artifact = ok(cli(repo, "--json", "artifacts", ran)).json()["artifacts"][0]["id"]  # type: ignore[index]
    git(repo, "add", "job.toml", "queued.toml")
    git(repo, "commit", "-qm", "specs")
    gc.collect()  # the in-process commands' index connections closed now (the last one removes -wal, -shm), not mid-test
    return {"ran": ran, "queued": queued, "artifact": artifact}


@pytest.fixture
def frozen(repo: Path, jobs: dict[str, str]) -> Iterator[ReadOnly]:
    with read_only(repo) as found:
        yield found


READS = [
    ["status"], ["--json", "status"], ["status", "{ran}"], ["show", "{ran}"], ["--json", "show", "{queued}"],
    ["log", "{ran}"], ["artifacts", "{ran}"], ["artifact", "{artifact}"], ["output", "{ran}/a"], ["cost"],
    ["worktrees", "list"], ["memory", "list"], ["adapters", "list"], ["--json", "doctor"],
]


@pytest.mark.parametrize("args", READS, ids=lambda a: " ".join(a))
def test_a_read_works_and_writes_nothing(repo: Path, jobs: dict[str, str], args: list[str]) -> None:
    args = [a.format(**jobs) for a in args]
    writable = ok(Result(*_child(repo, *args)))  # the same command, before the repository is made read-only
    with read_only(repo) as frozen:
        before = files(repo)
        result = frozen.gitswarm(*args)
        assert files(repo) == before
    assert result.code == 0, result.err
    assert result.err == ""
    if args[-1] != "doctor":
        assert result.out == writable.out  # the index read from the refs into memory answers as the one on disk
    else:
        (index,) = [c for c in json.loads(result.out)["checks"] if c["name"] == "index"]
        assert index["ok"] and index["detail"].startswith(f"read-only repository, cannot write to {repo}/.git/gitswarm (")


def _child(repo: Path, *args: str) -> tuple[int, str, str]:
    done = subprocess.run([*GITSWARM, *args], cwd=repo, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout, done.stderr


WRITES = [
    ["init"], ["submit", "job.toml"], ["run", "job.toml"], ["--json", "run", "job.toml", "-j", "2"], ["work"],
    ["cancel", "{queued}"], ["retry", "{ran}/a"], ["steer", "{queued}", "look"], ["review", "HEAD", "--accept"],
    ["audit", "--check", "true"], ["approve", "{queued}"], ["recover"], ["index", "rebuild"], ["hooks", "install"],
    ["remember", "{artifact}"], ["worktrees", "gc"], ["pull"],
]


@pytest.mark.parametrize("args", WRITES, ids=lambda a: " ".join(a))
def test_a_write_refuses_in_one_line(repo: Path, jobs: dict[str, str], frozen: ReadOnly, args: list[str]) -> None:
    before, refs = files(repo), swarm_refs(repo)
    result = frozen.gitswarm(*(a.format(**jobs) for a in args))
    assert result.code == 2, result.out + result.err
    assert result.out == ""
    assert result.err.startswith(f"{REFUSED}{repo}/.git/gitswarm (") and result.err.count("\n") == 1, result.err
    assert "nothing was written" in result.err
    assert files(repo) == before and swarm_refs(repo) == refs


def test_mcp_install_for_the_project_refuses_and_keeps_no_record(repo: Path, frozen: ReadOnly, isolated_env: Path) -> None:
    result = frozen.gitswarm("mcp", "install", "--client", "claude-code", "--scope", "project")
    assert result.code == 2 and result.out == ""
    assert result.err.startswith(f"{REFUSED}{repo} (") and result.err.count("\n") == 1, result.err
    assert not (repo / ".mcp.json").exists()
    # the bytes kept for an uninstall would be taken for those of a later install's file
    assert not list((isolated_env / ".local" / "state" / "gitswarm" / "mcp-installs").glob("*"))


def test_a_checkout_without_write_permission(repo: Path, jobs: dict[str, str]) -> None:
    """chmod -R a-w: the index cannot be written for want of permission (EACCES) rather than of a writable
    filesystem; the same answers."""
    writable = _child(repo, "--json", "status", jobs["ran"])
    with read_only(repo, "chmod") as frozen:
        before, refs = files(repo), swarm_refs(repo)
        assert frozen.gitswarm("--json", "status", jobs["ran"]) == Result(*writable)
        assert "index: read-only repository, cannot write to" in ok(frozen.gitswarm("doctor")).out
        refused = frozen.gitswarm("cancel", jobs["queued"])
        assert (refused.code, refused.out) == (2, "")
        assert refused.err == f"{REFUSED}{repo}/.git/gitswarm (Permission denied); nothing was written\n"
        assert files(repo) == before and swarm_refs(repo) == refs


def test_a_clone_that_never_ran_gitswarm(tmp_path: Path) -> None:
    clone = clone_of(tmp_path, "clone", seeded_remote(tmp_path))
    (clone / "job.toml").write_text(spec_text('id = "a"\ncommand = "true"'))
    with read_only(clone) as frozen:
        assert ok(frozen.gitswarm("--json", "status")).json() == {"jobs": [], "awaiting_approval": {}}
        doctor = ok(frozen.gitswarm("doctor"))
        assert "index: read-only repository, cannot write to" in doctor.out
        refused = frozen.gitswarm("submit", "job.toml")
        assert refused.code == 2 and refused.err.startswith(f"{REFUSED}{clone}/.git/gitswarm (")
    assert not (clone / ".git" / "gitswarm").exists()


def test_the_pre_push_hook_checks_a_push_from_a_read_only_clone(tmp_path: Path) -> None:
    remote = seeded_remote(tmp_path)
    clone = clone_of(tmp_path, "clone", remote)
    ok(cli(clone, "hooks", "install"))
    (clone / ".gitswarm.toml").write_text('[hooks]\nverified_branches = ["release"]\n')
    git(clone, "add", ".gitswarm.toml")
    git(clone, "commit", "-qm", "gate release")
    with read_only(clone) as frozen:
        free = frozen.run("git", "push", "-q", "origin", "HEAD:refs/heads/topic")
        gated = frozen.run("git", "push", "-q", "origin", "HEAD:refs/heads/release")
    assert git(remote, "rev-parse", "topic").strip() == git(clone, "rev-parse", "HEAD").strip(), free.err
    assert gated.code != 0 and "gitswarm: refusing to push release: its head" in gated.err, gated.err
    assert REFUSED not in gated.err + free.err


MCP_READS = {"status": {}, "show": {"job": "{ran}"}, "log": {"job": "{ran}"}, "artifacts": {"job": "{ran}"},
             "artifact": {"artifact_id": "{artifact}"}, "wait": {"target": "{ran}", "timeout": 1}}
MCP_WRITES = {"submit_job": {"spec": spec_text('id = "c"\ncommand = "true"')}, "cancel": {"target": "{queued}"},
              "steer": {"target": "{queued}", "text": "look"}, "review": {"target": "HEAD", "accept": True},
              "delegate": {"instruction": "fix the README", "checks": ["true"]}, "retry": {"task": "{ran}/a"}}


def test_mcp_tools(repo: Path, jobs: dict[str, str], frozen: ReadOnly) -> None:
    """Reads answer; writes are a tool error saying the repository is read-only, never "internal error"."""
    def filled(arguments: dict) -> dict:
        return {k: v.format(**jobs) if isinstance(v, str) and k != "spec" else v for k, v in arguments.items()}

    before = files(repo)
    client = RawClient(repo, argv=frozen.argv(*GITSWARM, "mcp"), lifetime=60)
    try:
        for tool, arguments in MCP_READS.items():
            answer = client.call(tool, filled(arguments))
            assert not answer.get("isError"), (tool, answer)
        for tool, arguments in MCP_WRITES.items():
            answer = client.call(tool, filled(arguments))
            text = answer["content"][0]["text"]
            assert answer.get("isError") and text.startswith(f"the repository is read-only: cannot write to {repo}/.git/gitswarm ("), (tool, text)
    finally:
        code = client.close()
    assert code == 0
    assert files(repo) == before


def test_the_index_failing_with_erofs_at_its_seam(repo: Path, jobs: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """No mount, no permissions: the index's lock file (the first write of every command) refused with
    EROFS, in-process. Reads answer from the refs; writes refuse before anything is written."""
    real_open = os.open

    def refusing(path: str | os.PathLike[str], flags: int, *args: object, **kwargs: object) -> int:
        if os.fspath(path).endswith(os.path.join("gitswarm", "index.lock")):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(path))
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    writable = ok(cli(repo, "--json", "status", jobs["ran"])).out
    refs = swarm_refs(repo)
    monkeypatch.setattr(os, "open", refusing)
    assert ok(cli(repo, "--json", "status", jobs["ran"])).out == writable
    assert ok(cli(repo, "log", jobs["ran"])).out
    result: Result = cli(repo, "cancel", jobs["queued"])
    assert result.code == 2 and result.out == ""
    assert result.err == f"{REFUSED}{repo}/.git/gitswarm (Read-only file system); nothing was written\n"
    assert swarm_refs(repo) == refs
