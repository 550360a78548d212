"""Which adapters exist here, by name."""

from __future__ import annotations

from gitswarm.adapters.base import Adapter
from gitswarm.adapters.shell import ShellAdapter
from gitswarm.model.errors import BadInput

BUILTIN: dict[str, Adapter] = {"shell": ShellAdapter()}


def get_adapter(name: str) -> Adapter:
    try:
        return BUILTIN[name]
    except KeyError:
        raise BadInput(f"unknown adapter {name!r}") from None
