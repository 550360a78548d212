"""Claude Code, Codex and Gemini end to end: the SHIPPED specs driving the fake CLIs
(tests/fakes/bin/claude, codex, gemini) through `gitswarm run`, read back from the recorded
artifacts. The fakes print what the real CLIs print headless (see the top of each fake and
/work/shared/AGENT-CLIS.md); the scripted behaviour is tests/fakes/bin/fakelib.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import cli, spec_text

ADAPTERS = ("claude-code", "codex", "gemini")


# -- helpers -------------------------------------------------------------------------------


def task(adapter: str, prompt: str, id: str = "t", **fields: object) -> str:
    """One [[tasks]] body; `prompt` lines are fakelib directives."""
    body = f'id = "{id}"\nadapter = "{adapter}"\nprompt = {json.dumps(prompt)}\n'
    return body + "".join(f"{key} = {json.dumps(value)}\n" for key, value in fields.items())


def run(repo: Path, tmp_path: Path, *tasks: str, jobs: int = 1) -> dict:
    """`gitswarm --json run SPEC -j JOBS` (the spec outside the repo); the job's view."""
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(*tasks))
    result = cli(repo, "--json", "run", str(spec), "-j", str(jobs))
    assert result.out, result.err
    data = result.json()
    assert "unusable" not in data, data["unusable"]  # each fake passed its preflight
    assert result.code == (0 if data["status"] == "succeeded" else 1)
    return data


def task_row(data: dict, id: str = "t") -> dict:
    return next(t for t in data["tasks"] if t["id"] == id)


def artifacts(repo: Path, job: str, id: str = "t") -> list[dict]:
    """The task's artifact records, through `gitswarm artifacts` and `gitswarm artifact ID`."""
    listed = cli(repo, "--json", "artifacts", job).json()["artifacts"]
    return [cli(repo, "--json", "artifact", a["id"]).json()["record"] for a in listed if a["task"] == id]


def of(records: list[dict], kind: str) -> list[dict]:
    return [r for r in records if r["kind"] == kind]


