"""Routing runs to model tiers, the receipt each run records, and the fallback after a provider error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitswarm.adapters.registry import repo_registry
from gitswarm.engine.config import RoutingConfig, load_config
from gitswarm.engine.routing.route import route
from gitswarm.model.artifacts import Run
from gitswarm.model.errors import BadInput
from gitswarm.model.records import TaskSpec
from gitswarm.model.routing import Option, Routing
from tests.conftest import cli, spec_text


def task(adapter: str = "claude-code", mode: str = "analyze", **fields: object) -> TaskSpec:
    return TaskSpec(id="t", seq=0, adapter=adapter, mode=mode, prompt="p", **fields)  # type: ignore[arg-type]


def spec_file(repo: Path, name: str, text: str) -> None:
    path = repo / ".gitswarm" / "adapters" / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


# -- tiers: defaults and overrides -------------------------------------------------------------


@pytest.mark.parametrize(("adapter", "fast", "strong"), [
    ("claude-code", "claude-haiku-4-5", "claude-sonnet-4-5"),
    ("codex", "gpt-5-mini", "gpt-5.5"),
    ("gemini", "gemini-2.5-flash", "gemini-2.5-pro"),
])
def test_analyze_takes_the_fast_tier_and_implement_the_strong_one(repo: Path, adapter: str, fast: str, strong: str) -> None:
    registry = repo_registry(repo)
    analyze, implement = route(task(adapter), registry, RoutingConfig()), route(task(adapter, "implement"), registry, RoutingConfig())
    assert analyze is not None and implement is not None
    assert (analyze.adapter, analyze.model, analyze.tier, analyze.routing.rule) == (adapter, fast, "fast", "repo_default")
    assert (implement.model, implement.tier, implement.routing.rule) == (strong, "strong", "repo_default")


@pytest.mark.parametrize("adapter", ["aider", "hermes", "omp"])
def test_a_spec_without_tiers_runs_its_own_model(repo: Path, adapter: str) -> None:
    routed = route(task(adapter), repo_registry(repo), RoutingConfig())
    assert routed is not None and (routed.model, routed.tier, routed.routing.rule) == (None, None, "spec_default")


def test_the_shell_adapter_is_not_routed(repo: Path) -> None:
    assert route(task("shell", command="true"), repo_registry(repo), RoutingConfig()) is None


def test_the_repository_sets_the_default_tier_of_each_mode(repo: Path) -> None:
    (repo / ".gitswarm.toml").write_text('[routing]\nanalyze = "strong"\nimplement = "default"\n')
    config = load_config(repo).routing
    registry = repo_registry(repo)
    analyze, implement = route(task(), registry, config), route(task(mode="implement"), registry, config)
    assert analyze is not None and (analyze.model, analyze.routing.reason) == ("claude-sonnet-4-5", '[routing] analyze = "strong"')
    assert implement is not None and (implement.model, implement.routing.rule) == (None, "spec_default")  # claude's own default


def test_bad_routing_config_is_refused_with_the_key_named(repo: Path) -> None:
    (repo / ".gitswarm.toml").write_text('[routing]\nanalyze = "cheap"\n')
    with pytest.raises(BadInput, match=r"routing\.analyze"):
        load_config(repo)


def test_effort_and_model_of_a_task_override_the_defaults(repo: Path) -> None:
    registry = repo_registry(repo)
    high = route(task(effort="high"), registry, RoutingConfig())
    assert high is not None and (high.model, high.tier, high.routing.rule) == ("claude-sonnet-4-5", "strong", "task_effort")
    named = route(task(mode="implement", effort="low", model="claude-opus-4-1"), registry, RoutingConfig())
    assert named is not None and (named.model, named.tier, named.routing.rule) == ("claude-opus-4-1", None, "task_model")


def test_an_extending_spec_overrides_a_tier_and_a_spec_setting_model_drops_them(repo: Path) -> None:
    spec_file(repo, "claude-code", 'extends = "claude-code"\n[models]\nfast = "claude-3-5-haiku"\n')
    spec_file(repo, "claude-gateway", 'extends = "claude-code"\nmodel = "gateway-llama"\n')
    registry = repo_registry(repo)
    fast = route(task(), registry, RoutingConfig())
    assert fast is not None and (fast.model, fast.tier) == ("claude-3-5-haiku", "fast")
    strong = route(task(mode="implement"), registry, RoutingConfig())
    assert strong is not None and strong.model == "claude-sonnet-4-5"  # the base's strong tier is kept
    gateway = route(task("claude-gateway"), registry, RoutingConfig())
    assert gateway is not None and (gateway.model, gateway.routing.rule) == ("gateway-llama", "spec_default")


def test_a_tier_must_name_a_model(repo: Path) -> None:
    spec_file(repo, "mine", 'executable = "x"\n[models]\nfast = ""\n')
    with pytest.raises(BadInput, match=r"models\.fast"):
        repo_registry(repo).get("mine")
    spec_file(repo, "mine", 'executable = "x"\n[models]\nmedium = "m"\n')
    with pytest.raises(BadInput, match="medium"):
        repo_registry(repo).get("mine")


# -- fallback: the next attempt after a provider error ------------------------------------------


def failed_run(adapter: str, model: str | None, tier: str | None, routing: Routing, error: str | None = "quota") -> Run:
    return Run(job="j", task="t", attempt=1, created=1.0, producer=adapter, adapter=adapter, exit_code=1, duration=1.0,
               model=model, tier=tier, routing=routing, error="failed", provider_error=error)


def test_fallback_takes_the_next_entry_and_passes_over_what_cannot_run(repo: Path, fake_clis: Path) -> None:
    registry = repo_registry(repo)
    config = RoutingConfig(fallback=["fast", "shell", "nope", "codex"])
    first = route(task(mode="implement"), registry, config)
    assert first is not None and first.model == "claude-sonnet-4-5"
    previous = failed_run("claude-code", "claude-sonnet-4-5", "strong", first.routing)
    second = route(task(mode="implement"), registry, config, previous)
    assert second is not None and (second.adapter, second.model, second.tier) == ("claude-code", "claude-haiku-4-5", "fast")
    assert (second.routing.rule, second.routing.fallback, second.routing.after) == ("fallback", 0, "quota")
    assert second.routing.passed_over == (Option(adapter="claude-code", tier="strong", model="claude-sonnet-4-5",
                                                 why="failed: quota"),)
    previous = failed_run("claude-code", "claude-haiku-4-5", "fast", second.routing)
    third = route(task(mode="implement"), registry, config, previous)
    assert third is not None and (third.adapter, third.model, third.routing.fallback) == ("codex", "gpt-5.5", 3)
    whys = [o.why for o in third.routing.passed_over]
    assert whys[0] == "failed: quota"
    assert whys[1] == "fallback[1] = 'shell': not an agent adapter"
    assert whys[2] is not None and whys[2].startswith("fallback[2] = 'nope': unknown adapter")
    assert third.routing.passed_over[-1] == Option(adapter="claude-code", tier="strong", model="claude-sonnet-4-5")  # its own route
    previous = failed_run("codex", "gpt-5.5", "strong", third.routing)
    again = route(task(mode="implement"), registry, config, previous)
    assert again is not None and (again.adapter, again.routing.rule) == ("claude-code", "repo_default")  # the list is used up


def test_no_fallback_without_a_provider_error_or_a_list(repo: Path) -> None:
    registry = repo_registry(repo)
    first = route(task(), registry, RoutingConfig(fallback=["strong"]))
    assert first is not None
    other = failed_run("claude-code", first.model, first.tier, first.routing, error=None)
    assert route(task(), registry, RoutingConfig(fallback=["strong"]), other) == first
    provider = failed_run("claude-code", first.model, first.tier, first.routing)
    assert route(task(), registry, RoutingConfig(), provider) == first


def test_fallback_skips_an_adapter_lacking_what_the_task_needs_or_disabled(repo: Path, fake_clis: Path) -> None:
    registry = repo_registry(repo)
    needs_browser = task("hermes", needs=("browser",), approved=True)
    first = route(needs_browser, registry, RoutingConfig())
    assert first is not None
    previous = failed_run("hermes", None, None, first.routing)
    assert route(needs_browser, registry, RoutingConfig(fallback=["codex"]), previous) == first
    plain = route(task(), registry, RoutingConfig(fallback=["codex", "gemini"]),
                  failed_run("claude-code", "claude-haiku-4-5", "fast", first.routing), disabled=["codex"])
    assert plain is not None and plain.adapter == "gemini"
    assert plain.routing.passed_over[1].why == "fallback[0] = 'codex': disabled or unusable here"


# -- end to end: the receipt in the stored run, and fallback from each fake CLI's error shape -------


def run_job(repo: Path, tmp_path: Path, body: str) -> tuple[dict, list[dict]]:
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(body))
    result = cli(repo, "--json", "run", str(spec), "-j", "1")
    assert result.out, result.err
    data = result.json()
    listed = cli(repo, "--json", "artifacts", data["id"]).json()["artifacts"]
    runs = [cli(repo, "--json", "artifact", a["id"]).json()["record"] for a in listed if a["kind"] == "run"]
    return data, sorted(runs, key=lambda r: (r["attempt"], r["created"]))


def test_the_run_records_model_tier_and_receipt(repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    data, (run,) = run_job(repo, tmp_path, 'id = "t"\nadapter = "claude-code"\nprompt = "answer: ok"\neffort = "high"\n')
    assert data["status"] == "succeeded"
    assert (run["model"], run["tier"]) == ("claude-sonnet-4-5", "strong")
    assert run["routing"] == {
        "rule": "task_effort", "model": "claude-sonnet-4-5", "reason": 'task effort = "high": tier strong',
        "passed_over": [{"adapter": "claude-code", "tier": "fast", "model": "claude-haiku-4-5", "why": None},
                        {"adapter": "claude-code", "tier": None, "model": None, "why": None}],
        "fallback": None, "after": None,
    }
    assert run["provider_error"] is None
    cost = cli(repo, "--json", "cost").json()
    assert "strong" in json.dumps(cost)


#: adapter, provider failure, the model its first attempt runs (and fails) on, the fallback list,
#: what the spec's provider_error_regex finds, and where the second attempt goes.
FALLBACKS = [
    ("claude-code", "quota", "claude-haiku-4-5", ["strong"], "rate_limit_error", ("claude-code", "claude-sonnet-4-5", "strong")),
    ("codex", "funds", "gpt-5-mini", ["strong"], "Quota exceeded. Check your plan and billing details", ("codex", "gpt-5.5", "strong")),
    ("gemini", "model", "gemini-2.5-flash", ["strong"], "models/gemini-2.5-flash is not found", ("gemini", "gemini-2.5-pro", "strong")),
    ("aider", "quota", "gpt-4o", ["codex"], "litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached for gpt-4o",
     ("codex", "gpt-5-mini", "fast")),
    ("hermes", "funds", "hermes-4", ["claude-code"], "Error code: 402 - {'error': {'message': 'Insufficient credits.",
     ("claude-code", "claude-haiku-4-5", "fast")),
    ("omp", "model", "claude-sonnet-4-5", ["strong", "gemini"], 'not_found_error","message":"model: claude-sonnet-4-5',
     ("gemini", "gemini-2.5-flash", "fast")),
]


@pytest.mark.parametrize(("adapter", "kind", "model", "fallback", "said", "then"), FALLBACKS, ids=[f[0] for f in FALLBACKS])
def test_after_a_provider_error_the_next_attempt_falls_back(
    repo: Path, tmp_path: Path, fake_clis: Path, adapter: str, kind: str, model: str, fallback: list[str], said: str,
    then: tuple[str, str, str],
) -> None:
    (repo / ".gitswarm.toml").write_text(f"[routing]\nfallback = {json.dumps(fallback)}\n")
    named = 'model = "hermes-4"\n' if adapter == "hermes" else ""  # hermes names no model of its own
    data, runs = run_job(repo, tmp_path, f'id = "t"\nadapter = "{adapter}"\nprompt = "fail-provider: {kind} for {model}\\nanswer: ok"\n{named}')
    assert data["status"] == "succeeded", data["tasks"]
    first, second = runs
    assert (first["adapter"], first["attempt"]) == (adapter, 1) and first["error"]
    assert first["provider_error"].startswith(said)
    assert (second["adapter"], second["model"], second["tier"], second["attempt"]) == (*then, 2)
    receipt = second["routing"]
    assert (receipt["rule"], receipt["fallback"], receipt["after"]) == ("fallback", fallback.index(then[2] if then[0] == adapter else then[0]),
                                                                       first["provider_error"])
    assert receipt["passed_over"][0]["adapter"] == adapter and receipt["passed_over"][0]["why"].startswith("failed: ")
    assert receipt["reason"].startswith(f"attempt 1 failed for a provider reason on {adapter}")
    if adapter == "omp":  # omp names no tiers: "strong" is passed over, and says why
        assert receipt["passed_over"][1]["why"] == "fallback[0] = 'strong': omp names no strong tier"


def test_a_failure_that_is_not_the_providers_is_retried_on_the_same_route(repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    (repo / ".gitswarm.toml").write_text('[routing]\nfallback = ["strong"]\n')
    data, runs = run_job(repo, tmp_path, 'id = "t"\nadapter = "claude-code"\nprompt = "fail: boom"\nmax_attempts = 2\n')
    assert data["status"] == "failed"
    assert [(r["tier"], r["routing"]["rule"], r["provider_error"]) for r in runs] == [("fast", "repo_default", None)] * 2


# -- browser work: the floor applies to the routed model ------------------------------------------


def test_a_browser_task_routed_below_the_floor_is_refused_at_submit(repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    (repo / ".gitswarm.toml").write_text('[browser]\nmodels = ["claude-sonnet-*"]\n')
    spec_file(repo, "claude-browser", 'extends = "claude-code"\ncapabilities = ["browser"]\n')
    spec = tmp_path / "spec.toml"
    body = 'id = "t"\nadapter = "claude-browser"\nneeds = ["browser"]\nprompt = "look"\napprove = true\n'
    spec.write_text(spec_text(body))
    result = cli(repo, "submit", str(spec))
    assert result.code == 2 and "model 'claude-haiku-4-5' is below the floor" in result.err  # analyze: the fast tier
    spec.write_text(spec_text(body + 'effort = "high"\n'))
    assert cli(repo, "submit", str(spec)).code == 0  # the strong tier is allowed


def test_fallback_never_takes_a_browser_task_below_the_floor(repo: Path, fake_clis: Path) -> None:
    registry = repo_registry(repo)
    browser = task(needs=("browser",), approved=True, effort="high")
    first = route(browser, registry, RoutingConfig())
    assert first is not None and first.model == "claude-sonnet-4-5"
    previous = failed_run("claude-code", first.model, first.tier, first.routing)
    again = route(browser, registry, RoutingConfig(fallback=["fast"]), previous, floor=["claude-sonnet-*"])
    assert again == first
    allowed = route(browser, registry, RoutingConfig(fallback=["fast"]), previous, floor=["claude-*"])
    assert allowed is not None and allowed.model == "claude-haiku-4-5"
