"""Which adapters exist here, by name: the built-in shell adapter and TOML specs."""

from __future__ import annotations

from pathlib import Path

from gitswarm.adapters.agent import AgentAdapter, load_spec
from gitswarm.adapters.base import Adapter
from gitswarm.adapters.names import adapter_names, spec_dirs
from gitswarm.adapters.shell import ShellAdapter
from gitswarm.model.errors import BadInput
from gitswarm.model.ids import TASK_ID

BUILTIN: dict[str, Adapter] = {"shell": ShellAdapter()}


class Registry:
    """Adapters by name; a repository's `.gitswarm/adapters/` overrides the shipped specs."""

    def __init__(self, spec_dirs: list[Path]) -> None:
        self.spec_dirs = spec_dirs

    def names(self) -> list[str]:
        return adapter_names(self.spec_dirs)

    def get(self, name: str) -> Adapter:
        if name in BUILTIN:
            return BUILTIN[name]
        if not TASK_ID.fullmatch(name):
            raise BadInput(f"invalid adapter name {name!r}")
        for directory in self.spec_dirs:
            path = directory / f"{name}.toml"
            if path.is_file():
                return AgentAdapter(name, load_spec(path))
        raise BadInput(f"unknown adapter {name!r}")


def repo_registry(workdir: Path | None) -> Registry:
    return Registry(spec_dirs(workdir))
