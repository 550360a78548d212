"""The adapters of a repository as the CLI shows them, their preflight checks, and what their specs
may get wrong without failing one (warnings)."""

from __future__ import annotations

import json
import string
from collections.abc import Iterable, Mapping
from dataclasses import asdict

from gitswarm.adapters.agentspec import AgentSpec, Arg
from gitswarm.adapters.preflight import PreflightCache, check
from gitswarm.adapters.registry import repo_registry
from gitswarm.engine.swarm import Swarm
from gitswarm.model.errors import BadInput

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
    """Preflight one adapter, or every adapter whose executable is found; refreshes the cache.
    `warnings` say what the specs of those adapters get wrong that no preflight fails (`ok` ignores them)."""
    cache = preflight_cache(swarm, parent_env)
    registry = cache.registry
    names = [name] if name is not None else [n for n in registry.names() if registry.found(n).executable is not None]
    results = [asdict(cache.get(n, fresh=True)) for n in names]
    warnings = [w for n in names if (spec := registry.found(n).spec) is not None for w in model_warnings(n, spec)]
    return {"ok": all(r["ok"] for r in results), "adapters": results, "warnings": warnings}


def model_warnings(name: str, spec: AgentSpec) -> list[str]:
    """A spec that names models (`[models]` tiers, or `model`) while an argument template it runs with
    has no `{model}`: routing picks a model and the run records it, but the CLI is never given it."""
    tiers = spec.models.named()
    if not tiers and spec.model is None:
        return []
    templates = _templates(spec)
    missing = [where for where, args in templates.items() if "model" not in _placeholders(args)]
    if not missing:
        return []
    named = f"model tiers ([models] {', '.join(tiers)})" if tiers else f"a model (model = {json.dumps(spec.model)})"
    where, runs = ("its args", "") if len(missing) == len(templates) else (", ".join(missing), " in those runs")
    return [f"{name}: names {named} but passes no {{model}} in {where}, so the CLI never receives the routed model{runs}"]


def _templates(spec: AgentSpec) -> dict[str, list[Arg] | None]:
    """Every argument template a run may use, by the key it is under (`args` also when absent: the
    prompt alone is passed then)."""
    found: dict[str, list[Arg] | None] = {}
    for mode in ("analyze", "implement"):
        table = spec.implement if mode == "implement" else spec.analyze
        found.setdefault(f"{mode}.args" if table is not None else "args", spec.args_for(mode))
        if table is not None and table.browser_args is not None:
            found[f"{mode}.browser_args"] = table.browser_args
    return found


def _placeholders(args: list[Arg] | None) -> set[str]:
    names: set[str] = set()
    for arg in args or ():
        for word in [arg] if isinstance(arg, str) else arg:
            names.update(field for _, field, _, _ in string.Formatter().parse(word) if field)  # a loaded spec parses
    return names


def refuse_unusable(swarm: Swarm, adapters: Iterable[str], parent_env: Mapping[str, str]) -> None:
    """BadInput naming the first of `adapters` whose preflight fails here (its executable missing, say):
    for a job about to be started here, whose worker would otherwise leave it queued with no word why."""
    cache = preflight_cache(swarm, parent_env)
    for name in sorted(set(adapters) - {"shell"}):
        result = cache.get(name)
        if not result.ok:
            raise BadInput(f"adapter {name} cannot run here: {result.reason or 'preflight failed'}; nothing was submitted")
