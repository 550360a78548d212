"""The post-commit hook's audits coalesce to the newest commit per branch, and stay out of `status`.

`hooks.post_commit` is called in-process here (the shim calls it in the background; test_hooks.py
covers that end to end): the job it queues is not worked, so it stays queued and not started.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitswarm.engine.sharing import hooks
from gitswarm.engine.swarm import Swarm
from gitswarm.model.audit_names import branch_of, looks_like_audit, source_for
from tests.conftest import cli, commit_file, git, rev, spec_text


@pytest.fixture
def audited(repo: Path) -> Iterator[tuple[Path, Swarm]]:
    commit_file(repo, ".gitswarm.toml", '[audit]\nchecks = ["true"]\n[hooks]\naudit_branches = ["main", "feature/*"]\n', "audit")
    swarm = Swarm(repo)
    yield repo, swarm
    swarm.close()


def jobs(swarm: Swarm) -> dict[str, tuple[str, str]]:
    """goal -> (status, id) of every job, audit jobs included."""
    swarm.index.refresh(swarm.refs)
    return {j["goal"]: (j["status"], j["id"]) for j in swarm.status()["jobs"]}


def test_a_newer_commit_cancels_the_queued_audit_of_an_older_one(audited: tuple[Path, Swarm]) -> None:
    repo, swarm = audited
    first = commit_file(repo, "a.txt", "a\n", "first")
    older = hooks.post_commit(swarm, first, "main")
    second = commit_file(repo, "b.txt", "b\n", "second")
    newer = hooks.post_commit(swarm, second, "main")
    assert older and newer and newer != older
    assert jobs(swarm) == {f"audit {first[:12]} on main": ("cancelled", older), f"audit {second[:12]} on main": ("queued", newer)}
    (task,) = swarm.status(older)["tasks"]
    assert task["error"] == f"superseded by the audit of {second[:12]}"


def test_the_hook_of_an_older_commit_audits_the_branch_tip_once(audited: tuple[Path, Swarm]) -> None:
    """Its background run came late: the branch has moved on, so the tip is audited; the tip's own
    hook then finds it queued and adds nothing."""
    repo, swarm = audited
    first = commit_file(repo, "a.txt", "a\n", "first")
    second = commit_file(repo, "b.txt", "b\n", "second")
    job = hooks.post_commit(swarm, first, "main")
    assert hooks.post_commit(swarm, second, "main") is None
    assert hooks.post_commit(swarm, first, "main") is None
    assert jobs(swarm) == {f"audit {second[:12]} on main": ("queued", job)}


def test_an_audit_that_started_is_not_cancelled(audited: tuple[Path, Swarm]) -> None:
    repo, swarm = audited
    first = commit_file(repo, "a.txt", "a\n", "first")
    running = hooks.post_commit(swarm, first, "main")
    lease = swarm.ledger.claim("someone", 60, swarm.clock(), job_id=running)
    assert lease is not None
    second = commit_file(repo, "b.txt", "b\n", "second")
    newer = hooks.post_commit(swarm, second, "main")
    assert jobs(swarm) == {f"audit {first[:12]} on main": ("running", running), f"audit {second[:12]} on main": ("queued", newer)}


def test_an_amended_commit_is_not_audited_and_branches_do_not_mix(audited: tuple[Path, Swarm]) -> None:
    repo, swarm = audited
    first = commit_file(repo, "a.txt", "a\n", "first")
    git(repo, "commit", "-q", "--amend", "-m", "first, amended")
    amended = rev(repo)
    assert hooks.post_commit(swarm, first, "main") is None  # no longer on main
    on_main = hooks.post_commit(swarm, amended, "main")
    git(repo, "checkout", "-qb", "feature/x")
    side = commit_file(repo, "c.txt", "c\n", "side")
    on_feature = hooks.post_commit(swarm, side, "feature/x")
    assert jobs(swarm) == {f"audit {amended[:12]} on main": ("queued", on_main), f"audit {side[:12]} on feature/x": ("queued", on_feature)}
    snapshot = swarm.refs.snapshot(on_feature)
    assert snapshot.job.source == source_for("feature/x") == "post-commit:feature%2Fx"
    assert branch_of(snapshot.job.source) == "feature/x"


def test_a_persons_job_that_reads_like_an_audit_is_never_cancelled(audited: tuple[Path, Swarm]) -> None:
    """The hook cancels only what its source says it queued. `status` goes by goal and shape (the
    index holds no sources): the same goal with other tasks is listed; the very same shape is not."""
    repo, swarm = audited
    first = commit_file(repo, "a.txt", "a\n", "first")
    goal = f"audit {first[:12]} on main"
    assert looks_like_audit(goal)
    mine = {}
    for task in ("audit", "check"):
        (repo / "job.toml").write_text(spec_text(f'id = "{task}"\ncommand = ["gitswarm", "audit", "HEAD"]', goal=goal))
        mine[task] = cli(repo, "--json", "submit", "job.toml").json()["id"]
    second = commit_file(repo, "b.txt", "b\n", "second")
    queued = hooks.post_commit(swarm, second, "main")
    swarm.index.refresh(swarm.refs)
    assert [swarm.status(job)["status"] for job in mine.values()] == ["queued", "queued"]
    listed = cli(repo, "--json", "status").json()["jobs"]
    assert [(j["id"], j["audit"]) for j in listed] == [(mine["check"], False)]
    everything = cli(repo, "--json", "status", "--all").json()["jobs"]
    assert sorted((j["id"], j["audit"]) for j in everything) == sorted([(mine["check"], False), (mine["audit"], True), (queued, True)])


def test_status_leaves_audit_jobs_out_unless_all(audited: tuple[Path, Swarm], monkeypatch: pytest.MonkeyPatch) -> None:
    repo, swarm = audited
    monkeypatch.setenv("COLUMNS", "200")
    head = rev(repo)
    job = hooks.post_commit(swarm, head, "main")
    assert cli(repo, "status").out == "no jobs; 1 audit job of the post-commit hook not shown (gitswarm status --all)\n"
    assert cli(repo, "--json", "status").json() == {"jobs": [], "awaiting_approval": {}}
    shown = cli(repo, "status", "--all").out.splitlines()
    assert shown[0].split() == ["JOB", "STATUS", "TASKS", "CREATED", "GOAL"]
    assert shown[1].startswith(job[:12]) and shown[1].endswith(f"audit {head[:12]} on main")
    assert cli(repo, "status", "--json", "--all").json()["jobs"][0]["audit"] is True


def test_status_tells_audit_jobs_without_loading_pygit2(audited: tuple[Path, Swarm]) -> None:
    repo, swarm = audited
    hooks.post_commit(swarm, rev(repo), "main")
    assert cli(repo, "status").code == 0  # the index on disk, in step with the refs
    probe = "import sys\nfrom gitswarm.cli.main import run\nassert run(['status']) == 0\nassert 'pygit2' not in sys.modules\n"
    done = subprocess.run([sys.executable, "-c", probe], cwd=repo, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "1 audit job of the post-commit hook not shown" in done.stdout
