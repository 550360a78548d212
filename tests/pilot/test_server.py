"""`gitswarm mcp` end to end: an MCP client from the SDK drives the server as a subprocess over stdio,
on real repositories, with real workers (the scripted agent and shell tasks: no model)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitswarm.pilot.proposals import proposals_dir
from tests.conftest import git, register_scripted, rev, swarm_refs
from tests.pilot.mcpclient import Session

FIX = "edit README.md: replace hello with world"
CHECK = "grep -qx world README.md"
TOOLS = {"submit_job", "delegate", "status", "show", "artifacts", "artifact", "diff", "log", "wait",
         "cancel", "retry", "verify", "merge", "merge_job", "review", "follow_up", "steer"}


@pytest.fixture
def project(repo: Path) -> Path:
    return register_scripted(repo)


@pytest.fixture
def pilot(project: Path) -> Iterator[Session]:
    session = Session(project, {"PLANTED_SECRET": "s3cr3t-value"})
    yield session
    session.close()


def proposals(repo: Path) -> list[str]:
    folder = proposals_dir(repo / ".git")
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def delegate_and_wait(pilot: Session, instruction: str, checks: list[str]) -> dict:
    proposed = pilot.call("delegate", {"instruction": instruction, "adapter": "scripted", "checks": checks})
    assert not proposed.is_error, proposed.text
    started = pilot.call("delegate", {"confirm": proposed.data["token"]})
    assert not started.is_error, started.text
    done = pilot.call("wait", {"target": started.data["job"], "until": "done", "timeout": 60})
    assert done.data["done"], done.data
    return started.data


def patch_of(pilot: Session, job: str) -> str:
    """The job's newest patch (a rejected one goes back for repair rounds: one patch each)."""
    listed = pilot.call("artifacts", {"job": job}).data["artifacts"]
    ids = [a["id"] for a in listed if a["kind"] == "patch"]
    return max(ids, key=lambda i: pilot.call("artifact", {"artifact_id": i}).data["record"]["created"])


# -- the listing -------------------------------------------------------------------------------------


def test_every_tool_is_listed_with_an_input_schema(pilot: Session) -> None:
    tools = {t.name: t for t in pilot.tools()}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.input_schema["type"] == "object" and tool.description
    assert tools["wait"].input_schema["required"] == ["target"]
    assert tools["delegate"].input_schema["properties"]["instruction"]["anyOf"][0]["maxLength"] == 256 * 1024


# -- a delegation, start to merge ----------------------------------------------------------------------


def test_a_pilot_delegates_waits_reads_and_merges(pilot: Session, project: Path) -> None:
    proposed = pilot.call("delegate", {"instruction": f"{FIX}\n(in README.md)", "adapter": "scripted", "checks": [CHECK]})
    assert not proposed.is_error, proposed.text
    assert proposed.data["stage"] == "proposed" and proposed.data["similar"] == []
    assert proposed.data["proposal"]["base"] == rev(project) and proposed.data["proposal"]["adapter"] == "scripted"
    assert proposed.data["proposal"]["scope"] == ["README.md"]
    assert git(project, "for-each-ref", "refs/swarm/jobs") == ""  # a proposal submits nothing

    started = pilot.call("delegate", {"confirm": proposed.data["token"]})
    assert started.data["stage"] == "started" and started.data["task"] == "delegate"
    job = started.data["job"]
    done = pilot.call("wait", {"target": job, "until": "done", "timeout": 60})
    assert done.data["done"] and done.data["status"] == "succeeded" and not done.data["timed_out"]
    assert done.data["changed"]["tasks"]["delegate"]["to"] == "succeeded"
    assert done.progress, "progress notifications while waiting"

    status = pilot.call("status", {"job": job[:8]}).data
    assert status["id"] == job and [t["state"] for t in status["tasks"]] == ["succeeded"]
    assert any(j["id"] == job for j in pilot.call("status").data["jobs"])
    shown = pilot.call("show", {"job": job}).data
    assert "summary" in shown and shown["status"] == "succeeded"
    assert pilot.read(f"gitswarm://jobs/{job}/summary") == shown["summary"]["text"]
    events = pilot.call("log", {"job": job}).data["events"]
    assert events[0]["op"] == "job_created" and len(events) >= 3

    patch = patch_of(pilot, job)
    record = pilot.call("artifact", {"artifact_id": patch[:10]}).data
    assert record["id"] == patch and record["record"]["kind"] == "patch"
    diff = pilot.call("diff", {"patch": patch}).data
    assert "-hello\n+world" in diff["diff"] and not diff["truncated"]
    assert pilot.read(f"gitswarm://patches/{patch}/diff") == diff["diff"]

    verified = pilot.call("verify", {"patch": patch})
    assert verified.data["accepted"] and verified.data["checks"][0]["passed"]
    merged = pilot.call("merge", {"patch": patch})
    assert not merged.is_error, merged.text
    assert merged.data["into"] == "main" and (project / "README.md").read_text() == "world\n"
    assert git(project, "status", "--porcelain", "--untracked-files=no") == ""


