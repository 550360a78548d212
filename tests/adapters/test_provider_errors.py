"""Each shipped spec's provider_error_regex against what its CLI prints for a quota, a key without credit
and an unknown model (the fakes print the real shapes; tests/fakes/bin/* cite them), and not for other failures."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gitswarm.adapters.agentspec import load_spec
from gitswarm.adapters.names import shipped_dir
from gitswarm.adapters.report import read_report
from gitswarm.model.errors import BadInput
from tests.conftest import FAKES

SHIPPED = shipped_dir()
assert SHIPPED is not None

ARGV = {
    "claude-code": ["claude", "-p", "{prompt}", "--output-format", "json"],
    "codex": ["codex", "exec", "--json", "--skip-git-repo-check", "{prompt}"],
    "gemini": ["gemini", "-p", "{prompt}", "--output-format", "json", "--skip-trust"],
    "aider": ["aider", "--message", "{prompt}", "--no-git"],
    "hermes": ["hermes", "-z", "{prompt}", "-m", "hermes-4"],
    "omp": ["omp", "-p", "{prompt}", "--mode", "json", "--no-session"],
}

#: What each spec's regex finds in its CLI's output, by failure.
FOUND = {
    "claude-code": {"quota": "rate_limit_error", "funds": "Credit balance is too low",
                    "model": 'not_found_error","message":"model: claude-sonnet-4-5'},
    "codex": {"quota": "You've hit your usage limit", "funds": "Quota exceeded. Check your plan and billing details",
              "model": "The model `gpt-5.5` does not exist or you do not have access to it"},
    "gemini": {"quota": "You exceeded your current quota", "funds": "prepayment credits are depleted",
               "model": "models/gemini-2.5-pro is not found"},
    "aider": {"quota": "litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached for gpt-4o",
              "funds": "litellm.RateLimitError: RateLimitError: OpenAIException - You exceeded your current quota",
              "model": "litellm.NotFoundError: NotFoundError: OpenAIException - The model `gpt-4o` does not exist"},
    "hermes": {"quota": "Error code: 429 - {'error': {'message': 'Rate limit reached for hermes-4",
               "funds": "Error code: 402 - {'error': {'message': 'Insufficient credits.",
               "model": "Error code: 404 - {'error': {'message': 'The model `hermes-4` does not exist"},
    "omp": {"quota": "rate_limit_error", "funds": "credit balance is too low",
            "model": 'not_found_error","message":"model: claude-sonnet-4-5'},
}


def run_fake(adapter: str, directive: str, cwd: Path) -> tuple[int, bytes, bytes]:
    prompt = f"# Your task: t\n{directive}\n"
    argv = [prompt if word == "{prompt}" else word for word in ARGV[adapter]]
    env = dict(os.environ, PATH=f"{FAKES}{os.pathsep}{os.environ.get('PATH', '')}")
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, stdin=subprocess.DEVNULL, timeout=60, check=False)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("kind", ["quota", "funds", "model"])
@pytest.mark.parametrize("adapter", sorted(ARGV))
def test_each_cli_s_provider_error_is_recognised(adapter: str, kind: str, tmp_path: Path) -> None:
    spec = load_spec(SHIPPED / f"{adapter}.toml")
    code, out, err = run_fake(adapter, f"fail-provider: {kind}", tmp_path)
    report = read_report(spec.output, out, err)
    assert report.failed or code != 0  # hermes says so in its usage file and its exit code
    assert report.provider_error is not None and report.provider_error.startswith(FOUND[adapter][kind])


@pytest.mark.parametrize("adapter", sorted(ARGV))
def test_other_failures_and_successes_are_no_provider_error(adapter: str, tmp_path: Path) -> None:
    spec = load_spec(SHIPPED / f"{adapter}.toml")
    for directive in ("fail: the tool crashed", "answer: ok", "fail-provider: quota for another-model\nanswer: ok"):
        _, out, err = run_fake(adapter, directive, tmp_path)
        assert read_report(spec.output, out, err).provider_error is None, (directive, out, err)


def test_a_provider_error_regex_needs_one_group(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text("executable = \"x\"\n[output]\nprovider_error_regex = 'quota'\n")
    with pytest.raises(BadInput, match=r"output\.provider_error_regex: needs exactly one group"):
        load_spec(path)
