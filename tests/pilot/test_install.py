"""`gitswarm mcp install|uninstall` through the real CLI: each client's file, in its place and format
(as each real CLI's own `mcp add` writes it: gitswarm/pilot/clients.py), idempotent, and put back
byte for byte by uninstall."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import cli

COMMAND = [sys.executable, "-m", "gitswarm", "mcp"]

# (client, scope) -> (the file relative to HOME or to the repository, what else is in it already)
CASES = {
    ("claude-code", "project"): ("repo", ".mcp.json", '{\n  "mcpServers": {\n    "other": {\n      "command": "x"\n    }\n  }\n}\n'),
    ("claude-code", "user"): ("home", ".claude.json", '{\n  "numStartups": 3,\n  "projects": {}\n}\n'),
    ("codex", "user"): ("home", ".codex/config.toml", 'model = "o3"\n\n[mcp_servers.other]\ncommand = "x"\n'),
    ("gemini", "project"): ("repo", ".gemini/settings.json", '{\n  "theme": "Dracula"\n}\n'),
    ("gemini", "user"): ("home", ".gemini/settings.json", '{\n  "privacy": {\n    "usageStatisticsEnabled": false\n  }\n}\n'),
    ("hermes", "user"): ("home", ".hermes/config.yaml", "model:\n  default: x  # mine\nmcp_servers:\n    other:\n        command: x\ntoolsets: [file]\n"),
    ("omp", "project"): ("repo", ".omp/mcp.json", '{}\n'),
    ("omp", "user"): ("home", ".omp/agent/mcp.json", '{\n  "mcpServers": {}\n}\n'),
}


def where(case: tuple[str, str], repo: Path, home: Path) -> Path:
    base, name, _ = CASES[case]
    return (repo if base == "repo" else home) / name


def entry_of(path: Path) -> object:
    """The gitswarm server's entry as the client would read it."""
    text = path.read_text()
    if path.suffix == ".json":
        return json.loads(text)["mcpServers"]["gitswarm"]
    if path.suffix == ".toml":
        return tomllib.loads(text)["mcp_servers"]["gitswarm"]
    lines = text.splitlines()  # YAML: no parser here; its shape is checked by line
    start = next(n for n, line in enumerate(lines) if line.strip() == "gitswarm:")
    return {"command": json.loads(lines[start + 1].split(":", 1)[1]), "args": json.loads(lines[start + 2].split(":", 1)[1])}


def install(repo: Path, client: str, scope: str, *more: str) -> tuple[int, dict | str]:
    result = cli(repo, "--json", "mcp", "install", "--client", client, "--scope", scope, *more)
    return result.code, (result.json() if result.code == 0 else result.err)


def uninstall(repo: Path, client: str, scope: str) -> dict:
    result = cli(repo, "--json", "mcp", "uninstall", "--client", client, "--scope", scope)
    assert result.code == 0, result.err
    return result.json()


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("existing", [True, False], ids=["existing-file", "no-file"])
def test_install_is_idempotent_and_uninstall_restores_the_file_exactly(
    case: tuple[str, str], existing: bool, repo: Path, isolated_env: Path
) -> None:
    client, scope = case
    path = where(case, repo, isolated_env)
    if existing:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(CASES[case][2])
    before = path.read_bytes() if existing else None

    code, data = install(repo, client, scope)
    assert code == 0 and data["action"] == "installed" and data["path"] == str(path), data
    command = ["gitswarm", "mcp"] if scope == "project" else COMMAND
    found = entry_of(path)
    assert found["command"] == command[0] and found["args"] == command[1:]
    if client == "claude-code":
        assert found == {"type": "stdio", "command": command[0], "args": command[1:], "env": {}}
    if existing and path.suffix == ".json":  # what was there stays
        assert {k: v for k, v in json.loads(path.read_text()).items() if k != "mcpServers"} == \
            {k: v for k, v in json.loads(CASES[case][2]).items() if k != "mcpServers"}
    if existing and path.suffix == ".toml":
        assert tomllib.loads(path.read_text())["mcp_servers"]["other"] == {"command": "x"}
    installed = path.read_bytes()

    code, again = install(repo, client, scope)
    assert code == 0 and again["action"] == "already installed" and path.read_bytes() == installed

    assert uninstall(repo, client, scope)["action"] == "restored"
    if existing:
        assert path.read_bytes() == before
    else:
        assert (not path.exists() and not path.parent.exists()) or path.parent in (repo, isolated_env)
    assert uninstall(repo, client, scope)["action"] == "not installed"


