"""Adapters as the user meets them: list, check (preflight), routing by needs, approval, isolation."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from tests.conftest import cli, dumps_dir

# A tiny CLI: `--version`, a `--help` that lists --answer, and a run that dumps what it sees.
TOOL = """#!/bin/sh
case "$1" in
  --version) echo "tool 1.2.3"; exit 0 ;;
  --help) echo "usage: tool [--answer TEXT] [--mode M]"; exit 0 ;;
esac
{python} -c 'import json, os, sys; home = os.environ["HOME"]
json.dump(dict(env=dict(os.environ), home=sorted(os.listdir(home)), cwd=os.getcwd()), open(sys.argv[1], "w"))' "$DUMP"
echo "all done"
"""


def install_tool(repo: Path, name: str, spec: str, tmp_path: Path) -> Path:
    exe = tmp_path / "bin" / "tool"
    exe.parent.mkdir(exist_ok=True)
    exe.write_text(TOOL.format(python=sys.executable))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    adapters = repo / ".gitswarm" / "adapters"
    adapters.mkdir(parents=True, exist_ok=True)
    (adapters / f"{name}.toml").write_text(f"executable = {json.dumps(str(exe))}\n" + spec)
    return exe


def run_spec(repo: Path, body: str, *flags: str) -> tuple[int, dict, str]:
    spec = repo / "job.toml"
    spec.write_text('goal = "see"\n' + body)
    result = cli(repo, "--json", "run", str(spec), "-j", "1", *flags)
    return result.code, (result.json() if result.out else {}), result.err


def test_an_agent_never_sees_the_parent_environment_or_the_real_home(
    repo: Path, tmp_path: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dump = dumps_dir(repo, tmp_path) / "seen.json"
    monkeypatch.setenv("GITSWARM_PLANTED_SECRET", "hunter2")
    monkeypatch.setenv("TOOL_API_KEY", "k-123")
    monkeypatch.setenv("DUMP", str(dump))
    (isolated_env / ".ssh").mkdir()
    (isolated_env / ".ssh" / "id_ed25519").write_text("private")
    (isolated_env / ".toolrc").write_text("token")
    install_tool(repo, "tool", 'pass_env = ["TOOL_API_KEY", "DUMP"]\nhome_files = [".toolrc"]\n', tmp_path)
    code, view, err = run_spec(repo, '[[tasks]]\nid = "a"\nadapter = "tool"\nprompt = "look around"\n')
    assert code == 0, err
    seen = json.loads(dump.read_text())
    env = seen["env"]
    assert "GITSWARM_PLANTED_SECRET" not in env and "hunter2" not in json.dumps(env)
    assert env["TOOL_API_KEY"] == "k-123"  # declared by the spec
    assert env["HOME"] != str(isolated_env) and not env["HOME"].startswith(str(isolated_env))
    assert seen["home"] == [".toolrc"]  # only what the spec declared; no .ssh, no .gitconfig
    assert env["GIT_TERMINAL_PROMPT"] == "0" and env["GIT_PAGER"] == "cat" and env["PAGER"] == "cat"
    assert "GIT_CONFIG_GLOBAL" not in env and "GIT_AUTHOR_NAME" not in env
    assert not Path(env["HOME"]).exists()  # the ephemeral home is gone after the run
    assert view["tasks"][0]["state"] == "succeeded"


def test_adapters_list_and_check(repo: Path, tmp_path: Path) -> None:
    install_tool(repo, "tool", 'version_args = ["--version"]\nargs = ["--answer", "{prompt}"]\ncapabilities = ["edit"]\n', tmp_path)
    listed = cli(repo, "--json", "adapters", "list")
    assert listed.code == 0, listed.err
    rows = {a["name"]: a for a in listed.json()}
    assert rows["tool"]["found"] and rows["tool"]["version"] == "tool 1.2.3" and rows["tool"]["capabilities"] == ["edit"]
    assert rows["shell"]["source"] == "builtin"
    assert {"claude-code", "codex", "gemini", "aider", "hermes", "omp"} <= set(rows)
    assert rows["tool"]["source"].endswith(".gitswarm/adapters/tool.toml")
    checked = cli(repo, "--json", "adapters", "check", "tool")
    assert checked.code == 0 and checked.json()["adapters"] == [
        {"name": "tool", "ok": True, "version": "tool 1.2.3", "reason": None}
    ]


def test_a_flag_the_cli_does_not_document_fails_the_check_and_its_tasks_are_never_leased(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DUMP", str(tmp_path / "never.json"))
    install_tool(repo, "tool", 'args = ["--answer", "{prompt}", "--turbo"]\npass_env = ["DUMP"]\n', tmp_path)
    checked = cli(repo, "--json", "adapters", "check", "tool")
    assert checked.code == 1
    assert checked.json()["adapters"][0]["reason"] == "its --help does not list --turbo"
    code, view, err = run_spec(
        repo, '[[tasks]]\nid = "a"\nadapter = "tool"\nprompt = "p"\n[[tasks]]\nid = "b"\ncommand = "true"\n'
    )
    assert code == 1
    assert "tasks for adapter tool were not run: its --help does not list --turbo" in err
    assert {t["id"]: t["state"] for t in view["tasks"]} == {"a": "queued", "b": "succeeded"}
    assert view["unusable"] == {"tool": "its --help does not list --turbo"}
    assert not (tmp_path / "never.json").exists()


def test_a_missing_executable_is_said_and_not_waited_for(repo: Path) -> None:
    adapters = repo / ".gitswarm" / "adapters"
    adapters.mkdir(parents=True)
    (adapters / "ghost.toml").write_text('executable = "no-such-agent-anywhere"\n')
    code, _view, err = run_spec(repo, '[[tasks]]\nid = "a"\nadapter = "ghost"\nprompt = "p"\n')
    assert code == 1 and "executable 'no-such-agent-anywhere' not found" in err


def test_needs_route_to_the_first_preferred_adapter_that_has_them(repo: Path, tmp_path: Path) -> None:
    install_tool(repo, "plain", 'capabilities = ["edit"]\n', tmp_path)
    install_tool(repo, "surfer", 'capabilities = ["edit", "web"]\n', tmp_path)
    (repo / ".gitswarm.toml").write_text('[adapters]\nprefer = ["plain", "surfer"]\n')
    spec = repo / "job.toml"
    spec.write_text('goal = "g"\n[[tasks]]\nid = "a"\nneeds = ["web"]\nprompt = "p"\n[[tasks]]\nid = "b"\nneeds = ["edit"]\nprompt = "p"\n')
    job = cli(repo, "--json", "submit", str(spec)).json()["id"]
    adapters = {t["id"]: t["adapter"] for t in cli(repo, "--json", "status", job).json()["tasks"]}
    assert adapters == {"a": "surfer", "b": "plain"}
    (repo / ".gitswarm.toml").write_text('[adapters]\nprefer = ["plain", "surfer"]\ndisabled = ["surfer"]\n')
    refused = cli(repo, "submit", str(spec))
    assert refused.code == 2 and refused.err.startswith("gitswarm: tasks[0].needs: no enabled, installed adapter has web")


def test_side_effects_need_approval(repo: Path, tmp_path: Path) -> None:
    install_tool(repo, "browser", 'capabilities = ["browser"]\n', tmp_path)
    spec = repo / "job.toml"
    spec.write_text('goal = "g"\n[[tasks]]\nid = "a"\nneeds = ["browser"]\nprompt = "p"\n')
    refused = cli(repo, "submit", str(spec))
    assert refused.code == 2
    assert refused.err == "gitswarm: tasks[0]: needs approval (browser): set approve = true or pass --approve\n"
    assert cli(repo, "--json", "status").json()["jobs"] == []
    assert cli(repo, "--json", "submit", "--approve", str(spec)).code == 0
    spec.write_text('goal = "g"\n[[tasks]]\nid = "a"\nneeds = ["browser"]\napprove = true\nprompt = "p"\n')
    assert cli(repo, "--json", "submit", str(spec)).code == 0


def test_a_malformed_adapter_spec_is_one_line_and_exit_2(repo: Path) -> None:
    adapters = repo / ".gitswarm" / "adapters"
    adapters.mkdir(parents=True)
    (adapters / "bad.toml").write_text('executable = "x"\nflavour = "mint"\n')
    spec = repo / "job.toml"
    spec.write_text('goal = "g"\n[[tasks]]\nid = "a"\nadapter = "bad"\nprompt = "p"\n')
    refused = cli(repo, "submit", str(spec))
    assert refused.code == 2 and refused.err.count("\n") == 1
    assert "bad.toml" in refused.err and "flavour" in refused.err
    assert cli(repo, "adapters", "check", "bad").code == 2
    assert os.listdir(repo / ".gitswarm" / "adapters") == ["bad.toml"]


TIERS = '[models]\nfast = "tool-mini"\nstrong = "tool-max"\n'
NO_MODEL = "so the CLI never receives the routed model"


@pytest.mark.parametrize(
    ("spec", "warned"),
    [
        (f'args = ["--answer", "{{prompt}}"]\n{TIERS}',
         "tool: names model tiers ([models] fast, strong) but passes no {model} in its args, " + NO_MODEL),
        (f"{TIERS}",  # no args at all: the prompt alone is passed
         "tool: names model tiers ([models] fast, strong) but passes no {model} in its args, " + NO_MODEL),
        ('args = ["--answer", "{prompt}"]\nmodel = "tool-max"\n',
         'tool: names a model (model = "tool-max") but passes no {model} in its args, ' + NO_MODEL),
        (f'[analyze]\nargs = ["--mode", "{{model}}", "{{prompt}}"]\n[implement]\nargs = ["--answer", "{{prompt}}"]\n{TIERS}',
         "tool: names model tiers ([models] fast, strong) but passes no {model} in implement.args, " + NO_MODEL
         + " in those runs"),
        (f'args = ["--answer", "{{prompt}}", ["--mode", "{{model}}"]]\n{TIERS}', None),
        ('args = ["--answer", "{prompt}", "--mode", "{model}"]\nmodel = "tool-max"\n', None),
        ('args = ["--answer", "{prompt}"]\n', None),  # names no model: routing records none
    ],
    ids=["tiers", "tiers-no-args", "model", "tiers-one-mode", "tiers-with-model", "model-with-model", "no-model"],
)
def test_a_spec_naming_models_without_a_model_placeholder_is_warned_about_and_still_passes(
    repo: Path, tmp_path: Path, spec: str, warned: str | None
) -> None:
    install_tool(repo, "tool", spec, tmp_path)
    checked = cli(repo, "--json", "adapters", "check", "tool")
    assert checked.code == 0, checked.err
    data = checked.json()
    assert data["ok"] is True and data["adapters"] == [{"name": "tool", "ok": True, "version": "tool 1.2.3", "reason": None}]
    assert data["warnings"] == ([warned] if warned else [])
    assert checked.err == (f"gitswarm: warning: {warned}\n" if warned else "")
    human = cli(repo, "adapters", "check", "tool")
    assert human.code == 0, human.err
    assert human.err == (f"gitswarm: warning: {warned}\n" if warned else "")
    assert "tool" in human.out and "yes" in human.out


def test_a_warning_does_not_hide_a_failed_check(repo: Path, tmp_path: Path) -> None:
    install_tool(repo, "tool", f'args = ["--answer", "{{prompt}}", "--turbo"]\n{TIERS}', tmp_path)
    checked = cli(repo, "--json", "adapters", "check", "tool")
    assert checked.code == 1
    data = checked.json()
    assert data["ok"] is False and data["adapters"][0]["reason"] == "its --help does not list --turbo"
    assert data["warnings"] == ["tool: names model tiers ([models] fast, strong) but passes no {model} in its args, " + NO_MODEL]
