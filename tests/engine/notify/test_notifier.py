"""`[notify]`: a command run per event with the event as JSON on stdin, through the real CLI; a notifier
that hangs, fails or cannot start never affects the job."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from gitswarm.engine.swarm import Swarm
from tests.conftest import cli, clone_of, commit_file, git, register_scripted, seeded_remote, spec_text

# Writes each event it is handed (stdin) to a file of its own in OUT.
RECORDER = """import json, os, sys, time
event = json.load(sys.stdin)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, f"{time.time_ns()}-{event['event']}.json"), "w") as f:
    json.dump(event, f)
"""


def configure(repo: Path, tmp_path: Path, notify: str) -> Path:
    out = tmp_path / "events"
    (tmp_path / "recorder.py").write_text(RECORDER)
    commit_file(repo, ".gitswarm.toml", f"[notify]\n{notify}\n", "notify")
    return out


def recorder_command(tmp_path: Path) -> str:
    return "command = " + json.dumps([sys.executable, str(tmp_path / "recorder.py"), str(tmp_path / "events")])


def events(out: Path, count: int, timeout: float = 15.0) -> list[dict]:
    """The events recorded, oldest first, once `count` of them are there (the runner is asynchronous)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = sorted(out.glob("*.json")) if out.exists() else []
        if len(found) >= count:
            time.sleep(0.3)  # none more should come
            return [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
        time.sleep(0.05)
    raise AssertionError(f"expected {count} events, found {sorted(p.name for p in out.glob('*.json')) if out.exists() else []}")


def run(repo: Path, tmp_path: Path, *tasks: str, goal: str = "notify me") -> dict:
    spec = tmp_path / "job.toml"
    spec.write_text(spec_text(*tasks, goal=goal))
    result = cli(repo, "--json", "run", str(spec), "-j", "1")
    assert result.out, result.err
    return result.json()


def test_a_finished_and_a_failed_job_are_announced_with_the_event_on_stdin(repo: Path, tmp_path: Path) -> None:
    out = configure(repo, tmp_path, recorder_command(tmp_path))
    done = run(repo, tmp_path, 'id = "a"\ncommand = "true"')
    failed = run(repo, tmp_path, 'id = "b"\ncommand = "exit 3"\nmax_attempts = 1', goal="this fails")
    first, second = events(out, 2)
    assert first["event"] == "job_finished" and first["job"] == done["id"] and first["status"] == "succeeded"
    assert first["goal"] == "notify me" and first["repository"] == str(repo) and first["at"] > 0
    assert second["event"] == "job_failed" and second["job"] == failed["id"] and second["goal"] == "this fails"


def test_verdicts_are_announced_from_a_delegation_and_from_verify(repo: Path, tmp_path: Path) -> None:
    register_scripted(repo)
    out = configure(repo, tmp_path, recorder_command(tmp_path) + '\nevents = ["patch_verified", "patch_rejected"]')
    accepted = cli(repo, "--json", "delegate", "edit README.md: replace hello with world", "--adapter", "scripted",
                   "--check", "grep -qx world README.md")
    assert accepted.code == 0, accepted.err
    (verified,) = events(out, 1)
    patch = accepted.json()["summary"]["patches"][0]["id"]
    assert verified["event"] == "patch_verified" and verified["patch"] == patch and verified["accepted"]
    assert verified["judged"] == "complete/clean/aligned" and len(verified["head"]) == 40

    git(repo, "notes", "--ref=swarm", "remove", verified["head"])  # as if never verified here
    commit_file(repo, "other.txt", "x\n")
    assert cli(repo, "--json", "verify", patch).code == 0
    assert [e["event"] for e in events(out, 2)] == ["patch_verified", "patch_verified"]


def test_a_rejected_patch_is_announced(repo: Path, tmp_path: Path) -> None:
    register_scripted(repo)
    out = configure(repo, tmp_path, recorder_command(tmp_path) + '\nevents = ["patch_rejected"]')
    cli(repo, "delegate", "edit README.md: replace hello with world", "--adapter", "scripted", "--check", "false")
    rejected = events(out, 1)
    assert {e["event"] for e in rejected} == {"patch_rejected"} and not rejected[0]["accepted"]


def test_events_not_listed_are_not_sent(repo: Path, tmp_path: Path) -> None:
    out = configure(repo, tmp_path, recorder_command(tmp_path) + '\nevents = ["job_failed"]')
    run(repo, tmp_path, 'id = "a"\ncommand = "true"')
    time.sleep(1.0)
    assert not out.exists()


def test_a_notifier_that_hangs_is_killed_at_its_timeout_and_the_job_does_not_wait(repo: Path, tmp_path: Path) -> None:
    configure(repo, tmp_path, 'command = "sleep 60.123"\ntimeout = "1s"')
    started = time.monotonic()
    data = run(repo, tmp_path, 'id = "a"\ncommand = "true"')
    assert data["status"] == "succeeded" and time.monotonic() - started < 20
    log = repo / ".git" / "gitswarm" / "logs" / "notify.log"
    deadline = time.monotonic() + 15
    while not (log.exists() and "killed after 1 s" in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "notifier 'sh' killed after 1 s" in log.read_text()
    # The runner itself (its argv names the command too) exits just after writing that line.
    deadline = time.monotonic() + 10
    while (left := subprocess.run(["pgrep", "-f", "sleep 60.123"], capture_output=True, text=True).stdout.split()):
        assert time.monotonic() < deadline, f"the hanging notifier outlived its timeout: {left}"
        time.sleep(0.1)


def test_a_notifier_that_fails_or_cannot_start_leaves_a_line_and_the_job_succeeds(repo: Path, tmp_path: Path) -> None:
    configure(repo, tmp_path, "command = [\"sh\", \"-c\", \"echo broken pipe dream >&2; exit 7\"]")
    assert run(repo, tmp_path, 'id = "a"\ncommand = "true"')["status"] == "succeeded"
    log = repo / ".git" / "gitswarm" / "logs" / "notify.log"
    commit_file(repo, ".gitswarm.toml", '[notify]\ncommand = ["/nonexistent/notifier"]\n', "notify")
    assert run(repo, tmp_path, 'id = "b"\ncommand = "true"')["status"] == "succeeded"
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not (log.exists() and "could not start" in log.read_text()):
        time.sleep(0.1)
    text = log.read_text()
    assert "exit 7: broken pipe dream" in text and "'/nonexistent/notifier' could not start" in text


def test_a_bad_notify_section_is_bad_input(repo: Path, tmp_path: Path) -> None:
    commit_file(repo, ".gitswarm.toml", '[notify]\nevents = ["job_exploded"]\n', "notify")
    spec = tmp_path / "job.toml"
    spec.write_text(spec_text('id = "a"\ncommand = "true"'))
    result = cli(repo, "run", str(spec))
    assert result.code == 2 and "notify.events" in result.err and len(result.err.strip().splitlines()) == 1


def test_a_pull_of_150_jobs_awaiting_approval_is_one_notification_and_the_next_work_adds_none(tmp_path: Path) -> None:
    remote = seeded_remote(tmp_path)
    evil, victim = clone_of(tmp_path, "evil", remote), clone_of(tmp_path, "victim", remote)
    spec = tmp_path / "job.toml"
    spec.write_text(spec_text('id = "a"\ncommand = "true"'))
    swarm = Swarm(evil)
    try:
        jobs = sorted(swarm.submit_file(spec) for _ in range(150))
    finally:
        swarm.close()
    assert cli(evil, "push").code == 0
    out = configure(victim, tmp_path, recorder_command(tmp_path) + '\nevents = ["approval_needed"]')
    pulled = cli(victim, "--json", "pull")
    assert pulled.code == 0, pulled.err
    (event,) = events(out, 1)
    assert event["event"] == "approval_needed" and sorted(j["job"] for j in event["jobs"]) == jobs
    assert all(j["why"].startswith("pulled from origin") for j in event["jobs"])
    assert cli(victim, "--json", "work", "--until-idle", "-j", "1").code == 0
    time.sleep(0.5)
    assert len(list(out.glob("*.json"))) == 1  # announced once, by the pull


def test_an_invalid_notify_timeout_is_refused_before_anything_is_written(repo: Path, tmp_path: Path) -> None:
    commit_file(repo, ".gitswarm.toml", '[notify]\ncommand = "true"\ntimeout = "soon"\n', "notify")
    spec = tmp_path / "job.toml"
    spec.write_text(spec_text('id = "a"\ncommand = "true"'))
    for command in ("submit", "run"):
        result = cli(repo, command, str(spec))
        assert result.code == 2 and "notify.timeout" in result.err and len(result.err.strip().splitlines()) == 1
    assert git(repo, "for-each-ref", "refs/swarm") == ""
