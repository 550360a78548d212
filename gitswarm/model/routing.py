"""Which model a run goes to, and the receipt that says why.

An adapter spec may name models by tier (`[models] fast = "...", strong = "..."`).
A run's model is decided by the first of these rules that applies:

1. `task_model`: the task names a `model`;
2. `task_effort`: the task asks for an `effort` (low: the fast tier, high: the
   strong one) and the spec has that tier;
3. `repo_default`: the repository's tier for the task's mode (`[routing]
   analyze = "fast"`, `implement = "strong"` by default), when the spec has it;
4. `spec_default`: the spec's `model`, else the CLI's own default.

After a run failed for a provider reason (quota, an unfunded key, an unknown
model), the next attempt may be routed by `fallback` instead (engine/routing/route.py).
Every agent run records the `Routing` that chose its model: the rule, a
sentence, and the alternatives passed over, so a person can audit it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import msgspec

Tier = Literal["fast", "strong"]
TIERS: tuple[Tier, ...] = ("fast", "strong")
EFFORT_TIERS: dict[str, Tier] = {"low": "fast", "high": "strong"}
Rule = Literal["task_model", "task_effort", "repo_default", "spec_default", "fallback"]
SPEC_DEFAULT = "default"  # a [routing] mode value: the spec's own model, no tier


class Option(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One place a run could go: an adapter, the tier (if any) and the model (None: the CLI's default)."""

    adapter: str
    tier: Tier | None = None
    model: str | None = None
    why: str | None = None  # why it was not taken, when that is not simply "another rule decided"


class Routing(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The receipt of one run's routing."""

    rule: Rule
    model: str | None = None  # the model chosen (None: the CLI's own default); the run's `model` is what the CLI says it ran
    reason: str  # the rule in words: `task effort = "low": tier fast`
    passed_over: tuple[Option, ...] = ()
    fallback: int | None = None  # rule fallback: the index in `[routing] fallback` of the entry taken
    after: str | None = None  # rule fallback: the provider error of the attempt before


class Route(msgspec.Struct, frozen=True):
    """Where a run goes, and its receipt."""

    adapter: str
    model: str | None
    tier: Tier | None
    routing: Routing

    @property
    def option(self) -> Option:
        return Option(adapter=self.adapter, tier=self.tier, model=self.model)


def choose(
    adapter: str,
    tiers: Mapping[str, str],
    spec_model: str | None,
    mode: str,
    mode_tier: str | None,
    task_model: str | None = None,
    effort: str | None = None,
) -> Route:
    """The model of a run of `adapter` (whose spec has `tiers` and `spec_model`) by the rules above.

    `mode_tier` is the repository's default for the task's mode: a tier, or
    SPEC_DEFAULT / None for the spec's own model.
    """
    if task_model:
        tier = _tier_of(task_model, tiers)
        return _route(adapter, task_model, tier, "task_model", f"the task names model {task_model!r}", tiers, spec_model)
    notes: list[str] = []
    if effort is not None:
        wanted = EFFORT_TIERS[effort]
        if wanted in tiers:
            return _route(adapter, tiers[wanted], wanted, "task_effort", f'task effort = "{effort}": tier {wanted}', tiers, spec_model)
        notes.append(f'task effort = "{effort}" asks for tier {wanted}, which {adapter} does not name')
    if mode_tier in TIERS:
        if mode_tier in tiers:
            reason = f'[routing] {mode} = "{mode_tier}"'
            return _route(adapter, tiers[mode_tier], mode_tier, "repo_default", "; ".join([*notes, reason]), tiers, spec_model)
        notes.append(f'[routing] {mode} = "{mode_tier}", which {adapter} does not name')
    shown = repr(spec_model) if spec_model else "none: the CLI's own default"
    reason = "; ".join([*notes, f"the spec's model ({shown})"])
    return _route(adapter, spec_model, _tier_of(spec_model, tiers), "spec_default", reason, tiers, spec_model)


def options(adapter: str, tiers: Mapping[str, str], spec_model: str | None) -> list[Option]:
    """Every model a spec offers: its tiers in order, then its own model when it is no tier's."""
    found = [Option(adapter=adapter, tier=tier, model=tiers[tier]) for tier in TIERS if tier in tiers]
    if not any(o.model == spec_model for o in found):
        found.append(Option(adapter=adapter, tier=None, model=spec_model))
    return found


def as_tier(name: str | None) -> Tier | None:
    """`name` as a tier, or None when it names none (an adapter, no tier)."""
    return next((tier for tier in TIERS if tier == name), None)


def _tier_of(model: str | None, tiers: Mapping[str, str]) -> Tier | None:
    return next((tier for tier in TIERS if model and tiers.get(tier) == model), None)


def _route(
    adapter: str, model: str | None, tier: Tier | None, rule: Rule, reason: str, tiers: Mapping[str, str], spec_model: str | None
) -> Route:
    passed = tuple(o for o in options(adapter, tiers, spec_model) if o.model != model)
    return Route(adapter, model, tier, Routing(rule=rule, model=model, reason=reason, passed_over=passed))
