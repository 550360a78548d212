"""Where and how each agent CLI registers an MCP server, as checked against the real programs.

Checked with ../shared/realclis (Claude Code 2.1.332, Codex 0.171.0, Gemini CLI
0.61.0, Hermes Agent 0.19.0, oh-my-pi 18.2.3), by running each CLI's own
`mcp add` where it has one and reading what it wrote:

- claude-code: `claude mcp add --scope project` writes `.mcp.json`, `--scope user`
  `~/.claude.json`; both `{"mcpServers": {NAME: {"type": "stdio", "command", "args", "env"}}}`.
- codex: `codex mcp add` writes `[mcp_servers.NAME]` (`command`, `args`) to
  `$CODEX_HOME/config.toml` (else `~/.codex/config.toml`); a project's
  `.codex/config.toml` was not read (`codex mcp list`), so user scope only.
- gemini: `gemini mcp add` writes `.gemini/settings.json` (project, its default) or
  `~/.gemini/settings.json` (`-s user`): `{"mcpServers": {NAME: {"command", "args"}}}`.
- hermes: `mcp_servers: {NAME: {command, args}}` in `$HERMES_HOME/config.yaml` (else
  `~/.hermes/config.yaml`): hermes_cli/mcp_config.py; it has no project config.
- omp: `{"mcpServers": {...}}` (Claude Desktop's shape) in `.omp/mcp.json` (project) or
  `$PI_CODING_AGENT_DIR/mcp.json` (else `~/.omp/agent/mcp.json`):
  pi-utils/src/dirs.ts getMCPConfigPath, pi-coding-agent/src/discovery/mcp-json.ts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gitswarm.model.errors import BadInput

Format = Literal["json", "toml", "yaml"]
Scope = Literal["project", "user"]
CLIENTS = ("claude-code", "codex", "gemini", "hermes", "omp")
SERVER_NAME = "gitswarm"


@dataclass(frozen=True)
class Registration:
    client: str
    scope: Scope
    path: Path
    format: Format
    entry: dict  # the server's entry, as the client's format holds it


def _home(env: Mapping[str, str]) -> Path:
    home = env.get("HOME")
    if not home:
        raise BadInput("mcp install: HOME is not set")
    return Path(home)


def registration(client: str, scope: Scope, project: Path, command: list[str], env: Mapping[str, str] = os.environ) -> Registration:
    """Where `client` keeps MCP servers for `scope`, and the entry that starts `command`."""
    if client not in CLIENTS:
        raise BadInput(f"--client: unknown client {client!r} (one of {', '.join(CLIENTS)})")
    if scope not in ("project", "user"):
        raise BadInput("--scope: project or user")
    program, args = command[0], command[1:]
    plain = {"command": program, "args": args}
    if client == "claude-code":
        path = project / ".mcp.json" if scope == "project" else _home(env) / ".claude.json"
        return Registration(client, scope, path, "json", {"type": "stdio", **plain, "env": {}})
    if client == "gemini":
        base = project if scope == "project" else _home(env)
        return Registration(client, scope, base / ".gemini" / "settings.json", "json", plain)
    if client == "omp":
        if scope == "project":
            path = project / ".omp" / "mcp.json"
        else:
            agent_dir = env.get("PI_CODING_AGENT_DIR")
            path = Path(agent_dir) / "mcp.json" if agent_dir else _home(env) / ".omp" / "agent" / "mcp.json"
        return Registration(client, scope, path, "json", plain)
    if scope == "project":
        raise BadInput(f"--scope project: {client} reads MCP servers only from its user configuration; use --scope user")
    if client == "codex":
        codex_home = env.get("CODEX_HOME")
        path = Path(codex_home) / "config.toml" if codex_home else _home(env) / ".codex" / "config.toml"
        return Registration(client, scope, path, "toml", plain)
    hermes_home = env.get("HERMES_HOME")
    path = Path(hermes_home) / "config.yaml" if hermes_home else _home(env) / ".hermes" / "config.yaml"
    return Registration(client, scope, path, "yaml", plain)
