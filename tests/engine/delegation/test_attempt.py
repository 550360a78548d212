"""Delegation end to end on real repositories through the real CLI, with the scripted fake agent.

delegate -> the agent edits in its own worktree -> gitswarm commits it as a PATCH ->
checks on a clean checkout -> a verdict for exactly that head -> merge. And every way
this must refuse: no-op, failing checks, a malformed auditor, a branch moved after its
verdict, a target that moved (with and without conflict), a dirty target tree, a worker
that wrote outside its worktree or switched branch.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from gitswarm.adapters.base import RunContext
from gitswarm.engine.delegation.attempt import commit_message
from gitswarm.engine.swarm import Swarm
from gitswarm.model.artifacts import Check, Decision, Patch, Verdict
from gitswarm.model.records import TaskSpec
from gitswarm.store.worktrees import repo_key
from tests.conftest import Result, cli, git, register_scripted, rev, sandbox_off

TASK = "delegate"
FIX = "edit README.md: replace hello with world"
CHECK = "grep -qx world README.md"


# -- helpers -------------------------------------------------------------------------------


@pytest.fixture
def project(repo: Path) -> Path:
    return register_scripted(repo)


@dataclass
class Delegated:
    repo: Path
    result: Result
    data: dict

    @property
    def job(self) -> str:
        return self.data["id"]

    @property
    def task(self) -> dict:
        (task,) = self.data["tasks"]
        return task

    @property
    def worktree(self) -> Path:
        return state_root(self.repo) / self.job / TASK

    @property
    def branch(self) -> str:
        return f"refs/heads/swarm/{self.job}/{TASK}"

    def artifacts(self) -> list[tuple[str, object]]:
        return task_artifacts(self.repo, self.job, TASK)

    def of(self, kind: type) -> list[tuple[str, object]]:
        return [(a, r) for a, r in self.artifacts() if isinstance(r, kind)]

    def patch(self) -> tuple[str, Patch]:
        """The last patch."""
        return self.of(Patch)[-1]


def state_root(repo: Path) -> Path:
    """The default worktree root of `repo`: under the test's state directory (conftest sets XDG_STATE_HOME)."""
    return Path(os.environ["XDG_STATE_HOME"]) / "gitswarm" / "worktrees" / repo_key(repo / ".git")


def task_artifacts(repo: Path, job: str, task: str) -> list[tuple[str, object]]:
    """The task's artifacts in the order they were recorded."""
    swarm = Swarm(repo)
    try:
        snapshot = swarm.refs.snapshot(job, swarm.index.job_tip(job))
        return [(a, snapshot.artifact(a)) for a in snapshot.task(task).artifacts]
    finally:
        swarm.close()


def delegate(repo: Path, instruction: str, *checks: str) -> Delegated:
    args = ["--json", "delegate", instruction, "--adapter", "scripted"]
    for check in checks:
        args += ["--check", check]
    result = cli(repo, *args)
    assert result.out, result.err
    return Delegated(repo, result, result.json())


def run_spec(repo: Path, text: str, tmp_path: Path, jobs: int = 1) -> Result:
    spec = tmp_path / "spec.toml"  # outside the repo: the user's tree stays as it is
    spec.write_text(text)
    return cli(repo, "--json", "run", str(spec), "-j", str(jobs))


def state(repo: Path) -> dict:
    """Everything a refused merge must leave alone."""
    return {
        "heads": git(repo, "for-each-ref", "refs/heads"),
        "HEAD": git(repo, "symbolic-ref", "HEAD"),
        "status": git(repo, "status", "--porcelain", "--untracked-files=all"),
        "files": {p.name: p.read_bytes() for p in repo.iterdir() if p.is_file()},
    }


def note(repo: Path, commit: str) -> list[dict]:
    """The verdict lines of COMMIT's swarm note (each verdict made here has a seal line beside it)."""
    return [n for n in note_lines(repo, commit) if n["kind"] == "verdict"]


def note_lines(repo: Path, commit: str) -> list[dict]:
    out = subprocess.run(["git", "notes", "--ref=swarm", "show", commit], cwd=repo, capture_output=True, text=True)
    return [json.loads(line) for line in out.stdout.splitlines()] if out.returncode == 0 else []


def commit_file(repo: Path, name: str, text: str, message: str = "user change") -> str:
    (repo / name).write_text(text)
    git(repo, "add", name)
    git(repo, "commit", "-qm", message)
    return rev(repo)


def merged_ok(result: Result) -> dict:
    assert result.code == 0, result.err
    return result.json()


# -- the happy path ------------------------------------------------------------------------