def test_merge_job_lands_a_jobs_verified_patches_in_one_move(pilot: Session, project: Path) -> None:
    started = delegate_and_wait(pilot, FIX, [CHECK])
    before = rev(project)
    merged = pilot.call("merge_job", {"job": started["job"][:10]})
    assert not merged.is_error, merged.text
    assert merged.data["old"] == before and merged.data["new"] == rev(project) != before and merged.data["check_runs"] == 1
    assert [(p["task"], p["status"]) for p in merged.data["patches"]] == [("delegate", "landed")]
    assert (project / "README.md").read_text() == "world\n"
    again = pilot.call("merge_job", {"job": started["job"]})
    assert again.is_error and "no verified patch to merge" in again.text and rev(project) == merged.data["new"]


def test_a_rejected_patch_is_not_merged_and_the_pilot_is_told_why(pilot: Session, project: Path) -> None:
    started = delegate_and_wait(pilot, FIX, ["false"])
    patch = patch_of(pilot, started["job"])
    before = rev(project)
    refused = pilot.call("merge", {"patch": patch})
    assert refused.is_error and "rejected" in refused.text and "nothing merged" in refused.text
    assert "Traceback" not in refused.text and len(refused.text.splitlines()) == 1
    assert rev(project) == before and (project / "README.md").read_text() == "hello\n"


def test_a_person_review_through_the_pilot_never_makes_a_patch_mergeable(pilot: Session, project: Path) -> None:
    started = delegate_and_wait(pilot, FIX, ["false"])
    patch = patch_of(pilot, started["job"])
    reviewed = pilot.call("review", {"target": patch, "accept": True, "note": "looks fine to me"})
    assert reviewed.data["accepted"] and reviewed.data["note"] == "looks fine to me"
    refused = pilot.call("merge", {"patch": patch})
    assert refused.is_error and "nothing merged" in refused.text


def test_a_pilot_follows_up_a_rejected_delegation_and_steers_its_next_attempt(pilot: Session, project: Path) -> None:
    started = delegate_and_wait(pilot, "edit README.md: replace hello with hullo", [CHECK])
    job = started["job"]
    old_patch = patch_of(pilot, job)
    old_head = pilot.call("artifact", {"artifact_id": old_patch}).data["record"]["head"]
    steered = pilot.call("steer", {"target": f"{job}/delegate", "text": "keep the file to one line"})
    assert not steered.is_error and steered.data["task"] == "delegate", steered.text
    followed = pilot.call("follow_up", {"target": old_patch, "instruction": "edit README.md: replace hullo with world"})
    assert not followed.is_error, followed.text
    assert followed.data["job"] == job and followed.data["patch"] == old_patch and followed.data["worker"]["pid"]
    done = pilot.call("wait", {"target": f"{job}/delegate", "until": "done", "timeout": 60}).data
    assert done["states"] == {"delegate": "succeeded"}, done
    new_patch = patch_of(pilot, job)
    new_head = pilot.call("artifact", {"artifact_id": new_patch}).data["record"]["head"]
    assert new_patch != old_patch and new_head != old_head
    ops = [e["op"] for e in pilot.call("log", {"job": job}).data["events"]]
    assert "steered" in ops and "followed_up" in ops and "steering_delivered" in ops
    merged = pilot.call("merge", {"patch": new_patch})
    assert not merged.is_error, merged.text
    assert (project / "README.md").read_text() == "world\n"


