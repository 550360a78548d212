"""`gitswarm cost` against hand-computed sums over several jobs, run by the fake CLIs through the
shipped specs (claude reports its cost, codex only tokens: priced from adapters/prices.toml, gemini on
a model with no price: unknown)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import cli, spec_text


def task(adapter: str, prompt: str, id: str, **fields: object) -> str:
    body = f'id = "{id}"\nadapter = "{adapter}"\nprompt = {json.dumps(prompt)}\n'
    return body + "".join(f"{key} = {json.dumps(value)}\n" for key, value in fields.items())


def run(repo: Path, tmp_path: Path, goal: str, *tasks: str) -> str:
    spec = tmp_path / f"{goal}.toml"
    spec.write_text(spec_text(*tasks, goal=goal))
    result = cli(repo, "--json", "run", str(spec), "-j", "1")
    assert result.code == 0, result.err
    return result.json()["id"]


@pytest.fixture
def jobs(repo: Path, tmp_path: Path, fake_clis: Path) -> tuple[str, str]:
    first = run(repo, tmp_path, "first",
                task("claude-code", "findings\ntokens: 1000 100\ncost: 0.5", "a"),
                task("codex", "findings\ntokens: 2000 200", "b"))
    second = run(repo, tmp_path, "second",
                 task("claude-code", "findings\ntokens: 500 50\ncost: 0.25", "c"),
                 'id = "d"\ncommand = "true"',
                 task("gemini", "findings\ntokens: 300 30", "e", model="mystery-model"))
    return first, second


# analyze tasks take the fast tier by default: codex's is gpt-5-mini, priced per million tokens in adapters/prices.toml
CODEX = (2000 * 0.25 + 200 * 2.0) / 1e6


def test_cost_sums_every_agent_run_by_adapter_model_and_job(repo: Path, jobs: tuple[str, str]) -> None:
    first, second = jobs
    data = cli(repo, "--json", "cost").json()
    total = data["total"]
    assert total["runs"] == 4  # the shell task is no model run
    assert (total["input_tokens"], total["output_tokens"]) == (3800, 380)
    assert total["usd"] == pytest.approx(0.5 + CODEX + 0.25) and total["estimated_usd"] == pytest.approx(CODEX)
    assert (total["unknown_cost_runs"], total["unknown_cost_tokens"]) == (1, 330)
    by_adapter = data["by_adapter"]
    assert set(by_adapter) == {"claude-code", "codex", "gemini"}
    assert by_adapter["claude-code"]["runs"] == 2 and by_adapter["claude-code"]["usd"] == pytest.approx(0.75)
    assert by_adapter["codex"]["usd"] == pytest.approx(CODEX) and by_adapter["codex"]["estimated_usd"] == pytest.approx(CODEX)
    assert by_adapter["gemini"]["unknown_cost_runs"] == 1 and by_adapter["gemini"]["usd"] == 0
    assert data["by_model"]["gpt-5-mini"]["runs"] == 1 and data["by_model"]["mystery-model"]["unknown_cost_runs"] == 1
    assert data["by_job"][first]["usd"] == pytest.approx(0.5 + CODEX)
    assert data["by_job"][second]["usd"] == pytest.approx(0.25) and data["by_job"][second]["runs"] == 2
    assert data["by_tier"]["fast"]["runs"] == 3  # the analyze default; the gemini task named its model
    assert sum(t["runs"] for t in data["by_tier"].values()) == 4


def test_since_leaves_older_runs_out(repo: Path, jobs: tuple[str, str]) -> None:
    assert cli(repo, "--json", "cost", "--since", "1d").json()["total"]["runs"] == 4
    later = cli(repo, "--json", "cost", "--since", "2999-01-01").json()
    assert later["total"]["runs"] == 0 and later["by_adapter"] == {}
    assert cli(repo, "cost", "--since", "2999-01-01").out.strip() == "no agent runs since then"


def test_the_text_names_unknown_costs_apart(repo: Path, jobs: tuple[str, str]) -> None:
    out = cli(repo, "cost").out
    assert "ADAPTER" in out and "MODEL" in out and "JOB" in out
    assert "cost unknown for 1 runs (330 tokens)" in out
    assert f"total: 4 runs, 4,180 tokens, ${0.5 + CODEX + 0.25:.4f}" in out


@pytest.mark.parametrize("since", ["yesterday", "7x", "-1d", "\u0663d", "\u0662\u0660\u0662\u0666-11-30"])  # other scripts' digits too
def test_a_bad_since_is_bad_input(repo: Path, since: str) -> None:
    result = cli(repo, "cost", "--since", since)
    assert result.code == 2 and "--since" in result.err and len(result.err.strip().splitlines()) == 1


def test_cost_writes_nothing_and_needs_no_index(repo: Path) -> None:
    result = cli(repo, "--json", "cost")
    assert result.code == 0 and result.json()["total"]["runs"] == 0
    assert not (repo / ".git" / "gitswarm" / "index.sqlite").exists()


def test_cost_reads_the_same_from_an_index_rebuilt_from_the_refs(repo: Path, jobs: tuple[str, str]) -> None:
    before = cli(repo, "--json", "cost").json()
    assert cli(repo, "index", "rebuild").code == 0
    assert cli(repo, "--json", "cost").json() == before
    (repo / ".git" / "gitswarm" / "index.sqlite").unlink()  # a clone with no index yet: built in memory, written nowhere
    assert cli(repo, "--json", "cost").json() == before