def test_delegate_verify_merge_moves_main_and_updates_the_checked_out_tree(project: Path, tmp_path: Path) -> None:
    base = rev(project)
    d = delegate(project, FIX, CHECK, "pwd")
    assert d.result.code == 0, d.result.err
    assert d.data["status"] == "succeeded" and d.task["state"] == "succeeded" and d.task["mode"] == "implement"

    # the patch: pinned base, the branch's head, the files
    (patch_id, patch), = d.of(Patch)
    assert patch.base == base and patch.head == rev(project, d.branch) == rev(d.worktree)
    assert rev(project, f"{patch.head}~1") == base
    assert [(f.path, f.added, f.deleted) for f in patch.files] == [("README.md", 1, 1)]
    assert patch.producer == "scripted"

    # the check ran on a clean checkout, the verdict is for exactly that head, also as a note on it
    checks = [c for _, c in d.of(Check)]
    assert [(c.command, c.passed) for c in checks] == [(CHECK, True), ("pwd", True)]
    ran_in = Path(git(project, "cat-file", "blob", checks[1].stdout.oid).strip())
    assert ran_in.parent == state_root(project) / "checkouts"
    (_, verdict), = d.of(Verdict)
    assert verdict.accepted and verdict.head == patch.head and verdict.reviewer == "checks"
    assert (verdict.status, verdict.integrity, verdict.contract) == ("complete", "clean", "aligned")
    assert sorted(n["kind"] for n in note_lines(project, patch.head)) == ["seal", "verdict"]
    assert note(project, patch.head)[0]["accepted"] is True
    assert d.data["summary"]["patches"][0]["verified"] is True

    # the clean checkout is kept for the next verification, clean and detached; the user's tree was not touched
    assert [p.name for p in (state_root(project) / "checkouts").iterdir()] == ["0"]
    assert git(ran_in, "status", "--porcelain", "--ignored") == "" and f"worktree {ran_in}\nHEAD {patch.head}\ndetached" in git(
        project, "worktree", "list", "--porcelain"
    )
    assert rev(project) == base and git(project, "status", "--porcelain") == ""
    assert (project / "README.md").read_text() == "hello\n"

    # the diff applies to the base, and is byte for byte the one the patch's sha256 names
    shown = cli(project, "diff", patch_id[:12])
    assert shown.code == 0, shown.err
    diff_file = tmp_path / "p.diff"
    diff_file.write_text(shown.out)
    assert subprocess.run(["git", "apply", "--check", str(diff_file)], cwd=project, capture_output=True).returncode == 0
    raw = subprocess.run([str(Path(sys.executable).parent / "gitswarm"), "diff", patch_id], cwd=project, capture_output=True, check=True).stdout
    assert hashlib.sha256(raw).hexdigest() == patch.sha256
    assert raw == subprocess.run(["git", "diff", "--binary", "--full-index", base, patch.head], cwd=project, capture_output=True).stdout

    listed = cli(project, "--json", "worktrees", "list").json()["worktrees"]
    assert [(w["job"], w["task"], w["state"], w["clean"], w["head"]) for w in listed] == [(d.job, TASK, "succeeded", True, patch.head)]

    merged = merged_ok(cli(project, "--json", "merge", patch_id[:12]))
    assert merged == {"patch": patch_id, "into": "main", "old": base, "new": patch.head, "fast_forward": True}
    assert rev(project, "refs/heads/main") == patch.head
    assert (project / "README.md").read_text() == "world\n"
    assert git(project, "status", "--porcelain") == ""
    decisions = [r for _, r in d.of(Decision)]
    assert len(decisions) == 1 and decisions[0].title.startswith("merged patch")

    again = cli(project, "--json", "merge", patch_id)
    assert again.code == 1 and "already contains" in again.err
    assert rev(project, "refs/heads/main") == patch.head


def test_squash_merge_makes_one_new_commit_on_main(project: Path) -> None:
    base = rev(project)
    d = delegate(project, FIX, CHECK)
    patch_id, patch = d.patch()
    merged = merged_ok(cli(project, "--json", "merge", patch_id, "--squash"))
    new = rev(project, "main")
    assert merged["new"] == new != patch.head and merged["fast_forward"] is True
    assert git(project, "rev-list", "--parents", "-1", new).split() == [new, base]
    assert rev(project, f"{new}^{{tree}}") == rev(project, f"{patch.head}^{{tree}}")
    assert (project / "README.md").read_text() == "world\n" and git(project, "status", "--porcelain") == ""


def test_uncommitted_changes_in_the_users_tree_never_leak_into_the_base(project: Path) -> None:
    base = rev(project)
    (project / "README.md").write_text("hello\nuncommitted line\n")
    (project / "scratch.txt").write_text("untracked, not listed in worktree-include\n")
    d = delegate(project, "write NEW.md: from the agent", "grep -qx hello README.md", "test ! -e scratch.txt")
    assert d.result.code == 0, d.data
    _, patch = d.patch()
    assert patch.base == base
    assert [f.path for f in patch.files] == ["NEW.md"]
    assert (d.worktree / "README.md").read_text() == "hello\n"
    assert not (d.worktree / "scratch.txt").exists()
    assert git(project, "show", f"{patch.head}:README.md") == "hello\n"
    # and the user's uncommitted work is still theirs
    assert (project / "README.md").read_text() == "hello\nuncommitted line\n"
    assert (project / "scratch.txt").exists()


