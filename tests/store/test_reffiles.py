"""Refs read from their files (store/reffiles.py), and the reads that answer from a fresh index
without opening the repository through pygit2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gitswarm.engine.swarm import Swarm
from gitswarm.store import layout, reffiles
from gitswarm.store.git import open_repo
from tests.conftest import cli, git, spec_text


def submit(repo: Path, goal: str = "g") -> str:
    (repo / "job.toml").write_text(spec_text('id = "a"\ncommand = "true"', goal=goal))
    result = cli(repo, "--json", "submit", "job.toml")
    assert result.code == 0, result.err
    return result.json()["id"]


def test_the_common_dir_is_found_as_git_finds_it(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sub = repo / "src" / "deep"
    sub.mkdir(parents=True)
    assert reffiles.common_dir(sub) == (repo / ".git").resolve() == open_repo(sub).common_dir
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "--detach", str(linked))
    assert reffiles.common_dir(linked) == (repo / ".git").resolve() == open_repo(linked).common_dir
    outside = tmp_path / "outside"
    outside.mkdir()
    assert reffiles.common_dir(outside) is None
    bare = tmp_path / "bare.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    assert reffiles.common_dir(bare) is None  # pygit2 decides
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))
    assert reffiles.common_dir(repo) is None


def test_refs_loose_and_packed_read_as_pygit2_reads_them(repo: Path) -> None:
    jobs = [submit(repo, f"job {n}") for n in range(3)]
    common = (repo / ".git").resolve()

    def pygit2_refs() -> dict[str, str]:
        return open_repo(repo).list_refs(layout.JOBS_PREFIX)

    assert reffiles.read_refs(common, layout.JOBS_PREFIX) == pygit2_refs() and len(pygit2_refs()) == 3
    git(repo, "pack-refs", "--all")
    assert not any((common / "refs" / "swarm" / "jobs").glob("*"))
    assert reffiles.read_refs(common, layout.JOBS_PREFIX) == pygit2_refs()
    assert cli(repo, "cancel", jobs[0]).code == 0  # a loose ref again, newer than the packed one
    assert reffiles.read_refs(common, layout.JOBS_PREFIX) == pygit2_refs()
    for job in jobs:  # one ref read alone: loose (jobs[0]) or packed
        assert reffiles.read_ref(common, layout.job_ref(job)) == pygit2_refs()[layout.job_ref(job)]
    assert reffiles.read_ref(common, layout.job_ref(jobs[0])[:-1]) is None  # a prefix of a packed name is no ref
    assert reffiles.read_ref(common, layout.job_ref("0" * 26)) is None
    git(repo, "symbolic-ref", f"{layout.JOBS_PREFIX}alias", f"{layout.JOBS_PREFIX}{jobs[1]}")
    assert reffiles.read_refs(common, layout.JOBS_PREFIX) is None
    assert reffiles.read_ref(common, f"{layout.JOBS_PREFIX}alias") is None
    assert reffiles.read_ref(common, "refs/swarm") is None  # a folder


def test_a_read_of_a_fresh_index_does_not_open_the_repository(repo: Path) -> None:
    job = submit(repo)
    assert cli(repo, "status").code == 0  # the index is on disk and in step
    eager = Swarm(repo)
    lazy = Swarm(repo, create=False)
    try:
        assert lazy._repo is None
        assert lazy.status() == eager.status() and lazy.status(job) == eager.status(job)
        assert lazy.show(job) == eager.show(job)
        assert lazy._repo is None
        assert cli(repo, "cancel", job).code == 0  # gitswarm moves the ref and the index together
        cancelled = Swarm(repo, create=False)
        assert cancelled._repo is None and cancelled.status(job)["status"] == "cancelled"
        cancelled.close()
        # The ref moved behind the index's back (git itself, a fetch): not fresh, so the repository
        # is opened and the index refreshed.
        git(repo, "update-ref", f"{layout.JOBS_PREFIX}{job}", f"{layout.JOBS_PREFIX}{job}~1")
        after = Swarm(repo, create=False)
        assert after._repo is not None and after.status(job)["status"] == "queued"
        after.close()
    finally:
        eager.close()
        lazy.close()


def test_status_and_show_load_no_pygit2_when_the_index_is_fresh(repo: Path) -> None:
    job = submit(repo)
    assert cli(repo, "status").code == 0
    probe = (
        "import sys\nfrom gitswarm.cli.main import run\n"
        f"codes = [run(['status']), run(['--json', 'status', '{job}']), run(['show', '{job}'])]\n"
        "assert codes == [0, 0, 0], codes\nassert 'pygit2' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=repo, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
