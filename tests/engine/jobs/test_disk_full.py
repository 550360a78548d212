"""A full disk ends `work` with one line that says so and where, exit 1, nothing half-written,
and the running tasks' leases released at once (not left to expire).

On a small tmpfs where this machine lets the test mount one; everywhere, with ENOSPC injected at
the store's write seam (PygitRepo.write_blob), the way the kernel reports it.
"""

from __future__ import annotations

import errno
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitswarm.engine.swarm import Swarm
from gitswarm.model.errors import DiskFull
from gitswarm.store import diskspace
from gitswarm.store.git import PygitRepo
from gitswarm.store.gitrepo import GitCommandError
from tests.conftest import cli, clone_of, git, ok, seeded_remote

BIG = 3_000_000  # bytes of output the big task prints: more than the small disk has room for
SPEC = f"""goal = "outputs"
[[tasks]]
id = "big"
command = "head -c {BIG} /dev/urandom"
max_attempts = 3
[[tasks]]
id = "slow"
command = "sleep 20"
"""


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q")
    (path / "README.md").write_text("hello\n")
    git(path, "add", "README.md")
    git(path, "commit", "-qm", "initial")
    (path / "job.toml").write_text(SPEC)
    (path / ".git" / "info" / "exclude").write_text("job.toml\n")
    return path


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs, mounted for this test (root with CAP_SYS_ADMIN only)."""
    mount = tmp_path / f"small-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.strip() or 'mount failed'}); the injected case covers it")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def assert_stopped_by_a_full_disk(repo: Path, where: Path) -> None:
    result = cli(repo, "run", "job.toml", "-j", "2")
    assert result.code == 1, (result.out, result.err)
    said = [line for line in result.err.splitlines() if line.startswith("gitswarm:")]
    assert len(said) == 1 and "disk full" in said[0] and str(where) in said[0], result.err
    assert "Traceback" not in result.err and "GitError" not in result.err
    view = cli(repo, "--json", "status").json()
    [job] = view if isinstance(view, list) else view["jobs"]
    tasks = cli(repo, "--json", "status", job["id"]).json()["tasks"]
    # Both leases were released when the run stopped: nothing is left running until its lease runs out.
    assert {t["id"]: t["state"] for t in tasks} == {"big": "queued", "slow": "queued"}
    doctor = cli(repo, "--json", "doctor")
    assert doctor.code == 0, doctor.out + doctor.err  # every record still reads: nothing half-written


def test_a_full_tmpfs_stops_the_run_with_one_line_and_releases_the_leases(small_disk: Path) -> None:
    repo = make_repo(small_disk / "repo")
    assert_stopped_by_a_full_disk(repo, repo / ".git")


def test_enospc_at_the_write_seam_stops_the_run_with_one_line_and_releases_the_leases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo")
    real = PygitRepo._write_blob

    def no_room_for_big_blobs(self: PygitRepo, data: bytes) -> str:
        if len(data) >= BIG:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, data)

    monkeypatch.setattr(PygitRepo, "_write_blob", no_room_for_big_blobs)  # the forked workers inherit it
    assert_stopped_by_a_full_disk(repo, repo / ".git")


def test_a_failed_write_is_a_full_disk_only_when_the_disk_says_so(tmp_path: Path) -> None:
    enospc = OSError(errno.ENOSPC, "No space left on device")
    assert diskspace.full(tmp_path, enospc) is not None
    assert "disk full" in str(diskspace.full(tmp_path, RuntimeError("no error"), need=1 << 62))  # more than any disk has
    assert diskspace.full(tmp_path, RuntimeError("no error"), need=10) is None  # room enough: some other failure
    assert diskspace.full(tmp_path, OSError(errno.EACCES, "Permission denied")) is None
    assert "\n" not in str(diskspace.full(tmp_path, enospc))  # one line


def test_little_room_makes_no_other_failure_a_full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(diskspace, "free_bytes", lambda path: 100 * 1024)  # less than the margin
    assert diskspace.full(tmp_path, GitCommandError("git merge-base failed: exit 1")) is None  # a plain "no"
    assert diskspace.full(tmp_path, RuntimeError("failed to lock file 'refs/x.lock' for writing")) is None
    assert diskspace.full(tmp_path, RuntimeError("no error"), need=10) is not None  # libgit2 lost the errno: the room says


def test_a_full_disk_during_a_pull_is_said_and_no_job_is_called_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    remote = seeded_remote(tmp_path)
    a, b = clone_of(tmp_path, "a", remote), clone_of(tmp_path, "b", remote)
    (a / "spec.toml").write_text('goal = "shared"\n[[tasks]]\nid = "x"\ncommand = "true"\n')
    ok(cli(a, "submit", "spec.toml"))
    ok(cli(a, "push"))
    real = PygitRepo._cas_ref

    def no_room_for_job_refs(self: PygitRepo, name: str, new: str, expected: str | None, message: str) -> None:
        if name.startswith("refs/swarm/jobs/"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(self, name, new, expected, message)

    monkeypatch.setattr(PygitRepo, "_cas_ref", no_room_for_job_refs)
    pulled = cli(b, "--json", "pull")
    assert pulled.code == 1, (pulled.out, pulled.err)
    assert pulled.err.startswith("gitswarm: disk full") and pulled.err.count("\n") == 1 and pulled.out == ""
    monkeypatch.setattr(PygitRepo, "_cas_ref", real)
    again = ok(cli(b, "--json", "pull")).json()  # room again: the job comes in, never marked refused
    assert len(again["new"]) == 1 and again["invalid"] == {}


def test_an_index_with_no_room_is_a_full_disk_and_keeps_nothing_of_the_transaction(repo: Path) -> None:
    swarm = Swarm(repo)
    try:
        job = swarm.submit_text('goal = "g"\n[[tasks]]\nid = "a"\ncommand = "true"\n')
        before = swarm.index.tasks(job)
        pages = swarm.index.db.execute("PRAGMA page_count").fetchone()[0]
        swarm.index.db.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own SQLITE_FULL, the way a full disk gives it
        spec = 'goal = "big"\n' + "".join(f'[[tasks]]\nid = "t{i}"\ncommand = "true"\n' for i in range(400))
        with pytest.raises(DiskFull, match="disk full"):
            swarm.submit_text(spec)
        assert swarm.index.tasks(job) == before and not swarm.index.db.in_transaction
    finally:
        swarm.close()
