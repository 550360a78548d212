"""Each agent run: an allow-listed environment and an ephemeral home that links only what its spec names."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitswarm.adapters.agentspec import AgentSpec, load_spec
from gitswarm.adapters.isolation import (
    BASE_ALLOW,
    FIXED,
    NETWORK_ALLOW,
    SCRATCH_PREFIX,
    build_home,
    make_scratch,
    remove_scratch,
    run_environment,
)

SHIPPED = Path(__file__).resolve().parents[2] / "adapters"


def spec(text: str) -> AgentSpec:
    return msgspec.toml.decode(('executable = "agent"\n' + text).encode(), type=AgentSpec)


@pytest.fixture
def scratch() -> Path:
    path = make_scratch()
    yield path
    remove_scratch(path)


# -- environment -----------------------------------------------------------------------


PARENT = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "TERM": "xterm",
    "TZ": "UTC",
    "HOME": "/home/real",
    "USER": "real-user",
    "AWS_SECRET_ACCESS_KEY": "planted-secret",
    "GITHUB_TOKEN": "planted-token",
    "MY_API_KEY": "key-123",
    "GIT_TERMINAL_PROMPT": "1",
    "EDITOR": "vim",
    "SHARED": "from-parent",
}


def test_run_environment_keeps_only_what_is_allowed(tmp_path: Path) -> None:
    agent = spec('pass_env = ["MY_API_KEY", "UNSET_KEY"]\n[env]\nSHARED = "from-spec"\nSPEC_ONLY = "s"\n')
    home = tmp_path / "home"
    env = run_environment(agent, PARENT, {"TASK_VAR": "t"}, home)
    assert env == {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "TERM": "xterm",
        "TZ": "UTC",
        "MY_API_KEY": "key-123",
        "SHARED": "from-spec",
        "SPEC_ONLY": "s",
        "TASK_VAR": "t",
        **FIXED,
        "HOME": str(home),
        "USER": "gitswarm",
    }
    assert "UNSET_KEY" not in env  # named by the spec, but not set in the parent
    assert "planted-secret" not in env.values() and "planted-token" not in env.values()


def test_precedence_is_parent_then_spec_then_task_then_fixed(tmp_path: Path) -> None:
    agent = spec('pass_env = ["MY_API_KEY"]\n[env]\nMY_API_KEY = "spec-key"\nLAYER = "spec"\nPAGER = "less"\n')
    env = run_environment(agent, PARENT, {"LAYER": "task", "GIT_PAGER": "less", "HOME": "/task/home"}, tmp_path)
    assert env["MY_API_KEY"] == "spec-key"
    assert env["LAYER"] == "task"
    assert env["PAGER"] == "cat" and env["GIT_PAGER"] == "cat"  # FIXED wins over spec and task
    assert env["GIT_TERMINAL_PROMPT"] == "0" and env["EDITOR"] == "true"
    assert env["HOME"] == str(tmp_path)  # the ephemeral home, whatever the task said


PROXIES = {
    "HTTPS_PROXY": "http://proxy.corp:3128", "https_proxy": "http://proxy.corp:3128",
    "HTTP_PROXY": "http://proxy.corp:3128", "http_proxy": "http://proxy.corp:3128",
    "NO_PROXY": "localhost,.corp", "no_proxy": "localhost,.corp",
    "ALL_PROXY": "socks5://proxy.corp:1080", "all_proxy": "socks5://proxy.corp:1080",
    "NODE_EXTRA_CA_CERTS": "/etc/corp/ca.pem", "REQUESTS_CA_BUNDLE": "/etc/corp/ca.pem",
    "SSL_CERT_FILE": "/etc/corp/ca.pem", "SSL_CERT_DIR": "/etc/corp/certs",
}


def test_proxy_and_certificate_variables_reach_every_agent_without_pass_env() -> None:
    assert set(PROXIES) == set(NETWORK_ALLOW)
    env = run_environment(spec(""), {**PARENT, **PROXIES}, {}, Path("/h"))
    assert {name: env[name] for name in PROXIES} == PROXIES
    assert "AWS_SECRET_ACCESS_KEY" not in env


def test_a_task_user_is_kept() -> None:
    env = run_environment(spec(""), PARENT, {"USER": "task-user"}, Path("/h"))
    assert env["USER"] == "task-user"


NAMES = st.from_regex(r"[A-Z][A-Z0-9_]{0,8}", fullmatch=True)


@given(
    parent=st.dictionaries(NAMES | st.sampled_from(BASE_ALLOW + NETWORK_ALLOW), st.text(max_size=5), max_size=12),
    pass_env=st.lists(NAMES, max_size=4),
)
def test_a_planted_secret_never_passes(parent: dict[str, str], pass_env: list[str]) -> None:
    parent = {**parent, "PLANTED_SECRET": "s3cr3t", "HOME": "/real"}
    pass_env = [n for n in pass_env if n != "PLANTED_SECRET"]
    agent = AgentSpec(executable="agent", pass_env=pass_env)
    env = run_environment(agent, parent, {}, Path("/ephemeral"))
    assert "PLANTED_SECRET" not in env
    allowed = set(BASE_ALLOW) | set(NETWORK_ALLOW) | set(pass_env) | set(FIXED) | {"HOME", "USER"}
    assert set(env) <= allowed
    for name in set(BASE_ALLOW) | set(NETWORK_ALLOW) | set(pass_env):
        if name in FIXED:
            continue
        assert env.get(name) == parent.get(name)  # passed exactly when set in the parent
    assert env["HOME"] == "/ephemeral"


def test_the_real_process_environment_does_not_leak(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PLANTED_SECRET", "s3cr3t")
    claude = load_spec(SHIPPED / "claude-code.toml")
    env = run_environment(claude, dict(os.environ), {}, tmp_path)
    assert "PLANTED_SECRET" not in env and "s3cr3t" not in env.values()
    assert env["DISABLE_TELEMETRY"] == "1"
    assert env["HOME"] == str(tmp_path) != os.environ["HOME"]


# -- home ------------------------------------------------------------------------------


@pytest.fixture
def real_home(tmp_path: Path) -> Path:
    home = tmp_path / "real-home"
    (home / ".tool").mkdir(parents=True)
    (home / ".tool" / "auth.json").write_text('{"token": "t"}')
    (home / ".tool" / "settings.json").write_text('{"theme": "dark"}')
    (home / ".toolrc").write_text("rc = 1\n")
    (home / ".confdir" / "sub").mkdir(parents=True)
    (home / ".confdir" / "sub" / "a.txt").write_text("a\n")
    (home / "unrelated-secret.txt").write_text("do not share\n")
    return home


def test_build_home_links_and_copies_what_the_spec_names(real_home: Path, scratch: Path) -> None:
    agent = spec('home_files = [".tool/auth.json", ".missing/creds.json"]\n'
                 'home_copy = [".tool/settings.json", ".toolrc", ".confdir", ".absent.yml"]\n')
    env: dict[str, str] = {}
    home = build_home(agent, scratch, {"HOME": str(real_home)}, env)
    assert home == scratch / "home" and home.is_dir()
    assert (home.stat().st_mode & 0o777) == 0o700

    auth = home / ".tool" / "auth.json"
    assert auth.is_symlink() and auth.resolve() == (real_home / ".tool" / "auth.json").resolve()
    assert auth.read_text() == '{"token": "t"}'

    settings = home / ".tool" / "settings.json"
    assert settings.is_file() and not settings.is_symlink()
    settings.write_text('{"theme": "changed by the agent"}')
    assert (real_home / ".tool" / "settings.json").read_text() == '{"theme": "dark"}'

    rc = home / ".toolrc"
    assert not rc.is_symlink() and rc.read_text() == "rc = 1\n"
    rc.write_text("rewritten\n")
    assert (real_home / ".toolrc").read_text() == "rc = 1\n"

    confdir = home / ".confdir"
    assert confdir.is_dir() and not confdir.is_symlink()
    (confdir / "sub" / "a.txt").write_text("changed\n")
    (confdir / "new.txt").write_text("new\n")
    assert (real_home / ".confdir" / "sub" / "a.txt").read_text() == "a\n"
    assert not (real_home / ".confdir" / "new.txt").exists()

    # Missing entries are skipped; nothing else of the real home shows.
    assert not (home / ".missing").exists() and not (home / ".absent.yml").exists()
    assert not (home / "unrelated-secret.txt").exists()
    assert sorted(p.name for p in home.iterdir()) == [".confdir", ".tool", ".toolrc"]
    # no state home; a temporary directory of the run's own, beside its home (never around a CLI's state)
    assert env == {"TMPDIR": str(scratch / "tmp")} and (scratch / "tmp").is_dir()


def test_build_home_without_a_real_home(scratch: Path, tmp_path: Path) -> None:
    agent = spec('home_files = [".tool/auth.json"]\nhome_copy = [".toolrc"]\n')
    home = build_home(agent, scratch, {}, {})
    assert home.is_dir() and list(home.iterdir()) == []
    other = make_scratch()
    try:
        home = build_home(agent, other, {"HOME": str(tmp_path / "does-not-exist")}, {})
        assert list(home.iterdir()) == []
    finally:
        remove_scratch(other)


# -- state home ------------------------------------------------------------------------


HERMES_LIKE = ('[state_home]\nenv = "AGENT_HOME"\ndefault = "~/.agent"\n'
               'copy = ["config.yaml", "skills"]\nfresh = ["sessions", "state.db"]\n')


def make_state(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "config.yaml").write_text("model: x\n")
    (root / "skills").mkdir()
    (root / "skills" / "one.md").write_text("skill\n")
    (root / "sessions").mkdir()
    (root / "sessions" / "old.json").write_text("{}")
    (root / "state.db").write_text("db")
    (root / "auth.json").write_text("secret-auth")
    (root / "memories").mkdir()
    (root / "memories" / "m.md").write_text("memory\n")
    return root


def test_state_home_under_the_default(real_home: Path, scratch: Path) -> None:
    source = make_state(real_home / ".agent")
    env: dict[str, str] = {}
    build_home(spec(HERMES_LIKE), scratch, {"HOME": str(real_home)}, env)
    state = Path(env["AGENT_HOME"])
    assert state == scratch / "state" and state.is_dir()
    assert sorted(p.name for p in state.iterdir()) == ["auth.json", "config.yaml", "memories", "skills"]
    # Linked: every other entry.
    for name in ("auth.json", "memories"):
        assert (state / name).is_symlink() and (state / name).resolve() == (source / name).resolve()
    # Copied: writing the copy leaves the real one unchanged.
    for name in ("config.yaml", "skills"):
        assert not (state / name).is_symlink()
    (state / "config.yaml").write_text("model: changed\n")
    (state / "skills" / "one.md").write_text("changed\n")
    assert (source / "config.yaml").read_text() == "model: x\n"
    assert (source / "skills" / "one.md").read_text() == "skill\n"
    # Fresh: absent, and the real ones untouched.
    assert not (state / "sessions").exists() and not (state / "state.db").exists()
    assert (source / "sessions" / "old.json").exists() and (source / "state.db").read_text() == "db"


def test_state_home_uses_the_parents_value_when_set(real_home: Path, scratch: Path, tmp_path: Path) -> None:
    make_state(real_home / ".agent")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "only-here.txt").write_text("here\n")
    env: dict[str, str] = {}
    build_home(spec(HERMES_LIKE), scratch, {"HOME": str(real_home), "AGENT_HOME": str(elsewhere)}, env)
    state = Path(env["AGENT_HOME"])
    assert state != elsewhere
    assert [p.name for p in state.iterdir()] == ["only-here.txt"]
    assert (state / "only-here.txt").resolve() == (elsewhere / "only-here.txt").resolve()


def test_state_home_with_an_empty_parent_value_falls_back_to_the_default(real_home: Path, scratch: Path) -> None:
    make_state(real_home / ".agent")
    env: dict[str, str] = {}
    build_home(spec(HERMES_LIKE), scratch, {"HOME": str(real_home), "AGENT_HOME": ""}, env)
    assert (Path(env["AGENT_HOME"]) / "auth.json").is_symlink()


def test_state_home_with_an_absolute_default(scratch: Path, tmp_path: Path) -> None:
    source = make_state(tmp_path / "abs-state")
    agent = spec(f'[state_home]\nenv = "AGENT_HOME"\ndefault = "{source}"\n')
    env: dict[str, str] = {}
    build_home(agent, scratch, {}, env)
    state = Path(env["AGENT_HOME"])
    assert sorted(p.name for p in state.iterdir()) == sorted(p.name for p in source.iterdir())
    assert all(p.is_symlink() for p in state.iterdir())


def test_state_home_without_a_real_state_dir_is_empty(real_home: Path, scratch: Path) -> None:
    env: dict[str, str] = {}
    build_home(spec(HERMES_LIKE), scratch, {"HOME": str(real_home)}, env)
    state = Path(env["AGENT_HOME"])
    assert state.is_dir() and list(state.iterdir()) == []
    assert (state.stat().st_mode & 0o777) == 0o700


def test_state_home_env_reaches_the_run_environment(real_home: Path, scratch: Path) -> None:
    hermes = load_spec(SHIPPED / "hermes.toml")
    make_state(real_home / ".hermes")
    parent = {"PATH": "/bin", "HOME": str(real_home), "OPENROUTER_API_KEY": "k"}
    home = scratch / "home"
    env = run_environment(hermes, parent, {}, home)
    assert build_home(hermes, scratch, parent, env) == home
    assert env["HERMES_HOME"] == str(scratch / "state")
    assert env["HOME"] == str(home) and env["OPENROUTER_API_KEY"] == "k"
    state = Path(env["HERMES_HOME"])
    assert (state / "config.yaml").is_file() and not (state / "config.yaml").is_symlink()
    assert not (state / "sessions").exists() and not (state / "state.db").exists()


# -- scratch ---------------------------------------------------------------------------


def test_remove_scratch_removes_everything(real_home: Path) -> None:
    make_state(real_home / ".agent")
    scratch = make_scratch()
    assert scratch.name.startswith(SCRATCH_PREFIX) and scratch.is_dir()
    agent = spec('home_files = [".tool/auth.json"]\nhome_copy = [".confdir"]\n' + HERMES_LIKE)
    build_home(agent, scratch, {"HOME": str(real_home)}, {})
    (scratch / "prompt.md").write_text("prompt")
    remove_scratch(scratch)
    assert not scratch.exists()
    # The real files behind the links are still there.
    assert (real_home / ".tool" / "auth.json").read_text() == '{"token": "t"}'
    assert (real_home / ".agent" / "auth.json").read_text() == "secret-auth"
    assert (real_home / ".confdir" / "sub" / "a.txt").exists()


def test_remove_scratch_of_none_or_a_missing_dir_is_harmless(tmp_path: Path) -> None:
    remove_scratch(None)
    remove_scratch(tmp_path / "never-made")
