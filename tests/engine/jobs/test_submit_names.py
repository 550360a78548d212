"""A spec file whose name is not UTF-8 is submitted like any other: its name is recorded as text (git's
quoted form), and this clone's record of the jobs it made names only jobs that exist."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import cli, git, spec_text


def test_a_spec_file_with_a_name_that_is_not_utf8_is_submitted(repo: Path, tmp_path: Path) -> None:
    name = os.fsdecode(b"sp\xffec.toml")
    (tmp_path / name).write_text(spec_text('id = "a"\ncommand = "true"'))
    result = cli(repo, "--json", "submit", str(tmp_path / name))
    assert result.code == 0, result.err
    job = result.json()["id"]
    record = cli(repo, "--json", "log", job).json()["events"][0]["record"]
    assert record["job"]["source"] == '"sp\\377ec.toml"'
    made = (repo / ".git" / "gitswarm" / "local-jobs").read_text().split()
    assert made == [job] and git(repo, "for-each-ref", "--format=%(refname)", "refs/swarm/jobs").strip() == f"refs/swarm/jobs/{job}"
