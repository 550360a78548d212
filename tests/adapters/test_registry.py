"""The adapters a repository knows (adapters/registry.py): a spec is read without looking for its program."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gitswarm.adapters import registry as registry_module
from gitswarm.adapters.registry import repo_registry


def test_a_spec_is_read_without_looking_for_its_executable(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Submission asks every task's adapter for its spec: the built-in has none, and an agent's comes from its
    files alone; only `found` (what `adapters list` shows) looks the executable up on PATH."""
    (repo / ".gitswarm" / "adapters").mkdir(parents=True)
    (repo / ".gitswarm" / "adapters" / "ghost.toml").write_text('executable = "no-such-agent-cli"\nmodel = "m1"\n')
    looked: list[str] = []
    real = shutil.which
    monkeypatch.setattr(registry_module.shutil, "which", lambda name, *a, **k: looked.append(name) or real(name, *a, **k))
    reg = repo_registry(repo)
    assert reg.spec("shell") is None
    found = reg.spec("ghost")
    assert found is not None and found.model == "m1" and found.executable == "no-such-agent-cli"
    assert looked == []
    assert reg.found("ghost").executable is None and looked  # (`found` does look)
