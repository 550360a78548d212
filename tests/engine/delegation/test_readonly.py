"""Analyze tasks of agents are read-only: they run on a throwaway checkout of the job's pinned base,
and any change to it (tracked or untracked, ignored included, a commit, a branch) fails the task on
integrity, not retried. The user's checkout never changes. Shell analyze tasks still run in the
user's checkout. Real repositories, real git, the real CLI.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from gitswarm.engine.swarm import Swarm
from gitswarm.model.spec import parse_spec
from tests.conftest import cli, commit_file, git, register_scripted, rev, spec_text
from tests.engine.delegation.test_attempt import state_root

AGENT_SCRIPT = """#!/bin/sh
pwd > "{log}.cwd"
git status --porcelain --untracked-files=all > "{log}.status"
{command}
echo "the answer"
"""


def agent(repo: Path, tmp_path: Path, command: str = "true") -> Path:
    """Register adapter `probe`: an agent (a script) that records where it ran, then runs `command` there."""
    files = tmp_path / "probe-files"  # its script and its log, which it may write ([sandbox] write)
    files.mkdir(exist_ok=True)
    log = files / "probe"
    script = files / "probe.sh"
    script.write_text(AGENT_SCRIPT.format(log=log, command=command))
    commit_file(repo, ".gitswarm/adapters/probe.toml", f'executable = "/bin/sh"\nargs = [{json.dumps(str(script))}, "{{prompt}}"]\n'
                f'[sandbox]\nwrite = [{json.dumps(str(files))}]\n')
    return log


def analyze(adapter: str, prompt: str = "look around", attempts: int = 3) -> str:
    return spec_text(f'id = "look"\nadapter = "{adapter}"\nprompt = {json.dumps(prompt)}\nmax_attempts = {attempts}\n')


def run(repo: Path, tmp_path: Path, text: str) -> dict:
    spec = tmp_path / "spec.toml"  # outside the repo: the user's tree stays as it is
    spec.write_text(text)
    result = cli(repo, "--json", "run", str(spec), "-j", "1")
    assert result.out, result.err
    return {**result.json(), "code": result.code}


def user_tree(repo: Path) -> dict:
    """The user's checkout, every file and its bytes, ignored files included; HEAD and the branches."""
    return {
        "status": git(repo, "status", "--porcelain", "--untracked-files=all", "--ignored"),
        "heads": git(repo, "for-each-ref", "refs/heads"),
        "HEAD": git(repo, "symbolic-ref", "HEAD"),
        "files": {str(p.relative_to(repo)): p.read_bytes() for p in sorted(repo.rglob("*")) if p.is_file() and ".git" not in p.relative_to(repo).parts},
    }


@pytest.fixture
def project(repo: Path) -> Path:
    commit_file(repo, ".gitignore", ".cache/\n")
    return repo


def test_an_agent_that_writes_in_its_cwd_during_an_analyze_task_fails_on_integrity_not_retried(project: Path, tmp_path: Path) -> None:
    register_scripted(project)
    before = user_tree(project)
    job = run(project, tmp_path, analyze("scripted", "write notes.txt: my findings"))
    (task,) = job["tasks"]
    assert task["state"] == "failed" and task["attempts"] == 1, task
    assert task["error"].startswith("integrity: ") and "read-only" in task["error"] and "notes.txt created" in task["error"]
    assert job["code"] == 1
    assert user_tree(project) == before and not (project / "notes.txt").exists()
    # the checkout it wrote in was discarded, not kept for reuse
    checkouts = state_root(project) / "checkouts"
    assert not checkouts.exists() or list(checkouts.iterdir()) == []
    assert "/checkouts/" not in git(project, "worktree", "list")


