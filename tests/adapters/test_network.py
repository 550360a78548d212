"""The network side of a run: proxy and certificate variables reach every agent (end to end), and
every shipped spec sets the kill switches its CLI documents for telemetry and update checks.

Each shipped spec drives its fake CLI (tests/fakes/bin) through `gitswarm run`; the fake's
`dump-env: PATH` directive writes the environment it was started with.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitswarm.adapters.agentspec import AgentSpec, load_spec
from gitswarm.adapters.names import shipped_dir
from tests.conftest import cli, dumps_dir, spec_text

ALL_CLIS = ("claude-code", "codex", "gemini", "aider", "hermes", "omp")
PROXIES = {
    "HTTPS_PROXY": "http://proxy.corp.example:3128",
    "http_proxy": "http://proxy.corp.example:3128",
    "NO_PROXY": "127.0.0.1,localhost,.corp.example",
    "all_proxy": "socks5://proxy.corp.example:1080",
    "NODE_EXTRA_CA_CERTS": "/etc/corp/ca.pem",
    "REQUESTS_CA_BUNDLE": "/etc/corp/ca.pem",
    "SSL_CERT_FILE": "/etc/corp/ca.pem",
    "SSL_CERT_DIR": "/etc/corp/certs",
}


def run_one(repo: Path, tmp_path: Path, body: str) -> dict:
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(body))
    result = cli(repo, "--json", "run", str(spec), "-j", "1")
    assert result.out, result.err
    return result.json()


@pytest.mark.parametrize("adapter", ALL_CLIS)
def test_proxy_and_certificate_variables_reach_the_agent(
    adapter: str, repo: Path, tmp_path: Path, fake_clis: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in PROXIES.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PLANTED_SECRET", "s3cr3t")
    dump = dumps_dir(repo, tmp_path) / "env.json"
    data = run_one(repo, tmp_path, f'id = "t"\nadapter = "{adapter}"\nprompt = {json.dumps(f"dump-env: {dump}")}\n')
    assert data["status"] == "succeeded", data["tasks"]
    env = json.loads(dump.read_text())["env"]
    assert {name: env.get(name) for name in PROXIES} == PROXIES
    assert "PLANTED_SECRET" not in env


# -- the documented kill switches (AGENT-CLIS.md, realclis/README.md) are in every shipped spec ---------


def words(spec: AgentSpec, mode: str) -> list[str]:
    return [w for arg in spec.args_for(mode) or () for w in ([arg] if isinstance(arg, str) else arg)]


def shipped(name: str) -> AgentSpec:
    directory = shipped_dir()
    assert directory is not None
    return load_spec(directory / f"{name}.toml")


def test_claude_code_sends_no_nonessential_traffic() -> None:
    assert shipped("claude-code").env == {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
                                          "DISABLE_ERROR_REPORTING": "1", "DISABLE_AUTOUPDATER": "1"}


@pytest.mark.parametrize("mode", ["analyze", "implement"])
def test_codex_analytics_and_plugins_are_off(mode: str) -> None:
    argv = words(shipped("codex"), mode)
    assert "analytics.enabled=false" in argv and argv[argv.index("--disable") + 1] == "plugins"


@pytest.mark.parametrize("mode", ["analyze", "implement"])
def test_aider_fetches_no_price_map_and_checks_no_update(mode: str) -> None:
    spec = shipped("aider")
    assert spec.env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert {"--no-check-update", "--analytics-disable"} <= set(words(spec, mode))


def test_gemini_usage_statistics_are_off() -> None:
    assert shipped("gemini").home_json == {".gemini/settings.json": {"privacy": {"usageStatisticsEnabled": False}}}


def test_hermes_update_check_is_fresh_for_the_version_the_spec_was_checked_against() -> None:
    """Hermes trusts its stamp only when `ver` is its own version (hermes_cli/banner.py)."""
    state = shipped("hermes").state_home
    assert state is not None and state.json == {".update_check": {"ts": "{now}", "behind": 0, "ver": "0.19.0"}}
    fake = (Path(__file__).parents[1] / "fakes" / "bin" / "hermes").read_text()
    assert 'VERSION = "0.19.0"' in fake


def test_claude_code_kill_switches_reach_the_agent(repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    dump = dumps_dir(repo, tmp_path) / "env.json"
    data = run_one(repo, tmp_path, f'id = "t"\nadapter = "claude-code"\nprompt = {json.dumps(f"dump-env: {dump}")}\n')
    assert data["status"] == "succeeded"
    env = json.loads(dump.read_text())["env"]
    assert env["DISABLE_TELEMETRY"] == env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
