"""Each agent run gets an environment built from an allow-list and a home of its own.

Never the whole parent environment, never the real home: only PATH, the
locale and terminal variables, the proxy and certificate variables, the
variables the adapter spec names (its API key, its endpoint), the task's own
`env`, and the few files under the real home that the spec declares (the
agent's own config or credentials), linked or copied into a fresh directory
that is removed after the run, with the spec's settings merged into them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from gitswarm.adapters.agentspec import AgentSpec, StateHome
from gitswarm.adapters.jsonfiles import patch_json_file, patch_yaml_file

#: Passed through from the caller when set: what any program needs to run.
BASE_ALLOW = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TERM", "TZ", "TMPDIR")
#: Passed through from the caller when set, to every agent: how it reaches the network
#: behind a proxy and which extra certificate authorities it trusts (Node reads
#: NODE_EXTRA_CA_CERTS, Python's requests REQUESTS_CA_BUNDLE, OpenSSL SSL_CERT_*).
NETWORK_ALLOW = (
    "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy",
    "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR",
)
#: Set for every run: git never prompts and no pager waits for a keypress.
FIXED = {"GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "PAGER": "cat", "GIT_EDITOR": "true", "EDITOR": "true"}
SCRATCH_PREFIX = "gitswarm-run-"


def make_scratch() -> Path:
    """A private directory for one run: its home, prompt file, schema and usage files."""
    return Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))


def run_environment(
    spec: AgentSpec, parent: Mapping[str, str], task_env: Mapping[str, str], home: Path
) -> dict[str, str]:
    env = {name: parent[name] for name in (*BASE_ALLOW, *NETWORK_ALLOW) if name in parent}
    env.update((name, parent[name]) for name in spec.pass_env if name in parent)
    env.update(spec.env)
    env.update(task_env)
    env.update(FIXED)
    env["HOME"] = str(home)
    env.setdefault("USER", "gitswarm")
    return env


def build_home(spec: AgentSpec, scratch: Path, parent: Mapping[str, str], env: dict[str, str]) -> Path:
    """Create the run's home under `scratch`, linking in what the spec declares and
    writing its settings (`home_json`); the same for its state directory (`[state_home]`)."""
    now = time.time()
    home = scratch / "home"
    home.mkdir(mode=0o700)
    # A temporary directory of the run's own, beside its home and state, not around them: Codex refuses
    # to set up its sandbox helper under $TMPDIR, so a CODEX_HOME inside the system's temporary
    # directory broke every edit (AGENT-CLIS.md, checked 2026-12-04). Removed with the scratch.
    private_tmp = scratch / "tmp"
    private_tmp.mkdir(mode=0o700)
    env["TMPDIR"] = str(private_tmp)
    real = Path(parent["HOME"]) if parent.get("HOME") else None
    if real is not None and real.is_dir():
        for entry, link in [(e, True) for e in spec.home_files] + [(e, False) for e in spec.home_copy]:
            source = real / entry
            if not source.exists():
                continue
            target = home / entry
            target.parent.mkdir(parents=True, exist_ok=True)
            if link:
                target.symlink_to(source)
            elif source.is_dir():
                shutil.copytree(source, target, symlinks=True)
            else:
                shutil.copy2(source, target)
    for entry, settings in spec.home_json.items():
        patch_json_file(home, entry, settings, now)
    if spec.state_home is not None:
        state = spec.state_home
        state_source: Path | None
        if parent.get(state.env):
            state_source = Path(parent[state.env])
        elif state.default.startswith("~/"):
            state_source = real / state.default[2:] if real is not None else None
        else:
            state_source = Path(state.default)
        target = _state_home(state, scratch, state_source)
        for entry, settings in state.json.items():
            patch_json_file(target, entry, settings, now)
        for entry, settings in state.yaml.items():
            patch_yaml_file(target, entry, settings, now)
        env[state.env] = str(target)
    return home


def _state_home(state: StateHome, scratch: Path, source: Path | None) -> Path:
    target = scratch / "state"
    target.mkdir(mode=0o700)
    if source is not None and source.is_dir():
        for entry in source.iterdir():
            if entry.name in state.fresh:
                continue
            if entry.name in state.copy:
                if entry.is_dir():
                    shutil.copytree(entry, target / entry.name, symlinks=True)
                else:
                    shutil.copy2(entry, target / entry.name)
            elif state.link is None or entry.name in state.link:
                (target / entry.name).symlink_to(entry)
    return target


def linked_sources(scratch: Path) -> list[Path]:
    """Where the links under `scratch` lead outside it: the user's files a spec links into a run's home
    or state directory (home_files, [state_home] link), which a sandboxed run must be able to reach."""
    found = []
    inside = os.path.join(os.path.realpath(scratch), "")
    for directory, dirs, files in os.walk(scratch):
        for name in (*dirs, *files):
            path = os.path.join(directory, name)
            if os.path.islink(path):
                target = os.path.realpath(path)
                if not target.startswith(inside) and os.path.exists(target):
                    found.append(Path(target))
    return found


def remove_scratch(scratch: Path | None) -> None:
    """Remove a run's scratch directory, even where the agent left read-only directories."""
    if scratch is None:
        return

    def writable_then_retry(func: Callable[..., object], path: str, _exc: object) -> None:
        try:
            os.chmod(os.path.dirname(path), 0o700)
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, 0o700)
            func(path)
        except OSError:
            pass  # a scratch directory under the system temp dir: nothing else depends on it

    shutil.rmtree(scratch, onerror=writable_then_retry)
