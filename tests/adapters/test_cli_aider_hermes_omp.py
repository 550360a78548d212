"""The shipped aider, hermes and omp adapter specs end to end, against the fake CLIs.

Each test runs a real job (`gitswarm --json run SPEC -j 1`) through the real CLI on a
real repository, with tests/fakes/bin first on PATH, and reads back what was recorded:
findings and decisions, the run (adapter, tokens, cost), patches and verdicts, errors.
What each fake prints and why is written at the top of tests/fakes/bin/{aider,hermes,omp}.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from gitswarm.adapters.preflight import check
from gitswarm.adapters.registry import repo_registry
from gitswarm.engine.swarm import Swarm
from gitswarm.model.artifacts import Decision, Finding, Patch, Run, Verdict
from tests.conftest import cli, dumps_dir, git, spec_text
from tests.proctools import interruptible

CLIS = ["aider", "hermes", "omp"]
USAGE = "tokens: 3000 42\ncost: 0.0063"  # aider prints `Tokens: 3.0k sent, 42 received. Cost: $0.0063 message, ...`
AIDER_USAGE_LINE = "Tokens: 3.0k sent, 42 received. Cost: $0.0063 message, $0.0063 session."


# -- helpers -------------------------------------------------------------------------------


def task(adapter: str, prompt: str, task_id: str = "t", **fields: str | int | list[str]) -> str:
    body = {"id": task_id, "adapter": adapter, "prompt": prompt, **fields}
    return "\n".join(f"{key} = {json.dumps(value)}" for key, value in body.items())


def run_job(repo: Path, tmp_path: Path, *tasks: str) -> dict:
    """Run a job of these tasks; the `--json run` document."""
    spec = tmp_path / "spec.toml"  # outside the repo: the user's tree stays as it is
    spec.write_text(spec_text(*tasks))
    result = cli(repo, "--json", "run", str(spec), "-j", "1")
    assert result.out, result.err
    return result.json()


def state(data: dict, task_id: str = "t") -> dict:
    (found,) = [t for t in data["tasks"] if t["id"] == task_id]
    return found


def recorded(repo: Path, job: str, task_id: str = "t") -> list[object]:
    """The task's artifacts, in the order they were recorded."""
    swarm = Swarm(repo)
    try:
        snapshot = swarm.refs.snapshot(job, swarm.index.job_tip(job))
        return [snapshot.artifact(a) for a in snapshot.task(task_id).artifacts]
    finally:
        swarm.close()


def of(artifacts: list[object], kind: type) -> list:
    return [a for a in artifacts if isinstance(a, kind)]


def blob(repo: Path, oid: str) -> str:
    return git(repo, "cat-file", "blob", oid)


# -- analyze -------------------------------------------------------------------------------


PROSE = "The add function looks wrong to me."