def test_a_file_changed_since_the_install_loses_only_the_entry(repo: Path, isolated_env: Path) -> None:
    path = isolated_env / ".codex" / "config.toml"
    path.parent.mkdir()
    path.write_text('model = "o3"\n')
    assert install(repo, "codex", "user")[0] == 0
    path.write_text(path.read_text() + '\n[profiles.fast]\nmodel = "o4-mini"\n')  # the user edits it meanwhile
    assert uninstall(repo, "codex", "user")["action"] == "removed"
    assert path.read_text() == 'model = "o3"\n\n[profiles.fast]\nmodel = "o4-mini"\n'

    settings = repo / ".gemini" / "settings.json"
    assert install(repo, "gemini", "project")[0] == 0
    settings.write_text(json.dumps({**json.loads(settings.read_text()), "theme": "x"}, indent=2))
    assert uninstall(repo, "gemini", "project")["action"] == "removed"
    assert json.loads(settings.read_text()) == {"theme": "x"}


@pytest.mark.parametrize(
    ("client", "variable", "name"),
    [("codex", "CODEX_HOME", "config.toml"), ("hermes", "HERMES_HOME", "config.yaml"), ("omp", "PI_CODING_AGENT_DIR", "mcp.json")],
)
def test_each_clients_home_variable_is_honoured(
    client: str, variable: str, name: str, repo: Path, isolated_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    profile = tmp_path / "profile"
    profile.mkdir()
    monkeypatch.setenv(variable, str(profile))
    code, data = install(repo, client, "user")
    assert code == 0 and data["path"] == str(profile / name)
    assert entry_of(profile / name)["args"] == COMMAND[1:]
    assert not any(p.name == name for p in isolated_env.rglob("*"))  # the default home is not touched
    assert uninstall(repo, client, "user")["action"] == "restored" and not (profile / name).exists()


def test_print_shows_the_file_and_writes_nothing(repo: Path, isolated_env: Path) -> None:
    result = cli(repo, "mcp", "install", "--client", "claude-code", "--scope", "project", "--print")
    assert result.code == 0, result.err
    assert '"mcpServers"' in result.out and '"gitswarm"' in result.out
    assert not (repo / ".mcp.json").exists() and not (isolated_env / ".local" / "state" / "gitswarm" / "mcp-installs").exists()


@pytest.mark.parametrize(
    ("client", "scope", "content", "says"),
    [
        ("codex", "project", None, "user configuration"),
        ("hermes", "project", None, "user configuration"),
        ("cursor", "user", None, "unknown client"),
        ("claude-code", "sideways", None, "--scope"),
        ("claude-code", "project", '{"mcpServers": {"gitswarm": {"command": "something-else"}}}', "another command"),
        ("gemini", "project", '{\n  // mine\n  "theme": "x"\n}\n', "comments"),
        ("omp", "project", "[1, 2]", "not a JSON object"),
        ("claude-code", "project", "{oops", "not JSON"),
    ],
)
def test_what_cannot_be_installed_safely_is_refused_and_nothing_written(
    client: str, scope: str, content: str | None, says: str, repo: Path, isolated_env: Path
) -> None:
    path = {"claude-code": repo / ".mcp.json", "gemini": repo / ".gemini" / "settings.json", "omp": repo / ".omp" / "mcp.json"}.get(client)
    if content is not None and path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    before = {p: p.read_bytes() for p in [*repo.rglob("*"), *isolated_env.rglob("*")] if p.is_file() and ".git" not in p.parts}
    code, err = install(repo, client, scope)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1
    after = {p: p.read_bytes() for p in [*repo.rglob("*"), *isolated_env.rglob("*")] if p.is_file() and ".git" not in p.parts}
    assert after == before