def test_follow_up_and_steer_refuse_bad_targets(pilot: Session, project: Path) -> None:
    before = swarm_refs(project)
    assert pilot.call("follow_up", {"target": "nope/x", "instruction": "again"}).is_error
    assert pilot.call("steer", {"target": "nope", "text": "x"}).is_error
    assert swarm_refs(project) == before


# -- the two-stage start ---------------------------------------------------------------------------------


def test_a_proposal_names_active_work_that_looks_the_same(pilot: Session, project: Path) -> None:
    spec = ('goal = "fix the readme"\n[[tasks]]\nid = "fix"\nmode = "implement"\nadapter = "scripted"\n'
            f'prompt = "{FIX} in README.md"\n')
    submitted = pilot.call("submit_job", {"spec": spec, "start": False})
    assert not submitted.is_error, submitted.text
    proposed = pilot.call("delegate", {"instruction": "Fix the wording of README.md", "adapter": "scripted"})
    (alike,) = proposed.data["similar"]
    assert alike["job"] == submitted.data["id"] and alike["task"] == "fix"
    assert any("README.md" in why for why in alike["why"])
    same = pilot.call("delegate", {"instruction": f"{FIX} in README.md", "adapter": "scripted"}).data["similar"]
    assert any("near-identical" in why for why in same[0]["why"])


def test_a_token_starts_one_job_once(pilot: Session, project: Path) -> None:
    token = pilot.call("delegate", {"instruction": FIX, "adapter": "scripted", "checks": [CHECK]}).data["token"]
    first = pilot.call("delegate", {"confirm": token})
    assert not first.is_error
    again = pilot.call("delegate", {"confirm": token})
    assert again.is_error and "already used" in again.text
    refs = git(project, "for-each-ref", "refs/swarm/jobs").splitlines()
    assert len(refs) == 1
    pilot.call("wait", {"target": first.data["job"], "until": "done", "timeout": 60})


def test_an_expired_token_starts_nothing(pilot: Session, project: Path) -> None:
    token = pilot.call("delegate", {"instruction": FIX, "adapter": "scripted"}).data["token"]
    path = proposals_dir(project / ".git") / f"{token}.json"
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "expires": time.time() - 1}))
    before = swarm_refs(project)
    refused = pilot.call("delegate", {"confirm": token})
    assert refused.is_error and "expired" in refused.text
    assert swarm_refs(project) == before and proposals(project) == []


