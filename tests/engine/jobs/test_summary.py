"""The stitcher: one summary artifact per finished job, built from its records and artifacts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gitswarm.engine.jobs.run import write_summary
from gitswarm.engine.swarm import Swarm
from tests.conftest import cli, git, isolation_env, spec_text

BAD = 'for i in $(seq 1 30); do echo "err line $i" >&2; done; echo "some stdout"; exit 3'
TASKS = (
    'id = "good"\ncommand = "echo fine"',
    f"id = \"bad\"\ncommand = '{BAD}'\nmax_attempts = 1",
    'id = "dep"\ncommand = "true"\ndepends_on = ["bad"]',
    'id = "quiet_bad"\ncommand = "echo only-stdout; exit 2"\nmax_attempts = 1',
    'id = "flaky"\ncommand = "test -f flaky.flag || { touch flaky.flag; exit 1; }"\nmax_attempts = 3',
)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, dict]]:
    """One `gitswarm run` of a job with a success, two failures, a skipped dependent and a retried success.

    Module-scoped fixtures are set up before the autouse (function-scoped)
    isolation, so this one isolates HOME and the git config itself.
    """
    home = tmp_path_factory.mktemp("stitch-home")
    with pytest.MonkeyPatch.context() as mp:
        for key, value in isolation_env(home).items():
            mp.setenv(key, value)
        repo = tmp_path_factory.mktemp("stitch") / "repo"
        repo.mkdir()
        git(repo, "init", "-q")
        git(repo, "commit", "-q", "--allow-empty", "-m", "initial")
        (repo / "spec.toml").write_text(spec_text(*TASKS, goal="stitch goal"))
        result = cli(repo, "--json", "run", "spec.toml", "-j", "2", "--lease", "5")
        assert result.code == 1, result.err
        data = result.json()
        yield repo, data["id"], data


@pytest.fixture
def stitched(finished: tuple[Path, str, dict]) -> tuple[Path, str, dict]:
    repo, job, _ = finished
    shown = cli(repo, "--json", "show", job)
    assert shown.code == 0, shown.err
    return repo, job, shown.json()


def test_one_summary_artifact_for_the_job(stitched: tuple[Path, str, dict]) -> None:
    _repo, _job, shown = stitched
    summaries = [a for a in shown["artifacts"] if a["kind"] == "summary"]
    assert len(summaries) == 1 and summaries[0]["task"] is None
    assert summaries[0]["id"] == shown["summary"]["id"]
    assert summaries[0]["summary"] == "# stitch goal"


def test_summary_tasks_table(stitched: tuple[Path, str, dict]) -> None:
    _, _, shown = stitched
    summary = shown["summary"]
    assert summary["goal"] == "stitch goal" and summary["status"] == "failed"
    assert summary["counts"] == {"failed": 2, "skipped": 1, "succeeded": 2}
    rows = {row["task"]: row for row in summary["tasks"]}
    assert [row["task"] for row in summary["tasks"]] == ["good", "bad", "dep", "quiet_bad", "flaky"]
    assert (rows["good"]["state"], rows["good"]["attempts"], rows["good"]["error"]) == ("succeeded", 1, None)
    assert isinstance(rows["good"]["seconds"], float) and rows["good"]["seconds"] >= 0
    assert (rows["bad"]["state"], rows["bad"]["error"]) == ("failed", "exit 3: err line 30")
    assert (rows["dep"]["state"], rows["dep"]["attempts"], rows["dep"]["seconds"]) == ("skipped", 0, None)
    assert (rows["flaky"]["state"], rows["flaky"]["attempts"]) == ("succeeded", 2)
    assert rows["flaky"]["error"] == "attempt 1: exit 1; then passed"


def test_failures_carry_the_tail_of_the_output(stitched: tuple[Path, str, dict]) -> None:
    _, _, shown = stitched
    failures = {f["task"]: f for f in shown["summary"]["failures"]}
    assert set(failures) == {"bad", "quiet_bad"}
    bad = failures["bad"]
    assert bad["error"] == "exit 3: err line 30"
    # stderr is preferred over stdout, and only the last 15 lines are kept
    assert bad["tail"] == "\n".join(f"err line {n}" for n in range(16, 31))
    assert failures["quiet_bad"] == {"task": "quiet_bad", "error": "exit 2: only-stdout", "tail": "only-stdout", "truncated": 0}


def test_markdown_mentions_every_task_and_the_failure(stitched: tuple[Path, str, dict]) -> None:
    _, job, shown = stitched
    text = shown["summary"]["text"]
    assert text.startswith("# stitch goal\n")
    assert f"Job `{job}`: **failed** (2 failed, 1 skipped, 2 succeeded)" in text
    for task, state in (("good", "succeeded"), ("bad", "failed"), ("dep", "skipped"), ("quiet_bad", "failed"), ("flaky", "succeeded")):
        assert f"| {task} | {state} |" in text
    assert "## Failed: bad" in text and "## Failed: quiet_bad" in text
    assert "err line 30" in text and "err line 16" in text and "err line 15\n" not in text
    assert "attempt 1: exit 1; then passed" in text


def test_show_without_json_prints_the_markdown(stitched: tuple[Path, str, dict]) -> None:
    repo, job, shown = stitched
    human = cli(repo, "show", job)
    assert human.code == 0 and human.out == shown["summary"]["text"]


def test_write_summary_again_adds_nothing(stitched: tuple[Path, str, dict]) -> None:
    repo, job, shown = stitched
    swarm = Swarm(repo)
    try:
        ops_before = len(swarm.log(job)["events"])
        assert write_summary(swarm, job) == shown["summary"]["id"]
        assert len(swarm.log(job)["events"]) == ops_before
        assert [a["kind"] for a in swarm.artifacts(job)["artifacts"]].count("summary") == 1
    finally:
        swarm.close()
    ops = [e["op"] for e in cli(repo, "--json", "log", job).json()["events"]]
    assert ops.count("artifacts") == 1


def test_no_summary_before_the_job_finishes(swarm: Swarm) -> None:
    job = swarm.submit_text(spec_text('id = "a"\ncommand = "true"'))
    assert write_summary(swarm, job) is None
    assert "summary" not in swarm.show(job)
    assert swarm.artifacts(job)["artifacts"] == []


def test_attempts_count_every_run_across_retries(repo: Path) -> None:
    """A task that failed its only attempt, was retried and then passed ran twice: the summary
    says 2 (Task.attempts starts again at 0 on a retry; the runs do not)."""
    (repo / "spec.toml").write_text(spec_text('id = "once"\ncommand = "test -f ok.flag"\nmax_attempts = 1', goal="retried"))
    first = cli(repo, "--json", "run", "spec.toml", "-j", "1")
    assert first.code == 1, first.err
    job = first.json()["id"]
    assert [(r["state"], r["attempts"]) for r in first.json()["summary"]["tasks"]] == [("failed", 1)]
    (repo / "ok.flag").write_text("")
    assert cli(repo, "retry", f"{job}/once").code == 0
    assert cli(repo, "work", "--job", job, "-j", "1").code == 0
    summary = cli(repo, "--json", "show", job).json()["summary"]
    assert summary["status"] == "succeeded"
    (row,) = summary["tasks"]
    assert (row["state"], row["attempts"], row["error"]) == ("succeeded", 2, "attempt 1: exit 1; then passed")
    assert "| once | succeeded | 2 |" in summary["text"]
    tries = cli(repo, "--json", "status", job).json()["tasks"][0]
    assert (tries["attempts"], tries["claims"]) == (1, 2)  # status keeps both: TRIES counts since the retry
