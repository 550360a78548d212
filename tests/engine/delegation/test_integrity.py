"""An agent is untrusted: every way out of its worktree fails the task on integrity, not retried.

Real repositories, real git, the real CLI: the attacker is a shell-adapter implement task
whose command does the escape from inside its worktree ($C is the git common dir, $C/..
the user's working tree). What gitswarm writes itself from other workers at the same time
(job refs, notes, task branches, the index) is no violation.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from gitswarm.engine.delegation import integrity
from gitswarm.engine.delegation.integrity import Watch
from gitswarm.model.artifacts import Patch
from gitswarm.model.paths import unquote_path
from gitswarm.store.errorlogs import write_log
from tests.conftest import cli, commit_file, git, register_scripted, rev, spec_text, swarm_refs
from tests.engine.delegation.test_attempt import task_artifacts

C = 'C="$(git rev-parse --path-format=absolute --git-common-dir)"'
LATIN1 = "$(printf 'caf\\351.txt')"  # a file name that is not UTF-8: b"caf\xe9.txt"


@pytest.fixture
def project(repo: Path) -> Path:
    """A repository with ignored files in the user's tree (a secret and a dependency)."""
    commit_file(repo, ".gitignore", ".env\nnode_modules/\n")
    (repo / ".env").write_text("API_KEY=secret\n")
    (repo / "node_modules" / "dep").mkdir(parents=True)
    (repo / "node_modules" / "dep" / "index.js").write_text("module.exports = 1\n")
    return repo


def attack(command: str, checks: list[str] | None = None) -> str:
    """A one-task implement job whose agent runs `command` in its worktree; two attempts allowed."""
    body = f'id = "agent"\nmode = "implement"\nadapter = "shell"\ncommand = {json.dumps(f"{C}; {command}")}\nmax_attempts = 2\n'
    return spec_text(body + (f"checks = {json.dumps(checks)}\n" if checks else ""))


def run(repo: Path, tmp_path: Path, text: str) -> dict:
    spec = tmp_path / "spec.toml"  # outside the repo: the user's tree stays as it is
    spec.write_text(text)
    result = cli(repo, "--json", "run", str(spec), "-j", "1")
    assert result.out, result.err
    (task,) = result.json()["tasks"]
    return {**task, "job": result.json()["id"], "code": result.code}


def refused(task: dict, *what: str) -> None:
    """Failed on integrity at the first attempt, never retried, naming what it touched."""
    assert task["state"] == "failed", task
    assert task["error"].startswith("integrity: "), task["error"]
    assert task["attempts"] == 1, "an integrity failure was retried"
    for word in what:
        assert word in task["error"], task["error"]
    assert task["code"] == 1


def branch(task: dict) -> str:
    return f"refs/heads/swarm/{task['job']}/agent"


# -- the repository's git dir: refs, config, gitswarm's own files ------------------------------


@pytest.mark.parametrize(
    "command, named",
    [
        ('git -C "$C/.." branch main-evil', "refs/heads/main-evil created"),
        ("echo x > f && git add f && git commit -qm x && git update-ref refs/heads/main HEAD", "refs/heads/main moved"),
        ("git tag x", "refs/tags/x created"),
        ("echo more >> README.md && git stash -q", "refs/stash created"),  # shared by every worktree: the user's stash list
        ("git update-ref refs/remotes/origin/main HEAD", "refs/remotes/origin/main created"),
        ("git branch swarm/evil", "refs/heads/swarm/evil created"),  # the task-branch namespace, not a task's shape
        ("git branch swarm/01aaaaaaaaaaaaaaaaaaaaaaaa/t", "refs/heads/swarm/01aaaaaaaaaaaaaaaaaaaaaaaa/t created"),  # no such job
        ('git -C "$C/.." checkout -q -b elsewhere', "HEAD changed"),
        ("git config --local core.hooksPath /tmp", "config changed"),
        ('echo "*.py" >> "$C/info/exclude"', "exclude changed"),
        ('git rev-parse HEAD > "$C/shallow"', "shallow created"),
        ('echo /tmp/objects > "$C/objects/info/alternates"', "alternates created"),
        ('echo \'{"approved": ["anything"]}\' > "$C/gitswarm/trust.json"', "trust.json created"),
        ('echo impostor > "$C/gitswarm/actor"', "actor changed"),
        ('mkdir -p "$C/gitswarm/keys" && echo k > "$C/gitswarm/keys/evil.pub"', "evil.pub created"),
        ('echo x > "$C/gitswarm/config.toml"', "config.toml created"),
        ('echo 01aaaaaaaaaaaaaaaaaaaaaaaa > "$C/gitswarm/local-jobs"', "local-jobs changed"),  # rewritten, not appended
        ('echo "not an id" >> "$C/gitswarm/local-ops"', "local-ops created"),
    ],
    ids=[
        "new-branch", "move-main", "tag", "stash", "remote-ref", "swarm-misshaped", "swarm-no-job", "user-head",
        "config", "info", "shallow", "alternates", "trust", "actor", "key", "gitswarm-config", "local-jobs", "local-ops",
    ],
)
def test_writes_into_the_git_dir_fail_on_integrity(project: Path, tmp_path: Path, command: str, named: str) -> None:
    task = run(project, tmp_path, attack(f"{command} && echo work > done.txt"))
    refused(task, named)
    assert task_artifacts(project, task["job"], "agent") and not [
        a for _, a in task_artifacts(project, task["job"], "agent") if isinstance(a, Patch)
    ]


