"""Repair that repairs: a round that leaves the same files as a rejected one is not checked again, the
agent is told so and why that change was rejected, and two such rounds in a row end the task.

The agent here (tests/gated.py, the scripted agent keeping each prompt) always makes the same change,
and the check appends the tree it runs on to a marker file, so the marker counts the check's runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gitswarm.engine.delegation.repair import Rejected, Rounds
from gitswarm.model.artifacts import Patch, Verdict
from tests.conftest import cli, git, spec_text
from tests.engine.delegation.test_attempt import task_artifacts
from tests.gated import prompts, register_gated


def run_same_change(repo: Path, tmp_path: Path, repair_rounds: int) -> tuple[str, Path, Path]:
    """Run one implement task whose agent always writes the same out.txt and whose check always fails;
    the job, the agent's control directory and the check's marker file."""
    control = register_gated(repo, tmp_path / "gated")
    marker = tmp_path / "checked"
    check = f"git rev-parse 'HEAD^{{tree}}' >> {marker}; echo 'out.txt is not right' >&2; exit 1"
    task = (
        'id = "fix"\nmode = "implement"\nadapter = "gated"\nprompt = "write out.txt: same"\n'
        f"checks = [{check!r}]\nrepair_rounds = {repair_rounds}\nmax_attempts = 1\n"
    )
    (tmp_path / "job.toml").write_text(spec_text(task))
    ran = cli(repo, "--json", "run", str(tmp_path / "job.toml"), "-j", "1")
    assert ran.code == 1, ran.err
    return ran.json()["id"], control, marker


def test_two_identical_rounds_in_a_row_end_the_task_and_the_check_ran_once_for_that_tree(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job, control, marker = run_same_change(repo, tmp_path, repair_rounds=3)
    artifacts = [a for _, a in task_artifacts(repo, job, "fix")]
    (patch,) = [a for a in artifacts if isinstance(a, Patch)]  # only round 0's change was made a patch and checked
    (verdict,) = [a for a in artifacts if isinstance(a, Verdict)]
    assert not verdict.accepted and verdict.head == patch.head
    tree = git(repo, "rev-parse", f"{patch.head}^{{tree}}").strip()
    checked = marker.read_text().split()
    assert checked.count(tree) == 1 and len(checked) == 2  # once for that tree, once on the base (cached per base)

    # Round 0, its repair round 1 (the same change), round 2 (the same again): then it stopped, round 3 never ran.
    _, repair, repeat = prompts(control)
    assert "was identical" not in repair and f"Your change (commit {patch.head[:12]}) was rejected" in repair
    assert f"Your last attempt (round 1, commit {patch.head[:12]}) was identical to round 0's change" in repeat
    assert f"tree {tree[:12]}" in repeat and "another identical round ends the task" in repeat
    assert "The check `git rev-parse" in repeat and "out.txt is not right" in repeat  # why it was rejected
    assert repeat.rstrip().endswith("Fix it in this worktree.")

    error = (
        f"rejected: rounds 1 and 2 left the same files as round 0 (tree {tree[:12]}), already rejected, so they were not "
        "checked again; 2 identical rounds in a row ended the task. Round 0 was rejected for: checks failed: git rev-parse"
    )
    status = cli(repo, "--json", "status", job).json()
    (task,) = status["tasks"]
    assert task["state"] == "failed" and task["error"].startswith(error), task["error"]
    show = cli(repo, "--json", "show", job).json()
    assert show["summary"]["tasks"][0]["error"] == task["error"] and show["summary"]["failures"][0]["error"] == task["error"]
    monkeypatch.setenv("COLUMNS", "1000")  # the table's NOTE column whole
    assert "2 identical rounds in a row ended the task" in cli(repo, "status", job).out
    assert "2 identical rounds in a row ended the task" in show["summary"]["text"]


def test_a_last_round_that_repeats_a_rejected_change_is_not_checked_and_the_error_says_so(repo: Path, tmp_path: Path) -> None:
    job, control, marker = run_same_change(repo, tmp_path, repair_rounds=1)
    assert len(prompts(control)) == 2 and len(marker.read_text().split()) == 2
    (task,) = cli(repo, "--json", "status", job).json()["tasks"]
    assert task["error"].startswith("rejected after 1 repair round(s): checks failed: ")
    assert task["error"].endswith("(round 1 repeated round 0's change, not checked again)")


def rejected(round_: int, tree: str) -> Rejected:
    verdict = Verdict(
        job="01" + "a" * 24, task="fix", created=0.0, producer="gitswarm", head="b" * 40, status="incomplete",
        integrity="clean", contract="needs_revision", accepted=False, reviewer="checks", evidence={"false": "failed"},
    )
    return Rejected(round_, "b" * 40, tree, [], verdict)


def test_a_new_change_between_repeats_starts_the_count_again() -> None:
    rounds = Rounds()
    rounds.reject(rejected(0, "t0"))
    assert rounds.seen(1, "t0") is not None and not rounds.stop
    assert rounds.seen(2, "t2") is None and not rounds.stop  # a new tree: checked, and the run of repeats is over
    rounds.reject(rejected(2, "t2"))
    assert rounds.seen(3, "t0") is not None and not rounds.stop
    assert rounds.seen(4, "t2") is not None and rounds.stop  # two in a row, of two different rejected rounds
    assert rounds.repeated_error() == (
        "rejected: rounds 3 and 4 left the same files as rounds 0 and 2 (trees t0, t2), already rejected, so they were not "
        "checked again; 2 identical rounds in a row ended the task. Round 2 was rejected for: checks failed: false"
    )
