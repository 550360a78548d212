"""Follow-ups end to end on real repositories: a new attempt from the last patch, verified again,
recorded before it runs so that kill -9 of the supervisor loses nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from gitswarm.engine.jobs.followup import follow_up
from gitswarm.engine.swarm import Swarm
from gitswarm.model.artifacts import Patch, Run
from gitswarm.model.errors import BadInput
from tests.conftest import cli, git, register_scripted, spec_text, swarm_note, swarm_refs
from tests.gated import prompts, register_gated, running
from tests.proctools import alive, read_pids, wait_for, wait_gone

GITSWARM = str(Path(sys.executable).with_name("gitswarm"))


def implement_job(repo: Path, adapter: str, prompt: str, check: str, **extra: str) -> str:
    body = f'id = "fix"\nmode = "implement"\nadapter = "{adapter}"\nprompt = "{prompt}"\nchecks = ["{check}"]\n'
    body += "".join(f"{key} = {value}\n" for key, value in extra.items())
    (repo / "job.toml").write_text(spec_text(body))
    result = cli(repo, "--json", "run", "job.toml", "-j", "1")
    assert result.code in (0, 1), result.err
    return result.json()["id"]


def patches(repo: Path, job: str) -> list[tuple[str, Patch]]:
    with closing(Swarm(repo)) as swarm:
        snapshot = swarm.refs.snapshot(job)
        return [(a, p) for a in snapshot.task("fix").artifacts if isinstance(p := snapshot.artifact(a), Patch)]


def log_ops(repo: Path, job: str) -> list[dict]:
    return [e["record"] for e in cli(repo, "--json", "log", job).json()["events"]]


def test_a_follow_ups_new_head_gets_its_own_verdict_and_the_old_one_stays(repo: Path) -> None:
    register_scripted(repo)
    assert (repo / "README.md").read_text() == "hello\n"
    job = implement_job(repo, "scripted", "edit README.md: replace hello with world", "grep -qx world2 README.md", repair_rounds="1")
    old_id, old = patches(repo, job)[-1]
    old_verdicts = swarm_note(repo, old.head)
    assert old_verdicts and not any(v["accepted"] for v in old_verdicts)

    result = cli(repo, "--json", "follow-up", f"{job}/fix", "edit README.md: replace world with world2")
    assert result.code == 0, result.err
    data = result.json()
    assert data["outcome"] == "succeeded" and data["follow_up"]["patch"] == old_id and data["follow_up"]["head"] == old.head
    new_id, new = patches(repo, job)[-1]
    assert new_id != old_id and new.head != old.head
    assert git(repo, "rev-parse", f"{new.head}^").strip() == old.head  # continued on the branch, not started over
    assert new.base == old.base  # the patch is the whole delegation, from the job's base
    assert git(repo, "show", f"{new.head}:README.md") == "world2\n"
    [new_verdict] = swarm_note(repo, new.head)
    assert new_verdict["accepted"] is True and new_verdict["patch"] == new_id
    assert swarm_note(repo, old.head) == old_verdicts  # the old verdicts stay on the old head, and only they
    assert cli(repo, "merge", old_id[:12]).code == 1  # the old head is still not mergeable
    message = git(repo, "log", "-1", "--format=%B", new.head)
    assert message.startswith("edit README.md: replace world with world2\n")
    assert f"Gitswarm-Follow-Up: {data['follow_up']['op']}" in message


def test_the_follow_up_prompt_carries_the_contract_the_patch_its_verdict_and_the_instruction(repo: Path, tmp_path: Path) -> None:
    control = register_gated(repo, tmp_path / "gated")
    job = implement_job(repo, "gated", "write out.txt: one", "grep -qx two out.txt", repair_rounds="1")
    result = cli(repo, "--json", "follow-up", f"{job}/fix", "write out.txt: two")
    assert result.code == 0, result.err
    prompt = prompts(control)[-1]
    assert "# Your task: fix" in prompt and "write out.txt: one" in prompt  # the original contract
    assert "# Your earlier work on this task" in prompt and "Its verdict: rejected" in prompt
    assert "The check `grep -qx two out.txt` failed (exit 1)" in prompt
    assert prompt.rstrip().endswith("write out.txt: two")


@pytest.mark.parametrize(
    "target, text, why",
    [
        ("nojob/fix", "x", "no job"),
        ("{job}/nope", "x", "no task"),
        ("{job}/fix", "", "empty"),
        ("{job}/fix", "a\0b", "NUL"),
        ("{job}/fix", "x" * 40_000, "at most"),
        ("{job}/scan", "x", "analyze task"),
    ],
)
def test_bad_follow_ups_write_nothing(repo: Path, target: str, text: str, why: str) -> None:
    register_scripted(repo)
    (repo / "job.toml").write_text(
        spec_text('id = "fix"\nmode = "implement"\nadapter = "scripted"\nprompt = "write a.txt: a"', 'id = "scan"\ncommand = "true"')
    )
    job = cli(repo, "--json", "run", "job.toml").json()["id"]
    before = swarm_refs(repo)
    with closing(Swarm(repo)) as swarm, pytest.raises(BadInput, match=why):
        follow_up(swarm, target.format(job=job), text)
    assert swarm_refs(repo) == before


def test_an_unfinished_task_is_not_followed_up(repo: Path) -> None:
    register_scripted(repo)
    (repo / "job.toml").write_text(spec_text('id = "fix"\nmode = "implement"\nadapter = "scripted"\nprompt = "write a.txt: a"'))
    job = cli(repo, "--json", "submit", "job.toml").json()["id"]
    result = cli(repo, "follow-up", f"{job}/fix", "more")
    assert result.code == 2 and "queued, not finished: steer it instead" in result.err


@pytest.mark.slow
def test_a_follow_up_survives_kill_9_of_the_supervisor_and_is_resumed(repo: Path, tmp_path: Path) -> None:
    control = register_gated(repo, tmp_path / "gated")
    job = implement_job(repo, "gated", "write a.txt: one", "test -f a.txt")
    [(old_id, old)] = patches(repo, job)
    (control / "hold").write_text("")
    out, err = tmp_path / "fu.out", tmp_path / "fu.err"
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen(
            [GITSWARM, "--json", "follow-up", f"{job}/fix", "write b.txt: two", "--lease", "2"],
            cwd=repo, stdout=o, stderr=e, start_new_session=True,
        )
    try:
        wait_for(lambda: len(read_pids(control / "starts")) == 2, 20, "the follow-up's agent to start")
        [agent] = running(control)
        os.kill(proc.pid, signal.SIGKILL)  # the supervisor only: its worker and the agent must go with it
        proc.wait(10)
        assert wait_gone([agent], 10) == [], "the agent outlived its supervisor"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    # Its worker died with the supervisor: the next status sees so and requeues the follow-up, nothing lost.
    status = wait_for(lambda: (t := cli(repo, "--json", "status", job).json()["tasks"][0])["state"] == "queued" and t, 2, "requeued")
    assert "died" in status["error"] and status["attempts"] == 0
    (control / "hold").unlink()
    resumed = cli(repo, "--json", "work", "--job", job, "--lease", "2")
    assert resumed.code == 0, resumed.err
    assert cli(repo, "--json", "status", job).json()["tasks"][0]["state"] == "succeeded"
    ops = [r["op"] for r in log_ops(repo, job)]
    assert ops.count("followed_up") == 1
    assert ops[ops.index("followed_up"):] == ["followed_up", "claimed", "expired", "claimed", "finished", "artifacts"]
    assert "write b.txt: two" in prompts(control)[-1]  # the resumed attempt is the same follow-up
    new_id, new = patches(repo, job)[-1]
    assert new_id != old_id and git(repo, "rev-parse", f"{new.head}^").strip() == old.head
    assert sorted(f.path for f in new.files) == ["a.txt", "b.txt"]
    assert not alive(proc.pid)


def test_resume_session_is_opt_in_and_resumes_the_session_that_made_the_patch(repo: Path, fake_clis: Path) -> None:
    (repo / "job.toml").write_text(spec_text('id = "fix"\nmode = "implement"\nadapter = "claude-code"\nprompt = "write a.txt: one"'))
    job = cli(repo, "--json", "run", "job.toml").json()["id"]
    assert cli(repo, "--json", "status", job).json()["tasks"][0]["state"] == "succeeded"
    with closing(Swarm(repo)) as swarm:
        snapshot = swarm.refs.snapshot(job)
        [session] = [r.session_id for a in snapshot.task("fix").artifacts if isinstance(r := snapshot.artifact(a), Run)]
    result = cli(repo, "--json", "follow-up", f"{job}/fix", "write b.txt: two", "--resume-session")
    assert result.code == 0, result.err
    assert result.json()["follow_up"]["session"] == session
    with closing(Swarm(repo)) as swarm:
        snapshot = swarm.refs.snapshot(job)
        runs = [r for a in snapshot.task("fix").artifacts if isinstance(r := snapshot.artifact(a), Run)]
    assert runs[-1].session_id == session  # the fake refuses --resume of a session it cannot find
    plain = cli(repo, "--json", "follow-up", f"{job}/fix", "write c.txt: three")
    assert plain.code == 0 and plain.json()["follow_up"]["session"] is None  # isolation stays the default


def test_resume_session_is_refused_for_an_adapter_that_cannot(repo: Path) -> None:
    register_scripted(repo)
    (repo / "job.toml").write_text(spec_text('id = "fix"\nmode = "implement"\nadapter = "scripted"\nprompt = "write a.txt: a"'))
    job = cli(repo, "--json", "run", "job.toml").json()["id"]
    before = swarm_refs(repo)
    result = cli(repo, "follow-up", f"{job}/fix", "more", "--resume-session")
    assert result.code == 2 and "cannot resume a session" in result.err
    assert swarm_refs(repo) == before
