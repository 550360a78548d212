"""`worktrees discard JOB/TASK` on real repositories through the real CLI: a finished task's worktree and
branch go, and nothing else; a task that may run, a merged branch, a branch checked out elsewhere or
uncommitted work (without --force) are refused with exit 2 and nothing removed."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from gitswarm.engine.swarm import Swarm
from gitswarm.model.artifacts import Decision
from tests.conftest import cli, git, register_scripted, rev, spec_text
from tests.engine.delegation.test_attempt import CHECK, FIX, TASK, delegate, merged_ok, task_artifacts


@pytest.fixture
def project(repo: Path) -> Path:
    git(repo, "branch", "release")
    return register_scripted(repo)


def refs(repo: Path) -> str:
    """Every branch but the task branches, and where HEAD points."""
    heads = [line for line in git(repo, "for-each-ref", "refs/heads").splitlines() if "refs/heads/swarm/" not in line]
    return "\n".join(heads) + git(repo, "symbolic-ref", "HEAD")


def branch_exists(repo: Path, job: str) -> bool:
    return bool(git(repo, "for-each-ref", f"refs/heads/swarm/{job}/{TASK}").strip())


def test_a_failed_delegations_worktree_and_branch_are_discarded_and_nothing_else(project: Path) -> None:
    d = delegate(project, "append notes.txt: a line", "false")  # rejected after its repair rounds: three commits
    assert d.task["state"] == "failed" and d.worktree.is_dir()
    head = rev(project, d.branch)
    before = refs(project)
    out = cli(project, "--json", "worktrees", "discard", f"{d.job[:8]}/{TASK}")
    assert out.code == 0, out.err
    assert out.json() == {"job": d.job, "task": TASK, "branch": f"swarm/{d.job}/{TASK}", "head": head, "worktree": str(d.worktree)}
    assert not d.worktree.exists() and not branch_exists(project, d.job)
    assert str(d.worktree) not in git(project, "worktree", "list")
    assert refs(project) == before and git(project, "status", "--porcelain") == ""
    (decision,) = [a for _, a in task_artifacts(project, d.job, TASK) if isinstance(a, Decision)]
    assert decision.title == f"discarded branch swarm/{d.job}/{TASK}" and head in decision.rationale
    again = cli(project, "--json", "worktrees", "discard", f"{d.job}/{TASK}")
    assert again.code == 2 and "nothing to discard" in again.err


def test_uncommitted_work_is_kept_unless_forced(project: Path) -> None:
    d = delegate(project, f"misbehave: no-edit\n{FIX}", CHECK)  # a no-op: failed, its branch at the base
    (d.worktree / "README.md").write_text("my own edit, not committed\n")
    refused = cli(project, "--json", "worktrees", "discard", f"{d.job}/{TASK}")
    assert refused.code == 2 and "uncommitted work" in refused.err and "--force" in refused.err
    assert (d.worktree / "README.md").read_text() == "my own edit, not committed\n" and branch_exists(project, d.job)
    (d.worktree / "README.md").write_text("hello\n")
    (d.worktree / "new.txt").write_text("untracked counts too\n")
    assert cli(project, "--json", "worktrees", "discard", f"{d.job}/{TASK}").code == 2 and (d.worktree / "new.txt").exists()
    forced = cli(project, "--json", "worktrees", "discard", f"{d.job}/{TASK}", "--force")
    assert forced.code == 0, forced.err
    assert not d.worktree.exists() and not branch_exists(project, d.job)


@pytest.mark.parametrize("how", ["gitswarm", "by-hand"])
def test_a_merged_branch_is_refused(project: Path, how: str) -> None:
    d = delegate(project, FIX, CHECK)
    patch_id, patch = d.patch()
    if how == "gitswarm":
        merged_ok(cli(project, "--json", "merge", patch_id))
    else:
        git(project, "merge", "-q", "--ff-only", patch.head)
    refused = cli(project, "--json", "worktrees", "discard", f"{d.job}/{TASK}")
    assert refused.code == 2 and "was merged" in refused.err, refused.err
    assert d.worktree.is_dir() and branch_exists(project, d.job)


def test_a_succeeded_but_unwanted_patch_can_be_discarded(project: Path) -> None:
    d = delegate(project, FIX, CHECK)
    assert d.task["state"] == "succeeded"
    assert cli(project, "--json", "worktrees", "discard", f"{d.job}/{TASK}").code == 0
    assert not d.worktree.exists() and not branch_exists(project, d.job)


def test_a_task_that_may_still_run_is_refused(project: Path) -> None:
    spec = spec_text(f'id = "{TASK}"\nmode = "implement"\nadapter = "scripted"\nprompt = "{FIX}"')
    swarm = Swarm(project)
    try:
        job = swarm.submit_text(spec)
        queued = cli(project, "--json", "worktrees", "discard", f"{job}/{TASK}")
        assert queued.code == 2 and "queued" in queued.err and "cancel it first" in queued.err
        lease = swarm.ledger.claim("someone", 60.0, time.time())
        assert lease is not None and lease.task == TASK
    finally:
        swarm.close()
    running = cli(project, "--json", "worktrees", "discard", f"{job}/{TASK}")
    assert running.code == 2 and "running" in running.err


def test_a_branch_checked_out_outside_the_tasks_worktree_is_refused(project: Path, tmp_path: Path) -> None:
    d = delegate(project, f"misbehave: no-edit\n{FIX}", CHECK)
    shutil.rmtree(d.worktree)
    git(project, "worktree", "prune")
    git(project, "worktree", "add", "-q", str(tmp_path / "mine"), f"swarm/{d.job}/{TASK}")  # the user's own
    refused = cli(project, "--json", "worktrees", "discard", f"{d.job}/{TASK}")
    assert refused.code == 2 and "checked out in" in refused.err
    assert (tmp_path / "mine").is_dir() and branch_exists(project, d.job)


def test_a_worktree_deleted_by_hand_or_under_the_old_root_is_discarded(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITSWARM_WORKTREE_ROOT", str(project / ".git" / "gitswarm" / "worktrees"))
    old = delegate(project, f"misbehave: no-edit\n{FIX}", CHECK)
    monkeypatch.delenv("GITSWARM_WORKTREE_ROOT")
    gone = delegate(project, f"misbehave: no-edit\n{FIX}", CHECK)
    shutil.rmtree(gone.worktree)
    old_tree = project / ".git" / "gitswarm" / "worktrees" / old.job / TASK
    assert cli(project, "--json", "worktrees", "discard", f"{old.job}/{TASK}").json()["worktree"] == str(old_tree)
    assert cli(project, "--json", "worktrees", "discard", f"{gone.job}/{TASK}").code == 0
    assert not old_tree.exists() and not branch_exists(project, old.job) and not branch_exists(project, gone.job)
    assert "prunable" not in git(project, "worktree", "list", "--porcelain")


def test_a_discard_of_no_such_task_is_bad_input_and_changes_nothing(project: Path) -> None:
    d = delegate(project, f"misbehave: no-edit\n{FIX}", CHECK)
    before = git(project, "for-each-ref")
    for target in ("01aaaaaaaaaaaaaaaaaaaaaaaa/delegate", f"{d.job}/nope", "main", "../main"):
        out = cli(project, "--json", "worktrees", "discard", target)
        assert out.code == 2, (target, out.err)
    assert git(project, "for-each-ref") == before and d.worktree.is_dir()