def test_two_pilots_racing_one_token_start_one_job(project: Path) -> None:
    pilots = [Session(project), Session(project)]
    try:
        token = pilots[0].call("delegate", {"instruction": FIX, "adapter": "scripted"}).data["token"]
        results: list = [None, None]
        barrier = threading.Barrier(2)

        def confirm(n: int) -> None:
            barrier.wait()
            results[n] = pilots[n].call("delegate", {"confirm": token})

        threads = [threading.Thread(target=confirm, args=(n,)) for n in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(r.is_error for r in results) == [False, True]
        assert len(git(project, "for-each-ref", "refs/swarm/jobs").splitlines()) == 1
        winner = next(r for r in results if not r.is_error)
        pilots[0].call("wait", {"target": winner.data["job"], "until": "done", "timeout": 60})
    finally:
        for p in pilots:
            p.close()


# -- submit, wait, cancel, retry -----------------------------------------------------------------------


def test_structured_tasks_submit_and_wait_wakes_on_a_workers_change(pilot: Session, project: Path) -> None:
    tasks = [{"id": "a", "command": "true"}, {"id": "b", "command": "exit 3", "depends_on": ["a"], "max_attempts": 1}]
    submitted = pilot.call("submit_job", {"goal": "two steps", "tasks": tasks, "start": False})
    assert not submitted.is_error, submitted.text
    job = submitted.data["id"]
    waited: list = []
    waiter = threading.Thread(target=lambda: waited.append(pilot.call("wait", {"target": job, "timeout": 30})))
    waiter.start()
    time.sleep(1.0)  # the wait is under way before the change
    subprocess.run([sys.executable, "-m", "gitswarm", "work", "--job", job, "-j", "1"], cwd=project, check=False,
                   capture_output=True, timeout=60)
    waiter.join(60)
    (result,) = waited
    assert not result.data["timed_out"] and result.data["changed"]["tasks"]
    assert result.progress
    done = pilot.call("wait", {"target": f"{job}/b", "until": "done", "timeout": 30}).data
    assert done["states"] == {"b": "failed"} and done["done"]

    retried = pilot.call("retry", {"task": f"{job}/b", "start": False})
    assert retried.data["changed"] and not retried.is_error
    cancelled = pilot.call("cancel", {"target": job, "reason": "enough"})
    assert not cancelled.is_error
    assert pilot.call("status", {"job": job}).data["status"] == "cancelled"


def test_wait_times_out_quietly_when_nothing_changes(pilot: Session) -> None:
    job = pilot.call("submit_job", {"goal": "one step", "tasks": [{"id": "a", "command": "true"}], "start": False}).data["id"]
    started = time.monotonic()
    result = pilot.call("wait", {"target": job, "timeout": 0.5})
    assert result.data["timed_out"] and result.data["changed"] == {"tasks": {}}
    assert 0.4 < time.monotonic() - started < 10


# -- bad input -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments", "says"),
    [
        ("status", {"job": 5}, "job"),
        ("show", {"job": "0123abcd"}, "no job"),
        ("show", {"job": "../etc"}, ""),
        ("artifact", {"artifact_id": "ffff"}, "artifact"),
        ("diff", {"patch": "ffff"}, ""),
        ("delegate", {"instruction": "x" * (300 * 1024), "adapter": "scripted"}, "instruction"),
        ("delegate", {"instruction": FIX, "adapter": "no-such-agent"}, "no-such-agent"),
        ("delegate", {"confirm": "../../etc/passwd"}, "token"),
        ("delegate", {"confirm": "A" * 40}, "unknown"),
        ("submit_job", {"spec": "goal = 'x'\n[[tasks]]\nid = 'a/b'\ncommand = 'true'\n"}, "a/b"),
        ("submit_job", {"spec": "not toml ["}, ""),
        ("submit_job", {"tasks": [{"id": "a", "command": "true", "bogus": 1}]}, "bogus"),
        ("submit_job", {}, "spec"),
        ("wait", {"target": "nope", "timeout": 1}, "nope"),
        ("wait", {"target": "x", "timeout": -1}, "timeout"),
        ("merge", {"patch": "ffff", "mode": "octopus"}, "mode"),
        ("cancel", {"target": "nope/x"}, ""),
    ],
)
def test_bad_arguments_are_tool_errors_and_write_nothing(pilot: Session, project: Path, tool: str, arguments: dict, says: str) -> None:
    before = (swarm_refs(project), git(project, "status", "--porcelain"), proposals(project))
    result = pilot.call(tool, arguments)
    assert result.is_error, result
    assert says in result.text and "Traceback" not in result.text
    assert (swarm_refs(project), git(project, "status", "--porcelain"), proposals(project)) == before


def test_no_result_carries_the_environment(pilot: Session, project: Path) -> None:
    started = delegate_and_wait(pilot, FIX, [CHECK])
    texts = [pilot.call(name, args).text for name, args in (
        ("status", {}), ("show", {"job": started["job"]}), ("log", {"job": started["job"]}),
        ("artifacts", {"job": started["job"]}),
    )]
    assert Path(started["worker"]["log"]).is_file()
    assert not any("s3cr3t-value" in text for text in texts)


def test_a_job_for_an_adapter_that_cannot_run_here_is_refused_at_submission(project: Path, pilot: Session) -> None:
    git(project, "config", "user.name", "t")
    (project / ".gitswarm" / "adapters" / "ghost.toml").write_text('executable = "/nonexistent/agent"\n')
    git(project, "add", ".gitswarm/adapters/ghost.toml")
    git(project, "commit", "-qm", "an agent that is not installed")
    before = swarm_refs(project)
    spec = 'goal = "g"\n[[tasks]]\nid = "t"\nadapter = "ghost"\nprompt = "hi"\n'
    refused = pilot.call("submit_job", {"spec": spec})
    assert refused.is_error and "adapter ghost cannot run here" in refused.text and "not found" in refused.text
    proposed = pilot.call("delegate", {"instruction": "say hi", "adapter": "ghost"})
    assert not proposed.is_error
    started = pilot.call("delegate", {"confirm": proposed.data["token"]})
    assert started.is_error and "adapter ghost cannot run here" in started.text
    assert swarm_refs(project) == before
