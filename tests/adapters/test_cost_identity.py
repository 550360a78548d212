"""Honest cost and identity of runs: a zero cost for tokens spent is no price (priced from tokens,
else unknown, never free); model and session recorded for every CLI that prints them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitswarm.adapters.agentspec import load_spec
from gitswarm.adapters.names import shipped_dir
from gitswarm.adapters.pricing import Price, PriceTable, run_cost
from gitswarm.adapters.report import read_report
from gitswarm.model.errors import BadInput
from tests.conftest import cli, spec_text

SHIPPED = shipped_dir()
assert SHIPPED is not None
PRICES = PriceTable({"gpt-5": Price(input=1.25, output=10.0)})


def gpt5(inp: int, out: int) -> float:
    return (inp * 1.25 + out * 10.0) / 1e6


# -- the rule --------------------------------------------------------------------------------


@pytest.mark.parametrize(("reported", "model", "tokens", "expected"), [
    (0.05, "gpt-5", (1000, 100), (0.05, False)),                 # a positive cost is the CLI's own
    (0.0, "gpt-5", (0, 0), (0.0, False)),                        # nothing spent: a real zero
    (0.0, "gpt-5", (1000, 100), (gpt5(1000, 100), True)),        # zero for tokens spent: priced from tokens
    (0.0, "local-llama", (1000, 100), (None, False)),            # ... else unknown, not free
    (0.0, "gpt-5", (None, None), (None, False)),                 # zero, tokens unknown: unknown
    (None, "gpt-5", (1000, 100), (gpt5(1000, 100), True)),       # no cost reported (codex, gemini)
    (None, None, (1000, 100), (None, False)),
    (-1.0, "gpt-5", (1000, 100), (gpt5(1000, 100), True)),       # a negative figure is no cost
])
def test_run_cost(reported: float | None, model: str | None, tokens: tuple, expected: tuple) -> None:
    cost, estimated = run_cost(reported, model, *tokens, PRICES)
    assert (cost if cost is None else pytest.approx(cost), estimated) == (
        expected[0] if expected[0] is None else pytest.approx(expected[0]), expected[1])


def test_a_negative_reported_cost_is_read_as_none() -> None:
    spec = load_spec(SHIPPED / "claude-code.toml").output
    report = read_report(spec, b'{"result": "x", "total_cost_usd": -0.5, "session_id": "s"}', b"")
    assert report.cost_usd is None


# -- end to end ------------------------------------------------------------------------------


def run_task(repo: Path, tmp_path: Path, adapter: str, prompt: str, **fields: object) -> dict:
    """One task; its run record."""
    body = f'id = "t"\nadapter = "{adapter}"\nprompt = {json.dumps(prompt)}\n'
    body += "".join(f"{key} = {json.dumps(value)}\n" for key, value in fields.items())
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(body))
    result = cli(repo, "--json", "run", str(spec), "-j", "1")
    assert result.out, result.err
    data = result.json()
    assert data["status"] == "succeeded", data["tasks"]
    listed = cli(repo, "--json", "artifacts", data["id"]).json()["artifacts"]
    (run,) = [cli(repo, "--json", "artifact", a["id"]).json()["record"] for a in listed if a["kind"] == "run"]
    return run


def test_hermes_zero_cost_from_a_custom_endpoint_is_priced_from_tokens(repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    """Hermes reports estimated_cost_usd 0.0 for a custom endpoint (AGENT-CLIS.md): not a real zero."""
    run = run_task(repo, tmp_path, "hermes", "tokens: 40000 2000\ncost: 0", model="gpt-5")
    assert run["cost_usd"] == pytest.approx(gpt5(40000, 2000)) and run["cost_estimated"] is True
    assert (run["input_tokens"], run["output_tokens"], run["model"]) == (40000, 2000, "gpt-5")


def test_hermes_zero_cost_for_an_unpriced_model_is_unknown_not_free(repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    run = run_task(repo, tmp_path, "hermes", "tokens: 40000 2000\ncost: 0", model="local-llama")
    assert run["cost_usd"] is None and run["cost_estimated"] is False


def test_claude_zero_cost_behind_a_custom_base_url(
    repo: Path, tmp_path: Path, fake_clis: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    run = run_task(repo, tmp_path, "claude-code", "tokens: 10000 1000\ncost: 0")
    # an analyze task: the fast tier; the model from its modelUsage; priced from adapters/prices.toml
    assert run["model"] == "claude-haiku-4-5"
    assert run["cost_usd"] == pytest.approx((10000 * 1.0 + 1000 * 5.0) / 1e6) and run["cost_estimated"] is True
    unpriced = run_task(repo, tmp_path, "claude-code", "tokens: 10000 1000\ncost: 0", model="gateway-llama-70b")
    assert unpriced["model"] == "gateway-llama-70b" and unpriced["cost_usd"] is None


def test_a_users_prices_price_a_custom_model(repo: Path, tmp_path: Path, fake_clis: Path, isolated_env: Path) -> None:
    prices = isolated_env / ".config" / "gitswarm" / "prices.toml"
    prices.parent.mkdir(parents=True)
    prices.write_text('[models."local-llama"]\ninput = 0.5\noutput = 1.0\n')
    run = run_task(repo, tmp_path, "omp", "tokens: 2000000 1000000\ncost: 0", model="local-llama")
    assert run["cost_usd"] == pytest.approx(2.0) and run["cost_estimated"] is True


#: What each CLI prints of its model and session (AGENT-CLIS.md and the headers of tests/fakes/bin/*).
#: codex prints no model (its JSONL has none): the run records the model gitswarm passed with -m.
#: An analyze task takes the fast tier of the specs that name tiers (claude-code, codex, gemini).
IDENTITY = {
    "claude-code": ("claude-haiku-4-5", True),    # modelUsage keys; session_id
    "codex": ("gpt-5-mini", True),                # -m (the fast tier); thread.started thread_id
    "gemini": ("gemini-2.5-flash", True),         # stats.models keys; session_id
    "aider": ("gpt-4o", False),                   # its banner `Model: gpt-4o with diff edit format`; no session id
    "hermes": (None, True),                       # the usage file's model (none configured here); session_id
    "omp": ("claude-sonnet-4-5", True),           # message_end message.model; the session header id
}


@pytest.mark.parametrize("adapter", sorted(IDENTITY))
def test_model_and_session_are_recorded(adapter: str, repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    run = run_task(repo, tmp_path, adapter, "answer: ok")
    model, has_session = IDENTITY[adapter]
    assert run["model"] == model
    assert bool(run["session_id"]) is has_session


@pytest.mark.parametrize("adapter", ["claude-code", "gemini", "aider", "hermes", "omp"])
def test_the_model_the_cli_says_it_ran_is_recorded(adapter: str, repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    """A task's model reaches the CLI and comes back in what it printed."""
    model = "openai/fake-model" if adapter == "aider" else "fake-model-7"
    run = run_task(repo, tmp_path, adapter, "answer: ok", model=model)
    assert run["model"] == ("fake-model-7" if adapter == "omp" else model)  # omp prints provider and name apart


@pytest.mark.parametrize("adapter", ["claude-code", "gemini"])
def test_the_model_that_wrote_most_is_the_runs_model(adapter: str, repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    """A second, smaller model listed first in the per-model usage does not name the run."""
    run = run_task(repo, tmp_path, adapter, "answer: ok\nalso-model: small-helper-model\ntokens: 5000 500")
    assert run["model"] == {"claude-code": "claude-haiku-4-5", "gemini": "gemini-2.5-flash"}[adapter]  # the fast tier
    assert (run["input_tokens"], run["output_tokens"]) == (5000, 500)


@pytest.mark.parametrize("selector", ['{ path = "usage.model", key = true }', '{ path = "m.*.n", take = "sum", key = true }'])
def test_a_key_selector_needs_a_star_and_no_sum(tmp_path: Path, selector: str) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(f'executable = "x"\n[output]\nformat = "json"\nmodel = {selector}\n')
    with pytest.raises(BadInput, match=r"output\.model: key = true"):
        load_spec(path)
