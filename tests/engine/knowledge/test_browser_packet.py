"""Browser work: hermes with its browser toolsets and a 20-minute default, the three
guardrails in every browser prompt, network evidence on findings, and the repository's model floor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitswarm.engine.knowledge.packet import build_packet
from gitswarm.engine.swarm import Swarm
from gitswarm.model.analyze_answer import BROWSER_SCHEMA_TEXT, SCHEMA_TEXT
from gitswarm.model.artifacts import Finding
from gitswarm.model.browser import BROWSER_TIMEOUT, GUARDRAILS
from gitswarm.model.codec import encode
from gitswarm.model.spec import AdapterFacts, parse_spec
from tests.conftest import cli, dumps_dir, spec_text, swarm_refs

FACTS = AdapterFacts(names=["shell", "hermes", "claude-code"], capabilities=lambda name: ("browser", "web", "edit"),
                     route=lambda needs: "hermes")
BROWSER_TASK = 'id = "qa"\nneeds = ["browser"]\napprove = true\nprompt = "Sign up on the staging site"'


def floor(models: list[str] | None, default: str | None = None) -> AdapterFacts:
    return AdapterFacts(names=FACTS.names, capabilities=FACTS.capabilities, route=FACTS.route,
                        model=lambda name: default, browser_models=models)


# -- routing and timeout ----------------------------------------------------------------------


def test_a_browser_task_goes_to_hermes_with_a_20_minute_default() -> None:
    (qa, plain) = parse_spec(spec_text(BROWSER_TASK, 'id = "b"\nadapter = "claude-code"\nprompt = "p"'), FACTS).tasks
    assert qa.adapter == "hermes" and qa.timeout == BROWSER_TIMEOUT == 1200.0
    assert plain.timeout == 600.0


def test_a_timeout_the_spec_sets_wins_over_the_browser_default() -> None:
    (own,) = parse_spec(spec_text(BROWSER_TASK + '\ntimeout = "5m"'), FACTS).tasks
    assert own.timeout == 300.0
    (job_default,) = parse_spec(spec_text(BROWSER_TASK, defaults='timeout = "45m"'), FACTS).tasks
    assert job_default.timeout == 2700.0


def test_browser_tasks_still_need_approval() -> None:
    with pytest.raises(Exception, match=r"needs approval \(browser\)"):
        parse_spec(spec_text(BROWSER_TASK.replace("approve = true\n", "")), FACTS)


def test_hermes_gets_the_browser_toolsets_by_name(repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    place = dumps_dir(repo, tmp_path)
    dumps = {mode: place / f"{mode}.json" for mode in ("analyze", "implement", "plain")}
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(
        f'id = "a"\nneeds = ["browser"]\napprove = true\nprompt = """dump-env: {dumps["analyze"]}\nfindings"""',
        f'id = "i"\nmode = "implement"\nneeds = ["browser"]\napprove = true\nprompt = """dump-env: {dumps["implement"]}\nwrite note.txt: seen"""',
        f'id = "p"\nadapter = "hermes"\nprompt = """dump-env: {dumps["plain"]}\nfindings"""',
    ))
    result = cli(repo, "--json", "run", str(spec), "-j", "1")
    assert result.json()["status"] == "succeeded", result.err

    def toolsets(mode: str) -> str:
        argv = json.loads(dumps[mode].read_text())["argv"]
        return argv[argv.index("-t") + 1]

    assert toolsets("analyze") == "file,web,vision,browser"
    assert toolsets("implement") == "file,terminal,web,vision,browser,todo"
    assert toolsets("plain") == "web,browser,todo"  # a task that needs no browser is as before


# -- the packet --------------------------------------------------------------------------------


def test_every_browser_prompt_carries_the_three_guardrails(swarm: Swarm, fake_clis: Path) -> None:
    job = swarm.submit_text(spec_text(
        'id = "qa"\nneeds = ["browser"]\napprove = true\nprompt = "Check the signup form"',
        'id = "fix"\nmode = "implement"\nneeds = ["browser"]\napprove = true\nprompt = "Fix the form"',
        'id = "plain"\nadapter = "hermes"\nprompt = "Review the parser"',
    ))
    snapshot = swarm.refs.snapshot(job, swarm.index.job_tip(job))

    def packet(task: str) -> str:
        return build_packet(snapshot, snapshot.task(task).spec, swarm.repo.read_blob)

    for task in ("qa", "fix"):
        text = packet(task)
        assert GUARDRAILS in text
        words = " ".join(text.split())
        assert "through the native value setter, then fire input and change events" in words  # (a)
        assert "Judge by network truth: each request's URL, status and response body" in words  # (b)
        assert "HTTP 200 can carry an application error" in words
        assert "Report the network evidence each finding relies on" in words  # (c)
        assert "evidence" in text.split("# How to")[1]  # (c): the answer asks for it
        assert text.index("# Your task: ") < text.index(GUARDRAILS) < text.index("# How to")
    assert f"Its JSON schema: {BROWSER_SCHEMA_TEXT}" in packet("qa")
    plain = packet("plain")
    assert GUARDRAILS not in plain and "evidence" not in plain and f"Its JSON schema: {SCHEMA_TEXT}" in plain


def test_browser_findings_keep_the_network_evidence(repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    evidence = "POST https://staging.example/api/signup -> 200, body {\"error\": \"email taken\"}"
    answer = json.dumps({"findings": [{"title": "Signup fails with an application error in a 200", "body": "b",
                                       "confidence": 0.8, "severity": "high", "evidence": evidence}], "decisions": []})
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(f'id = "qa"\nneeds = ["browser"]\napprove = true\nprompt = {json.dumps("answer: " + answer)}'))
    data = cli(repo, "--json", "run", str(spec), "-j", "1").json()
    assert data["status"] == "succeeded", data
    swarm = Swarm(repo)
    try:
        snapshot = swarm.refs.snapshot(data["id"], swarm.index.job_tip(data["id"]))
        findings = [a for a in map(snapshot.artifact, snapshot.task("qa").artifacts) if isinstance(a, Finding)]
    finally:
        swarm.close()
    assert [(f.title, f.evidence, f.low_confidence) for f in findings] == [
        ("Signup fails with an application error in a 200", evidence, False)]


def test_a_finding_without_evidence_encodes_as_before() -> None:
    finding = Finding(job="j", created=1.0, title="t")
    assert b"evidence" not in encode(finding)
    assert b'"evidence":"GET /x -> 500"' in encode(Finding(job="j", created=1.0, title="t", evidence="GET /x -> 500"))


# -- the model floor ---------------------------------------------------------------------------


def test_the_floor_refuses_a_model_not_allowed() -> None:
    allowed = ["claude-opus-4-*", "gpt-5.5"]
    (ok,) = parse_spec(spec_text(BROWSER_TASK + '\nmodel = "claude-opus-4-1"'), floor(allowed)).tasks
    assert ok.model == "claude-opus-4-1"
    (by_default,) = parse_spec(spec_text(BROWSER_TASK), floor(allowed, default="gpt-5.5")).tasks
    assert by_default.adapter == "hermes"
    with pytest.raises(Exception, match=r"^tasks\[0\]: browser task on adapter 'hermes' model 'qwen-7b' is below the floor"):
        parse_spec(spec_text(BROWSER_TASK + '\nmodel = "qwen-7b"'), floor(allowed, default="gpt-5.5"))
    with pytest.raises(Exception, match=r"names no model"):
        parse_spec(spec_text(BROWSER_TASK), floor(allowed))
    # no floor configured: any model, as before; a task that needs no browser is never held to it
    assert parse_spec(spec_text(BROWSER_TASK + '\nmodel = "qwen-7b"'), floor(None)).tasks[0].model == "qwen-7b"
    assert parse_spec(spec_text('id = "b"\nadapter = "hermes"\nmodel = "qwen-7b"\nprompt = "p"'), floor([])).tasks


def test_a_below_floor_browser_task_is_refused_at_submit_with_nothing_written(repo: Path, tmp_path: Path, fake_clis: Path) -> None:
    (repo / ".gitswarm.toml").write_text('[browser]\nmodels = ["claude-opus-4-*"]\n')
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(BROWSER_TASK + '\nmodel = "cheap-mini"'))
    before = swarm_refs(repo)
    refused = cli(repo, "submit", str(spec))
    assert refused.code == 2 and refused.err.count("\n") == 1
    assert refused.err == ("gitswarm: tasks[0]: browser task on adapter 'hermes' model 'cheap-mini' is below the floor "
                           "for browser work ([browser] models: claude-opus-4-*)\n")
    assert swarm_refs(repo) == before
    spec.write_text(spec_text(BROWSER_TASK + '\nmodel = "claude-opus-4-1"'))
    assert cli(repo, "submit", str(spec)).code == 0


def test_the_packet_of_a_browser_task_is_stable(swarm: Swarm, fake_clis: Path) -> None:
    job = swarm.submit_text(spec_text('id = "qa"\nneeds = ["browser"]\napprove = true\nprompt = "p"'))
    snapshot = swarm.refs.snapshot(job, swarm.index.job_tip(job))
    spec = snapshot.task("qa").spec
    assert build_packet(snapshot, spec, swarm.repo.read_blob) == build_packet(snapshot, spec, swarm.repo.read_blob)
