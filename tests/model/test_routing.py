"""Model tiers: which rule decides a run's model, and the receipt it leaves."""

from __future__ import annotations

import msgspec
import pytest

from gitswarm.model.artifacts import Run, artifact_id
from gitswarm.model.codec import decode, encode
from gitswarm.model.errors import CorruptRecord
from gitswarm.model.routing import Option, Routing, choose

TIERS = {"fast": "claude-haiku-4-5", "strong": "claude-sonnet-4-5"}


def pick(mode: str = "analyze", mode_tier: str | None = "fast", model: str | None = None, effort: str | None = None,
         tiers: dict[str, str] = TIERS, spec_model: str | None = None) -> tuple[str | None, str | None, Routing]:
    route = choose("claude-code", tiers, spec_model, mode, mode_tier, model, effort)
    return route.model, route.tier, route.routing


def test_the_repository_default_for_the_mode_decides_when_the_task_asks_nothing() -> None:
    model, tier, routing = pick("analyze", "fast")
    assert (model, tier, routing.rule, routing.model) == ("claude-haiku-4-5", "fast", "repo_default", "claude-haiku-4-5")
    assert routing.reason == '[routing] analyze = "fast"'
    assert routing.passed_over == (Option(adapter="claude-code", tier="strong", model="claude-sonnet-4-5"),
                                   Option(adapter="claude-code", tier=None, model=None))
    model, tier, routing = pick("implement", "strong")
    assert (model, tier, routing.rule) == ("claude-sonnet-4-5", "strong", "repo_default")


@pytest.mark.parametrize(("effort", "expected"), [("low", "fast"), ("high", "strong")])
def test_a_tasks_effort_beats_the_repository_default(effort: str, expected: str) -> None:
    model, tier, routing = pick("implement", "strong", effort=effort)
    assert (model, tier, routing.rule) == (TIERS[expected], expected, "task_effort")
    assert routing.reason == f'task effort = "{effort}": tier {expected}'


def test_a_tasks_model_beats_its_effort_and_is_tiered_when_a_tier_names_it() -> None:
    model, tier, routing = pick(effort="low", model="claude-opus-4-1")
    assert (model, tier, routing.rule) == ("claude-opus-4-1", None, "task_model")
    assert [o.model for o in routing.passed_over] == ["claude-haiku-4-5", "claude-sonnet-4-5", None]
    assert pick(model="claude-sonnet-4-5")[1] == "strong"


def test_a_spec_without_the_tier_falls_to_its_own_model_and_says_why() -> None:
    model, tier, routing = pick(effort="high", tiers={}, spec_model="gpt-4o")
    assert (model, tier, routing.rule, routing.passed_over) == ("gpt-4o", None, "spec_default", ())
    assert routing.reason == ('task effort = "high" asks for tier strong, which claude-code does not name; '
                              '[routing] analyze = "fast", which claude-code does not name; the spec\'s model (\'gpt-4o\')')
    model, _, routing = pick(mode_tier="default")
    assert (model, routing.rule) == (None, "spec_default")
    assert routing.reason == "the spec's model (none: the CLI's own default)"


def test_the_receipt_is_part_of_the_run_artifact_and_round_trips() -> None:
    routing = pick()[2]
    run = Run(job="j", task="t", attempt=1, created=1.0, producer="claude-code", adapter="claude-code", exit_code=0,
              duration=1.0, model="claude-haiku-4-5", tier="fast", routing=routing)
    data = encode(run)
    assert b'"routing":{"rule":"repo_default","model":"claude-haiku-4-5"' in data
    again = decode(data, Run, "run")
    assert again == run and artifact_id(again) == artifact_id(run)
    old = decode(encode(msgspec.structs.replace(run, routing=None)), Run, "run")  # a run from before routing
    assert old.routing is None and old.provider_error is None


def test_a_pulled_receipt_with_an_unknown_rule_is_refused() -> None:
    bad = encode(Routing(rule="task_model", reason="x")).replace(b"task_model", b"coin_flip")
    with pytest.raises((CorruptRecord, msgspec.ValidationError)):
        decode(bad, Routing, "routing")
