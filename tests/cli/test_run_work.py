"""`gitswarm run` and `gitswarm work` through the real CLI: exit codes, output streams, retry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Result, cli, spec_text, swarm_refs

OK = 'id = "a"\ncommand = "echo a"'


def write(repo: Path, *tasks: str, name: str = "spec.toml", goal: str = "test goal") -> str:
    (repo / name).write_text(spec_text(*tasks, goal=goal))
    return name


def event_lines(result: Result) -> list[dict]:
    lines = result.err.splitlines()
    assert lines, "no progress events on stderr"
    parsed = [json.loads(line) for line in lines]
    assert all(isinstance(e, dict) and "event" in e for e in parsed)
    return parsed


def states(repo: Path, job: str) -> dict[str, str]:
    return {t["id"]: t["state"] for t in cli(repo, "--json", "status", job).json()["tasks"]}


def test_run_exits_0_when_every_task_succeeds(repo: Path) -> None:
    spec = write(repo, OK, 'id = "b"\ncommand = "echo b"\ndepends_on = ["a"]')
    result = cli(repo, "run", spec, "-j", "2")
    assert result.code == 0, result.err
    # not a terminal: the summary's markdown as text, progress as JSON lines
    assert result.out.startswith("# test goal\n") and "| b | succeeded |" in result.out
    assert [e["event"] for e in event_lines(result)][-1] == "done"


def test_run_exits_1_when_a_task_fails(repo: Path) -> None:
    spec = write(repo, OK, 'id = "b"\ncommand = "exit 5"\nmax_attempts = 1')
    result = cli(repo, "run", spec, "-j", "2")
    assert result.code == 1, result.err
    assert "| b | failed |" in result.out and "exit 5" in result.out


def test_run_json_is_one_document_on_stdout_and_event_lines_on_stderr(repo: Path) -> None:
    spec = write(repo, OK, 'id = "b"\ncommand = "echo b >&2; exit 1"\nmax_attempts = 1', 'id = "c"\ncommand = "true"\ndepends_on = ["b"]')
    result = cli(repo, "--json", "run", spec, "-j", "2")
    assert result.code == 1
    assert result.out.endswith("\n") and result.out.count("\n") == 1
    data = json.loads(result.out)
    assert data["status"] == "failed" and data["summary"]["status"] == "failed"
    assert {t["id"]: t["state"] for t in data["tasks"]} == {"a": "succeeded", "b": "failed", "c": "skipped"}
    events = event_lines(result)
    assert events[0] == {"event": "submitted", "job": data["id"], "t": events[0]["t"]}
    assert events[1]["event"] == "start" and events[1]["workers"] == 2
    assert events[-1]["event"] == "done" and events[-1]["job"] == data["id"]
    finals = {e["task"]: e["state"] for e in events if e["event"] == "task"}
    assert finals == {"a": "succeeded", "b": "failed", "c": "skipped"}
    failed = [e for e in events if e["event"] == "task" and e["state"] == "failed"]
    assert failed[0]["error"] == "exit 1: b"


def test_work_until_idle_finishes_two_jobs(repo: Path) -> None:
    first = cli(repo, "--json", "submit", write(repo, OK, 'id = "b"\ncommand = "true"', name="one.toml", goal="one")).json()["id"]
    second = cli(repo, "--json", "submit", write(repo, OK, name="two.toml", goal="two")).json()["id"]
    result = cli(repo, "--json", "work", "--until-idle", "-j", "2")
    assert result.code == 0, result.err
    assert sorted(result.json()["jobs"]) == sorted([first, second])
    jobs = {j["id"]: j["status"] for j in cli(repo, "--json", "status").json()["jobs"]}
    assert jobs == {first: "succeeded", second: "succeeded"}
    for job in (first, second):
        assert cli(repo, "--json", "show", job).json()["summary"]["status"] == "succeeded"


def test_work_job_leaves_other_jobs_queued(repo: Path) -> None:
    mine = cli(repo, "--json", "submit", write(repo, OK, name="one.toml")).json()["id"]
    other = cli(repo, "--json", "submit", write(repo, OK, name="two.toml")).json()["id"]
    result = cli(repo, "--json", "work", "--job", mine[:10], "-j", "1")
    assert result.code == 0, result.err
    assert result.json() == {"jobs": [mine], "unusable": {}, "skipped": {}}
    assert states(repo, mine) == {"a": "succeeded"} and states(repo, other) == {"a": "queued"}


def retry_job(repo: Path) -> str:
    """b fails until a flag file exists; c and d wait on it and are skipped."""
    spec = write(
        repo,
        OK,
        'id = "b"\ncommand = "test -f flag"\nmax_attempts = 1',
        'id = "c"\ncommand = "true"\ndepends_on = ["b"]',
        'id = "d"\ncommand = "true"\ndepends_on = ["c", "a"]',
    )
    result = cli(repo, "--json", "run", spec, "-j", "2")
    assert result.code == 1, result.err
    job = result.json()["id"]
    assert states(repo, job) == {"a": "succeeded", "b": "failed", "c": "skipped", "d": "skipped"}
    return job


def test_retry_requeues_the_failed_task_and_its_skipped_dependents(repo: Path) -> None:
    job = retry_job(repo)
    (repo / "flag").touch()
    retried = cli(repo, "--json", "retry", f"{job}/b")
    assert retried.code == 0, retried.err
    assert retried.json() == {"job": job, "task": "b", "changed": {"b": "queued", "c": "blocked", "d": "blocked"}}
    worked = cli(repo, "--json", "work", "--job", job, "-j", "2")
    assert worked.code == 0, worked.err
    assert states(repo, job) == {"a": "succeeded", "b": "succeeded", "c": "succeeded", "d": "succeeded"}
    status = cli(repo, "--json", "status", job).json()
    assert status["status"] == "succeeded"
    b = next(t for t in status["tasks"] if t["id"] == "b")
    assert (b["attempts"], b["claims"], b["error"]) == (1, 2, None)


def test_summary_after_retry_describes_the_final_outcome(repo: Path) -> None:
    """BUG: the summary is written once per job. After `retry` and `work` the job
    succeeds, yet `show` still prints the summary stitched when it had failed."""
    job = retry_job(repo)
    (repo / "flag").touch()
    assert cli(repo, "retry", f"{job}/b").code == 0
    assert cli(repo, "--json", "work", "--job", job, "-j", "2").code == 0
    shown = cli(repo, "--json", "show", job).json()
    assert shown["status"] == "succeeded"
    assert shown["summary"]["status"] == "succeeded"
    assert {r["task"]: r["state"] for r in shown["summary"]["tasks"]} == dict.fromkeys("abcd", "succeeded")


def test_retry_of_a_task_that_did_not_fail_is_refused(repo: Path) -> None:
    job = cli(repo, "--json", "run", write(repo, OK), "-j", "1").json()["id"]
    before = swarm_refs(repo)
    result = cli(repo, "retry", f"{job}/a")
    assert result.code == 2
    assert result.err.count("\n") == 1 and result.err.startswith("gitswarm: ")
    assert swarm_refs(repo) == before


@pytest.mark.parametrize(
    "body",
    [
        'goal = "g"\n[[tasks]]\nid = "a"\n',  # shell task without a command
        'goal = "g"\n[[tasks]]\nid = "a"\ncommand = "true"\ndepends_on = ["nope"]\n',
        "not = [valid toml",
    ],
)
def test_run_with_a_bad_spec_exits_2_with_one_line(repo: Path, body: str) -> None:
    (repo / "spec.toml").write_text(body)
    result = cli(repo, "run", "spec.toml")
    assert result.code == 2
    assert result.out == ""
    assert result.err.startswith("gitswarm: ") and result.err.count("\n") == 1
    assert swarm_refs(repo) == ""


def test_run_with_a_missing_spec_exits_2(repo: Path) -> None:
    result = cli(repo, "--json", "run", "missing.toml")
    assert result.code == 2 and result.out == ""
    assert result.err.startswith("gitswarm: cannot read spec missing.toml") and result.err.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("run", "spec.toml", "-j", "0"), "gitswarm: -j: must be at least 1\n"),
        (("work", "--until-idle", "-j", "0"), "gitswarm: -j: must be at least 1\n"),
        (("run", "spec.toml", "--lease", "0"), "gitswarm: --lease: must be positive\n"),
        (("work", "--until-idle", "--lease", "-1"), "gitswarm: --lease: must be positive\n"),
    ],
)
def test_bad_worker_options_exit_2_and_write_nothing(repo: Path, args: tuple[str, ...], message: str) -> None:
    write(repo, OK)
    result = cli(repo, *args)
    assert (result.code, result.out, result.err) == (2, "", message)
    assert swarm_refs(repo) == ""


def test_work_on_an_unknown_job_exits_2(repo: Path) -> None:
    result = cli(repo, "work", "--job", "01zzzzzzzz")
    assert result.code == 2 and result.err.startswith("gitswarm: ") and result.err.count("\n") == 1


def next_lines(err: str) -> list[str]:
    """Every `next:` block on stderr (progress there is JSON lines), each as its lines."""
    blocks: list[list[str]] = []
    for line in err.splitlines():
        if line.startswith("next: "):
            blocks.append([])
        if blocks and not line.startswith("{"):
            blocks[-1].append(line.strip())
    return blocks


def test_work_ends_with_each_jobs_summary_and_what_to_do_next(repo: Path) -> None:
    fix = (
        'id = "fix"\nmode = "implement"\nadapter = "scripted"\nprompt = "write fixed.txt: yes"\n'
        'checks = ["test -s fixed.txt"]'
    )
    lint = 'id = "lint"\ncommand = "echo no lint here; exit 3"\nmax_attempts = 1'
    done_job = cli(repo, "--json", "submit", write(repo, fix, lint)).json()["id"]
    quiet_job = cli(repo, "--json", "submit", write(repo, OK, name="quiet.toml", goal="a quiet job")).json()["id"]
    worked = cli(repo, "work", "--until-idle", "-j", "2")
    assert worked.code == 0, worked.err
    shown = {job: cli(repo, "--json", "show", job).json() for job in (done_job, quiet_job)}
    # stdout: each finished job's summary, in the order of their ids (as `--json work` lists them)
    assert worked.out == "".join(shown[job]["summary"]["text"] for job in sorted(shown))
    (patch,) = shown[done_job]["summary"]["patches"]
    assert patch["verified"]
    blocks = dict(zip(sorted(shown), next_lines(worked.err)))
    assert blocks[done_job] == [
        f"next: gitswarm merge {patch['id'][:12]}    (the patch of fix passed its checks)",
        f"gitswarm show {done_job[:12]}    (what happened)",
        f"gitswarm output {done_job[:12]}/lint    (what its last run or check printed)",
    ]
    assert blocks[quiet_job] == [f"next: gitswarm show {quiet_job[:12]}    (its tasks and what they left)"]
    assert "summaries written" not in worked.out + worked.err
    # with --json, the one document it always was
    again = cli(repo, "--json", "work", "--until-idle")
    assert again.code == 0 and json.loads(again.out) == {"jobs": [], "unusable": {}, "skipped": {}}