@pytest.mark.parametrize("ignored", [True, False], ids=["ignored", "not-ignored"])
def test_include_files_reach_the_agent_but_never_the_patch(project: Path, ignored: bool) -> None:
    """`.gitswarm/worktree-include` copies local files (secrets, typically) for the agent to use;
    they are not the agent's work and must not be committed into its patch, ignored or not."""
    if ignored:
        commit_file(project, ".gitignore", ".env\n")
    commit_file(project, ".gitswarm/worktree-include", ".env\n")
    (project / ".env").write_text("API_KEY=secret\n")
    d = delegate(project, FIX, CHECK, "test ! -e .env")
    assert (d.worktree / ".env").read_text() == "API_KEY=secret\n"  # the agent had it
    _, patch = d.patch()
    assert [f.path for f in patch.files] == ["README.md"], "the include file was committed into the patch"
    assert d.result.code == 0


# -- rejections by the agent's own behaviour -----------------------------------------------


def test_an_agent_that_changes_nothing_fails_as_a_no_op(project: Path) -> None:
    d = delegate(project, f"misbehave: no-edit\n{FIX}", CHECK)
    assert d.result.code == 1
    assert d.task["state"] == "failed" and d.task["error"].startswith("no-op")
    assert d.of(Patch) == [] and d.of(Verdict) == []
    assert rev(project, d.branch) == rev(project)


def test_an_agent_that_switches_branch_fails_on_integrity(project: Path) -> None:
    sandbox_off(project)  # where there is no sandbox, gitswarm detects it (tests/engine/delegation/test_sandbox.py: prevented)
    base = rev(project)
    d = delegate(project, f"{FIX}\nmisbehave: switch-branch", CHECK)
    assert d.result.code == 1
    assert d.task["state"] == "failed"
    assert d.task["error"].startswith("integrity:") and "agent-elsewhere" in d.task["error"]
    assert d.of(Patch) == [] and d.of(Verdict) == []
    assert rev(project, d.branch) == base == rev(project, "agent-elsewhere")  # nothing was committed for it
    assert rev(project, "main") == base and git(project, "status", "--porcelain") == ""


def test_an_agent_that_writes_into_the_users_tree_fails_on_integrity(project: Path) -> None:
    sandbox_off(project)  # where there is no sandbox, gitswarm detects it (tests/engine/delegation/test_sandbox.py: prevented)
    d = delegate(project, f"{FIX}\nwrite {project}/escaped.txt: oops", CHECK)
    assert (project / "escaped.txt").exists()  # the test's premise: it did reach the user's tree
    assert d.result.code == 1
    assert d.task["state"] == "failed" and d.task["error"].startswith("integrity:")
    assert "outside its worktree" in d.task["error"]
    assert d.of(Patch) == []


def test_an_agent_that_writes_outside_its_worktree_fails_on_integrity(project: Path) -> None:
    """`misbehave: outside` writes into the repository's main working tree."""
    sandbox_off(project)  # where there is no sandbox, gitswarm detects it (tests/engine/delegation/test_sandbox.py: prevented)
    d = delegate(project, f"{FIX}\nmisbehave: outside", CHECK)
    assert (project / "written-outside-the-worktree.txt").exists()  # it did write outside
    assert d.task["state"] == "failed", "a worker that wrote outside its worktree was accepted"
    assert d.task["error"].startswith("integrity:")
    assert d.result.code == 1


@pytest.mark.parametrize(
    "where",
    ["../next-to-the-worktree.txt", "{git}/hooks/pre-commit"],
    ids=["beside-the-worktree", "git-hooks"],
)
def test_an_agent_that_writes_anywhere_outside_its_worktree_fails_on_integrity(project: Path, where: str) -> None:
    """Outside the worktree is not only the user's tree: the worktree root and the git dir itself are outside too."""
    sandbox_off(project)  # where there is no sandbox, gitswarm detects it (tests/engine/delegation/test_sandbox.py: prevented)
    where = where.format(git=project / ".git")
    d = delegate(project, f"{FIX}\nwrite {where}: echo planted", CHECK)
    assert (d.worktree / where).resolve().exists()  # the test's premise: it did write there
    assert git(project, "status", "--porcelain") == ""  # invisible to the user's tree status
    assert d.task["state"] == "failed", f"a worker that wrote {(d.worktree / where).resolve()} was accepted"
    assert d.task["error"].startswith("integrity:")


# -- rejections by verification ------------------------------------------------------------


