"""Steering end to end: a steer reaches the next attempt (or repair round) of its task exactly once,
a job-wide one the next task to start, and `log` records each delivery."""

from __future__ import annotations

import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from gitswarm.engine.jobs.steering import steer
from gitswarm.engine.swarm import Swarm
from gitswarm.model.errors import BadInput
from tests.conftest import cli, spec_text, swarm_refs
from tests.gated import prompts, register_gated
from tests.proctools import wait_for

GITSWARM = str(Path(sys.executable).with_name("gitswarm"))
STEER = "# Guidance from the user"


def implement(task: str, prompt: str, **extra: str) -> str:
    body = f'id = "{task}"\nmode = "implement"\nadapter = "gated"\nprompt = "{prompt}"\n'
    return body + "".join(f"{key} = {value}\n" for key, value in extra.items())


def submit(repo: Path, *tasks: str) -> str:
    (repo / "job.toml").write_text(spec_text(*tasks))
    result = cli(repo, "--json", "submit", "job.toml")
    assert result.code == 0, result.err
    return result.json()["id"]


def deliveries(repo: Path, job: str) -> list[dict]:
    return [e["record"] for e in cli(repo, "--json", "log", job).json()["events"] if e["op"] == "steering_delivered"]


def test_a_steer_reaches_the_next_attempt_exactly_once(repo: Path, tmp_path: Path) -> None:
    control = register_gated(repo, tmp_path / "gated")
    job = submit(repo, implement("fix", "write a.txt: a"))
    # the steer makes the first attempt fail (an error exit): a second attempt must not get it again
    result = cli(repo, "--json", "steer", f"{job}/fix", "append steered.txt: yes\nmisbehave: fail-after")
    assert result.code == 0, result.err
    op = result.json()["op"]
    assert cli(repo, "--json", "work", "--job", job).code == 0
    first, second = prompts(control)
    assert STEER in first and "append steered.txt: yes" in first
    assert STEER not in second
    [delivery] = deliveries(repo, job)
    assert (delivery["task"], delivery["attempt"], delivery["round"], delivery["steers"]) == ("fix", 1, 0, [op])
    status = cli(repo, "--json", "status", job).json()["tasks"][0]
    assert (status["state"], status["attempts"]) == ("succeeded", 2)


def test_a_job_wide_steer_reaches_the_next_task_to_start_only(repo: Path, tmp_path: Path) -> None:
    control = register_gated(repo, tmp_path / "gated")
    job = submit(repo, implement("first", "write a.txt: a", checks='["true"]'), implement("then", "write b.txt: b", depends_on='["first"]'))
    result = cli(repo, "--json", "steer", job, "write c.txt: c")
    assert result.code == 0, result.err
    assert result.json()["task"] is None and result.json()["delivered_at"] == "the next task of the job to start"
    assert cli(repo, "--json", "work", "--job", job).code == 0
    first, then = prompts(control)
    assert "write c.txt: c" in first and STEER not in then
    assert [(d["task"], d["attempt"]) for d in deliveries(repo, job)] == [("first", 1)]


def test_a_steer_given_while_a_task_runs_reaches_its_next_repair_round(repo: Path, tmp_path: Path) -> None:
    control = register_gated(repo, tmp_path / "gated")
    job = submit(repo, implement("fix", "write a.txt: a", checks='["test -f fixed.txt"]', repair_rounds="2"))
    (control / "hold").write_text("")
    proc = subprocess.Popen([GITSWARM, "--json", "work", "--job", job], cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: (control / "starts").exists(), 20, "the agent to start")
        assert cli(repo, "--json", "steer", f"{job}/fix", "write fixed.txt: yes").code == 0
        (control / "hold").unlink()
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    round0, round1 = prompts(control)
    assert STEER not in round0 and STEER in round1 and "write fixed.txt: yes" in round1
    [delivery] = deliveries(repo, job)
    assert (delivery["attempt"], delivery["round"]) == (1, 1)
    assert cli(repo, "--json", "status", job).json()["tasks"][0]["state"] == "succeeded"


@pytest.mark.parametrize(
    "target, text, why",
    [
        ("nojob", "x", "no"),
        ("{job}/nope", "x", "no task"),
        ("{job}/fix", " ", "empty"),
        ("{job}/fix", "a\0b", "NUL"),
        ("{job}/fix", "x" * 40_000, "at most"),
        ("{job}/lint", "x", "shell command"),
    ],
)
def test_bad_steers_write_nothing(repo: Path, tmp_path: Path, target: str, text: str, why: str) -> None:
    register_gated(repo, tmp_path / "gated")
    job = submit(repo, implement("fix", "write a.txt: a"), 'id = "lint"\ncommand = "true"')
    before = swarm_refs(repo)
    with closing(Swarm(repo)) as swarm, pytest.raises(BadInput, match=why):
        steer(swarm, target.format(job=job), text)
    assert swarm_refs(repo) == before


def test_a_job_of_shell_tasks_has_nothing_to_steer(repo: Path) -> None:
    job = submit(repo, 'id = "lint"\ncommand = "true"')
    result = cli(repo, "steer", job, "be careful")
    assert result.code == 2 and "no agent task" in result.err
