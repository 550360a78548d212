"""`extends`: a spec that adds to another; and where specs are looked up (repository, user, shipped)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gitswarm.adapters.agentspec import load_spec, load_spec_chain
from gitswarm.adapters.extends import merge
from gitswarm.adapters.names import shipped_dir, spec_dirs, user_config_dir
from gitswarm.adapters.preflight import _key
from gitswarm.adapters.registry import Registry, repo_registry
from gitswarm.model.errors import BadInput
from tests.conftest import cli, dumps_dir, spec_text

SHIPPED = shipped_dir()
assert SHIPPED is not None


def write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.toml"
    path.write_text(text)
    return path


@pytest.fixture
def user_dir(isolated_env: Path) -> Path:
    """The user's spec folder under the test's own HOME (XDG_CONFIG_HOME is unset: tests/adapters/conftest.py)."""
    return isolated_env / ".config" / "gitswarm" / "adapters"


def repo_dir(repo: Path) -> Path:
    return repo / ".gitswarm" / "adapters"


# -- the merge rules -------------------------------------------------------------------------


def test_lists_are_appended_tables_merged_key_by_key_and_scalars_replaced() -> None:
    base = {
        "executable": "agent", "timeout": "30m", "pass_env": ["A_KEY"], "capabilities": ["edit"],
        "env": {"ONE": "1", "TWO": "2"}, "implement": {"args": ["-p", "{prompt}"]},
        "home_json": {".a/settings.json": {"privacy": {"stats": False}, "theme": "dark"}},
    }
    child = {
        "extends": "base", "timeout": "5m", "pass_env": ["B_KEY"], "env": {"TWO": "two", "THREE": "3"},
        "implement": {"args": ["--flag"]}, "home_json": {".a/settings.json": {"auth": {"type": "key"}}},
    }
    assert merge(base, child) == {
        "executable": "agent", "timeout": "5m", "pass_env": ["A_KEY", "B_KEY"], "capabilities": ["edit"],
        "env": {"ONE": "1", "TWO": "two", "THREE": "3"}, "implement": {"args": ["-p", "{prompt}", "--flag"]},
        "home_json": {".a/settings.json": {"privacy": {"stats": False}, "theme": "dark", "auth": {"type": "key"}}},
    }
    assert base["pass_env"] == ["A_KEY"] and child["pass_env"] == ["B_KEY"]  # neither is changed


def test_an_output_selector_is_one_value_but_output_lists_are_appended() -> None:
    base = {"output": {"format": "jsonl", "text": {"path": "a", "where": {"type": "x"}}, "drop_lines": ["^x"]}}
    child = {"output": {"text": {"path": "b"}, "drop_lines": ["^y"]}}
    assert merge(base, child)["output"] == {"format": "jsonl", "text": {"path": "b"}, "drop_lines": ["^x", "^y"]}


def test_replace_takes_the_named_keys_as_they_are() -> None:
    base = {"implement": {"args": ["-p", "{prompt}", "--old"]}, "capabilities": ["edit", "web"], "env": {"A": "1"}}
    child = {"replace": ["implement.args", "capabilities", "env"], "implement": {"args": ["-p", "{prompt}"]},
             "capabilities": ["edit"], "env": {"B": "2"}}
    assert merge(base, child) == {"implement": {"args": ["-p", "{prompt}"]}, "capabilities": ["edit"], "env": {"B": "2"}}


# -- extending a shipped spec ----------------------------------------------------------------


def test_a_repository_spec_extends_the_shipped_one_of_its_own_name(repo: Path) -> None:
    path = write(repo_dir(repo), "claude-code", """