@pytest.mark.parametrize("name", CLIS)
def test_analyze_answers_become_findings_and_the_run_its_usage(name: str, repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    data = run_job(repo, tmp_path, task(name, f"findings\n{USAGE}", "json"), task(name, f"answer: {PROSE}", "prose"))
    assert data["status"] == "succeeded", data["tasks"]

    # an answer in JSON: findings and decisions as the agent gave them
    artifacts = recorded(repo, data["id"], "json")
    findings, decisions = of(artifacts, Finding), of(artifacts, Decision)
    assert [(f.title, f.confidence, f.severity, f.low_confidence) for f in findings] == [
        ("calc.add subtracts", 0.9, "high", False),
        ("no tests for div", 0.6, "medium", False),
    ]
    assert [d.title for d in decisions] == ["fix add first"]
    assert all(a.producer == name for a in findings + decisions)
    (run,) = of(artifacts, Run)
    assert (run.adapter, run.exit_code, run.error) == (name, 0, None)
    assert (run.input_tokens, run.output_tokens) == (3000, 42)
    assert run.cost_usd == pytest.approx(0.0063) and run.cost_estimated is False
    if name == "aider":  # parsed from its usage line; its history went to the run's scratch directory
        assert AIDER_USAGE_LINE in blob(repo, run.stdout.oid).splitlines()
        assert not list(repo.glob(".aider.*history*"))
    else:  # hermes: its usage file; omp: its session header
        assert run.session_id

    # a prose answer: one finding, flagged
    artifacts = recorded(repo, data["id"], "prose")
    (finding,) = of(artifacts, Finding)
    assert finding.low_confidence and PROSE in finding.body
    assert of(artifacts, Decision) == []


def test_an_aider_prose_finding_is_titled_with_the_answer(repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    data = run_job(repo, tmp_path, task("aider", f"answer: {PROSE}"))
    (finding,) = of(recorded(repo, data["id"]), Finding)
    assert finding.title == PROSE


# -- implement -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", CLIS)
def test_an_implement_task_yields_a_patch_and_an_accepted_verdict(
    name: str, repo: Path, tmp_path: Path, fake_clis: Path
) -> None:
    base = git(repo, "rev-parse", "HEAD").strip()
    data = run_job(repo, tmp_path, task(name, f"write hello.txt: hi\n{USAGE}", mode="implement", checks=["test -f hello.txt"]))
    assert state(data)["state"] == "succeeded", state(data)
    artifacts = recorded(repo, data["id"])
    (patch,) = of(artifacts, Patch)
    assert patch.base == base and patch.producer == name
    changed = [(f.path, f.added, f.deleted) for f in patch.files]
    if name == "aider":  # and its tags cache: see test_aider_leaves_no_files_of_its_own_behind
        assert ("hello.txt", 1, 0) in changed
    else:
        assert changed == [("hello.txt", 1, 0)]
    assert git(repo, "show", f"{patch.head}:hello.txt") == "hi\n"
    (verdict,) = of(artifacts, Verdict)
    assert verdict.accepted and verdict.head == patch.head
    (run,) = of(artifacts, Run)  # omp: summed over its two assistant messages
    assert (run.adapter, run.input_tokens, run.output_tokens) == (name, 3000, 42)
    assert run.cost_usd == pytest.approx(0.0063)
    # the user's tree is untouched (aider `git add`ed the file in the task's worktree only)
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == "" and not (repo / "hello.txt").exists()


def test_aider_leaves_no_files_of_its_own_behind(repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    data = run_job(repo, tmp_path, task("aider", "answer: fine", "look"),
                   task("aider", "write hello.txt: hi", "fix", mode="implement", checks=["test -f hello.txt"]))
    (patch,) = of(recorded(repo, data["id"], "fix"), Patch)
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    assert [f.path for f in patch.files] == ["hello.txt"]


def test_aider_writes_no_identity_into_the_users_git_config(repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    """With no user.name in reach, aider writes placeholders into .git/config (aider/main.py setup_git):
    the spec gives it an identity per process, so the user's config stays as it was."""
    before = (repo / ".git" / "config").read_bytes()
    data = run_job(repo, tmp_path, task("aider", "answer: fine", "look"),
                   task("aider", "write hello.txt: hi", "fix", mode="implement", checks=["test -f hello.txt"]))
    assert data["status"] == "succeeded", data["tasks"]
    assert (repo / ".git" / "config").read_bytes() == before


# -- failures ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CLIS)
def test_an_error_result_fails_the_task_with_the_agents_reason(name: str, repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    data = run_job(repo, tmp_path, task(name, "fail: model overloaded", max_attempts=1))
    assert data["status"] == "failed"
    assert state(data)["state"] == "failed"
    assert "model overloaded" in state(data)["error"] and state(data)["error"].startswith(f"{name}: ")
    (run,) = of(recorded(repo, data["id"]), Run)
    assert run.error == state(data)["error"]
    assert run.exit_code == {"aider": 0, "hermes": 1, "omp": 1}[name]  # aider exits 0 after an API error


@pytest.mark.parametrize("name", CLIS)
def test_a_hang_is_killed_at_the_timeout(name: str, repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    data = run_job(repo, tmp_path, task(name, "hang", timeout="2s", max_attempts=1))
    assert state(data)["state"] == "failed"
    assert "timeout" in state(data)["error"]
    (run,) = of(recorded(repo, data["id"]), Run)
    assert run.exit_code is None and 2.0 <= run.duration < 10.0


# -- hermes's state directory --------------------------------------------------------------


def test_hermes_runs_in_its_own_hermes_home(repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    real = Path(os.environ["HOME"]) / ".hermes"
    (real / "sessions").mkdir(parents=True)
    (real / "skills").mkdir()
    config = "model:\n  provider: custom\n  default: local-model\n  base_url: http://127.0.0.1:9/v1\n"
    (real / "config.yaml").write_text(config)
    (real / "sessions" / "old.json").write_text("{}")
    (real / "skills" / "x.md").write_text("# a skill\n")
    dump = dumps_dir(repo, tmp_path) / "env.json"
    prompt = f"dump-env: {dump}\nappend $HERMES_HOME/config.yaml: telemetry: false\nwrite note.txt: x\nanswer: ok"
    # implement: an analyze run has no toolset that writes (adapters/hermes.toml)
    data = run_job(repo, tmp_path, task("hermes", prompt, mode="implement", checks=["test -f note.txt"]))
    assert state(data)["state"] == "succeeded", state(data)

    seen = json.loads(dump.read_text())
    home = Path(seen["env"]["HERMES_HOME"])
    assert home != real and not home.is_relative_to(real) and seen["hermes_home"]["path"] == str(home)
    entries = seen["hermes_home"]["entries"]
    assert entries["skills"] == f"link -> {real / 'skills'}"
    assert entries["config.yaml"] == "file"  # a copy: the run changed it ...
    # a copy with lsp.install_strategy: manual merged in (adapters/hermes.toml), which the run then changed
    assert seen["hermes_config"] == config + "lsp:\n  install_strategy: manual\ntelemetry: false\n"
    assert (real / "config.yaml").read_text() == config  # ... and not the real one
    sessions = sorted(name for name in entries if name.startswith("sessions/"))
    assert entries["sessions"] == "dir" and len(sessions) == 1 and "sessions/old.json" not in entries
    assert sorted(p.name for p in (real / "sessions").iterdir()) == ["old.json"]
    assert not (real / "state.db").exists() and not (real / "logs").exists()

    (run,) = of(recorded(repo, data["id"]), Run)
    assert sessions == [f"sessions/session_{run.session_id}.json"]
    assert seen["hermes_home"]["modes"][sessions[0]] == "600"  # files hermes creates are private
    assert run.model == "local-model"  # from the copied config.yaml


def test_hermes_sees_none_of_the_real_session_store(repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    real = Path(os.environ["HOME"]) / ".hermes"
    real.mkdir()
    for name in ("state.db", "state.db-wal", "state.db-shm"):  # as while a gateway has the store open
        (real / name).write_bytes(b"the user's " + name.encode())
    dump = dumps_dir(repo, tmp_path) / "env.json"
    data = run_job(repo, tmp_path, task("hermes", f"dump-env: {dump}\nanswer: ok"))
    assert state(data)["state"] == "succeeded", state(data)
    for name in ("state.db", "state.db-wal", "state.db-shm"):
        assert (real / name).read_bytes() == b"the user's " + name.encode()
    entries = json.loads(dump.read_text())["hermes_home"]["entries"]
    assert not any(entry.startswith("state.db") and target.startswith("link") for entry, target in entries.items())


# -- the fakes themselves ------------------------------------------------------------------


@pytest.mark.parametrize("name", CLIS)
def test_preflight_finds_every_flag_of_the_shipped_spec_in_the_fakes_help(name: str, repo: Path, fake_clis: Path) -> None:
    found = repo_registry(repo).found(name)
    assert found.executable == str(fake_clis / name)
    result = check(found, os.environ)
    assert result.ok, result.reason
    assert result.version


def fake(fakes: Path, name: str, *argv: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(fakes / name), *argv], cwd=cwd, capture_output=True, text=True, check=False,
                          stdin=subprocess.DEVNULL, env={**os.environ, **env})


@pytest.mark.parametrize("argv", [
    ["chat", "--oneshot", "hi"],
    ["chat", "--usage-file", "u.json", "-q", "hi"],
    ["-z", "hi", "--source", "tool"],
    ["-q", "hi"],
])
def test_hermes_refuses_flags_outside_their_scope(argv: list[str], tmp_path: Path, fake_clis: Path) -> None:
    done = fake(fake_clis, "hermes", *argv, cwd=tmp_path, HERMES_HOME=str(tmp_path / "hh"))
    assert done.returncode == 2 and "error:" in done.stderr and done.stdout == ""
    assert not (tmp_path / "u.json").exists() and not (tmp_path / "hh").exists()


@pytest.mark.parametrize(("name", "code", "said"), [
    ("aider", 2, "aider: error: unrecognized arguments: --bogus"),
    ("omp", 1, "Error: unknown flag: --bogus"),
    ("hermes", 2, "hermes: error: unrecognized arguments: --bogus"),
])
def test_the_fakes_refuse_an_unknown_flag_as_the_real_ones_do(
    name: str, code: int, said: str, tmp_path: Path, fake_clis: Path
) -> None:
    done = fake(fake_clis, name, "--bogus", "--message" if name == "aider" else "-p", "hi", cwd=tmp_path)
    assert done.returncode == code and said in done.stderr.splitlines()


def test_hermes_interrupted_exits_130_and_still_writes_its_usage_file(tmp_path: Path, fake_clis: Path) -> None:
    usage = tmp_path / "usage.json"
    proc = subprocess.Popen([str(fake_clis / "hermes"), "-z", "hang", "--usage-file", str(usage)], cwd=tmp_path,
                            env={**os.environ, "HERMES_HOME": str(tmp_path / "hh")}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=interruptible)
    deadline = time.monotonic() + 10
    while not list((tmp_path / "hh").glob("sessions/session_*.json")) and time.monotonic() < deadline:
        time.sleep(0.02)  # the session has started: the agent is running
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 130 and out == b""
    report = json.loads(usage.read_text())
    assert report["failed"] is True and report["failure"] == "KeyboardInterrupt()"
    assert oct(usage.stat().st_mode & 0o777) == "0o600"