def test_checks_run_on_a_clean_checkout_not_in_the_workers_tree(project: Path) -> None:
    """Ignored junk the agent leaves in its tree must not make a check pass or fail."""
    commit_file(project, ".gitignore", "*.log\n")
    d = delegate(project, f"{FIX}\nwrite junk.log: left behind", CHECK, "test ! -e junk.log")
    assert (d.worktree / "junk.log").exists()
    assert d.result.code == 0, d.data
    _, patch = d.patch()
    assert [f.path for f in patch.files] == ["README.md"]


def test_a_failing_check_goes_back_for_repair_rounds_then_is_rejected_and_cannot_merge(project: Path) -> None:
    base = rev(project)
    d = delegate(project, "append notes.txt: one more line", "test $(wc -l < notes.txt) -ge 5")
    assert d.result.code == 1
    assert d.task["state"] == "failed" and d.task["error"].startswith("rejected")
    patches = d.of(Patch)
    verdicts = [v for _, v in d.of(Verdict)]
    assert len(patches) == 3 == len(verdicts)  # the first round and 2 repair rounds
    heads = [p.head for _, p in patches]
    assert len(set(heads)) == 3, "each round is a new commit"
    assert rev(project, f"{heads[0]}~1") == base and rev(project, f"{heads[1]}~1") == heads[0] and rev(project, f"{heads[2]}~1") == heads[1]
    assert all(p.base == base for _, p in patches)
    assert [v.head for v in verdicts] == heads
    for v in verdicts:
        assert (v.status, v.integrity, v.contract, v.accepted) == ("incomplete", "clean", "needs_revision", False)
        assert [n["head"] for n in note(project, v.head)] == [v.head]
    assert [c.passed for _, c in d.of(Check)] == [False, False, False]
    assert git(project, "show", f"{heads[-1]}:notes.txt") == "one more line\n" * 3

    before = state(project)
    for patch_id, _ in patches:
        refused = cli(project, "--json", "merge", patch_id)
        assert refused.code == 1 and "no accepted verdict" in refused.err
    assert state(project) == before


def test_a_repair_round_that_passes_is_accepted_and_only_its_head_can_merge(project: Path) -> None:
    d = delegate(project, "append notes.txt: one more line", "test $(wc -l < notes.txt) -ge 2")
    assert d.result.code == 0, d.data
    (first_id, first), (second_id, second) = d.of(Patch)
    verdicts = {v.head: v.accepted for _, v in d.of(Verdict)}
    assert verdicts == {first.head: False, second.head: True}
    before = state(project)
    refused = cli(project, "--json", "merge", first_id)
    assert refused.code == 1 and "no accepted verdict" in refused.err
    assert state(project) == before
    assert merged_ok(cli(project, "--json", "merge", second_id))["new"] == second.head
    assert (project / "notes.txt").read_text() == "one more line\n" * 2


def test_the_latest_verdict_for_a_head_decides(project: Path, tmp_path: Path) -> None:
    flag = tmp_path / "broken"
    d = delegate(project, FIX, CHECK, f"test ! -e {flag}")
    patch_id, patch = d.patch()
    flag.write_text("")
    again = cli(project, "--json", "verify", patch_id)
    assert again.code == 1 and again.json()["accepted"] is False
    before = state(project)
    refused = cli(project, "--json", "merge", patch_id)
    assert refused.code == 1 and "no accepted verdict" in refused.err
    assert state(project) == before
    flag.unlink()
    assert cli(project, "--json", "verify", patch_id).code == 0
    assert merged_ok(cli(project, "--json", "merge", patch_id))["new"] == patch.head
    assert [n["accepted"] for n in note(project, patch.head)].count(True) == 2


AUDITOR_SCRIPT = """#!/bin/sh
pwd > "{log}.cwd"
printf '%s' "$1" > "{log}.prompt"
cat "{answer}"
exit {code}
"""


def auditor(repo: Path, tmp_path: Path, answer: str, code: int = 0) -> Path:
    """An auditor adapter `auditor` that prints `answer` (and records where it ran and what it was asked)."""
    files = tmp_path / "auditor-files"  # what it reads and where it leaves its log: [sandbox] write
    files.mkdir(exist_ok=True)
    log = files / "auditor"
    (files / "answer.txt").write_text(answer)
    script = files / "auditor.sh"
    script.write_text(AUDITOR_SCRIPT.format(log=log, answer=files / "answer.txt", code=code))
    (repo / ".gitswarm" / "adapters" / "auditor.toml").write_text(
        f'executable = "/bin/sh"\nargs = [{json.dumps(str(script))}, "{{prompt}}"]\n[sandbox]\nwrite = [{json.dumps(str(files))}]\n')
    git(repo, "add", ".gitswarm")
    git(repo, "commit", "-qm", "register an auditor")
    return log


def audited_spec(checks: str = f'["{CHECK}"]') -> str:
    return (
        'goal = "audited"\n[[tasks]]\nid = "fix"\nmode = "implement"\nadapter = "scripted"\n'
        f'prompt = "{FIX}"\nchecks = {checks}\nauditor = "auditor"\nrepair_rounds = 1\nmax_attempts = 1\n'
    )


