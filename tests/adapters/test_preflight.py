"""Preflight of a `python -m MODULE` spec: the interpreter must be able to import the module.

A system python3 answers `--version` and lists `-m` in its help like the right interpreter
does, so only importing tells them apart (the docs' scripted-agent example used
/usr/bin/python3, which fails after a venv install while `adapters check` said OK).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.conftest import cli

SCRIPTED_ARGS = 'args = ["-m", "gitswarm.scripted_agent", "{prompt}"]\n'


def register(repo: Path, executable: str, args: str = SCRIPTED_ARGS) -> None:
    path = repo / ".gitswarm" / "adapters" / "scripted.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"executable = {json.dumps(executable)}\n{args}")


def bare_python(tmp_path: Path) -> Path:
    """A `python3` without gitswarm: this interpreter without site-packages (-S) or the environment (-I)."""
    path = tmp_path / "bin" / "python3"
    path.parent.mkdir()
    path.write_text(f'#!/bin/sh\nexec {sys.executable} -I -S "$@"\n')
    path.chmod(0o755)
    return path


def check(repo: Path) -> tuple[int, dict]:
    result = cli(repo, "--json", "adapters", "check", "scripted")
    (row,) = result.json()["adapters"]
    return result.code, row


def test_a_python_that_cannot_import_the_module_fails_its_preflight(repo: Path, tmp_path: Path) -> None:
    register(repo, str(bare_python(tmp_path)))
    code, row = check(repo)
    assert code != 0 and not row["ok"] and row["version"]  # it runs, and says its version
    assert "cannot import gitswarm.scripted_agent" in row["reason"] and sys.executable in row["reason"]


def test_the_python_gitswarm_runs_in_passes(repo: Path) -> None:
    register(repo, sys.executable)
    code, row = check(repo)
    assert code == 0 and row["ok"], row


def test_only_literal_modules_of_a_python_are_checked(repo: Path, tmp_path: Path) -> None:
    python = str(bare_python(tmp_path))
    register(repo, python, 'args = ["-c", "print(1)", "{prompt}"]\n')
    assert check(repo)[1]["ok"]
    register(repo, python, 'args = ["-m", "{model}", "{prompt}"]\n')
    assert check(repo)[1]["ok"]


def test_the_shipped_scripted_spec_runs_the_python_gitswarm_runs_in_and_passes(repo: Path) -> None:
    """No spec of the repository's own: the shipped `scripted.toml` says `executable = "{python}"`."""
    assert not (repo / ".gitswarm").exists()
    code, row = check(repo)
    assert code == 0 and row["ok"], row
    listed = {a["name"]: a for a in cli(repo, "--json", "adapters", "list").json()}
    assert listed["scripted"]["executable"] == sys.executable and listed["scripted"]["capabilities"] == []
    assert listed["scripted"]["source"].endswith("scripted.toml") and ".gitswarm" not in listed["scripted"]["source"]
