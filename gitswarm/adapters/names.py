"""Adapter names known in a repository, without loading any adapter (cheap enough for every command).

Specs are looked up, first match wins, in the repository's `.gitswarm/adapters/`,
then the user's folder (`$XDG_CONFIG_HOME/gitswarm/adapters/`, by default
`~/.config/gitswarm/adapters/`), then the specs gitswarm ships.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from gitswarm.model.ids import TASK_ID

BUILTIN_NAMES = ("shell",)
NOT_SPECS = frozenset({"prices"})  # prices.toml sits beside the specs


_PACKAGE = Path(__file__).resolve().parent.parent
#: The specs gitswarm ships: inside the package when installed from a wheel,
#: at the top of the source tree when run from a checkout.
SHIPPED_DIRS = (_PACKAGE / "shipped_adapters", _PACKAGE.parent / "adapters")


def shipped_dir() -> Path | None:
    return next((d for d in SHIPPED_DIRS if d.is_dir()), None)


def user_config_dir(env: Mapping[str, str] | None = None) -> Path | None:
    """`$XDG_CONFIG_HOME/gitswarm`, else `~/.config/gitswarm` (the XDG default); None without a home.

    A relative XDG_CONFIG_HOME is ignored, as the XDG base directory spec says.
    """
    env = os.environ if env is None else env
    xdg = env.get("XDG_CONFIG_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "gitswarm"
    home = env.get("HOME", "")
    return Path(home) / ".config" / "gitswarm" if home else None


def spec_dirs(workdir: Path | None, env: Mapping[str, str] | None = None) -> list[Path]:
    """Where adapter specs are looked up, first match wins: the repository's
    `.gitswarm/adapters/`, the user's folder, then the specs gitswarm ships."""
    dirs = [workdir / ".gitswarm" / "adapters"] if workdir is not None else []
    user = user_config_dir(env)
    if user is not None:
        dirs.append(user / "adapters")
    shipped = shipped_dir()
    return dirs + ([shipped] if shipped is not None else [])


def adapter_names(dirs: list[Path]) -> list[str]:
    names = set(BUILTIN_NAMES)
    for directory in dirs:
        names.update(p.stem for p in directory.glob("*.toml") if TASK_ID.fullmatch(p.stem) and p.stem not in NOT_SPECS)
    return sorted(names)
