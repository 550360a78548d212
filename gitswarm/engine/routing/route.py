"""Route an attempt of an agent task: its adapter, model and tier, with the receipt the run records.

The rules are model/routing.py's, over the adapter spec's `[models]` and the
repository's `[routing]`. One more applies first: when the attempt before this
one failed for a provider reason (its run has `provider_error`: quota, an
unfunded key, an unknown model, as the spec's `provider_error_regex` read it),
and `[routing] fallback` lists where to go, this attempt takes the next entry
after the one that attempt took (the first, if it took none). An entry is a
tier of the adapter that failed, or another adapter (routed by its own tiers;
the task's `model` belongs to its own adapter and is not carried over). An
entry that would run the same adapter and model again, or an adapter that is
unknown, disabled, unusable here, lacks a capability the task needs or needs
an approval the task lacks, or (for a browser task) runs a model below the
repository's `[browser] models` floor, is passed over, and the receipt says why.
When the list is used up the attempt takes the task's own route again.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import msgspec

from gitswarm.adapters.agentspec import AgentSpec
from gitswarm.adapters.registry import BUILTIN, Registry
from gitswarm.engine.config import RoutingConfig
from gitswarm.model.artifacts import Run
from gitswarm.model.browser import below_floor, is_browser
from gitswarm.model.errors import BadInput
from gitswarm.model.records import TaskSpec
from gitswarm.model.routing import Option, Route, Routing, as_tier, choose


def route(
    task: TaskSpec,
    registry: Registry,
    config: RoutingConfig,
    previous: Run | None = None,
    unusable: Collection[str] = (),
    disabled: Collection[str] = (),
    floor: Sequence[str] | None = None,
) -> Route | None:
    """Where this attempt of `task` runs; None for the shell adapter (no model to route).

    `previous` is the last routed run of the attempt before, if there was one.
    """
    if task.adapter in BUILTIN:
        return None
    own = _own(task, task.adapter, _spec(registry, task.adapter), config, task.model)
    if previous is None or previous.provider_error is None or not config.fallback:
        return own
    return _fallback(task, registry, config, previous, own, set(unusable) | set(disabled), floor) or own


def _own(task: TaskSpec, adapter: str, spec: AgentSpec, config: RoutingConfig, model: str | None) -> Route:
    mode_tier = config.implement if task.mode == "implement" else config.analyze
    return choose(adapter, spec.models.named(), spec.model, task.mode, mode_tier, model, task.effort)


def _fallback(
    task: TaskSpec, registry: Registry, config: RoutingConfig, previous: Run, own: Route, skip: set[str],
    floor: Sequence[str] | None,
) -> Route | None:
    earlier = previous.routing
    start = earlier.fallback + 1 if earlier is not None and earlier.fallback is not None else 0
    asked = earlier.model if earlier is not None else previous.model
    failed = Option(adapter=previous.adapter, tier=as_tier(previous.tier), model=asked)
    passed: list[Option] = [msgspec.structs.replace(failed, why=f"failed: {previous.provider_error}")]
    for index in range(start, len(config.fallback)):
        entry = config.fallback[index]
        candidate, why = _candidate(task, registry, config, previous, entry, skip)
        if candidate is not None and (candidate.adapter, candidate.model) == (failed.adapter, failed.model):
            candidate, why = None, "the same adapter and model as the attempt that failed"
        below = below_floor(candidate.model, floor) if candidate is not None and is_browser(task.needs) else None
        if below is not None:
            candidate, why = None, below
        if candidate is None:
            adapter = previous.adapter if as_tier(entry) else entry
            passed.append(Option(adapter=adapter, tier=as_tier(entry), why=f"fallback[{index}] = {entry!r}: {why}"))
            continue
        if own.option not in (failed, candidate.option):
            passed.append(own.option)
        reason = (f"attempt {previous.attempt} failed for a provider reason on {previous.adapter}"
                  f" ({asked or 'its default model'}); [routing] fallback[{index}] = {entry!r}")
        routing = Routing(rule="fallback", model=candidate.model, reason=reason, passed_over=tuple(passed),
                          fallback=index, after=previous.provider_error)
        return Route(candidate.adapter, candidate.model, candidate.tier, routing)
    return None


def _candidate(
    task: TaskSpec, registry: Registry, config: RoutingConfig, previous: Run, entry: str, skip: set[str]
) -> tuple[Route | None, str]:
    """The route an entry of the fallback list gives, or None and why it cannot be taken."""
    tier = as_tier(entry)
    if tier is not None:
        spec = _spec(registry, previous.adapter)
        tiers = spec.models.named()
        if tier not in tiers:
            return None, f"{previous.adapter} names no {tier} tier"
        return choose(previous.adapter, tiers, spec.model, task.mode, None, tiers[tier]), ""
    if entry in skip:
        return None, "disabled or unusable here"
    try:
        found = registry.found(entry)
    except BadInput as exc:
        return None, str(exc)
    if found.spec is None:
        return None, "not an agent adapter"
    lacking = [need for need in task.needs if need not in found.capabilities]
    if lacking:
        return None, f"lacks {', '.join(lacking)}"
    if found.spec.side_effects and not task.approved:
        return None, "needs an approval the task does not have"
    if found.executable is None:
        return None, f"its executable {found.spec.executable!r} is not installed"
    return _own(task, entry, found.spec, config, None), ""


def _spec(registry: Registry, name: str) -> AgentSpec:
    spec = registry.found(name).spec
    if spec is None:
        raise BadInput(f"adapter {name!r} has no spec to route by")
    return spec
