"""Adapter specs: the smallest one loads, the shipped ones load, and every mistake is refused by name."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitswarm.adapters.agentspec import PLACEHOLDERS, AgentSpec, load_spec
from gitswarm.model.capabilities import CAPABILITIES, SIDE_EFFECTS
from gitswarm.model.errors import BadInput

SHIPPED = Path(__file__).resolve().parents[2] / "adapters"
SHIPPED_SPECS = sorted(p for p in SHIPPED.glob("*.toml") if p.name != "prices.toml")


def write(tmp_path: Path, text: str, name: str = "agent.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def refused(tmp_path: Path, text: str) -> str:
    """Load `text` as a spec, expect a BadInput naming the file, and return its message."""
    path = write(tmp_path, text)
    with pytest.raises(BadInput) as info:
        load_spec(path)
    message = str(info.value)
    assert str(path) in message
    return message


# -- what loads ------------------------------------------------------------------------


def test_the_smallest_spec_is_just_an_executable(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, 'executable = "x"\n'))
    assert spec.executable == "x"
    assert spec.prompt == "arg"
    assert spec.args is None and spec.args_for("analyze") is None and spec.args_for("implement") is None
    assert spec.output.format == "text"
    assert spec.capabilities == [] and spec.flags() == []
    assert spec.help_args == [["--help"]]
    assert spec.side_effects is False


def test_shipped_specs_are_found() -> None:
    names = {p.stem for p in SHIPPED_SPECS}
    assert {"claude-code", "codex", "gemini", "aider", "hermes", "omp", "scripted"} <= names


def test_the_python_placeholder_is_the_interpreter_gitswarm_runs_in(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, 'executable = "{python}"\nargs = ["-m", "gitswarm.scripted_agent", "{prompt}"]\n'))
    assert spec.executable == sys.executable
    assert load_spec(SHIPPED / "scripted.toml").executable == sys.executable
    # only the whole value: a name that merely holds it is taken as it is written
    assert load_spec(write(tmp_path, 'executable = "my-{python}"\n')).executable == "my-{python}"


def test_the_python_placeholder_without_a_known_interpreter_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", "")
    message = refused(tmp_path, 'executable = "{python}"\n')
    assert message.endswith("executable {python}: this Python does not know the path of its interpreter")


def _words(raw: dict) -> list[str]:
    """Every word of every argument template in a raw (tomllib-parsed) spec."""
    found: list[str] = []
    for args in (raw.get("args"), raw.get("analyze", {}).get("args"), raw.get("implement", {}).get("args")):
        for arg in args or ():
            found.extend([arg] if isinstance(arg, str) else arg)
    return found


@pytest.mark.parametrize("path", SHIPPED_SPECS, ids=lambda p: p.stem)
def test_every_shipped_spec_loads_and_its_flags_are_its_args_flags(path: Path) -> None:
    spec = load_spec(path)
    assert spec.executable.strip()
    assert set(spec.capabilities) <= set(CAPABILITIES)
    raw = tomllib.loads(path.read_text())
    # The flags, read independently: each word starting with a dash, up to any "=".
    expected = {w.split("=", 1)[0] for w in _words(raw) if w.startswith("-")}
    flags = spec.flags()
    assert set(flags) == expected
    assert len(flags) == len(set(flags))  # each named once
    assert all(not f.startswith("{") for f in flags)
    # Every flag is one the analyze or implement arguments actually pass.
    used = {w for mode in ("analyze", "implement") for a in spec.args_for(mode) or () for w in ([a] if isinstance(a, str) else a)}
    assert all(any(w == f or w.startswith(f + "=") for w in used) for f in flags)


def test_flags_are_listed_once_in_first_use_order_with_values_cut_at_equals(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, """
executable = "x"
args = ["--alpha", "{prompt}", "--beta=3", "-c", "not=a-flag", ["--gamma", "{model}"]]
[implement]
args = ["--alpha", "--delta", "-x", "{prompt}"]
"""))
    assert spec.flags() == ["--alpha", "--beta", "-c", "--gamma", "--delta", "-x"]


def test_a_mode_without_its_own_args_uses_the_shared_args(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, 'executable = "x"\nargs = ["--a", "{prompt}"]\n[implement]\nargs = ["--b", "{prompt}"]\n'))
    assert spec.args_for("analyze") == ["--a", "{prompt}"]
    assert spec.args_for("implement") == ["--b", "{prompt}"]


# -- strict refusals -------------------------------------------------------------------


def test_unknown_top_level_key_is_refused_by_name(tmp_path: Path) -> None:
    message = refused(tmp_path, 'executable = "x"\nexecutabel = "y"\n')
    assert "unknown key" in message and "executabel" in message


def test_unknown_key_in_output_is_refused_by_name(tmp_path: Path) -> None:
    message = refused(tmp_path, 'executable = "x"\n[output]\nformat = "json"\ncosts = "total"\n')
    assert "unknown key" in message and "costs" in message and "output" in message


def test_unknown_placeholder_is_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, 'executable = "x"\nargs = ["--p", "{nope}"]\n')
    assert "{nope}" in message and "unknown placeholder" in message and "args" in message


def test_unknown_placeholder_inside_an_optional_group_is_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, 'executable = "x"\n[analyze]\nargs = [["--m", "{modle}"]]\n')
    assert "{modle}" in message and "analyze.args" in message


def test_malformed_placeholder_is_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, 'executable = "x"\nargs = ["{"]\n')
    assert "args" in message and "'{'" in message


@pytest.mark.parametrize("name", sorted(PLACEHOLDERS))
def test_every_known_placeholder_is_accepted(tmp_path: Path, name: str) -> None:
    extra = ""
    if name == "prompt_file":
        extra = 'prompt = "file"\n'
    spec = load_spec(write(tmp_path, f'executable = "x"\n{extra}args = ["--v", "{{{name}}}"]\n'))
    assert spec.args == ["--v", f"{{{name}}}"]


def test_prompt_file_without_its_placeholder_is_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, 'executable = "x"\nprompt = "file"\nargs = ["{prompt}"]\n')
    assert 'prompt = "file"' in message and "{prompt_file}" in message


def test_prompt_file_with_its_placeholder_in_one_mode_loads(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, 'executable = "x"\nprompt = "file"\n[analyze]\nargs = ["--f", "{prompt_file}"]\n'))
    assert spec.prompt == "file"


def test_usage_file_without_its_placeholder_is_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, 'executable = "x"\nargs = ["{prompt}"]\n[output]\nusage_file = true\n')
    assert "usage_file" in message and "{usage_file}" in message


def test_unknown_capability_is_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, 'executable = "x"\ncapabilities = ["edit", "teleport"]\n')
    assert "capabilities" in message and "'teleport'" in message


def test_a_regex_without_a_group_is_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, 'executable = "x"\n[output]\ncost_regex = \'Cost: \\$[0-9.]+\'\n')
    assert "output.cost_regex" in message and "one group" in message


def test_a_regex_with_two_groups_is_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, 'executable = "x"\n[output]\nerror_regex = \'(a)(b)\'\n')
    assert "output.error_regex" in message and "one group" in message


def test_an_invalid_regex_is_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, 'executable = "x"\n[output]\nsession_regex = \'(unclosed\'\n')
    assert "output.session_regex" in message


def test_a_non_numeric_exit_code_key_is_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, 'executable = "x"\n[exit_codes]\n1 = "failed"\nbad = "what"\n')
    assert "exit_codes" in message and "'bad'" in message


def test_a_negative_exit_code_key_is_accepted(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, 'executable = "x"\n[exit_codes]\n-9 = "killed"\n'))
    assert spec.exit_codes == {"-9": "killed"}


@pytest.mark.parametrize("key", ["home_files", "home_copy"])
@pytest.mark.parametrize("entry", ["../secret", ".config/../../etc/passwd", "/etc/passwd"])
def test_a_home_path_outside_the_home_is_refused(tmp_path: Path, key: str, entry: str) -> None:
    message = refused(tmp_path, f'executable = "x"\n{key} = ["{entry}"]\n')
    assert key in message and repr(entry) in message


def test_a_home_path_with_dots_in_a_name_is_fine(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, 'executable = "x"\nhome_files = ["..hidden", ".a..b/c"]\n'))
    assert spec.home_files == ["..hidden", ".a..b/c"]


def test_invalid_toml_is_refused_with_the_file(tmp_path: Path) -> None:
    refused(tmp_path, 'executable = "x\n')


def test_a_wrong_type_is_refused_with_the_key(tmp_path: Path) -> None:
    message = refused(tmp_path, 'executable = "x"\ncapabilities = "edit"\n')
    assert "capabilities" in message


def test_a_missing_executable_is_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, 'description = "no executable"\n')
    assert "executable" in message


def test_an_empty_executable_is_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, 'executable = "  "\n')
    assert "executable" in message


def test_a_bad_timeout_is_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, 'executable = "x"\ntimeout = "soon"\n')
    assert "timeout" in message


def test_a_bad_pass_env_name_is_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, 'executable = "x"\npass_env = ["NOT A NAME"]\n')
    assert "pass_env" in message and "'NOT A NAME'" in message


def test_a_bad_endpoint_env_name_is_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, 'executable = "x"\n[sandbox]\nendpoint_env = ["BASE-URL"]\n')
    assert "sandbox.endpoint_env" in message and "'BASE-URL'" in message


@pytest.mark.parametrize("host", ["api.example.com/v1", "a b", "api.example.com:70000", "[::1]x", ""])
def test_a_malformed_sandbox_host_is_refused_in_one_line(tmp_path: Path, host: str) -> None:
    message = refused(tmp_path, f'executable = "x"\n[sandbox]\nhosts = ["{host}"]\n')
    assert "sandbox.hosts" in message and repr(host) in message and "\n" not in message


@pytest.mark.parametrize("path", SHIPPED_SPECS, ids=lambda p: p.stem)
def test_every_shipped_spec_names_its_provider_hosts_for_endpoint(path: Path) -> None:
    """network = "endpoint" lets a run reach its spec's hosts: each CLI that talks to a provider names one."""
    spec = load_spec(path)
    if path.stem == "scripted":  # no model, no network
        assert spec.sandbox.hosts == [] and spec.sandbox.endpoint_env == []
        return
    provider = {"claude-code": "api.anthropic.com", "codex": "api.openai.com", "gemini": "generativelanguage.googleapis.com",
                "aider": "api.openai.com", "hermes": "openrouter.ai", "omp": "api.anthropic.com"}
    assert provider.get(path.stem, "?") in spec.sandbox.hosts, (path.stem, spec.sandbox.hosts)
    assert set(spec.sandbox.endpoint_env) <= set(spec.pass_env)  # a base URL it is not passed would name nothing


