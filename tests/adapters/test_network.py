"""What reaches an agent from the network side: proxy and certificate variables, end to end.

Each shipped spec drives its fake CLI (tests/fakes/bin) through `gitswarm run`; the fake's
`dump-env: PATH` directive writes the environment it was started with.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import cli, spec_text

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
    dump = tmp_path / "env.json"
    data = run_one(repo, tmp_path, f'id = "t"\nadapter = "{adapter}"\nprompt = {json.dumps(f"dump-env: {dump}")}\n')
    assert data["status"] == "succeeded", data["tasks"]
    env = json.loads(dump.read_text())["env"]
    assert {name: env.get(name) for name in PROXIES} == PROXIES
    assert "PLANTED_SECRET" not in env
