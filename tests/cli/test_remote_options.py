"""`--remote` and `--clock-skew` through the real CLI: bad input is one line, exit 2, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import cli, git, spec_text, swarm_refs

SPEC = spec_text('id = "a"\ncommand = "true"')


@pytest.mark.parametrize(
    "args",
    [
        ("submit", "job.toml", "--remote", "nosuch"),
        ("run", "job.toml", "--remote", "nosuch"),
        ("work", "--remote", "nosuch"),
        ("status", "--remote", "nosuch"),
        ("work", "--remote", "-x"),
        ("work", "--remote", "origin", "--clock-skew", "-1"),
        ("work", "--remote", "origin", "--clock-skew", "nan"),
        ("run", "job.toml", "--remote", "origin", "--clock-skew", "4000"),
    ],
)
def test_bad_remote_options_write_nothing(repo: Path, tmp_path: Path, args: tuple[str, ...]) -> None:
    git(tmp_path, "init", "-q", "--bare", str(tmp_path / "remote.git"))
    git(repo, "remote", "add", "origin", str(tmp_path / "remote.git"))
    (repo / "job.toml").write_text(SPEC)
    before = swarm_refs(repo)
    result = cli(repo, *args)
    assert result.code == 2, result.err
    assert len(result.err.strip().splitlines()) == 1 and "Traceback" not in result.err
    assert swarm_refs(repo) == before
    assert git(tmp_path / "remote.git", "for-each-ref") == ""


def test_submit_remote_pushes_the_job_and_status_remote_fetches_it(repo: Path, tmp_path: Path) -> None:
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(repo, "remote", "add", "origin", str(bare))
    git(repo, "push", "-q", "origin", "HEAD:refs/heads/main")
    (repo / "job.toml").write_text(SPEC)
    job = cli(repo, "--json", "submit", "--remote", "origin", "job.toml").json()["id"]
    assert git(bare, "rev-parse", f"refs/swarm/jobs/{job}").strip() == git(repo, "rev-parse", f"refs/swarm/jobs/{job}").strip()
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(bare), str(other))
    seen = cli(other, "--json", "status", "--remote", "origin", job)
    assert seen.code == 0, seen.err
    assert seen.json()["id"] == job and [t["id"] for t in seen.json()["tasks"]] == ["a"]
