"""The repository's configuration table as written, read with the standard library alone.

`.gitswarm.toml`, else `[tool.gitswarm]` of pyproject.toml. The pre-push
hook's first answer (engine/sharing/push_gate.py) reads it before anything
heavy is imported; engine/config.py validates what it holds.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

CONFIG_FILE = ".gitswarm.toml"
DEFAULT_VERIFIED = ("swarm/*",)


def raw_config(workdir: Path) -> dict:
    """The configuration table as written: `.gitswarm.toml`, else `[tool.gitswarm]` of pyproject.toml.
    Raises tomllib.TOMLDecodeError or OSError; engine/config.py validates what it holds."""
    own, pyproject = workdir / CONFIG_FILE, workdir / "pyproject.toml"
    if own.is_file():
        return tomllib.loads(own.read_text())
    if pyproject.is_file():
        section = tomllib.loads(pyproject.read_text()).get("tool", {}).get("gitswarm")
        return section if isinstance(section, dict) else {}
    return {}
