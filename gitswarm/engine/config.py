"""Repository configuration: `.gitswarm.toml`, or `[tool.gitswarm]` in pyproject.toml.

    [adapters]
    prefer = ["hermes", "claude-code"]   # routing order for tasks that name capabilities
    disabled = ["aider"]                 # never routed to

    [audit]
    checks = ["pytest -q"]               # what `gitswarm audit` runs on a clean checkout
    auditor = "claude-code"              # optional: an adapter that reviews the commit too
    timeout = "10m"

    [hooks]
    audit_branches = ["main"]            # post-commit audits commits on these (fnmatch); [] = none
    verified_branches = ["swarm/*"]      # pre-push refuses these without an accepted verdict

    [pull]
    max_record = 16777216                # bytes of one pulled record; a job holding a bigger one is refused
    max_pull = 1073741824                # bytes one pull may read in all; the jobs past it are refused
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated

import msgspec

from gitswarm.adapters.registry import DEFAULT_PREFERENCE
from gitswarm.model.errors import BadInput
from gitswarm.store.intake import PullLimits

CONFIG_FILE = ".gitswarm.toml"


class AdaptersConfig(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    prefer: list[str] = msgspec.field(default_factory=lambda: list(DEFAULT_PREFERENCE))
    disabled: list[str] = []


class AuditConfig(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    checks: list[str] = []
    auditor: str | None = None
    timeout: str | float = 600.0


class HooksConfig(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    audit_branches: list[str] = msgspec.field(default_factory=lambda: ["*"])
    verified_branches: list[str] = msgspec.field(default_factory=lambda: ["swarm/*"])


Bytes = Annotated[int, msgspec.Meta(ge=1024, le=2**40)]


class PullConfig(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    max_record: Bytes = PullLimits.max_record  # one pulled record (an op's commit, an artifact)
    max_pull: Bytes = PullLimits.max_pull  # everything one pull reads

    def limits(self) -> PullLimits:
        return PullLimits(max_record=self.max_record, max_pull=self.max_pull)


class Config(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    adapters: AdaptersConfig = msgspec.field(default_factory=AdaptersConfig)
    audit: AuditConfig = msgspec.field(default_factory=AuditConfig)
    hooks: HooksConfig = msgspec.field(default_factory=HooksConfig)
    pull: PullConfig = msgspec.field(default_factory=PullConfig)


def load_config(workdir: Path | None) -> Config:
    """The repository's configuration; defaults when it has none."""
    if workdir is None:
        return Config()
    own, pyproject = workdir / CONFIG_FILE, workdir / "pyproject.toml"
    try:
        if own.is_file():
            return msgspec.convert(tomllib.loads(own.read_text()), Config)
        if pyproject.is_file():
            section = tomllib.loads(pyproject.read_text()).get("tool", {}).get("gitswarm")
            return Config() if section is None else msgspec.convert(section, Config)
    except (tomllib.TOMLDecodeError, OSError) as exc:
        raise BadInput(f"{own if own.is_file() else pyproject}: {exc}") from None
    except msgspec.ValidationError as exc:
        where = own if own.is_file() else f"{pyproject} [tool.gitswarm]"
        raise BadInput(f"{where}: {str(exc).replace('Object contains unknown field', 'unknown key')}") from None
    return Config()
