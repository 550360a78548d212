"""Which adapters exist here, by name: the built-in shell adapter and TOML specs.

A repository's `.gitswarm/adapters/<name>.toml` overrides the user's
(`~/.config/gitswarm/adapters/<name>.toml`), which overrides the spec gitswarm
ships under the same name; prices likewise (`.gitswarm/prices.toml` over
`~/.config/gitswarm/prices.toml` over the shipped table), model by model.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from gitswarm.adapters.base import Adapter
from gitswarm.adapters.names import NOT_SPECS, adapter_names, shipped_dir, spec_dirs, user_config_dir
from gitswarm.adapters.shell import ShellAdapter
from gitswarm.model.errors import BadInput
from gitswarm.model.ids import TASK_ID

if TYPE_CHECKING:  # the agent adapters' modules are loaded when a spec is first read: a run of shell tasks never needs them
    from gitswarm.adapters.agentspec import AgentSpec
    from gitswarm.adapters.pricing import PriceTable

BUILTIN: dict[str, Adapter] = {"shell": ShellAdapter()}
#: The order in which adapters are tried for a task that names capabilities
#: rather than an adapter. Hermes first: it has a browser toolset.
DEFAULT_PREFERENCE = ("hermes", "claude-code", "codex", "gemini", "omp", "aider")
PRICES = "prices.toml"


class Found(msgspec.Struct, frozen=True):
    """One adapter as `adapters list` shows it."""

    name: str
    source: str  # "builtin", or the spec file
    capabilities: tuple[str, ...]
    executable: str | None  # the resolved path, None when not found
    spec: AgentSpec | None
    files: tuple[str, ...] = ()  # the spec file and every spec it extends


class Registry:
    """Adapters by name; a repository's `.gitswarm/adapters/` overrides the shipped specs."""

    def __init__(self, spec_dirs: list[Path], workdir: Path | None = None) -> None:
        self.spec_dirs = spec_dirs
        self.workdir = workdir
        self._prices: PriceTable | None = None

    def names(self) -> list[str]:
        return adapter_names(self.spec_dirs)

    def spec_path(self, name: str) -> Path | None:
        if name in BUILTIN:
            return None
        if not TASK_ID.fullmatch(name) or name in NOT_SPECS:
            raise BadInput(f"invalid adapter name {name!r}")
        for directory in self.spec_dirs:
            path = directory / f"{name}.toml"
            if path.is_file():
                return path
        raise BadInput(f"unknown adapter {name!r}")

    def get(self, name: str) -> Adapter:
        path = self.spec_path(name)
        if path is None:
            return BUILTIN[name]
        from gitswarm.adapters.agent import AgentAdapter  # deferred, as every agent module (see the imports)
        from gitswarm.adapters.agentspec import load_spec_chain

        spec, chain = load_spec_chain(path, self.spec_dirs)
        if "/" in spec.executable and not spec.executable.startswith("/"):
            # relative to the spec file that set it, as preflight found it, not to the task's directory
            resolved = _which(spec.executable, chain)
            if resolved is not None:
                spec = msgspec.structs.replace(spec, executable=resolved)
        return AgentAdapter(name, spec, self.prices())

    def prices(self) -> PriceTable:
        if self._prices is None:
            from gitswarm.adapters.pricing import PriceTable  # deferred, as the agent modules (see the imports)

            shipped, user = shipped_dir(), user_config_dir()
            paths = [shipped / PRICES] if shipped is not None else []
            if user is not None:
                paths.append(user / PRICES)
            if self.workdir is not None:
                paths.append(self.workdir / ".gitswarm" / PRICES)
            self._prices = PriceTable.load(paths)
        return self._prices

    def spec(self, name: str) -> AgentSpec | None:
        """The adapter's spec as its files chain it; None for a built-in. Its executable is not looked for on
        PATH (`found` does): submission asks this of every task."""
        path = self.spec_path(name)
        if path is None:
            return None
        from gitswarm.adapters.agentspec import load_spec_chain  # deferred, as the agent modules (see the imports)

        return load_spec_chain(path, self.spec_dirs)[0]

    def found(self, name: str) -> Found:
        path = self.spec_path(name)
        if path is None:
            return Found(name, "builtin", (), shutil.which("sh"), None)
        from gitswarm.adapters.agentspec import load_spec_chain  # deferred, as the agent modules (see the imports)

        spec, chain = load_spec_chain(path, self.spec_dirs)
        files = tuple(str(p) for p in chain)
        return Found(name, str(path), tuple(spec.capabilities), _which(spec.executable, chain), spec, files)

    def route(self, needs: Sequence[str], prefer: Sequence[str] = DEFAULT_PREFERENCE, disabled: Sequence[str] = ()) -> str:
        """The first enabled adapter, in preference order, that has every capability needed
        and whose executable is installed here."""
        ordered = [n for n in prefer if n in self.names()] + [n for n in self.names() if n not in prefer]
        for name in ordered:
            if name in disabled or name in BUILTIN:
                continue
            found = self.found(name)
            if set(needs) <= set(found.capabilities) and found.executable is not None:
                return name
        raise BadInput(f"no enabled, installed adapter has {', '.join(needs)} (looked at: {', '.join(ordered)})")


def _which(executable: str, chain: Sequence[Path]) -> str | None:
    """A name on PATH, or a path: absolute, or relative to the spec file that set it."""
    if "/" in executable:
        if executable.startswith("/"):
            return executable if Path(executable).is_file() else None
        for spec_path in chain:  # the relative path is the nearest spec's that could have set it
            candidate = spec_path.parent / executable
            if candidate.is_file():
                return str(candidate)
        return None
    return shutil.which(executable)


def repo_registry(workdir: Path | None) -> Registry:
    return Registry(spec_dirs(workdir), workdir)
