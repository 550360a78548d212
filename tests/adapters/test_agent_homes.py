"""What each run's home and state directory hold: settings merged in (gemini's usage statistics
off, hermes' update stamp), codex's CODEX_HOME honoured; end to end through the fakes, and
the JSON merge itself."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml

from gitswarm.adapters.agentspec import load_spec
from gitswarm.adapters.isolation import build_home, make_scratch, remove_scratch
from gitswarm.adapters.jsonfiles import patch_json_file, patch_yaml_file, strip_comments
from gitswarm.adapters.names import shipped_dir
from gitswarm.model.errors import BadInput
from tests.conftest import cli, dumps_dir, spec_text

SHIPPED = shipped_dir()
assert SHIPPED is not None


def run_dump(repo: Path, tmp_path: Path, adapter: str, *lines: str, **fields: object) -> dict:
    """Run one task whose fake dumps what it saw; that dump."""
    dump = dumps_dir(repo, tmp_path) / "seen.json"
    prompt = "\n".join([f"dump-env: {dump}", *lines])
    body = f'id = "t"\nadapter = "{adapter}"\nprompt = {json.dumps(prompt)}\n'
    body += "".join(f"{key} = {json.dumps(value)}\n" for key, value in fields.items())
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(body))
    result = cli(repo, "--json", "run", str(spec), "-j", "1")
    assert result.out, result.err
    data = result.json()
    assert data["status"] == "succeeded", data["tasks"]
    return json.loads(dump.read_text())


# -- gemini: usage statistics off ------------------------------------------------------------


def test_gemini_runs_with_usage_statistics_off(repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    seen = run_dump(repo, tmp_path, "gemini")
    assert seen["gemini_settings"] == {"privacy": {"usageStatisticsEnabled": False}}
    assert seen["usage_statistics"] is False


def test_gemini_settings_are_merged_with_the_users_own(
    repo: Path, tmp_path: Path, fake_clis: Path, isolated_env: Path
) -> None:
    real = isolated_env / ".gemini" / "settings.json"
    real.parent.mkdir()
    text = ('{\n  // my settings\n  "security": {"auth": {"selectedType": "gemini-api-key"}},\n'
            '  "privacy": {"usageStatisticsEnabled": true, "other": 1},\n  "ui": {"theme": "GitHub"}\n}\n')
    real.write_text(text)
    seen = run_dump(repo, tmp_path, "gemini")
    assert seen["gemini_settings"] == {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False, "other": 1},
        "ui": {"theme": "GitHub"},
    }
    assert seen["usage_statistics"] is False
    assert real.read_text() == text  # the user's own file is as it was


# -- codex: CODEX_HOME -----------------------------------------------------------------------


def codex_state(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "auth.json").write_text('{"OPENAI_API_KEY": "k"}')
    (root / "config.toml").write_text('model = "o3"\n')
    (root / "sessions").mkdir()
    (root / "sessions" / "rollout-old.jsonl").write_text("{}\n")
    (root / "history.jsonl").write_text("{}\n")
    return root


def test_codex_home_is_honoured(
    repo: Path, tmp_path: Path, fake_clis: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = codex_state(tmp_path / "elsewhere" / "codex-home")
    monkeypatch.setenv("CODEX_HOME", str(real))
    seen = run_dump(repo, tmp_path, "codex")
    state = seen["codex_home"]
    assert seen["env"]["CODEX_HOME"] == state["path"] != str(real)
    assert state["entries"] == {"auth.json": f"link -> {real / 'auth.json'}", "config.toml": "file"}
    assert sorted(p.name for p in real.iterdir()) == ["auth.json", "config.toml", "history.jsonl", "sessions"]


def test_codex_without_codex_home_uses_the_default(
    repo: Path, tmp_path: Path, fake_clis: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CODEX_HOME", raising=False)
    real = codex_state(isolated_env / ".codex")
    seen = run_dump(repo, tmp_path, "codex")
    assert seen["codex_home"]["entries"]["auth.json"] == f"link -> {real / 'auth.json'}"
    assert not any(name.startswith(".codex") for name in seen["home"])  # nothing of it in the home itself


# -- hermes: a fresh update stamp ------------------------------------------------------------


def test_hermes_gets_a_fresh_update_stamp_merged_over_the_users(
    repo: Path, tmp_path: Path, fake_clis: Path, isolated_env: Path
) -> None:
    real = isolated_env / ".hermes"
    real.mkdir()
    stale = {"ts": 1000.0, "behind": 7, "rev": None, "ver": "0.19.0"}
    (real / ".update_check").write_text(json.dumps(stale))
    started = time.time()
    seen = run_dump(repo, tmp_path, "hermes")
    assert seen["hermes_home"]["entries"][".update_check"] == "file"  # the run's own, not a link
    stamp = json.loads((real / ".update_check").read_text())
    assert stamp == stale  # the user's is unchanged
    spec = load_spec(SHIPPED / "hermes.toml")
    scratch = make_scratch()
    try:
        env: dict[str, str] = {}
        build_home(spec, scratch, {"HOME": str(isolated_env)}, env)
        written = json.loads((Path(env["HERMES_HOME"]) / ".update_check").read_text())
    finally:
        remove_scratch(scratch)
    assert written["behind"] == 0 and written["ver"] == "0.19.0" and started <= written["ts"] <= time.time()


def test_hermes_config_says_install_no_language_server_and_keeps_the_users_settings(
    tmp_path: Path, isolated_env: Path
) -> None:
    """AGENT-CLIS.md: hermes 0.19 fetches pyright from npm at its first .py write unless
    `lsp.install_strategy: manual`; the run's copy of config.yaml says so, the user's is unchanged."""
    real = isolated_env / ".hermes"
    real.mkdir()
    users = "# my settings\nmodel:\n  provider: custom\n  base_url: http://127.0.0.1:9/v1\nlsp:\n  enabled: true\n"
    (real / "config.yaml").write_text(users)
    scratch = make_scratch()
    try:
        env: dict[str, str] = {}
        build_home(load_spec(SHIPPED / "hermes.toml"), scratch, {"HOME": str(isolated_env)}, env)
        written = yaml.safe_load((Path(env["HERMES_HOME"]) / "config.yaml").read_text())
    finally:
        remove_scratch(scratch)
    assert written == {"model": {"provider": "custom", "base_url": "http://127.0.0.1:9/v1"},
                       "lsp": {"enabled": True, "install_strategy": "manual"}}
    assert (real / "config.yaml").read_text() == users


@pytest.mark.parametrize("text, why", [("- a\n- b\n", "not a YAML object"), ("a: [1\n", "not YAML")])
def test_a_yaml_file_that_is_not_a_mapping_is_bad_input(tmp_path: Path, text: str, why: str) -> None:
    (tmp_path / "config.yaml").write_text(text)
    with pytest.raises(BadInput, match=why):
        patch_yaml_file(tmp_path, "config.yaml", {"lsp": {"install_strategy": "manual"}}, 0.0)


def test_a_yaml_file_of_comments_only_is_empty(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("# nothing yet\n")
    path = patch_yaml_file(tmp_path, "config.yaml", {"lsp": {"install_strategy": "manual"}}, 0.0)
    assert yaml.safe_load(path.read_text()) == {"lsp": {"install_strategy": "manual"}}


# -- the merge -------------------------------------------------------------------------------


def test_a_json_file_is_created_merged_and_never_written_through_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text('{"a": {"b": 1, "c": [1]}, "keep": true}')
    root = tmp_path / "home"
    (root / ".tool").mkdir(parents=True)
    (root / ".tool" / "settings.json").symlink_to(real)
    path = patch_json_file(root, ".tool/settings.json", {"a": {"b": 2, "c": [2]}, "t": "{now}"}, 42.0)
    assert json.loads(path.read_text()) == {"a": {"b": 2, "c": [2]}, "keep": True, "t": 42.0}
    assert not path.is_symlink() and oct(path.stat().st_mode & 0o777) == "0o600"
    assert json.loads(real.read_text()) == {"a": {"b": 1, "c": [1]}, "keep": True}
    created = patch_json_file(root, ".new/dir/x.json", {"k": False}, 0.0)
    assert json.loads(created.read_text()) == {"k": False}


def test_a_json_file_under_a_linked_directory_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real-dir"
    real.mkdir()
    root = tmp_path / "home"
    root.mkdir()
    (root / ".tool").symlink_to(real)
    with pytest.raises(BadInput, match="linked"):
        patch_json_file(root, ".tool/settings.json", {"k": 1}, 0.0)
    assert list(real.iterdir()) == []


@pytest.mark.parametrize("text", ["[1, 2]", "{not json", '"string"'])
def test_a_json_file_that_is_not_an_object_is_refused(tmp_path: Path, text: str) -> None:
    (tmp_path / "s.json").write_text(text)
    with pytest.raises(BadInput, match=r"s\.json"):
        patch_json_file(tmp_path, "s.json", {"k": 1}, 0.0)


def test_comments_are_stripped_outside_strings() -> None:
    text = '{"url": "http://x//y", /* block */ "a": 1, // line\n "b": "/* kept */"}'
    assert json.loads(strip_comments(text)) == {"url": "http://x//y", "a": 1, "b": "/* kept */"}


def test_state_home_link_is_an_allow_list(tmp_path: Path) -> None:
    real = codex_state(tmp_path / "state-source")
    spec = load_spec(SHIPPED / "codex.toml")
    scratch = make_scratch()
    try:
        env: dict[str, str] = {}
        build_home(spec, scratch, {"HOME": str(tmp_path), "CODEX_HOME": str(real)}, env)
        state = Path(env["CODEX_HOME"])
        assert sorted(p.name for p in state.iterdir()) == ["auth.json", "config.toml"]
        assert (state / "auth.json").is_symlink() and not (state / "config.toml").is_symlink()
    finally:
        remove_scratch(scratch)
    assert os.path.exists(real / "auth.json")


@pytest.mark.parametrize(("text", "said"), [
    ('[home_json.".x/s.json"]\nwhen = 1979-05-27T07:32:00Z\n', "not JSON"),
    ('[home_json."/etc/s.json"]\nk = 1\n', "inside the home"),
    ('[state_home]\nenv = "H"\ndefault = "~/.h"\nlink = ["../up"]\n', "state_home.link"),
])
def test_bad_settings_files_are_spec_errors(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "agent.toml"
    path.write_text('executable = "x"\n' + text)
    with pytest.raises(BadInput, match=said):
        load_spec(path)


def test_a_users_settings_file_that_is_not_json_fails_preflight_and_the_run(
    repo: Path, tmp_path: Path, fake_clis: Path, isolated_env: Path
) -> None:
    (isolated_env / ".gemini").mkdir()
    (isolated_env / ".gemini" / "settings.json").write_text("{ theme: dark")
    check = cli(repo, "--json", "adapters", "check", "gemini")
    (row,) = check.json()["adapters"]
    assert check.code != 0 and not row["ok"] and "settings.json" in row["reason"] and "not JSON" in row["reason"]
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text('id = "t"\nadapter = "gemini"\nprompt = "answer: ok"\n'))
    result = cli(repo, "--json", "run", str(spec), "-j", "1")
    assert "settings.json" in result.out + result.err