GOOD_ANSWER = json.dumps(
    {
        "status": "complete",
        "integrity": "clean",
        "contract": "aligned",
        "evidence": {"status": "README says world", "integrity": "one line changed", "contract": "as instructed"},
    }
)


@pytest.mark.parametrize(
    "answer, code",
    [
        ("Looks great to me!", 0),
        ('{"status": "complete", "integrity": "clean", "contract": "aligned"}', 0),  # claims without evidence
        ('{"status": "done", "integrity": "clean", "contract": "aligned", "evidence": {}}', 0),
        (GOOD_ANSWER, 3),  # a good answer from an auditor that failed counts for nothing
    ],
    ids=["prose", "no-evidence", "bad-enum", "exit-3"],
)
def test_a_malformed_auditor_verdict_rejects_the_patch(project: Path, tmp_path: Path, answer: str, code: int) -> None:
    log = auditor(project, tmp_path, answer, code)
    result = run_spec(project, audited_spec(), tmp_path)
    assert result.code == 1
    data = result.json()
    job = data["id"]
    (task,) = data["tasks"]
    assert task["state"] == "failed" and task["error"].startswith("rejected")
    arts = task_artifacts(project, job, "fix")
    verdicts = [v for _, v in arts if isinstance(v, Verdict)]
    checks = [c for _, c in arts if isinstance(c, Check)]
    assert verdicts and all(c.passed for c in checks)  # the checks passed; the auditor alone rejected
    for v in verdicts:
        assert not v.accepted and v.reviewer == "checks+auditor"
        assert (v.status, v.integrity, v.contract) == ("incomplete", "suspect", "unknown")
        assert v.evidence.get("malformed")
    # the auditor ran in a clean checkout (not the worker's tree, not the user's), and was shown the patch
    cwd = Path(log.with_suffix(".cwd").read_text().strip())
    assert cwd.parent == state_root(project) / "checkouts"
    prompt = log.with_suffix(".prompt").read_text()
    assert "Do not edit anything" in prompt and "+world" in prompt and FIX in prompt
    patch_id = next(a for a, r in arts if isinstance(r, Patch))
    before = state(project)
    assert cli(project, "--json", "merge", patch_id).code == 1
    assert state(project) == before
    assert log.with_suffix(".cwd").exists()


def test_an_auditor_that_accepts_with_evidence_lets_the_patch_through(project: Path, tmp_path: Path) -> None:
    auditor(project, tmp_path, "I checked the diff.\n" + GOOD_ANSWER + "\n")
    result = run_spec(project, audited_spec(), tmp_path)
    data = result.json()
    job = data["id"]
    arts = task_artifacts(project, job, "fix")
    verdicts = [v for _, v in arts if isinstance(v, Verdict)]
    assert verdicts[0].evidence.get("malformed") is None, verdicts[0].evidence
    assert verdicts[0].accepted and verdicts[0].reviewer == "checks+auditor"
    assert verdicts[0].evidence["auditor.integrity"] == "one line changed"
    assert result.code == 0 and data["tasks"][0]["state"] == "succeeded"


def test_an_auditor_that_asks_for_revision_rejects_even_when_the_checks_pass(project: Path, tmp_path: Path) -> None:
    answer = json.dumps(
        {
            "status": "complete",
            "integrity": "clean",
            "contract": "needs_revision",
            "evidence": {"status": "done", "integrity": "fine", "contract": "the docs were not updated"},
        }
    )
    auditor(project, tmp_path, answer)
    result = run_spec(project, audited_spec(), tmp_path)
    assert result.code == 1
    verdicts = [v for _, v in task_artifacts(project, result.json()["id"], "fix") if isinstance(v, Verdict)]
    assert verdicts and not any(v.accepted for v in verdicts)
    assert verdicts[0].contract == "needs_revision", verdicts[0].evidence
    assert verdicts[0].evidence["auditor.contract"] == "the docs were not updated"


# -- a verdict is for one SHA --------------------------------------------------------------


def _amend(wt: Path) -> None:
    (wt / "README.md").write_text("broken\n")
    git(wt, "commit", "-q", "--amend", "-am", "amended")


def _reset(wt: Path) -> None:
    git(wt, "reset", "-q", "--hard", "HEAD~1")


def _new_commit(wt: Path) -> None:
    (wt / "README.md").write_text("broken\n")
    git(wt, "commit", "-qam", "sneaked in after the verdict")


def _empty_commit(wt: Path) -> None:
    git(wt, "commit", "-q", "--allow-empty", "-m", "empty")


