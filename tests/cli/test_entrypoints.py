"""The installed console scripts, run as real processes with the isolated environment.

`gitswarm` and `git-swarm` are the scripts in the virtualenv that runs the
tests (the directory of sys.executable); that directory goes first on PATH so
that `git swarm` finds `git-swarm` the way a user's shell would.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import gitswarm
from gitswarm.store.index import INDEX_FORMAT
from tests.conftest import git, spec_text, swarm_refs

BIN = Path(sys.executable).parent
GITSWARM = BIN / "gitswarm"


@dataclass
class Run:
    code: int
    out: str
    err: str


@pytest.fixture
def child_env(tmp_path: Path) -> dict[str, str]:
    """os.environ (already isolated by the autouse fixture), the venv first on PATH, TMPDIR under tmp_path."""
    tmp = tmp_path / "child-tmp"
    tmp.mkdir()
    env = os.environ.copy()
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    env["TMPDIR"] = str(tmp)
    return env


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> Run:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    return Run(done.returncode, done.stdout, done.stderr)


def gitswarm_(cwd: Path, env: dict[str, str], *args: str) -> Run:
    return run([str(GITSWARM), *args], cwd, env)


def test_scripts_are_installed() -> None:
    assert GITSWARM.is_file() and os.access(GITSWARM, os.X_OK)
    assert (BIN / "git-swarm").is_file() and os.access(BIN / "git-swarm", os.X_OK)


@pytest.mark.parametrize("args", [["--version"], ["--json", "--version"], ["-C", ".", "--version"]])
def test_version(tmp_path: Path, child_env: dict[str, str], args: list[str]) -> None:
    result = gitswarm_(tmp_path, child_env, *args)
    assert result.code == 0, result.err
    assert result.out == f"gitswarm {gitswarm.__version__}\n"
    assert result.err == ""


def test_git_swarm_version(tmp_path: Path, child_env: dict[str, str]) -> None:
    result = run(["git", "swarm", "--version"], tmp_path, child_env)
    assert result.code == 0, result.err
    assert result.out == f"gitswarm {gitswarm.__version__}\n"


@pytest.mark.skipif(
    not (Path(gitswarm.__file__).parent / "__main__.py").exists(), reason="gitswarm has no __main__.py"
)
def test_python_dash_m_version(tmp_path: Path, child_env: dict[str, str]) -> None:
    result = run([sys.executable, "-m", "gitswarm", "--version"], tmp_path, child_env)
    assert result.code == 0, result.err
    assert result.out == f"gitswarm {gitswarm.__version__}\n"


def test_git_swarm_status_in_a_repo(repo: Path, child_env: dict[str, str]) -> None:
    result = run(["git", "swarm", "status"], repo, child_env)
    assert result.code == 0, result.err
    assert result.out == "no jobs\n"
    assert result.err == ""


def test_git_swarm_finds_the_repo_from_a_subdirectory(repo: Path, child_env: dict[str, str]) -> None:
    (repo / "job.toml").write_text(spec_text('id = "a"\ncommand = "true"', goal="from git swarm"))
    submitted = run(["git", "swarm", "--json", "submit", "job.toml"], repo, child_env)
    assert submitted.code == 0, submitted.err
    job_id = json.loads(submitted.out)["id"]
    sub = repo / "src" / "deep"
    sub.mkdir(parents=True)
    result = run(["git", "swarm", "--json", "status"], sub, child_env)
    assert result.code == 0, result.err
    jobs = json.loads(result.out)["jobs"]
    assert [(j["id"], j["goal"], j["status"]) for j in jobs] == [(job_id, "from git swarm", "queued")]


def test_dash_c_json_status_on_an_empty_repo(repo: Path, tmp_path: Path, child_env: dict[str, str]) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = gitswarm_(elsewhere, child_env, "-C", str(repo), "--json", "status")
    assert result.code == 0, result.err
    assert json.loads(result.out) == {"jobs": [], "awaiting_approval": {}}
    assert result.out.count("\n") == 1
    assert result.err == ""
    assert not (repo / ".git" / "gitswarm").exists()  # a read creates no index in a clone that has none
    assert not (elsewhere / ".git").exists()


def test_dash_c_json_status_lists_a_submitted_job(repo: Path, tmp_path: Path, child_env: dict[str, str]) -> None:
    spec = repo / "job.toml"
    spec.write_text(spec_text('id = "a"\ncommand = "true"', 'id = "b"\ncommand = "true"\ndepends_on = ["a"]'))
    submitted = gitswarm_(tmp_path, child_env, "-C", str(repo), "--json", "submit", str(spec))
    assert submitted.code == 0, submitted.err
    job_id = json.loads(submitted.out)["id"]
    data = json.loads(gitswarm_(tmp_path, child_env, "-C", str(repo), "--json", "status").out)
    assert list(data) == ["awaiting_approval", "jobs"] and data["awaiting_approval"] == {}
    (job,) = data["jobs"]
    assert set(job) == {"id", "goal", "status", "created", "updated", "counts", "awaiting_approval", "audit"}
    assert job["awaiting_approval"] is False and job["audit"] is False
    assert (job["id"], job["status"], job["counts"]) == (job_id, "queued", {"blocked": 1, "queued": 1})


def test_dash_c_resolves_relative_arguments_like_git_dash_c(repo: Path, tmp_path: Path, child_env: dict[str, str]) -> None:
    """docs/cli.md: `-C PATH` runs "as if started in PATH (as git -C)", so a relative SPEC is read from PATH."""
    (repo / "job.toml").write_text(spec_text('id = "a"\ncommand = "true"'))
    assert git(tmp_path, "-C", str(repo), "ls-files", "--others", "job.toml") == "job.toml\n"  # what git -C does
    submitted = gitswarm_(tmp_path, child_env, "-C", str(repo), "--json", "submit", "job.toml")
    assert submitted.code == 0, submitted.err
    job_id = json.loads(submitted.out)["id"]
    assert f"refs/swarm/jobs/{job_id}" in swarm_refs(repo)


def test_demo(tmp_path: Path, child_env: dict[str, str]) -> None:
    """A throwaway repository, a small job run to the end, its summary table on stdout,
    one delegation verified and merged, one that gamed its test rejected and its merge refused, and why."""
    result = gitswarm_(tmp_path, child_env, "demo")
    assert result.code == 0, result.out + result.err
    lines = result.out.splitlines()
    assert lines[0] == "# Check a tiny project"
    (headline,) = [line for line in lines if line.startswith("Job `")]
    assert "**failed**" in headline  # game-test games its check and is rejected on purpose
    job_id = headline.split("`")[1]
    table = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines if line.startswith("|")]
    assert table[0][:3] == ["task", "state", "attempts"]
    rows = {row[0]: row for row in table[2:]}
    assert sorted(rows) == ["build", "fix-add", "game-test", "lint", "report", "test"]
    assert {row[1] for name, row in rows.items() if name != "game-test"} == {"succeeded"}
    assert rows["game-test"][1] == "failed" and "rejected" in rows["game-test"][4]
    assert any(line.startswith("fix-add: its patch") and "merged it into main" in line for line in lines)
    assert any(line.startswith("game-test: failed: rejected") and "changes what judges it: test_calc.py" in line for line in lines)
    assert any("refused" in line and "changes what judges it" in line for line in lines)
    # Not a terminal: progress goes to stderr as JSON lines; the first names the repository, under TMPDIR.
    events = [json.loads(line) for line in result.err.splitlines()]
    assert all("event" in e for e in events)
    assert events[0]["event"] == "demo"
    assert events[-1]["event"] == "demo_done" and events[-1]["merged"]["into"] == "main"
    assert any(e["event"] == "done" and e["job"] == job_id for e in events)
    demo_repo = Path(events[0]["repository"])
    assert demo_repo.is_relative_to(Path(child_env["TMPDIR"]))
    assert f"refs/swarm/jobs/{job_id}" in swarm_refs(demo_repo)
    # All of it in one scratch directory, which the story names with the command that removes it.
    scratch = demo_repo.parent
    assert sorted(p.name for p in scratch.iterdir()) == ["repo", "worktrees"]
    assert (scratch / "worktrees" / job_id / "fix-add").is_dir()
    assert lines[-1] == f"the whole demo (its repository and worktrees) is in {scratch}; remove it with: rm -rf {scratch}"
    assert lines[-2] == f"look around: cd {demo_repo} && gitswarm status"
    assert not (Path(child_env["XDG_STATE_HOME"]) / "gitswarm" / "worktrees").exists()


def test_status_outside_a_repo(tmp_path: Path, child_env: dict[str, str]) -> None:
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    probe = subprocess.run(["git", "rev-parse", "--git-dir"], cwd=outside, env=child_env, capture_output=True)
    assert probe.returncode != 0, "precondition: tmp_path must not be inside a git repository"
    result = gitswarm_(outside, child_env, "status")
    assert result.code == 2
    assert result.out == ""
    assert result.err.count("\n") == 1 and result.err.endswith("\n")
    assert result.err.startswith("gitswarm: not a git repository")
    assert not (outside / ".git").exists()


def test_init_twice_is_idempotent(repo: Path, child_env: dict[str, str]) -> None:
    refs_before = swarm_refs(repo)
    first = gitswarm_(repo, child_env, "init")
    assert first.code == 0, first.err
    index = repo / ".git" / "gitswarm" / "index.sqlite"
    assert index.is_file()
    assert first.out == f"gitswarm ready: index {index.resolve()} (0 jobs)\n"
    actor = (repo / ".git" / "gitswarm" / "actor").read_text()

    second = gitswarm_(repo, child_env, "init")
    assert second.code == 0, second.err
    assert second.out == first.out
    assert (repo / ".git" / "gitswarm" / "actor").read_text() == actor

    as_json = json.loads(gitswarm_(repo, child_env, "--json", "init").out)
    assert as_json == {"index": str(index.resolve()), "jobs": 0, "actor": actor.strip()}
    assert swarm_refs(repo) == refs_before
    with sqlite3.connect(index) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == INDEX_FORMAT
        assert db.execute("SELECT count(*) FROM jobs").fetchone()[0] == 0


def test_init_keeps_existing_jobs(repo: Path, child_env: dict[str, str]) -> None:
    (repo / "job.toml").write_text(spec_text('id = "a"\ncommand = "true"'))
    assert gitswarm_(repo, child_env, "submit", "job.toml").code == 0
    tips = swarm_refs(repo)
    for _ in range(2):
        result = gitswarm_(repo, child_env, "--json", "init")
        assert result.code == 0, result.err
        assert json.loads(result.out)["jobs"] == 1
    assert swarm_refs(repo) == tips


def test_doctor_on_a_healthy_repo(repo: Path, child_env: dict[str, str]) -> None:
    (repo / "job.toml").write_text(spec_text('id = "a"\ncommand = "true"'))
    assert gitswarm_(repo, child_env, "submit", "job.toml").code == 0
    result = gitswarm_(repo, child_env, "doctor")
    assert result.code == 0, result.out + result.err
    lines = result.out.splitlines()
    assert lines and all(line.startswith("ok ") for line in lines), result.out
    names = [line.split()[1].rstrip(":") for line in lines]
    assert names == ["repository", "git", "index", "records", "leases"]
    data = json.loads(gitswarm_(repo, child_env, "--json", "doctor").out)
    assert data["ok"] is True
    assert git(repo, "status", "--porcelain") == "?? job.toml\n"