@pytest.mark.parametrize(
    "command, named",
    [
        ("echo x >> README.md", "README.md changed"),
        ("rm README.md", "README.md removed"),
        ("mkdir -p .cache && echo x > .cache/state", ".cache/state created (ignored)"),
        ("mkdir -p a/b && echo x > a/b/deep.txt", "a/b/deep.txt created"),
        ("echo x > f && git add f", "f added"),
        ("git -c user.name=a -c user.email=b commit -q --allow-empty -m sneaky", "HEAD moved to"),
        ("git checkout -q -b agent-branch", "refs/heads/agent-branch created"),  # the refs watch sees it first
    ],
    ids=["tracked-edit", "tracked-removed", "ignored", "untracked-deep", "staged", "commit", "branch"],
)
def test_any_change_to_the_read_only_checkout_fails_the_task(project: Path, tmp_path: Path, command: str, named: str) -> None:
    agent(project, tmp_path, command)
    before = user_tree(project)
    job = run(project, tmp_path, analyze("probe"))
    (task,) = job["tasks"]
    assert task["state"] == "failed" and task["attempts"] == 1, task
    assert task["error"].startswith("integrity: ") and named in task["error"], task["error"]
    after = user_tree(project)
    if "refs/heads" in named:  # a branch the agent made is named, and left for the user to judge: never deleted
        after["heads"] = before["heads"]
    assert after == before


def test_an_agents_analyze_task_reads_a_clean_checkout_of_the_pinned_base(project: Path, tmp_path: Path) -> None:
    log = agent(project, tmp_path)
    base = rev(project)
    (project / "README.md").write_text("hello\nuncommitted\n")  # not part of the base
    (project / "scratch.txt").write_text("untracked\n")
    before = user_tree(project)
    job = run(project, tmp_path, analyze("probe"))
    (task,) = job["tasks"]
    assert task["state"] == "succeeded", task
    ran_in = Path(log.with_suffix(".cwd").read_text().strip())
    assert ran_in.parent == state_root(project) / "checkouts"
    assert log.with_suffix(".status").read_text() == ""  # it saw the base, none of the user's changes
    assert rev(ran_in) == base and git(ran_in, "status", "--porcelain", "--ignored") == ""  # kept, clean
    assert user_tree(project) == before
    swarm = Swarm(project)
    try:
        assert swarm.refs.snapshot(job["id"], swarm.index.job_tip(job["id"])).job.base == base
    finally:
        swarm.close()


def test_shell_analyze_tasks_still_run_in_the_users_checkout(project: Path, tmp_path: Path) -> None:
    log = tmp_path / "shell.cwd"
    job = run(project, tmp_path, spec_text(f'id = "build"\ncommand = "pwd > {log} && mkdir -p .cache && echo out > .cache/built"\n'))
    assert job["tasks"][0]["state"] == "succeeded", job["tasks"][0]
    assert Path(log.read_text().strip()) == project.resolve()
    assert (project / ".cache" / "built").read_text() == "out\n"


def test_only_jobs_with_implement_or_agent_tasks_pin_a_base(project: Path, tmp_path: Path) -> None:
    register_scripted(project)
    swarm = Swarm(project)
    try:
        shell_only = swarm.submit_text(spec_text('id = "a"\ncommand = "true"'))
        agent_analyze = swarm.submit_text(analyze("scripted"))
        jobs = {j: swarm.refs.snapshot(j, swarm.index.job_tip(j)).job for j in (shell_only, agent_analyze)}
    finally:
        swarm.close()
    assert jobs[shell_only].base is None
    assert jobs[agent_analyze].base == rev(project) and jobs[agent_analyze].base_ref == "refs/heads/main"


def test_an_agent_analyze_task_of_a_job_without_a_base_fails_clearly(project: Path, tmp_path: Path) -> None:
    """A job submitted by an older gitswarm pinned no base for its analyze tasks."""
    register_scripted(project)
    swarm = Swarm(project)
    try:
        spec = parse_spec(analyze("scripted"), swarm.adapter_facts(), "old.toml")
        job = swarm.ledger.submit(spec, time.time(), source="old.toml", base=None, base_ref=None)
    finally:
        swarm.close()
    result = cli(project, "--json", "work", "--until-idle", "-j", "1")
    assert result.code == 0, result.err
    (task,) = cli(project, "--json", "status", job).json()["tasks"]
    assert task["state"] == "failed" and "no base commit" in task["error"] and task["attempts"] == 1