@pytest.mark.parametrize("move", [_amend, _reset, _new_commit, _empty_commit], ids=["amend", "reset", "new-commit", "allow-empty"])
def test_a_verdict_does_not_cover_a_branch_moved_after_it(project: Path, move) -> None:
    d = delegate(project, FIX, CHECK)
    patch_id, patch = d.patch()
    move(d.worktree)
    moved = rev(project, d.branch)
    assert moved != patch.head
    before = state(project)

    refused = cli(project, "--json", "merge", patch_id)
    assert refused.code == 1 and "moved" in refused.err and "verify again" in refused.err
    assert state(project) == before and rev(project, "main") != patch.head

    # verify judges the patch's head, never whatever the branch points at now
    verified = cli(project, "--json", "verify", patch_id)
    assert verified.code == 0, verified.err
    out = verified.json()
    assert out["head"] == patch.head and out["accepted"] is True
    assert note(project, moved) == []
    assert all(n["head"] == patch.head for n in note(project, patch.head))
    assert len(note(project, patch.head)) == 2

    still = cli(project, "--json", "merge", patch_id)
    assert still.code == 1 and "moved" in still.err
    assert state(project) == before


# -- the target moved ----------------------------------------------------------------------


def test_a_target_that_moved_with_a_conflict_refuses_and_lists_the_file(project: Path) -> None:
    d = delegate(project, FIX, CHECK)
    patch_id, _ = d.patch()
    theirs = commit_file(project, "README.md", "bonjour\n")
    before = state(project)
    refused = cli(project, "--json", "merge", patch_id)
    assert refused.code == 1
    assert "conflict" in refused.err and "README.md" in refused.err
    assert state(project) == before and rev(project, "main") == theirs
    assert (project / "README.md").read_text() == "bonjour\n"
    decisions = [r for _, r in d.of(Decision)]
    assert len(decisions) == 1 and decisions[0].title.startswith("conflicted") and "README.md" in decisions[0].rationale


@pytest.mark.parametrize("recheck", [True, False], ids=["recheck", "no-recheck"])
def test_a_target_that_moved_without_conflict_gets_a_merge_commit(project: Path, recheck: bool) -> None:
    d = delegate(project, FIX, CHECK)
    patch_id, patch = d.patch()
    theirs = commit_file(project, "OTHER.md", "meanwhile\n")
    checks_before = len(d.of(Check))
    args = ["--json", "merge", patch_id] + ([] if recheck else ["--no-recheck"])
    merged = merged_ok(cli(project, *args))
    new = rev(project, "main")
    assert merged == {"patch": patch_id, "into": "main", "old": theirs, "new": new, "fast_forward": False}
    assert git(project, "rev-list", "--parents", "-1", new).split() == [new, theirs, patch.head]
    assert (project / "README.md").read_text() == "world\n" and (project / "OTHER.md").read_text() == "meanwhile\n"
    assert git(project, "status", "--porcelain") == ""
    rechecks = d.of(Check)[checks_before:]
    if recheck:
        assert [(c.command, c.passed) for _, c in rechecks] == [(CHECK, True)]
    else:
        assert rechecks == []


def test_rebase_onto_a_moved_target_is_one_linear_commit(project: Path) -> None:
    d = delegate(project, FIX, CHECK)
    patch_id, _ = d.patch()
    theirs = commit_file(project, "OTHER.md", "meanwhile\n")
    merged_ok(cli(project, "--json", "merge", patch_id, "--rebase"))
    new = rev(project, "main")
    assert git(project, "rev-list", "--parents", "-1", new).split() == [new, theirs]
    assert (project / "README.md").read_text() == "world\n" and git(project, "status", "--porcelain") == ""


def test_checks_that_fail_on_the_merged_tree_refuse_the_merge(project: Path) -> None:
    d = delegate(project, FIX, CHECK, "test ! -e OTHER.md")
    patch_id, _ = d.patch()
    theirs = commit_file(project, "OTHER.md", "meanwhile\n")
    before = state(project)
    refused = cli(project, "--json", "merge", patch_id)
    assert refused.code == 1 and "checks failed on the merged tree" in refused.err
    assert state(project) == before and rev(project, "main") == theirs
    # and --no-recheck is the user's explicit override
    merged_ok(cli(project, "--json", "merge", patch_id, "--no-recheck"))
    assert (project / "README.md").read_text() == "world\n"


# -- the target's worktree -----------------------------------------------------------------


@pytest.mark.parametrize("how", ["modified", "staged"])
def test_a_dirty_target_worktree_refuses_the_merge(project: Path, how: str) -> None:
    d = delegate(project, FIX, CHECK)
    patch_id, patch = d.patch()
    (project / "README.md").write_text("hello\nmy own work\n")
    if how == "staged":
        git(project, "add", "README.md")
    before = state(project)
    refused = cli(project, "--json", "merge", patch_id)
    assert refused.code == 1 and "uncommitted changes" in refused.err
    assert state(project) == before and rev(project, "main") != patch.head
    assert (project / "README.md").read_text() == "hello\nmy own work\n"


