from pathlib import Path

from tests.conftest import cli, spec_text, swarm_refs


def write_spec(repo: Path, text: str, name: str = "job.toml") -> Path:
    path = repo / name
    path.write_text(text)
    return path


def test_submit_then_status_json(repo: Path) -> None:
    write_spec(repo, spec_text('id = "lint"\ncommand = "true"', 'id = "test"\ncommand = "true"\ndepends_on = ["lint"]'))
    submitted = cli(repo, "--json", "submit", "job.toml")
    assert submitted.code == 0, submitted.err
    job_id = submitted.json()["id"]
    listing = cli(repo, "--json", "status").json()
    assert [j["id"] for j in listing["jobs"]] == [job_id]
    one = cli(repo, "--json", "status", job_id[:8]).json()
    assert [(t["id"], t["state"]) for t in one["tasks"]] == [("lint", "queued"), ("test", "blocked")]
    assert f"refs/swarm/jobs/{job_id}" in swarm_refs(repo)


def test_unknown_dependency_names_the_field(repo: Path) -> None:
    write_spec(
        repo,
        spec_text('id = "a"\ncommand = "true"', 'id = "b"\ncommand = "true"', 'id = "c"\ncommand = "x"\ndepends_on = ["lnt"]'),
    )
    result = cli(repo, "submit", "job.toml")
    assert result.code == 2
    assert result.err == 'gitswarm: tasks[2].depends_on: unknown task "lnt"\n'
    assert swarm_refs(repo) == ""
