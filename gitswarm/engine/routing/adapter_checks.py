"""The adapters of a repository as the CLI shows them, and their preflight checks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict

from gitswarm.adapters.preflight import PreflightCache, check
from gitswarm.adapters.registry import repo_registry
from gitswarm.engine.swarm import Swarm

PREFLIGHT_FILE = "preflight.json"


def preflight_cache(swarm: Swarm, parent_env: Mapping[str, str]) -> PreflightCache:
    registry = repo_registry(swarm.repo.workdir)
    return PreflightCache(swarm.repo.common_dir / "gitswarm" / PREFLIGHT_FILE, registry, parent_env)


def list_adapters(swarm: Swarm, parent_env: Mapping[str, str]) -> dict:
    registry = repo_registry(swarm.repo.workdir)
    rows = []
    for name in registry.names():
        found = registry.found(name)
        version = None
        if found.executable is not None:
            version = check(found, parent_env).version if found.spec is not None else "builtin"
        rows.append(
            {
                "name": name,
                "source": found.source,
                "capabilities": list(found.capabilities),
                "found": found.executable is not None,
                "executable": found.executable,
                "version": version,
            }
        )
    return {"adapters": rows}


def check_adapters(swarm: Swarm, parent_env: Mapping[str, str], name: str | None) -> dict:
    """Preflight one adapter, or every adapter whose executable is found; refreshes the cache."""
    cache = preflight_cache(swarm, parent_env)
    registry = cache.registry
    names = [name] if name is not None else [n for n in registry.names() if registry.found(n).executable is not None]
    results = [asdict(cache.get(n, fresh=True)) for n in names]
    return {"ok": all(r["ok"] for r in results), "adapters": results}