def test_an_untracked_file_in_the_way_refuses_the_merge_and_nothing_moves(project: Path) -> None:
    """The patch adds NEW.md; the user has an untracked NEW.md of their own in the target's tree."""
    d = delegate(project, "write NEW.md: from the agent", "test -e NEW.md")
    patch_id, _patch = d.patch()
    (project / "NEW.md").write_text("mine, not committed\n")
    before = state(project)
    refused = cli(project, "--json", "merge", patch_id)
    assert (project / "NEW.md").read_text() == "mine, not committed\n"
    assert refused.code == 1, refused.err
    assert state(project) == before, "the merge failed but moved main under the user's tree"


def test_a_merge_into_a_branch_not_checked_out_leaves_the_users_tree_alone(project: Path) -> None:
    git(project, "branch", "release")
    d = delegate(project, FIX, CHECK)
    patch_id, patch = d.patch()
    (project / "README.md").write_text("dirty, but main is not the target\n")
    merged = merged_ok(cli(project, "--json", "merge", patch_id, "--into", "release"))
    assert merged["into"] == "release" and rev(project, "release") == patch.head
    assert (project / "README.md").read_text() == "dirty, but main is not the target\n"
    assert rev(project, "main") == patch.base


# -- worktrees gc --------------------------------------------------------------------------


def test_worktrees_gc_removes_merged_clean_worktrees_and_keeps_failed_and_dirty_ones(project: Path) -> None:
    merged = delegate(project, FIX, CHECK)
    dirty = delegate(project, "write NEW.md: another change", "test -e NEW.md")
    failed = delegate(project, f"misbehave: no-edit\n{FIX}", CHECK)
    assert (merged.task["state"], dirty.task["state"], failed.task["state"]) == ("succeeded", "succeeded", "failed")

    merged_ok(cli(project, "--json", "merge", merged.patch()[0]))
    merged_ok(cli(project, "--json", "merge", dirty.patch()[0]))  # main moved: a merge commit, rechecked
    (dirty.worktree / "NEW.md").write_text("edited after the merge\n")

    listed = {w["job"]: w for w in cli(project, "--json", "worktrees", "list").json()["worktrees"]}
    assert set(listed) == {merged.job, dirty.job, failed.job}
    assert (listed[merged.job]["clean"], listed[dirty.job]["clean"], listed[failed.job]["clean"]) == (True, False, True)

    gc = cli(project, "--json", "worktrees", "gc")
    assert gc.code == 0, gc.err
    out = gc.json()
    assert [(r["path"], r["why"]) for r in out["removed"]] == [(str(merged.worktree), "branch merged")]
    kept = {k["path"]: k["why"] for k in out["kept"]}
    assert kept == {
        str(dirty.worktree): "holds uncommitted work",
        str(failed.worktree): "task failed, not merged into any branch outside swarm/ (--force removes it)",
    }
    assert not merged.worktree.exists()
    assert (dirty.worktree / "NEW.md").read_text() == "edited after the merge\n" and failed.worktree.exists()
    assert not git(project, "for-each-ref", merged.branch)  # merged: its branch went with its worktree (tests/engine/delegation/test_gc.py)
    assert {w["job"] for w in cli(project, "--json", "worktrees", "list").json()["worktrees"]} == {dirty.job, failed.job}
    assert cli(project, "--json", "worktrees", "gc").json()["removed"] == []


# -- where worktrees go --------------------------------------------------------------------


def test_a_configured_root_holds_the_worktree_and_the_clean_checkouts(project: Path, tmp_path: Path) -> None:
    commit_file(project, ".gitswarm.toml", '[worktrees]\nroot = "../trees"\n')
    d = delegate(project, FIX, CHECK, "pwd")
    assert d.result.code == 0, d.result.err
    trees = (tmp_path / "trees").resolve()
    assert rev(trees / d.job / TASK) == d.patch()[1].head
    ran_in = Path(git(project, "cat-file", "blob", d.of(Check)[1][1].stdout.oid).strip())
    assert ran_in.parent == trees / "checkouts"
    assert not state_root(project).exists() and not (project / ".git" / "gitswarm" / "worktrees").exists()