extends = "claude-code"
pass_env = ["CORP_GATEWAY_TOKEN"]
timeout = "5m"
[env]
ANTHROPIC_CUSTOM_HEADERS = "x-team: swarm"
[implement]
args = ["--add-dir", "/srv/shared"]
""")
    shipped = load_spec(SHIPPED / "claude-code.toml")
    spec, chain = load_spec_chain(path, spec_dirs(repo))
    assert chain == [path, SHIPPED / "claude-code.toml"]
    assert spec.pass_env == [*shipped.pass_env, "CORP_GATEWAY_TOKEN"]
    assert spec.env == {**shipped.env, "ANTHROPIC_CUSTOM_HEADERS": "x-team: swarm"}
    assert spec.timeout == "5m" and spec.executable == "claude"
    assert spec.implement.args == [*shipped.implement.args, "--add-dir", "/srv/shared"]
    assert spec.analyze == shipped.analyze and spec.output == shipped.output
    found = repo_registry(repo).found("claude-code")
    assert found.source == str(path) and found.files == (str(path), str(SHIPPED / "claude-code.toml"))


def test_a_spec_extends_another_name(repo: Path) -> None:
    write(repo_dir(repo), "claude-local", 'extends = "claude-code"\nmodel = "local-sonnet"\n')
    registry = repo_registry(repo)
    assert "claude-local" in registry.names()
    spec = registry.found("claude-local").spec
    assert spec is not None and spec.model == "local-sonnet" and spec.executable == "claude"


def test_extends_of_an_unknown_spec_is_a_spec_error(repo: Path) -> None:
    path = write(repo_dir(repo), "mine", 'extends = "no-such-agent"\n')
    with pytest.raises(BadInput) as info:
        repo_registry(repo).found("mine")
    message = str(info.value)
    assert str(path) in message and "extends" in message and "'no-such-agent'" in message


def test_extends_in_a_cycle_is_a_spec_error(repo: Path) -> None:
    a = write(repo_dir(repo), "a", 'extends = "b"\n')
    b = write(repo_dir(repo), "b", 'extends = "c"\n')
    write(repo_dir(repo), "c", 'extends = "a"\nexecutable = "x"\n')
    with pytest.raises(BadInput) as info:
        load_spec(a, spec_dirs(repo))
    message = str(info.value)
    assert "cycle" in message and str(a) in message and str(b) in message


def test_a_spec_extending_its_own_name_with_nothing_below_is_a_spec_error(repo: Path) -> None:
    path = write(repo_dir(repo), "solo", 'extends = "solo"\nexecutable = "x"\n')
    with pytest.raises(BadInput) as info:
        load_spec(path, spec_dirs(repo))
    assert "'solo' below this one" in str(info.value)


@pytest.mark.parametrize(("text", "said"), [
    ('executable = "x"\nreplace = ["executable"]\n', "only a spec that extends"),
    ('extends = "claude-code"\nreplace = ["implement.args"]\n', "'implement.args' is not set"),
    ('extends = "shell"\n', "built-in shell"),
    ('extends = "Not A Name"\n', "not an adapter name"),
    ('extends = "claude-code"\nexecutabel = "typo"\n', "unknown key"),
])
def test_bad_extends_and_replace_are_spec_errors(repo: Path, text: str, said: str) -> None:
    path = write(repo_dir(repo), "mine", text)
    with pytest.raises(BadInput) as info:
        load_spec(path, spec_dirs(repo))
    assert said in str(info.value) and str(path) in str(info.value)


def test_a_changed_base_invalidates_the_preflight_cache(repo: Path, user_dir: Path) -> None:
    write(repo_dir(repo), "mine", 'extends = "base"\n')
    base = write(user_dir, "base", 'executable = "x"\n')
    before = _key(repo_registry(repo).found("mine"))
    base.write_text('executable = "x"\nversion_args = ["-V"]\n')
    assert _key(repo_registry(repo).found("mine")) != before


# -- lookup order: repository, user folder, shipped --------------------------------------------


def test_lookup_order_is_repository_then_user_then_shipped(repo: Path, user_dir: Path) -> None:
    registry = repo_registry(repo)
    assert registry.spec_path("codex") == SHIPPED / "codex.toml"
    user = write(user_dir, "codex", 'executable = "my-codex"\n')
    write(user_dir, "only-mine", 'executable = "mine"\n')
    registry = repo_registry(repo)
    assert registry.spec_path("codex") == user and "only-mine" in registry.names()
    ours = write(repo_dir(repo), "codex", 'executable = "team-codex"\n')
    assert repo_registry(repo).spec_path("codex") == ours
    assert spec_dirs(repo) == [repo_dir(repo), user_dir, SHIPPED]


def test_xdg_config_home_moves_the_user_folder(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    assert user_config_dir() == config / "gitswarm"
    mine = write(config / "gitswarm" / "adapters", "gemini", 'executable = "my-gemini"\n')
    assert repo_registry(repo).spec_path("gemini") == mine
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/dir")  # ignored, as the XDG spec says
    assert user_config_dir() == Path(os.environ["HOME"]) / ".config" / "gitswarm"


def test_a_chain_through_every_level(repo: Path, user_dir: Path) -> None:
    """The repository's claude-code extends the user's, which extends the shipped one."""
    ours = write(repo_dir(repo), "claude-code", 'extends = "claude-code"\npass_env = ["TEAM_KEY"]\n')
    mine = write(user_dir, "claude-code", 'extends = "claude-code"\npass_env = ["MY_KEY"]\n')
    spec, chain = load_spec_chain(ours, spec_dirs(repo))
    assert chain == [ours, mine, SHIPPED / "claude-code.toml"]
    assert spec.pass_env[-2:] == ["MY_KEY", "TEAM_KEY"]


def test_user_prices_sit_between_shipped_and_repository_prices(repo: Path, user_dir: Path) -> None:
    (user_dir.parent / "prices.toml").parent.mkdir(parents=True, exist_ok=True)
    (user_dir.parent / "prices.toml").write_text('[models."local-llama"]\ninput = 0.1\noutput = 0.2\n'
                                                 '[models."gpt-5"]\ninput = 9.0\noutput = 9.0\n')
    (repo / ".gitswarm").mkdir()
    (repo / ".gitswarm" / "prices.toml").write_text('[models."gpt-5"]\ninput = 2.0\noutput = 3.0\n')
    prices = Registry(spec_dirs(repo), repo).prices()
    assert prices.cost("local-llama", 1_000_000, 1_000_000) == pytest.approx(0.3)
    assert prices.cost("gpt-5", 1_000_000, 1_000_000) == pytest.approx(5.0)


# -- end to end --------------------------------------------------------------------------------


def test_an_extending_spec_runs_with_its_additions(
    repo: Path, tmp_path: Path, fake_clis: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Codex pointed at another provider the way AGENT-CLIS.md says (`-c model_provider=...`), its key in pass_env."""
    write(repo_dir(repo), "codex-local", """
extends = "codex"
model = "gpt-5.5"
pass_env = ["LOCAL_OPENAI_KEY"]
[analyze]
args = ["-c", "model_provider=local", "-c", 'model_providers.local={{name="local", base_url="http://127.0.0.1:9/v1", wire_api="responses", env_key="LOCAL_OPENAI_KEY"}}']
""")
    monkeypatch.setenv("LOCAL_OPENAI_KEY", "k-local")
    dump = dumps_dir(repo, tmp_path) / "env.json"
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(f'id = "t"\nadapter = "codex-local"\nprompt = {json.dumps(f"dump-env: {dump}")}\n'))
    result = cli(repo, "--json", "run", str(spec), "-j", "1")
    assert result.out, result.err
    data = result.json()
    assert data["status"] == "succeeded", data["tasks"]
    seen = json.loads(dump.read_text())
    assert seen["env"]["LOCAL_OPENAI_KEY"] == "k-local"
    argv = seen["argv"]
    assert argv[:2] == ["exec", "--json"] and "model_provider=local" in argv
    assert 'model_providers.local={name="local", base_url="http://127.0.0.1:9/v1", wire_api="responses", ' \
           'env_key="LOCAL_OPENAI_KEY"}' in argv  # literal braces are doubled in a template
    assert argv[argv.index("-m") + 1] == "gpt-5.5"
    check = cli(repo, "--json", "adapters", "check", "codex-local")
    assert check.code == 0, check.out + check.err


def test_a_relative_executable_is_the_spec_files_at_run_time_too(repo: Path, tmp_path: Path, user_dir: Path) -> None:
    """Preflight found it beside the spec; the run must not look for it in the task's directory."""
    tool = user_dir / "bin" / "my-agent"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\necho \"ran in $(pwd)\"\n")
    tool.chmod(0o755)
    write(user_dir, "mine", 'executable = "bin/my-agent"\n')
    assert repo_registry(repo).found("mine").executable == str(tool)
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text('id = "t"\nadapter = "mine"\nprompt = "hi"\n'))
    data = cli(repo, "--json", "run", str(spec), "-j", "1").json()
    assert data["status"] == "succeeded", data["tasks"]