def test_a_non_swarm_ref_changed_in_packed_refs_fails_on_integrity(project: Path, tmp_path: Path) -> None:
    old = rev(project)
    git(project, "branch", "release")
    commit_file(project, "next.txt", "next\n")
    git(project, "pack-refs", "--all")
    assert "refs/heads/release" in (project / ".git" / "packed-refs").read_text()
    assert not (project / ".git" / "refs" / "heads" / "release").exists()
    task = run(project, tmp_path, attack('sed -i "s|^[0-9a-f]* refs/heads/release$|$(git rev-parse HEAD) refs/heads/release|" "$C/packed-refs"; echo w > w'))
    assert rev(project, "release") != old  # the test's premise: it moved release behind git's back
    refused(task, "refs/heads/release moved")


def test_an_agent_that_escapes_and_then_fails_is_not_retried(project: Path, tmp_path: Path) -> None:
    task = run(project, tmp_path, attack('git -C "$C/.." branch evil; exit 3'))
    refused(task, "refs/heads/evil created")


# -- the user's working tree, ignored files included ------------------------------------------


@pytest.mark.parametrize(
    "command, named",
    [
        ('echo API_KEY=stolen > "$C/../.env"', ".env changed in the working tree"),
        ('echo x > "$C/../node_modules/dep/index.js"', "node_modules/dep/index.js changed"),
        ('mkdir -p "$C/../node_modules/evil" && echo x > "$C/../node_modules/evil/postinstall.js"', "node_modules/evil/postinstall.js created"),
        ('rm "$C/../.env"', ".env removed in the working tree"),
        # same size, mtime put back: the ctime still moves
        ('cp -p "$C/../.env" /tmp/.gitswarm-test-env-$$ && echo API_KEY=stolen > "$C/../.env" && touch -r /tmp/.gitswarm-test-env-$$ "$C/../.env"; rm -f /tmp/.gitswarm-test-env-$$', ".env changed"),
        ('echo x > "$C/../escaped.txt"', "escaped.txt created in the working tree"),
        ('rm "$C/../README.md"', "README.md removed in the working tree"),
    ],
    ids=["ignored-secret", "ignored-dependency", "new-ignored-dir", "ignored-removed", "mtime-restored", "untracked", "tracked-removed"],
)
def test_writes_into_the_users_tree_fail_on_integrity_even_into_ignored_files(project: Path, tmp_path: Path, command: str, named: str) -> None:
    status = git(project, "status", "--porcelain")
    task = run(project, tmp_path, attack(f"{command}; echo work > done.txt"))
    refused(task, named, "outside its worktree")
    assert rev(project, branch(task)) == rev(project)  # nothing was committed for it
    if ".env" in named or "node_modules" in named:
        assert git(project, "status", "--porcelain") == status  # invisible to git status: only the stat check sees it


def test_a_file_the_user_already_changed_written_again_fails_on_integrity(project: Path, tmp_path: Path) -> None:
    (project / "README.md").write_text("hello\nmy own work in progress\n")
    before = git(project, "status", "--porcelain")
    task = run(project, tmp_path, attack('echo "agent was here" >> "$C/../README.md"; echo w > w'))
    assert git(project, "status", "--porcelain") == before == " M README.md\n"  # the same status either way
    refused(task, "README.md changed in the working tree")


# -- what the agent leaves in its own worktree ------------------------------------------------