def test_json_fields_on_text_output_are_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, 'executable = "x"\n[output]\nsession = "session_id"\n')
    assert "format" in message


def test_a_missing_file_is_refused_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "absent.toml"
    with pytest.raises(BadInput) as info:
        load_spec(path)
    assert str(path) in str(info.value)


# -- side effects ----------------------------------------------------------------------


def decode(text: str) -> AgentSpec:
    return msgspec.toml.decode(text.encode(), type=AgentSpec)


@pytest.mark.parametrize("capability", sorted(SIDE_EFFECTS))
def test_side_effects_for_browser_and_deploy(capability: str) -> None:
    assert {"browser", "deploy"} == set(SIDE_EFFECTS)
    assert decode(f'executable = "x"\ncapabilities = ["edit", "{capability}"]\n').side_effects


def test_side_effects_when_approve_is_set() -> None:
    assert decode('executable = "x"\napprove = true\n').side_effects
    assert decode('executable = "x"\ncapabilities = ["edit"]\napprove = true\n').side_effects


@given(st.lists(st.sampled_from(CAPABILITIES), unique=True), st.booleans())
def test_side_effects_is_exactly_approve_or_a_side_effect_capability(capabilities: list[str], approve: bool) -> None:
    spec = AgentSpec(executable="x", capabilities=capabilities, approve=approve)
    assert spec.side_effects == (approve or "browser" in capabilities or "deploy" in capabilities)


def test_shipped_side_effects() -> None:
    specs = {p.stem: load_spec(p) for p in SHIPPED_SPECS}
    assert specs["hermes"].side_effects  # it has a browser
    assert not specs["claude-code"].side_effects
    assert not specs["aider"].side_effects