def test_worktrees_made_under_the_old_root_inside_the_git_dir_are_listed_and_gcd(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old_root = project / ".git" / "gitswarm" / "worktrees"
    monkeypatch.setenv("GITSWARM_WORKTREE_ROOT", str(old_root))  # as earlier versions did by default
    old = delegate(project, FIX, CHECK)
    monkeypatch.delenv("GITSWARM_WORKTREE_ROOT")
    new = delegate(project, "write NEW.md: another change", "test -e NEW.md")
    old_tree = old_root / old.job / TASK
    assert old_tree.is_dir() and new.worktree.is_dir()
    listed = {w["path"] for w in cli(project, "--json", "worktrees", "list").json()["worktrees"]}
    assert listed == {str(old_tree), str(new.worktree)}
    merged_ok(cli(project, "--json", "merge", old.patch()[0]))
    gc = cli(project, "--json", "worktrees", "gc").json()
    assert [(r["path"], r["why"]) for r in gc["removed"]] == [(str(old_tree), "branch merged")]
    # the idle clean checkouts go too, under every root
    assert sorted(gc["checkouts"]) == sorted([str(old_root / "checkouts" / "0"), str(state_root(project) / "checkouts" / "0")])
    assert not any(Path(c).exists() for c in gc["checkouts"])
    assert not old_tree.exists() and new.worktree.is_dir()


# -- who a captured commit is by -----------------------------------------------------------


def test_a_captured_commit_is_authored_by_the_agent_committed_by_the_user_with_a_real_message(project: Path) -> None:
    first = "append notes.txt: one more line"
    instruction = f"{first}\nand nothing else"
    d = delegate(project, instruction, "false")  # rejected: a first round and two repair rounds
    heads = [p.head for _, p in d.of(Patch)]
    assert len(set(heads)) == 3
    shown = git(project, "log", "--format=%an <%ae>|%cn <%ce>|%s", heads[0], "-1").strip()
    assert shown == f"scripted (via gitswarm) <gitswarm@localhost>|Test Committer <committer@example.com>|{first}"
    assert git(project, "log", "--format=%s", heads[2], "-1").strip() == f"{first} (repair round 2)"
    body = git(project, "log", "--format=%B", heads[0], "-1")
    assert body == (
        f"{first}\n\n{instruction}\n\n"
        f"Made by scripted through gitswarm: task {TASK} of job {d.job}, attempt 1, round 0.\n\n"
        f"Gitswarm-Job: {d.job}\nGitswarm-Task: {TASK}\nGitswarm-Attempt: 1\nGitswarm-Round: 0\n\n"
    )
    trailers = git(project, "log", "--format=%(trailers:only,unfold)", heads[1], "-1").strip().splitlines()
    assert trailers == [f"Gitswarm-Job: {d.job}", f"Gitswarm-Task: {TASK}", "Gitswarm-Attempt: 1", "Gitswarm-Round: 1"]


def test_a_commit_subject_is_the_instructions_first_line_shortened_or_the_task_when_there_is_none() -> None:
    ctx = RunContext("01jobjobjobjobjobjobjobjob", "fix", 2, Path("."), {})
    long = TaskSpec(id="fix", seq=0, mode="implement", prompt="\n  " + "word " * 30 + "\nmore")
    subject = commit_message(long, ctx, 1, "codex").splitlines()[0]
    assert subject == "word " * 10 + "word… (repair round 1)" and len(subject) == 72
    shell = TaskSpec(id="fix", seq=0, mode="implement", command=["sed", "-i", "s/a b/c/", "f"])
    assert commit_message(shell, ctx, 0, "shell").startswith("sed -i 's/a b/c/' f\n\nMade by shell through gitswarm")
    empty = TaskSpec(id="fix", seq=0, mode="implement", prompt="   ")
    assert commit_message(empty, ctx, 0, "x").startswith("gitswarm: 01jobjobjobjobjobjobjobjob/fix\n\nMade by x through gitswarm")


def test_a_long_subject_is_cut_after_a_whole_word_and_the_body_keeps_the_whole_instruction() -> None:
    ctx = RunContext("01jobjobjobjobjobjobjobjob", "fix", 1, Path("."), {})
    instruction = "Rename the configuration loader to settings_loader and update every caller, including the plugin registry"
    message = commit_message(TaskSpec(id="fix", seq=0, mode="implement", prompt=instruction), ctx, 0, "codex")
    subject, blank, body = message.split("\n")[:3]
    assert subject == "Rename the configuration loader to settings_loader and update every…"
    assert len(subject) <= 72 and blank == "" and body == instruction  # nothing of it is lost
    repaired = commit_message(TaskSpec(id="fix", seq=0, mode="implement", prompt=instruction), ctx, 2, "codex")
    assert repaired.splitlines()[0] == "Rename the configuration loader to settings_loader and… (repair round 2)"
    # one word longer than a subject is the only thing ever cut inside
    url = "https://example.com/" + "a" * 80
    assert commit_message(TaskSpec(id="fix", seq=0, mode="implement", prompt=f"Fetch {url}"), ctx, 0, "x").split("\n")[:3] == [
        "Fetch…", "", f"Fetch {url}"
    ]
    assert commit_message(TaskSpec(id="fix", seq=0, mode="implement", prompt=url), ctx, 0, "x").splitlines()[0] == url[:71] + "…"
    fits = commit_message(TaskSpec(id="fix", seq=0, mode="implement", prompt="Fix the parser"), ctx, 0, "x")
    assert fits.startswith("Fix the parser\n\nMade by x through gitswarm")  # a subject that is all of it: no body
