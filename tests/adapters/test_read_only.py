"""Analyze runs use each CLI's own read-only switch, and a write refused in one is not retried.

AGENT-CLIS.md: with their analyze flags codex (`-s read-only`), aider (`--chat-mode ask`) and
gemini (default approval mode, headless) did not write; Claude Code in plan mode refused the
write (a permission denial); hermes with every toolset and omp without a tool list wrote.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import cli, dumps_dir, spec_text

ALL_CLIS = ("claude-code", "codex", "gemini", "aider", "hermes", "omp")


def run_job(repo: Path, tmp_path: Path, body: str) -> dict:
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(body))
    result = cli(repo, "--json", "run", str(spec), "-j", "1")
    assert result.out, result.err
    return result.json()


def task(adapter: str, prompt: str, **fields: object) -> str:
    body = f'id = "t"\nadapter = "{adapter}"\nprompt = {json.dumps(prompt)}\n'
    return body + "".join(f"{key} = {json.dumps(value)}\n" for key, value in fields.items())


def flag_value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def check_claude(argv: list[str]) -> None:
    assert flag_value(argv, "--permission-mode") == "plan" and "--allowedTools" not in argv


def check_codex(argv: list[str]) -> None:
    assert flag_value(argv, "-s") == "read-only"
    assert "--full-auto" not in argv and "--dangerously-bypass-approvals-and-sandbox" not in argv


def check_gemini(argv: list[str]) -> None:
    assert flag_value(argv, "--approval-mode") == "default" and "-y" not in argv and "--yolo" not in argv


def check_aider(argv: list[str]) -> None:
    assert flag_value(argv, "--chat-mode") == "ask"


def check_hermes(argv: list[str]) -> None:
    toolsets = set(flag_value(argv, "-t").split(","))
    assert toolsets and not toolsets & {"file", "terminal", "code_execution", "memory", "skills", "all", "*", "hermes-cli"}
    assert "--yolo" not in argv


def check_omp(argv: list[str]) -> None:
    tools = set(flag_value(argv, "--tools").split(","))
    assert "read" in tools and not tools & {"write", "edit", "bash", "python", "notebook", "lsp", "task"}
    assert "--auto-approve" not in argv


READ_ONLY = {"claude-code": check_claude, "codex": check_codex, "gemini": check_gemini, "aider": check_aider,
             "hermes": check_hermes, "omp": check_omp}


@pytest.mark.parametrize("adapter", ALL_CLIS)
def test_analyze_runs_with_the_clis_read_only_flags(adapter: str, repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    dump = dumps_dir(repo, tmp_path) / "seen.json"
    data = run_job(repo, tmp_path, task(adapter, f"dump-env: {dump}"))
    assert data["status"] == "succeeded", data["tasks"]
    READ_ONLY[adapter](json.loads(dump.read_text())["argv"])


@pytest.mark.parametrize("adapter", ALL_CLIS)
def test_an_analyze_run_writes_nothing(adapter: str, repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    data = run_job(repo, tmp_path, task(adapter, "write planted.txt: should not exist\nanswer: looked", max_attempts=1))
    assert not (repo / "planted.txt").exists()
    state = data["tasks"][0]
    if adapter in ("claude-code", "codex"):  # they say what they were refused: see below
        assert state["state"] == "failed"
    else:  # no tool to write with was offered
        assert state["state"] == "succeeded", state


@pytest.mark.parametrize(("adapter", "refused"), [("claude-code", "Write"), ("codex", "planted.txt")])
def test_a_write_refused_in_analyze_is_not_retried(adapter: str, refused: str, repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    data = run_job(repo, tmp_path, task(adapter, "write planted.txt: x\nanswer: looked", max_attempts=3))
    (state,) = data["tasks"]
    assert state["state"] == "failed" and state["attempts"] == 1  # of 3 allowed
    assert state["error"].startswith(f"{adapter}: analyze is read-only and the agent tried to write")
    assert refused in state["error"] and "not retried" in state["error"]
    assert not (repo / "planted.txt").exists()


def test_a_failed_patch_in_implement_mode_is_no_denial(repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    """Codex's failed file_change counts as a refusal only in analyze mode ([analyze] denials)."""
    body = task("codex", "write hello.txt: hi", mode="implement", checks=["test -f hello.txt"])
    data = run_job(repo, tmp_path, body)
    assert data["status"] == "succeeded", data["tasks"]


def test_implement_runs_keep_their_write_tools(repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    dumps = dumps_dir(repo, tmp_path)
    for adapter in ("hermes", "omp"):
        dump = dumps / f"{adapter}.json"
        data = run_job(repo, tmp_path, task(adapter, f"dump-env: {dump}\nwrite hello.txt: hi", mode="implement",
                                            checks=["test -f hello.txt"]))
        assert data["status"] == "succeeded", data["tasks"]
        argv = json.loads(dump.read_text())["argv"]
        if adapter == "hermes":
            assert {"file", "terminal"} <= set(flag_value(argv, "-t").split(","))
        else:
            assert "--auto-approve" in argv and "--tools" not in argv
