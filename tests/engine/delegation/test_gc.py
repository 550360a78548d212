"""`worktrees gc` and the task branches: merged ones are deleted, unmerged ones kept (and said why) unless --force,
and never one whose task may still run, one checked out, or one that is not a task's."""

from __future__ import annotations

from pathlib import Path

from gitswarm.model.artifacts import Decision
from gitswarm.model.ids import new_id
from tests.conftest import cli, git, ok, rev, spec_text
from tests.engine.delegation.test_attempt import TASK, delegate, merged_ok, task_artifacts


def branches(repo: Path) -> set[str]:
    return set(git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/swarm/").split())


def side_commit(repo: Path, text: str) -> str:
    """A commit on top of HEAD that no branch holds."""
    tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
    return git(repo, "commit-tree", tree, "-p", "HEAD", "-m", text).strip()


def test_gc_deletes_merged_branches_keeps_unmerged_ones_and_says_why_and_force_deletes_those(repo: Path) -> None:
    merged = delegate(repo, "edit README.md: replace hello with world", "grep -qx world README.md")
    by_hand = delegate(repo, "write HAND.md: merged by hand", "test -e HAND.md")
    unmerged = delegate(repo, "write NEW.md: never merged", "test -e NEW.md")
    rejected = delegate(repo, "append notes.txt: a line", "false")  # failed, with a commit each round
    merged_ok(cli(repo, "--json", "merge", merged.patch()[0]))
    git(repo, "merge", "-q", "--no-edit", by_hand.branch.removeprefix("refs/heads/"))
    gone_merged, gone_unmerged = f"swarm/{new_id()}/old", f"swarm/{new_id()}/lost"
    git(repo, "branch", gone_merged, "HEAD~1")
    git(repo, "branch", gone_unmerged, side_commit(repo, "work of a job that is gone"))
    git(repo, "branch", "swarm/notes", "HEAD")  # not a task branch: never gitswarm's to delete
    (repo / "job.toml").write_text(spec_text('id = "later"\nmode = "implement"\nadapter = "scripted"\nprompt = "write L.md: l"'))
    queued = ok(cli(repo, "--json", "submit", "job.toml")).json()["id"]
    git(repo, "branch", f"swarm/{queued}/later", side_commit(repo, "a branch of a task that may still run"))
    unmerged_head, rejected_head = rev(repo, unmerged.branch), rev(repo, rejected.branch)

    out = ok(cli(repo, "--json", "worktrees", "gc")).json()
    short = {d.job: d.branch.removeprefix("refs/heads/") for d in (merged, by_hand, unmerged, rejected)}
    assert {r["path"]: r["why"] for r in out["removed"]} == {
        str(merged.worktree): "branch merged",
        str(by_hand.worktree): f"merged: main contains its head {by_hand.patch()[1].head[:12]}",
    }
    assert {k["path"]: k["why"] for k in out["kept"]} == {
        str(unmerged.worktree): "task succeeded, not merged into any branch outside swarm/ (--force removes it)",
        str(rejected.worktree): "task failed, not merged into any branch outside swarm/ (--force removes it)",
    }
    assert {d["branch"]: d["why"] for d in out["branches"]["deleted"]} == {
        short[merged.job]: "branch merged",
        short[by_hand.job]: f"merged: main contains its head {by_hand.patch()[1].head[:12]}",
        gone_merged: f"its job is gone; merged: main contains its head {rev(repo, 'HEAD~1')[:12]}",
    }
    assert {k["branch"]: k["why"] for k in out["branches"]["kept"]} == {
        short[unmerged.job]: f"checked out in {unmerged.worktree}",
        short[rejected.job]: f"checked out in {rejected.worktree}",
        gone_unmerged: "its job is gone, not merged into any branch outside swarm/ (--force deletes it)",
        "swarm/notes": "not a task branch (swarm/JOB/TASK)",
        f"swarm/{queued}/later": "task is queued: it may still run",
    }
    kept = {short[unmerged.job], short[rejected.job], gone_unmerged, "swarm/notes", f"swarm/{queued}/later"}
    assert branches(repo) == kept
    assert (rev(repo, unmerged.branch), rev(repo, rejected.branch)) == (unmerged_head, rejected_head)  # nothing of them lost
    said = cli(repo, "worktrees", "gc").out.splitlines()
    assert f"kept branch {gone_unmerged} (its job is gone, not merged into any branch outside swarm/ (--force deletes it))" in said
    assert f"kept {unmerged.worktree} (task succeeded, not merged into any branch outside swarm/ (--force removes it))" in said

    forced = ok(cli(repo, "--json", "worktrees", "gc", "--force")).json()
    assert {r["path"]: r["why"] for r in forced["removed"]} == {
        str(unmerged.worktree): "task succeeded, not merged: removed (--force)",
        str(rejected.worktree): "task failed, not merged: removed (--force)",
    }
    assert {d["branch"]: d["why"] for d in forced["branches"]["deleted"]} == {
        short[unmerged.job]: "task succeeded, not merged: deleted (--force)",
        short[rejected.job]: "task failed, not merged: deleted (--force)",
        gone_unmerged: "its job is gone, not merged: deleted (--force)",
    }
    assert branches(repo) == {"swarm/notes", f"swarm/{queued}/later"}  # never a task that may run, nor another branch
    assert not unmerged.worktree.exists() and not rejected.worktree.exists()
    for d, head in ((unmerged, unmerged_head), (rejected, rejected_head)):
        (decision,) = [a for _, a in task_artifacts(repo, d.job, TASK) if isinstance(a, Decision)]
        assert decision.title == f"discarded branch {short[d.job]}"
        assert decision.rationale == f"head {head}; deleted by worktrees gc --force, unmerged"
    assert ok(cli(repo, "worktrees", "gc")).out.splitlines() == [  # in the order of their names
        f"kept branch swarm/{queued}/later (task is queued: it may still run)",
        "kept branch swarm/notes (not a task branch (swarm/JOB/TASK))",
    ]


def test_gc_never_removes_a_worktree_with_uncommitted_work_even_forced(repo: Path) -> None:
    d = delegate(repo, "append notes.txt: a line", "false")
    (d.worktree / "mine.txt").write_text("my own notes\n")
    out = ok(cli(repo, "--json", "worktrees", "gc", "--force")).json()
    assert out["removed"] == [] and out["kept"] == [{"path": str(d.worktree), "why": "holds uncommitted work"}]
    assert out["branches"] == {
        "deleted": [], "kept": [{"branch": d.branch.removeprefix("refs/heads/"), "head": rev(repo, d.branch),
                                 "why": f"checked out in {d.worktree}"}],
    }
    assert (d.worktree / "mine.txt").read_text() == "my own notes\n"


def test_gc_keeps_a_worktree_whose_branch_was_deleted_by_hand_and_goes_on(repo: Path) -> None:
    """Its HEAD then names no commit (git shows 0000…): gc must neither crash on it nor remove it unforced."""
    d = delegate(repo, "append notes.txt: a line", "false")
    git(repo, "update-ref", "-d", d.branch)
    out = ok(cli(repo, "--json", "worktrees", "gc")).json()
    assert out["removed"] == [] and [k["path"] for k in out["kept"]] == [str(d.worktree)]
    assert d.worktree.exists()


def test_gc_of_a_worktree_whose_job_is_gone_says_that_force_removes_it(repo: Path) -> None:
    d = delegate(repo, "append notes.txt: a line", "false")
    git(repo, "update-ref", "-d", f"refs/swarm/jobs/{d.job}")
    out = ok(cli(repo, "--json", "worktrees", "gc")).json()
    (kept,) = [k for k in out["kept"] if k["path"] == str(d.worktree)]
    assert kept["why"].startswith("its job is gone") and kept["why"].endswith("(--force removes it)")