@pytest.mark.parametrize(
    "command, named",
    [
        ("git init -q nested && touch nested/f && echo w > w", "git repository inside the worktree at nested"),
        (
            "mkdir -p lib && git init -q lib/vendored && echo x > lib/vendored/f && git -C lib/vendored add f"
            " && git -C lib/vendored -c user.name=a -c user.email=b commit -qm x && echo w > w",
            "git repository inside the worktree at lib/vendored",
        ),
        ("mkdir sub && git update-index --add --cacheinfo 160000,$(git rev-parse HEAD),sub && echo w > w", "gitlink (submodule commit) without a .gitmodules entry at sub"),
        ("rm .git && git init -q && echo w > w", "re-pointed its worktree at another repository"),
    ],
    ids=["git-init", "committed-clone", "gitlink", "repointed"],
)
def test_a_repository_inside_the_worktree_is_refused_never_a_dangling_gitlink(project: Path, tmp_path: Path, command: str, named: str) -> None:
    base = rev(project)
    task = run(project, tmp_path, attack(command))
    refused(task, named)
    assert rev(project, branch(task)) == base  # nothing committed, no gitlink on the branch
    assert git(project, "ls-tree", "-r", base) == git(project, "ls-tree", "-r", branch(task))


# -- include files that are tracked -----------------------------------------------------------


def test_a_tracked_include_file_is_refused_at_submit_and_nothing_is_written(project: Path, tmp_path: Path) -> None:
    register_scripted(project)
    commit_file(project, ".gitswarm/worktree-include", ".env\nREADME.md\n")
    spec = tmp_path / "spec.toml"
    spec.write_text(attack("echo changed > README.md"))
    before = swarm_refs(project)
    submitted = cli(project, "--json", "submit", str(spec))
    assert submitted.code == 2 and "README.md" in submitted.err and "worktree-include" in submitted.err
    assert ".env" not in submitted.err  # an ignored, untracked include is fine
    delegated = cli(project, "--json", "delegate", "edit README.md: replace hello with world", "--adapter", "scripted")
    assert delegated.code == 2 and "README.md" in delegated.err
    assert swarm_refs(project) == before
    # a job without implement tasks copies nothing and is not refused
    assert cli(project, "--json", "submit", str(_write(tmp_path, spec_text('id = "a"\ncommand = "true"')))).code == 0


