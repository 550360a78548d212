"""`gitswarm doctor` on a clone whose remote is a repository on disk: whether that remote refuses forced
pushes (without it anyone with push access can rewind shared history) is said, never a failure."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import cli, clone_of, git, seeded_remote


def test_doctor_says_whether_a_remote_on_disk_refuses_forced_pushes(tmp_path: Path) -> None:
    remote = seeded_remote(tmp_path)
    clone = clone_of(tmp_path, "clone", remote)
    first = cli(clone, "--json", "doctor")
    assert first.code == 0, first.err
    (check,) = [c for c in first.json()["checks"] if c["name"] == "remote origin"]
    assert check["ok"] and "accepts forced pushes" in check["detail"] and "receive.denyNonFastForwards true" in check["detail"]
    git(remote, "config", "receive.denyNonFastForwards", "true")
    (check,) = [c for c in cli(clone, "--json", "doctor").json()["checks"] if c["name"] == "remote origin"]
    assert check["detail"].endswith("refuses forced pushes")
