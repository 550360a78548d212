"""Delegation worktrees on a real repository: prepare, reset, include files, capture, violations."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from gitswarm.engine.config import worktree_root
from gitswarm.model.errors import BadInput
from gitswarm.store.gitcli import GitCommandError
from gitswarm.store.worktrees import Worktree, Worktrees, WorktreeViolation, branch_name, legacy_root, repo_key
from tests.conftest import commit_file, git

JOB = "01jobjobjobjobjobjobjobjob"
TASK = "impl"


def head(path: Path, rev: str = "HEAD") -> str:
    return git(path, "rev-parse", rev).strip()


@pytest.fixture
def trees(repo: Path) -> Worktrees:
    return Worktrees(repo, repo / ".git")


@pytest.fixture
def base(repo: Path) -> str:
    """A second commit, so that the base has a parent to reset below."""
    (repo / "code.py").write_text("x = 1\n")
    git(repo, "add", "code.py")
    git(repo, "commit", "-qm", "second")
    return head(repo)


def state_root(repo: Path) -> Path:
    """The default root of `repo`'s worktrees, under the test's own state directory (conftest sets XDG_STATE_HOME)."""
    return Path(os.environ["XDG_STATE_HOME"]) / "gitswarm" / "worktrees" / repo_key(repo / ".git")


def test_prepare_creates_the_task_branch_at_the_base_and_a_worktree_under_the_state_directory(repo: Path, trees: Worktrees, base: str) -> None:
    parent = head(repo, "HEAD~1")
    wt = trees.prepare(JOB, TASK, parent, reset=False)
    assert wt.branch == branch_name(JOB, TASK) == f"swarm/{JOB}/{TASK}"
    assert wt.path == state_root(repo) / JOB / TASK
    assert not wt.path.is_relative_to(repo)  # outside the user's tree and the git dir
    assert wt.base == parent
    assert head(repo, f"refs/heads/swarm/{JOB}/{TASK}") == parent
    assert head(wt.path) == parent
    assert git(wt.path, "symbolic-ref", "HEAD").strip() == f"refs/heads/swarm/{JOB}/{TASK}"
    assert not (wt.path / "code.py").exists() and (wt.path / "README.md").read_text() == "hello\n"
    listed = git(repo, "worktree", "list", "--porcelain")
    assert f"worktree {wt.path}\n" in listed and f"branch refs/heads/swarm/{JOB}/{TASK}" in listed
    # the user's tree and branch are untouched
    assert head(repo) == base and git(repo, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    assert git(repo, "status", "--porcelain") == ""
    assert trees.listing() == [{"path": str(wt.path), "branch": wt.branch, "head": parent}]


def test_prepare_reset_returns_a_used_worktree_to_the_base_and_drops_untracked_files(repo: Path, trees: Worktrees, base: str) -> None:
    wt = trees.prepare(JOB, TASK, base, reset=False)
    (wt.path / "README.md").write_text("changed\n")
    git(wt.path, "commit", "-qam", "worker commit")
    (wt.path / "code.py").write_text("x = 2\n")  # uncommitted tracked change
    (wt.path / "junk").mkdir()
    (wt.path / "junk" / "new.txt").write_text("untracked\n")
    (wt.path / "stray.txt").write_text("untracked\n")
    moved = head(wt.path)
    assert moved != base

    # without reset: reused as it stands (a repair round continues from the last commit)
    again = trees.prepare(JOB, TASK, base, reset=False)
    assert head(again.path) == moved and (again.path / "stray.txt").exists()

    fresh = trees.prepare(JOB, TASK, base, reset=True)
    assert fresh.path == wt.path
    assert head(fresh.path) == base == head(repo, f"refs/heads/{branch_name(JOB, TASK)}")
    assert (fresh.path / "README.md").read_text() == "hello\n"
    assert (fresh.path / "code.py").read_text() == "x = 1\n"
    assert not (fresh.path / "stray.txt").exists() and not (fresh.path / "junk").exists()
    assert git(fresh.path, "status", "--porcelain") == ""
    assert trees.is_clean(fresh.path)


def test_prepare_reset_also_repairs_a_worktree_left_on_another_branch(repo: Path, trees: Worktrees, base: str) -> None:
    wt = trees.prepare(JOB, TASK, base, reset=False)
    git(wt.path, "checkout", "-q", "-b", "elsewhere")
    fresh = trees.prepare(JOB, TASK, base, reset=True)
    assert git(fresh.path, "symbolic-ref", "HEAD").strip() == f"refs/heads/{branch_name(JOB, TASK)}"
    assert head(fresh.path) == base


def test_copy_includes_copies_listed_untracked_files_but_nothing_outside_the_repo(repo: Path, trees: Worktrees, base: str, tmp_path: Path) -> None:
    (repo / ".gitignore").write_text(".env\n")
    (repo / ".env").write_text("SECRET=1\n")
    (repo / "conf").mkdir()
    (repo / "conf" / "local.ini").write_text("[local]\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours\n")
    os.symlink(outside, repo / "link-out.txt")  # inside by name, outside once resolved
    (repo / ".gitswarm").mkdir()
    (repo / ".gitswarm" / "worktree-include").write_text(
        "# local files the agent needs\n"
        ".env\n"
        "\n"
        "  conf/local.ini  \n"
        "missing.txt\n"
        "../outside.txt\n"
        f"{outside}\n"
        "link-out.txt\n"
        "conf\n"  # a directory, not a file
    )
    wt = trees.prepare(JOB, TASK, base, reset=False)
    copied = trees.copy_includes(wt, repo)
    assert copied == [".env", "conf/local.ini"]
    assert (wt.path / ".env").read_text() == "SECRET=1\n"
    assert (wt.path / "conf" / "local.ini").read_text() == "[local]\n"
    assert not (wt.path / "outside.txt").exists() and not (wt.path / "link-out.txt").exists()
    assert not (wt.path.parent / "outside.txt").exists()
    assert sorted(p.name for p in wt.path.iterdir()) == [".env", ".git", "README.md", "code.py", "conf"]


def test_copy_includes_without_a_listing_copies_nothing(repo: Path, trees: Worktrees, base: str) -> None:
    (repo / ".env").write_text("SECRET=1\n")
    wt = trees.prepare(JOB, TASK, base, reset=False)
    assert trees.copy_includes(wt, repo) == []
    assert not (wt.path / ".env").exists()


def test_capture_commits_tracked_and_untracked_but_not_ignored_files(repo: Path, trees: Worktrees, base: str) -> None:
    (repo / ".gitignore").write_text("*.log\nbuild/\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-qm", "ignore")
    start = head(repo)
    wt = trees.prepare(JOB, TASK, start, reset=False)
    (wt.path / "README.md").write_text("hello\nworld\n")  # tracked: +1
    (wt.path / "code.py").unlink()  # tracked: deleted
    (wt.path / "pkg").mkdir()
    (wt.path / "pkg" / "new.py").write_text("a\nb\nc\n")  # untracked: +3
    (wt.path / "blob.bin").write_bytes(bytes(range(256)) * 4)  # untracked binary
    (wt.path / "debug.log").write_text("ignored\n")
    (wt.path / "build").mkdir()
    (wt.path / "build" / "out.o").write_bytes(b"\0\1")

    captured = trees.capture(wt, "gitswarm: capture test\n\nbody line\n", agent="claude-code")

    assert captured.head == head(wt.path) == head(repo, f"refs/heads/{wt.branch}") != start
    assert git(wt.path, "rev-parse", "HEAD~1").strip() == start  # exactly one commit on the base
    assert git(wt.path, "log", "-1", "--format=%B", "HEAD") == "gitswarm: capture test\n\nbody line\n\n"
    # the agent is the author; the user, as git knows them (conftest's GIT_COMMITTER_*), the committer
    assert git(wt.path, "log", "-1", "--format=%an <%ae>|%cn <%ce>", "HEAD").strip() == (
        "claude-code (via gitswarm) <gitswarm@localhost>|Test Committer <committer@example.com>"
    )
    committed = set(git(wt.path, "ls-tree", "-r", "--name-only", "HEAD").split())
    assert committed == {".gitignore", "README.md", "pkg/new.py", "blob.bin"}
    assert git(wt.path, "status", "--porcelain") == ""  # ignored files stay, uncommitted
    assert (wt.path / "debug.log").exists()

    expected = subprocess.run(
        ["git", "diff", "--binary", "--full-index", start, captured.head], cwd=repo, capture_output=True, check=True
    ).stdout
    assert captured.diff == expected
    assert captured.sha256 == hashlib.sha256(captured.diff).hexdigest()
    assert b"GIT binary patch" in captured.diff
    files = {f.path: (f.added, f.deleted) for f in captured.files}
    assert files == {"README.md": (1, 0), "code.py": (0, 1), "pkg/new.py": (3, 0), "blob.bin": (0, 0)}

    # the diff is a real patch: it applies to the base
    check = subprocess.run(["git", "apply", "--check", "-"], cwd=repo, input=captured.diff, capture_output=True)
    assert check.returncode == 0, check.stderr


def test_capture_of_an_untouched_worktree_makes_no_commit(repo: Path, trees: Worktrees, base: str) -> None:
    wt = trees.prepare(JOB, TASK, base, reset=False)
    captured = trees.capture(wt, "nothing\n")
    assert captured.head == base and captured.diff == b"" and captured.files == ()
    assert captured.sha256 == hashlib.sha256(b"").hexdigest()


def test_capture_keeps_the_workers_own_commits_on_top_of_the_base(repo: Path, trees: Worktrees, base: str) -> None:
    wt = trees.prepare(JOB, TASK, base, reset=False)
    (wt.path / "a.txt").write_text("a\n")
    git(wt.path, "add", "a.txt")
    git(wt.path, "commit", "-qm", "worker's own commit")
    own = head(wt.path)
    (wt.path / "b.txt").write_text("b\n")
    captured = trees.capture(wt, "gitswarm: rest\n")
    assert git(wt.path, "rev-parse", "HEAD~1").strip() == own
    assert {f.path for f in captured.files} == {"a.txt", "b.txt"}


def test_capture_refuses_a_worker_that_switched_branch(repo: Path, trees: Worktrees, base: str) -> None:
    wt = trees.prepare(JOB, TASK, base, reset=False)
    (wt.path / "README.md").write_text("edited\n")
    git(wt.path, "checkout", "-q", "-b", "agent-elsewhere")
    with pytest.raises(WorktreeViolation, match="agent-elsewhere"):
        trees.capture(wt, "m\n")
    assert head(repo, "agent-elsewhere") == base  # nothing was committed for it


def test_capture_refuses_a_detached_head(repo: Path, trees: Worktrees, base: str) -> None:
    wt = trees.prepare(JOB, TASK, base, reset=False)
    git(wt.path, "checkout", "-q", "--detach")
    with pytest.raises(WorktreeViolation, match="detached"):
        trees.capture(wt, "m\n")


def test_capture_refuses_a_reset_below_the_base(repo: Path, trees: Worktrees, base: str) -> None:
    wt = trees.prepare(JOB, TASK, base, reset=False)
    git(wt.path, "reset", "-q", "--hard", "HEAD~1")
    (wt.path / "README.md").write_text("edited\n")
    with pytest.raises(WorktreeViolation, match="below the base"):
        trees.capture(wt, "m\n")
    assert head(wt.path) == head(repo, "HEAD~1")  # no commit made


def test_capture_refuses_history_rewritten_onto_an_unrelated_root(repo: Path, trees: Worktrees, base: str) -> None:
    wt = trees.prepare(JOB, TASK, base, reset=False)
    tree = git(wt.path, "rev-parse", "HEAD^{tree}").strip()
    orphan = git(wt.path, "commit-tree", tree, "-m", "orphan").strip()
    git(wt.path, "reset", "-q", "--hard", orphan)  # same content, no base in its history
    with pytest.raises(WorktreeViolation):
        trees.capture(wt, "m\n")


def test_remove_refuses_a_dirty_worktree_and_removes_a_clean_one(repo: Path, trees: Worktrees, base: str) -> None:
    wt = trees.prepare(JOB, TASK, base, reset=False)
    (wt.path / "README.md").write_text("dirty\n")
    assert not trees.is_clean(wt.path)
    with pytest.raises(GitCommandError):
        trees.remove(wt.path)
    assert wt.path.exists()
    git(wt.path, "checkout", "--", "README.md")
    trees.remove(wt.path)
    assert not wt.path.exists() and trees.listing() == []
    assert head(repo, f"refs/heads/{branch_name(JOB, TASK)}") == base  # the branch stays


def test_worktree_root_can_be_elsewhere(repo: Path, base: str, tmp_path: Path) -> None:
    trees = Worktrees(repo, repo / ".git", root=tmp_path / "elsewhere")
    wt = trees.prepare(JOB, TASK, base, reset=False)
    assert wt == Worktree(tmp_path / "elsewhere" / JOB / TASK, branch_name(JOB, TASK), base)
    assert trees.listing()[0]["path"] == str(wt.path)


def test_the_worktree_root_can_be_configured(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "fast-disk"
    monkeypatch.setenv("GITSWARM_WORKTREE_ROOT", str(root))
    trees = Worktrees(repo, repo / ".git")
    base = git(repo, "rev-parse", "HEAD").strip()
    worktree = trees.prepare("job1", "task1", base, reset=False)
    assert worktree.path == root.resolve() / "job1" / "task1"
    assert (worktree.path / "README.md").read_text() == "hello\n"


# -- where the root is ---------------------------------------------------------------------


def test_the_default_root_is_the_users_state_directory_keyed_by_repository(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    key = repo_key(repo / ".git")
    name, _, digest = key.rpartition("-")
    assert name == "repo" and len(digest) == 12 and int(digest, 16) >= 0
    assert Worktrees(repo, repo / ".git").root == state / "gitswarm" / "worktrees" / key
    # a relative XDG_STATE_HOME is ignored (the XDG spec), as is an empty one: ~/.local/state
    for value in ("relative/state", ""):
        monkeypatch.setenv("XDG_STATE_HOME", value)
        assert Worktrees(repo, repo / ".git").root == Path.home().resolve() / ".local" / "state" / "gitswarm" / "worktrees" / key
    monkeypatch.delenv("XDG_STATE_HOME")
    assert Worktrees(repo, repo / ".git").root == Path.home().resolve() / ".local" / "state" / "gitswarm" / "worktrees" / key


def test_repository_keys_are_unique_per_repository_and_shared_by_its_linked_worktrees(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere" / "repo"  # the same name, another repository
    other.mkdir(parents=True)
    git(other, "init", "-q")
    assert repo_key(repo / ".git") != repo_key(other / ".git")
    assert repo_key(other / ".git").startswith("repo-")
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "--detach", str(linked))
    common = Path(git(linked, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())
    assert repo_key(common) == repo_key(repo / ".git")
    bare = tmp_path / "Project Name!.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    assert repo_key(bare).startswith("Project_Name_-")


def test_the_environment_variable_beats_the_config_key_which_beats_the_default(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    common = repo / ".git"
    assert worktree_root(repo, common) == state_root(repo)
    (repo / ".gitswarm.toml").write_text('[worktrees]\nroot = "../trees"\n')  # relative: to the repository's top
    assert worktree_root(repo, common) == (tmp_path / "trees").resolve()
    (repo / ".gitswarm.toml").write_text('[worktrees]\nroot = "~/trees"\n')
    assert worktree_root(repo, common) == Path.home().resolve() / "trees"
    monkeypatch.setenv("GITSWARM_WORKTREE_ROOT", str(tmp_path / "from-env"))
    assert worktree_root(repo, common) == (tmp_path / "from-env").resolve()
    monkeypatch.delenv("GITSWARM_WORKTREE_ROOT")
    (repo / ".gitswarm.toml").write_text('[worktrees]\nroot = ""\n')
    with pytest.raises(BadInput, match=r"worktrees\.root"):
        worktree_root(repo, common)
    (repo / ".gitswarm.toml").write_text('[worktrees]\nplace = "x"\n')
    with pytest.raises(BadInput, match="unknown key"):
        worktree_root(repo, common)


def test_worktrees_under_any_root_are_listed_but_not_the_main_tree_or_the_users_own(repo: Path, base: str, tmp_path: Path) -> None:
    old = Worktrees(repo, repo / ".git", root=legacy_root(repo / ".git"))  # where earlier versions put them
    configured = Worktrees(repo, repo / ".git", root=tmp_path / "configured")
    today = Worktrees(repo, repo / ".git")
    made = [old.prepare(JOB, "old", base, reset=False), configured.prepare(JOB, "conf", base, reset=False), today.prepare(JOB, TASK, base, reset=False)]
    git(repo, "worktree", "add", "-q", str(tmp_path / "inspect"), f"swarm/{JOB}/old~0")  # detached: not a task's
    git(repo, "branch", f"swarm/{JOB}/mine", base)
    git(repo, "worktree", "add", "-q", str(tmp_path / "mine"), f"swarm/{JOB}/mine")  # the user's, not at <job>/<task>
    listed = {entry["path"] for entry in today.listing()}
    assert listed == {str(w.path) for w in made}
    assert today.find(JOB, "old") == made[0].path and today.find(JOB, "nothing") is None


def test_a_main_working_tree_on_a_task_branch_at_a_task_like_path_is_never_listed(tmp_path: Path) -> None:
    main = tmp_path / JOB / "solo"
    main.mkdir(parents=True)
    git(main, "init", "-q", "-b", f"swarm/{JOB}/solo")
    commit_file(main, "a.txt", "a\n")
    assert Worktrees(main, main / ".git").listing() == []


# -- who a captured commit is by ------------------------------------------------------------


def _committer_after_capture(repo: Path, trees: Worktrees, base: str) -> str:
    wt = trees.prepare(JOB, TASK, base, reset=True)
    (wt.path / "new.txt").write_text("x\n")
    trees.capture(wt, "m\n", agent="codex")
    return git(wt.path, "log", "-1", "--format=%an <%ae>|%cn <%ce>").strip()


def test_the_committer_is_the_repositorys_own_identity_else_gitswarms(
    repo: Path, trees: Worktrees, base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "EMAIL"):
        monkeypatch.delenv(name, raising=False)
    git(repo, "config", "user.name", "Ada Lovelace")
    git(repo, "config", "user.email", "ada@example.com")
    assert _committer_after_capture(repo, trees, base) == "codex (via gitswarm) <gitswarm@localhost>|Ada Lovelace <ada@example.com>"
    # no identity at all (and no guessing one from the host name): gitswarm's own
    git(repo, "config", "--unset", "user.name")
    git(repo, "config", "--unset", "user.email")
    git(repo, "config", "user.useConfigOnly", "true")
    assert _committer_after_capture(repo, trees, base) == "codex (via gitswarm) <gitswarm@localhost>|gitswarm <gitswarm@localhost>"


def test_a_captured_commit_is_never_signed_with_the_users_key(repo: Path, trees: Worktrees, base: str) -> None:
    git(repo, "config", "commit.gpgSign", "true")
    git(repo, "config", "gpg.program", "false")  # signing would fail the commit
    wt = trees.prepare(JOB, TASK, base, reset=False)
    (wt.path / "new.txt").write_text("x\n")
    captured = trees.capture(wt, "# a heading, kept\n", agent="aider")
    assert git(wt.path, "log", "-1", "--format=%B", captured.head) == "# a heading, kept\n\n"


# -- drawing on the pool of clean checkouts ----------------------------------------------------


def test_prepare_adopts_an_idle_clean_checkout_and_makes_it_the_tasks(repo: Path, trees: Worktrees, base: str) -> None:
    commit_file(repo, ".gitignore", "*.log\n")
    pool = trees.checkouts
    checkout = pool.take(rev_of(repo))
    (checkout.path / "README.md").write_text("left by a check\n")
    (checkout.path / "out.log").write_text("ignored\n")
    (checkout.path / "stray.txt").write_text("untracked\n")
    pool.give_back(checkout)
    wt = trees.prepare(JOB, TASK, base, reset=False)
    assert not checkout.path.exists() and wt.path.is_dir()  # moved, not copied
    assert git(wt.path, "symbolic-ref", "HEAD").strip() == f"refs/heads/{branch_name(JOB, TASK)}"
    assert head(wt.path) == base == head(repo, f"refs/heads/{branch_name(JOB, TASK)}")
    assert git(wt.path, "status", "--porcelain", "--ignored", "--untracked-files=all") == ""
    assert sorted(p.name for p in wt.path.iterdir()) == [".git", "README.md", "code.py"]
    assert trees.listing() == [{"path": str(wt.path), "branch": wt.branch, "head": base}]
    # and the pool stocks again
    pool.stock(base)
    assert rev_of(checkout.path) == base


def test_an_untracked_include_file_and_no_change_is_no_commit(repo: Path, trees: Worktrees, base: str) -> None:
    wt = trees.prepare(JOB, TASK, base, reset=False)
    (wt.path / ".env").write_text("SECRET=1\n")  # copied in, not ignored: left out of the patch
    captured = trees.capture(wt, "m\n", leave_out=[".env"])
    assert captured.head == base and captured.files == ()


def test_a_captured_commit_moves_the_branch_with_a_reflog_entry(repo: Path, trees: Worktrees, base: str) -> None:
    wt = trees.prepare(JOB, TASK, base, reset=False)
    (wt.path / "a.txt").write_text("a\n")
    captured = trees.capture(wt, "Add a  \n\n\n\nbody   \n\n", agent="x")
    assert git(wt.path, "log", "-1", "--format=%B", captured.head) == "Add a\n\nbody\n\n"
    assert git(repo, "reflog", "-1", "--format=%gs", f"refs/heads/{wt.branch}").strip() == "commit: Add a"


def rev_of(path: Path) -> str:
    return git(path, "rev-parse", "HEAD").strip()