def test_an_include_listing_changed_after_submit_never_drops_the_agents_change_to_a_tracked_file(project: Path, tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(attack('echo "from the agent" > README.md'))
    submitted = cli(project, "--json", "submit", str(spec))
    assert submitted.code == 0, submitted.err
    (project / ".gitswarm").mkdir(exist_ok=True)
    (project / ".gitswarm" / "worktree-include").write_text("README.md\n")  # after submit, uncommitted
    (project / "README.md").write_text("the user's local edit\n")
    worked = cli(project, "--json", "work", "--until-idle", "-j", "1")
    assert worked.code == 0, worked.err
    job = submitted.json()["id"]
    (patch,) = [a for _, a in task_artifacts(project, job, "agent") if isinstance(a, Patch)]
    assert [f.path for f in patch.files] == ["README.md"]
    assert git(project, "show", f"{patch.head}:README.md") == "from the agent\n"  # neither dropped nor the user's


# -- file names that are not UTF-8 ------------------------------------------------------------


def test_a_file_name_that_is_not_utf8_is_carried_into_the_patch(project: Path, tmp_path: Path) -> None:
    task = run(project, tmp_path, attack(f'printf x > "{LATIN1}"', checks=[f'test -e "{LATIN1}"']))
    assert task["state"] == "succeeded", task
    (patch,) = [a for _, a in task_artifacts(project, task["job"], "agent") if isinstance(a, Patch)]
    assert [(f.path, f.added, f.deleted) for f in patch.files] == [('"caf\\351.txt"', 1, 0)]
    assert unquote_path(patch.files[0].path) == b"caf\xe9.txt"
    listed = subprocess.run(["git", "ls-tree", "-z", "--name-only", patch.head], cwd=project, capture_output=True, check=True).stdout
    assert b"caf\xe9.txt\0" in listed
    diff = subprocess.run(["git", "cat-file", "blob", patch.diff.oid], cwd=project, capture_output=True, check=True).stdout
    applied = subprocess.run(["git", "apply", "--check", "-"], cwd=project, input=diff, capture_output=True)
    assert applied.returncode == 0, applied.stderr
    shown = cli(project, "--json", "show", task["job"])
    assert shown.code == 0, shown.err


# -- what gitswarm writes itself is no violation ----------------------------------------------


@pytest.mark.parametrize("escape", [False, True], ids=["outputs-only", "and-an-escape"])
def test_a_task_running_in_the_users_tree_meanwhile_may_write_its_ignored_outputs(project: Path, tmp_path: Path, escape: bool) -> None:
    """A shell task runs in the user's tree while the agent runs: its ignored build output is not the
    agent's doing. A change of status (an untracked file created) still is."""
    commit_file(project, ".gitignore", ".env\nnode_modules/\nbuild/\n")
    agent = "sleep 0.8; " + ('echo x > "$C/../escaped.txt"; ' if escape else "") + "echo w > w"
    build = 'id = "build"\ncommand = "sleep 0.3; mkdir -p build && echo out > build/out.txt"\n'
    spec = tmp_path / "spec.toml"
    spec.write_text(attack(agent) + f"[[tasks]]\n{build}")
    result = cli(project, "--json", "run", str(spec), "-j", "2")
    tasks = {t["id"]: t for t in result.json()["tasks"]}
    assert (project / "build" / "out.txt").exists() and tasks["build"]["state"] == "succeeded"
    if escape:
        refused({**tasks["agent"], "code": result.code}, "escaped.txt created in the working tree")
        assert "build/out.txt" not in tasks["agent"]["error"]
    else:
        assert tasks["agent"]["state"] == "succeeded", tasks["agent"]["error"]


def test_an_ignored_file_written_with_no_task_running_in_the_users_tree_is_not_set_aside(project: Path) -> None:
    common = project / ".git"
    watch = Watch(project, common, common / "gitswarm" / "worktrees" / "j" / "t", common / "gitswarm" / "worktrees")
    before = integrity.snapshot(watch, time.time())
    (project / ".env").write_text("API_KEY=stolen\n")
    assert [c.what for c in integrity.violations(watch, before, integrity.snapshot(watch, time.time()))] == [
        ".env changed in the working tree"
    ]



def test_gitswarms_own_concurrent_writes_are_not_violations(project: Path) -> None:
    """Other workers move job refs, notes and their task branches, and write the index, while an agent runs."""
    common = project / ".git"
    job = "01aaaaaaaaaaaaaaaaaaaaaaaa"
    wt = common / "gitswarm" / "worktrees" / job / "agent"
    wt.mkdir(parents=True)
    watch = Watch(project, common, wt, common / "gitswarm" / "worktrees")
    head = rev(project)
    git(project, "update-ref", f"refs/swarm/jobs/{job}", head)
    before = integrity.snapshot(watch, time.time())
    git(project, "update-ref", f"refs/swarm/jobs/{job}", f"{head}^{{tree}}")
    other = "01bbbbbbbbbbbbbbbbbbbbbbbb"
    git(project, "update-ref", f"refs/swarm/jobs/{other}", head)  # a job submitted meanwhile
    git(project, "update-ref", f"refs/heads/swarm/{other}/fix", head)  # and its task's branch
    git(project, "update-ref", f"refs/heads/swarm/{job}/sibling", head)
    git(project, "update-ref", "refs/notes/swarm", head)
    git(project, "update-ref", "refs/gitswarm/shadow/origin/jobs/x", head)
    for name in ("index.sqlite", "index.sqlite-wal", "index.sqlite-shm", "index.lock", "merge.lock", "preflight.json", "seal.key",
                 "machine.key"):
        (common / "gitswarm" / name).write_text("written by gitswarm\n")
    # `work --remote`'s watch fetching while an agent runs (found with the real CLIs): its fetch gate and refusals.
    for name in ("fetch/origin.lock", "fetch/origin.json", "refused/origin.json"):
        (common / "gitswarm" / name).parent.mkdir(exist_ok=True)
        (common / "gitswarm" / name).write_text("written by gitswarm\n")
    (common / "gitswarm" / "cache").mkdir()
    (common / "gitswarm" / "cache" / "memory.msgpack").write_bytes(b"the records, decoded by another worker")
    (wt.parent / "sibling").mkdir()
    (wt / "inside.txt").write_text("the agent's own work\n")
    (common / "gitswarm" / "worktrees" / "verify" / "x").mkdir(parents=True)
    assert integrity.changes(before, integrity.snapshot(watch, time.time())) == []

    (common / "gitswarm" / "seal.key").write_text("replaced\n")  # may appear once, never change
    assert integrity.changes(before, integrity.snapshot(watch, time.time())) == []
    middle = integrity.snapshot(watch, time.time())
    (common / "gitswarm" / "seal.key").write_text("replaced again\n")
    assert [c for c in integrity.changes(middle, integrity.snapshot(watch, time.time())) if "seal.key" in c.what]


def test_an_unchanged_tree_with_many_ignored_files_is_no_violation(project: Path) -> None:
    """Every ignored file is listed one by one (and stat'ed), and nothing differs when nothing was written."""
    for d in range(10):
        for f in range(30):
            path = project / "node_modules" / f"p{d}" / f"m{f}.js"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("m\n")
    common = project / ".git"
    watch = Watch(project, common, common / "gitswarm" / "worktrees" / "j" / "t", common / "gitswarm" / "worktrees")
    before = integrity.snapshot(watch, time.time())
    assert len(before.tree) == 302 and before.tree[b"node_modules/p9/m29.js"][0] == b"!!"
    assert integrity.changes(before, integrity.snapshot(watch, time.time())) == []


def test_a_worktree_root_inside_the_users_tree_is_not_watched_as_the_users_files(project: Path) -> None:
    common = project / ".git"
    root = project / "wt"
    watch = Watch(project, common, root / "j" / "t", root)
    (root / "j" / "t").mkdir(parents=True)
    before = integrity.snapshot(watch, time.time())
    (root / "j" / "t" / "work.txt").write_text("the agent's own work\n")
    (root / "verify" / "x").mkdir(parents=True)
    assert integrity.changes(before, integrity.snapshot(watch, time.time())) == []
    (project / "beside.txt").write_text("x\n")
    assert [c.what for c in integrity.changes(before, integrity.snapshot(watch, time.time()))] == ["beside.txt created in the working tree"]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "other.toml"
    path.write_text(text)
    return path


def test_an_ignored_change_is_described_with_its_path(project: Path) -> None:
    common = project / ".git"
    watch = Watch(project, common, common / "gitswarm" / "worktrees" / "j" / "t", common / "gitswarm" / "worktrees")
    before = integrity.snapshot(watch, time.time())
    (project / os.fsdecode(b"node_modules/caf\xe9.js")).write_text("x\n")
    found = integrity.changes(before, integrity.snapshot(watch, time.time()))
    assert [(c.what, c.tree_output) for c in found] == [('"node_modules/caf\\351.js" created in the working tree', True)]
    assert integrity.describe(found).startswith("integrity: the worker wrote outside its worktree: ")


def test_a_repack_by_gc_in_the_background_is_no_violation(project: Path) -> None:
    """A user's `git commit` starts `gc --auto` in the background; its repack rewrites info/refs
    (update-server-info, for the dumb HTTP transport) while an agent runs."""
    common = project / ".git"
    watch = Watch(project, common, common / "gitswarm" / "worktrees" / "j" / "t", common / "gitswarm" / "worktrees")
    before = integrity.snapshot(watch, time.time())
    git(project, "repack", "-q", "-a", "-d")
    assert (common / "info" / "refs").exists()
    assert integrity.changes(before, integrity.snapshot(watch, time.time())) == []
    (common / "info" / "exclude").write_text("*.py\n")
    assert [c.what for c in integrity.changes(before, integrity.snapshot(watch, time.time()))] == [f"{common / 'info' / 'exclude'} changed"]


def test_an_error_log_written_meanwhile_is_no_violation(project: Path) -> None:
    """Any gitswarm command that fails internally, while an agent runs, leaves its traceback in gitswarm/logs/."""
    common = project / ".git"
    wt = common / "gitswarm" / "worktrees" / "01aaaaaaaaaaaaaaaaaaaaaaaa" / "agent"
    wt.mkdir(parents=True)
    watch = Watch(project, common, wt, common / "gitswarm" / "worktrees")
    before = integrity.snapshot(watch, time.time())
    path = write_log("Traceback ...\n", project)
    assert path.parent == (common / "gitswarm" / "logs").resolve()
    assert integrity.changes(before, integrity.snapshot(watch, time.time())) == []


def test_the_unwatched_cache_folder_swapped_for_a_symlink_is_a_violation(project: Path, tmp_path: Path) -> None:
    common = project / ".git"
    wt = common / "gitswarm" / "worktrees" / "01aaaaaaaaaaaaaaaaaaaaaaaa" / "agent"
    wt.mkdir(parents=True)
    (common / "gitswarm" / "cache").mkdir()
    watch = Watch(project, common, wt, common / "gitswarm" / "worktrees")
    before = integrity.snapshot(watch, time.time())
    (common / "gitswarm" / "cache").rmdir()
    (common / "gitswarm" / "cache").symlink_to(tmp_path, target_is_directory=True)
    assert [c for c in integrity.changes(before, integrity.snapshot(watch, time.time())) if "cache" in c.what]
