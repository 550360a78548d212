"""What job specs are checked against: the adapters known in a repository and how needs are routed.

A module of its own so that Swarm loads the adapter registry (and, through
it, every adapter implementation) only when something is submitted: reading
commands such as `status` never need it.
"""

from __future__ import annotations

from pathlib import Path

from gitswarm.adapters.names import adapter_names, spec_dirs
from gitswarm.adapters.registry import repo_registry
from gitswarm.engine.config import load_config, skill_dirs
from gitswarm.model.routing import choose
from gitswarm.model.spec import AdapterFacts


def known_adapters(workdir: Path | None) -> list[str]:
    return adapter_names(spec_dirs(workdir))


def adapter_facts(workdir: Path | None) -> AdapterFacts:
    """Adapter names, their capabilities and the routing of `needs` in the repository at `workdir`."""
    registry = repo_registry(workdir)
    config = load_config(workdir)
    skill_dirs(workdir, config.skills)  # a skills folder outside the repository is refused before anything is written
    routing = config.adapters

    def capabilities(name: str) -> tuple[str, ...]:
        return registry.found(name).capabilities

    def needs_approval(name: str) -> bool:
        found = registry.spec(name)
        return found is not None and found.approve

    def route(needs: tuple[str, ...]) -> str:
        return registry.route(needs, routing.prefer, routing.disabled)

    def model(name: str) -> str | None:
        found = registry.spec(name)
        return found.model if found is not None else None

    def routed_model(name: str, mode: str, effort: str | None) -> str | None:
        found = registry.spec(name)
        if found is None:
            return None
        mode_tier = config.routing.implement if mode == "implement" else config.routing.analyze
        return choose(name, found.models.named(), found.model, mode, mode_tier, None, effort).model

    return AdapterFacts(
        names=registry.names(), capabilities=capabilities, needs_approval=needs_approval, route=route, model=model,
        routed_model=routed_model,
        browser_models=config.browser.models,
    )
