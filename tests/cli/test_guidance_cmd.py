"""`follow-up` and `steer` through the CLI: JSON out, and bad input as one line, exit 2, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import cli, register_scripted, spec_text, swarm_refs


@pytest.fixture
def job(repo: Path) -> str:
    register_scripted(repo)
    (repo / "job.toml").write_text(
        spec_text('id = "fix"\nmode = "implement"\nadapter = "scripted"\nprompt = "write a.txt: a"', 'id = "lint"\ncommand = "true"')
    )
    result = cli(repo, "--json", "submit", "job.toml")
    assert result.code == 0, result.err
    return result.json()["id"]


def test_steer_prints_what_it_recorded(repo: Path, job: str) -> None:
    result = cli(repo, "--json", "steer", f"{job[:8]}/fix", "prefer small functions")
    assert result.code == 0, result.err
    data = result.json()
    assert (data["job"], data["task"]) == (job, "fix") and len(data["op"]) == 26
    assert data["delivered_at"] == "the next attempt or repair round of fix"
    human = cli(repo, "steer", job, "mind the tests")
    assert human.code == 0 and "delivered at the next task of the job to start" in human.out
    [event] = [e for e in cli(repo, "--json", "log", job).json()["events"] if e["record"]["op"] == "steered" and e["task"] == "fix"]
    assert event["record"]["text"] == "prefer small functions"


@pytest.mark.parametrize(
    "args, why",
    [
        (["steer", "{job}/nope", "x"], "no task"),
        (["steer", "{job}/lint", "x"], "shell command"),
        (["steer", "{job}/fix", ""], "empty"),
        (["steer", "{job}/fix", "x" * 40_000], "at most"),
        (["follow-up", "{job}/fix", "more"], "queued, not finished"),
        (["follow-up", "{job}/lint", "more"], "analyze task"),
        (["follow-up", "0" * 12, "more"], "no"),
        (["follow-up", "{job}/fix", "more", "--lease", "0"], "--lease"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(repo: Path, job: str, args: list[str], why: str) -> None:
    before = swarm_refs(repo)
    result = cli(repo, *(a.format(job=job) for a in args))
    assert result.code == 2, result.err
    assert why in result.err and len(result.err.strip().splitlines()) == 1
    assert swarm_refs(repo) == before