def fake(name: str, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run a fake CLI directly, stdin closed as gitswarm runs it."""
    path = Path(__file__).parent.parent / "fakes" / "bin" / name
    return subprocess.run([str(path), *args], cwd=cwd, env={**os.environ, **(env or {})},
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30, check=False)


# -- analyze -------------------------------------------------------------------------------


#: what each run artifact must say of cost: claude reports it; codex reports tokens only and is
#: priced from adapters/prices.toml for the spec's model gpt-5.5 ($5 in, $30 out per
#: million); gemini reports tokens only and no price covers it.
COST = {  # an analyze task runs on the spec's fast tier
    "claude-code": (0.0456, False),
    "codex": (round((3000 * 0.25 + 200 * 2.0) / 1e6, 8), True),  # tokens only: priced as gpt-5-mini
    "gemini": (round((3000 * 0.30 + 200 * 2.50) / 1e6, 8), True),  # tokens only: priced as gemini-2.5-flash
}


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_analyze_answer_becomes_findings_and_decisions_with_tokens_and_cost(
    adapter: str, repo: Path, tmp_path: Path, fake_clis: Path
) -> None:
    data = run(repo, tmp_path, task(adapter, "findings\ntokens: 3000 200\ncost: 0.0456"))
    assert task_row(data)["state"] == "succeeded", task_row(data)["error"]
    records = artifacts(repo, data["id"])
    findings, decisions = of(records, "finding"), of(records, "decision")
    assert sorted(f["title"] for f in findings) == ["calc.add subtracts", "no tests for div"]
    assert not any(f["low_confidence"] for f in findings)
    assert {f["severity"] for f in findings} == {"high", "medium"}
    assert [d["title"] for d in decisions] == ["fix add first"]
    assert {r["producer"] for r in findings + decisions} == {adapter}
    (record,) = of(records, "run")
    assert record["adapter"] == adapter and record["exit_code"] == 0 and record["error"] is None
    assert (record["input_tokens"], record["output_tokens"]) == (3000, 200)
    assert (record["cost_usd"], record["cost_estimated"]) == COST[adapter]
    assert record["session_id"]  # each CLI names its session
    if adapter == "codex":
        assert record["model"] == "gpt-5-mini"
    assert record["tier"] == "fast" and record["routing"]["rule"] == "repo_default"


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_prose_answer_becomes_one_low_confidence_finding(
    adapter: str, repo: Path, tmp_path: Path, fake_clis: Path
) -> None:
    data = run(repo, tmp_path, task(adapter, "answer: just some prose"))
    assert task_row(data)["state"] == "succeeded", task_row(data)["error"]
    records = artifacts(repo, data["id"])
    (finding,) = of(records, "finding")
    assert finding["low_confidence"] and finding["title"] == "just some prose"
    assert not of(records, "decision")


# -- implement -----------------------------------------------------------------------------


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_implement_edit_becomes_a_patch_with_an_accepted_verdict(
    adapter: str, repo: Path, tmp_path: Path, fake_clis: Path
) -> None:
    data = run(repo, tmp_path, task(adapter, "write hello.txt: hi", mode="implement", checks=["test -f hello.txt"]))
    assert task_row(data)["state"] == "succeeded", task_row(data)["error"]
    records = artifacts(repo, data["id"])
    (patch,) = of(records, "patch")
    assert [f["path"] for f in patch["files"]] == ["hello.txt"]
    (verdict,) = of(records, "verdict")
    assert verdict["accepted"] and verdict["head"] == patch["head"]
    assert not (repo / "hello.txt").exists()  # the agent worked in its own worktree


# -- failures ------------------------------------------------------------------------------


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_error_result_fails_the_task_with_the_agents_reason(
    adapter: str, repo: Path, tmp_path: Path, fake_clis: Path
) -> None:
    data = run(repo, tmp_path, task(adapter, "fail: model overloaded", max_attempts=1))
    row = task_row(data)
    assert row["state"] == "failed"
    assert row["error"] == f"{adapter}: model overloaded"
    (record,) = of(artifacts(repo, data["id"]), "run")
    assert record["exit_code"] == 1 and record["error"] == row["error"]


def test_gemini_error_is_read_after_its_cached_credentials_notice(
    repo: Path, tmp_path: Path, fake_clis: Path, isolated_env: Path
) -> None:
    """With OAuth credentials (linked into the run's home by the spec's home_files), gemini says
    'Loaded cached credentials.' on stderr before its pretty-printed error object."""
    (isolated_env / ".gemini").mkdir()
    (isolated_env / ".gemini" / "oauth_creds.json").write_text("{}")
    data = run(repo, tmp_path, task("gemini", "fail: model overloaded", max_attempts=1))
    assert task_row(data)["error"] == "gemini: model overloaded"


def test_claude_denied_edit_fails_the_task_though_it_exits_0(repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    data = run(repo, tmp_path, task("claude-code", "write hello.txt: hi\ndeny-edit", mode="implement",
                                    checks=["test -f hello.txt"], max_attempts=1))
    row = task_row(data)
    assert row["state"] == "failed"
    assert "permission denied" in row["error"] and "Write" in row["error"]
    records = artifacts(repo, data["id"])
    (record,) = of(records, "run")
    assert record["exit_code"] == 0 and "permission denied" in record["error"]
    assert not of(records, "patch") and not of(records, "verdict")


def test_hang_is_killed_at_the_timeout(repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    """One hanging task per CLI, run side by side (-j 3) to keep this file fast."""
    started = time.monotonic()
    data = run(repo, tmp_path, *(task(a, "hang", id=f"hang-{a}", timeout="2s", max_attempts=1) for a in ADAPTERS),
               jobs=3)
    took = time.monotonic() - started
    assert 2.0 <= took < 8.0
    for adapter in ADAPTERS:
        row = task_row(data, f"hang-{adapter}")
        assert row["state"] == "failed" and row["error"].startswith(f"{adapter} timeout after"), row
        (record,) = of(artifacts(repo, data["id"], f"hang-{adapter}"), "run")
        assert record["exit_code"] is None and 2.0 <= record["duration"] < 5.0


# -- the fakes behave as the real CLIs do headless ----------------------------------------


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_shipped_spec_passes_its_preflight_against_the_fake(adapter: str, repo: Path, fake_clis: Path) -> None:
    result = cli(repo, "--json", "adapters", "check", adapter)
    assert result.code == 0, result.out + result.err
    (row,) = result.json()["adapters"]
    assert row["ok"] and row["version"], row


def test_claude_help_does_not_list_max_turns_but_it_is_accepted(tmp_path: Path) -> None:
    help_text = fake("claude", "--help").stdout
    assert "--permission-mode" in help_text and "--max-turns" not in help_text
    done = fake("claude", "-p", "answer: ok", "--output-format", "json", "--max-turns", "1", cwd=tmp_path)
    assert done.returncode == 0 and json.loads(done.stdout)["result"] == "ok"
    over = fake("claude", "-p", "write a.txt: x", "--output-format", "json", "--permission-mode", "acceptEdits",
                "--max-turns", "1", cwd=tmp_path)
    assert over.returncode == 1 and json.loads(over.stdout)["subtype"] == "error_max_turns"


def test_fakes_refuse_what_the_real_clis_refuse(tmp_path: Path) -> None:
    unknown = fake("claude", "-p", "x", "--thinking", cwd=tmp_path)
    assert (unknown.returncode, unknown.stderr.strip()) == (1, "error: unknown option '--thinking'")
    top_level = fake("codex", "--json", "exec", "x", cwd=tmp_path)  # --json belongs to `codex exec`
    assert top_level.returncode == 2 and "--json" in top_level.stderr
    untrusted = fake("gemini", "-p", "write a.txt: x", "-o", "json", "-y", cwd=tmp_path)
    assert untrusted.returncode == 55 and untrusted.stdout == ""
    assert json.loads(untrusted.stderr)["error"]["type"] == "FatalUntrustedWorkspaceError"
    fallback = fake("gemini", "-p", "write a.txt: x", "-o", "json", "--approval-mode", "auto_edit", cwd=tmp_path)
    assert fallback.returncode == 0 and not (tmp_path / "a.txt").exists()  # untrusted: no write tools
    trusted = fake("gemini", "-p", "write a.txt: x", "-o", "json", "--approval-mode", "auto_edit", cwd=tmp_path,
                   env={"GEMINI_CLI_TRUST_WORKSPACE": "true"})
    assert trusted.returncode == 0 and (tmp_path / "a.txt").read_text() == "x\n"
