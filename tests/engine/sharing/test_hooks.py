"""`gitswarm hooks install|uninstall` and what the shims do, on real repositories with real git.

The shims (hooks/post-commit, hooks/pre-push) go where git runs hooks from (core.hooksPath,
relative or absolute, else .git/hooks); a hook that was there keeps running first, saved
beside as `<hook>.gitswarm-saved`; uninstall restores the directory exactly. post-commit
queues an audit of the new commit in the background; pre-push refuses verified branches
(swarm/* by default) whose head has no accepted verdict.
"""

from __future__ import annotations

import os
import re
import stat
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import cli, commit_file, git, rev, swarm_note
from tests.proctools import wait_for

MARKER = "# gitswarm hook shim"
GITSWARM = Path(sys.executable).with_name("gitswarm")  # what the installed shims call
ROOT = Path(__file__).resolve().parents[3]

OLD_POST_COMMIT = """#!/bin/sh
# the user's own post-commit hook
echo "old post-commit $(git rev-parse HEAD)" >> "{log}"
"""


# -- helpers -------------------------------------------------------------------------------


def snapshot(directory: Path) -> dict[str, tuple[bytes, int]] | None:
    """Every entry of a hooks directory: name -> (content, mode bits); None when it does not exist."""
    if not directory.exists():
        return None
    return {p.name: (p.read_bytes(), stat.S_IMODE(p.lstat().st_mode)) for p in sorted(directory.iterdir())}


def write_hook(path: Path, text: str, mode: int = 0o754) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def run_git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """git that may fail (a push a hook refuses)."""
    return subprocess.run(["git", *args], cwd=cwd, check=False, capture_output=True, text=True)


def install(repo: Path) -> dict:
    result = cli(repo, "--json", "hooks", "install")
    assert result.code == 0, result.err
    return result.json()


def uninstall(repo: Path) -> dict:
    result = cli(repo, "--json", "hooks", "uninstall")
    assert result.code == 0, result.err
    return result.json()


def jobs(repo: Path) -> list[dict]:
    result = cli(repo, "--json", "status", "--all")  # audit jobs are left out of the default listing
    assert result.code == 0, result.err
    return result.json()["jobs"]


FINISHED = {"succeeded", "failed", "cancelled"}


def settled(repo: Path, count: int) -> bool:
    """`count` jobs, all finished: the background audits are done."""
    found = jobs(repo)
    return len(found) == count and all(j["status"] in FINISHED for j in found)


def assert_shim(path: Path) -> None:
    text = path.read_text()
    assert MARKER in text.splitlines()[1], text
    assert f'GITSWARM="${{GITSWARM:-{GITSWARM}}}"' in text, "the shim does not call the gitswarm that installed it"
    mode = stat.S_IMODE(path.stat().st_mode)
    assert mode & 0o111 == 0o111 and os.access(path, os.X_OK), oct(mode)


@pytest.fixture
def quiet(repo: Path) -> Path:
    """The repo, configured so post-commit queues nothing (the tests that are not about it)."""
    commit_file(repo, ".gitswarm.toml", '[audit]\nchecks = ["true"]\n[hooks]\naudit_branches = []\n', "quiet hooks")
    return repo


def traced_gitswarm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, delay: float = 0) -> Path:
    """Point the shims at a wrapper of the real gitswarm (the shims honour $GITSWARM) that
    appends a line to the returned file when it is done, after waiting `delay` seconds
    first (a machine slow to start the background process)."""
    done = tmp_path / "gitswarm-done.txt"
    wrapper = tmp_path / "gitswarm-wrapper"
    wrapper.write_text(f'#!/bin/sh\nsleep {delay}\n"{GITSWARM}" "$@"\necho "$? $*" >> "{done}"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("GITSWARM", str(wrapper))
    return done


def done_lines(done: Path) -> list[str]:
    return done.read_text().splitlines() if done.exists() else []


# -- install / uninstall -------------------------------------------------------------------


def test_the_gitswarm_the_shims_call_exists() -> None:
    assert GITSWARM.is_file() and os.access(GITSWARM, os.X_OK)


def test_install_keeps_the_existing_hook_running_and_uninstall_restores_exactly(quiet: Path, tmp_path: Path) -> None:
    repo = quiet
    hooks = repo / ".git" / "hooks"
    log = tmp_path / "old-hook.log"
    old = OLD_POST_COMMIT.format(log=log)
    write_hook(hooks / "post-commit", old, 0o754)
    assert not (hooks / "pre-push").exists()
    before = snapshot(hooks)

    out = install(repo)
    assert Path(out["hooks_dir"]) == hooks.resolve()
    assert set(out["hooks"]) == {"post-commit", "pre-push"}
    assert "post-commit.gitswarm-saved" in out["hooks"]["post-commit"]
    assert_shim(hooks / "post-commit")
    assert_shim(hooks / "pre-push")
    saved = hooks / "post-commit.gitswarm-saved"
    assert saved.read_text() == old and stat.S_IMODE(saved.stat().st_mode) == 0o754
    assert not (hooks / "pre-push.gitswarm-saved").exists()
    installed = snapshot(hooks)
    assert set(installed) == set(before) | {"pre-push", "post-commit.gitswarm-saved"}
    assert {k: v for k, v in installed.items() if k.endswith(".sample")} == {k: v for k, v in before.items() if k.endswith(".sample")}

    # the old hook still runs, once per commit
    git(repo, "commit", "-q", "--allow-empty", "-m", "one")
    first = rev(repo)
    assert log.read_text().splitlines() == [f"old post-commit {first}"]

    # installing again changes nothing
    again = install(repo)
    assert again["hooks"] == {"post-commit": "already installed", "pre-push": "already installed"}
    assert snapshot(hooks) == installed
    git(repo, "commit", "-q", "--allow-empty", "-m", "two")
    assert log.read_text().splitlines() == [f"old post-commit {first}", f"old post-commit {rev(repo)}"]

    # uninstall: exactly what was there before (same files, content, mode; no pre-push)
    out = uninstall(repo)
    assert out["hooks"] == {"post-commit": "removed; the previous hook is back", "pre-push": "removed"}
    assert snapshot(hooks) == before
    assert uninstall(repo)["hooks"] == {"post-commit": "not ours: left alone", "pre-push": "not installed"}
    assert snapshot(hooks) == before
    git(repo, "commit", "-q", "--allow-empty", "-m", "three")
    assert len(log.read_text().splitlines()) == 3


def test_install_into_an_empty_hooks_dir_and_back(quiet: Path) -> None:
    hooks = quiet / ".git" / "hooks"
    before = snapshot(hooks)
    out = install(quiet)
    assert out["hooks"] == {"post-commit": "installed", "pre-push": "installed"}
    assert_shim(hooks / "post-commit")
    assert_shim(hooks / "pre-push")
    assert not list(hooks.glob("*.gitswarm-saved"))
    uninstall(quiet)
    assert snapshot(hooks) == before


def test_install_refuses_when_a_saved_hook_is_in_the_way(quiet: Path, tmp_path: Path) -> None:
    hooks = quiet / ".git" / "hooks"
    write_hook(hooks / "post-commit", OLD_POST_COMMIT.format(log=tmp_path / "log"))
    write_hook(hooks / "post-commit.gitswarm-saved", "#!/bin/sh\necho something else\n")
    before = snapshot(hooks)
    result = cli(quiet, "hooks", "install")
    assert result.code == 2
    assert len(result.err.strip().splitlines()) == 1 and "post-commit.gitswarm-saved" in result.err
    assert snapshot(hooks) == before, "a refused install changed the hooks directory"


def test_uninstall_leaves_a_hook_that_is_not_ours_alone(quiet: Path, tmp_path: Path) -> None:
    hooks = quiet / ".git" / "hooks"
    write_hook(hooks / "post-commit", OLD_POST_COMMIT.format(log=tmp_path / "log"))
    before = snapshot(hooks)
    assert uninstall(quiet)["hooks"]["post-commit"] == "not ours: left alone"
    assert snapshot(hooks) == before


@pytest.mark.parametrize("kind", ["relative", "absolute"])
def test_install_follows_core_hooks_path(quiet: Path, tmp_path: Path, kind: str) -> None:
    repo = quiet
    log = tmp_path / "old-hook.log"
    if kind == "relative":
        target = repo / ".githooks"
        write_hook(target / "post-commit", OLD_POST_COMMIT.format(log=log), 0o755)
        git(repo, "add", ".githooks")
        git(repo, "commit", "-qm", "shared hooks")
        commit_file(repo, "sub/file.txt", "x\n", "a subdirectory")
        git(repo, "config", "core.hooksPath", ".githooks")
        where = repo / "sub"  # run from a subdirectory: still the top's .githooks
    else:
        target = tmp_path / "shared-hooks"
        write_hook(target / "post-commit", OLD_POST_COMMIT.format(log=log), 0o755)
        git(repo, "config", "core.hooksPath", str(target))
        where = repo
    git(repo, "commit", "-q", "--allow-empty", "-m", "the old hook runs")
    assert len(log.read_text().splitlines()) == 1
    default = repo / ".git" / "hooks"
    default_before, before = snapshot(default), snapshot(target)

    result = cli(where, "--json", "hooks", "install")
    assert result.code == 0, result.err
    assert Path(result.json()["hooks_dir"]).resolve() == target.resolve()
    assert_shim(target / "post-commit")
    assert_shim(target / "pre-push")
    assert (target / "post-commit.gitswarm-saved").is_file()
    assert snapshot(default) == default_before, "installed into .git/hooks although core.hooksPath is set"
    assert not (where / ".githooks").exists() or where == repo

    # git runs the shim from there, and the shim runs the old hook
    git(repo, "commit", "-q", "--allow-empty", "-m", "through the shim")
    assert log.read_text().splitlines()[-1] == f"old post-commit {rev(repo)}"

    assert cli(where, "--json", "hooks", "uninstall").code == 0
    assert snapshot(target) == before and snapshot(default) == default_before
    if kind == "relative":
        assert git(repo, "status", "--porcelain") == ""


# -- post-commit ---------------------------------------------------------------------------


def test_a_commit_on_an_audited_branch_is_audited_in_the_background(repo: Path) -> None:
    commit_file(repo, ".gitswarm.toml", '[audit]\nchecks = ["grep -qx hello README.md"]\n', "configure the audit")
    install(repo)
    assert jobs(repo) == []
    git(repo, "commit", "-q", "--allow-empty", "-m", "to be audited")
    new = rev(repo)

    def queued():
        return [j for j in jobs(repo) if j["goal"].startswith("audit")]

    (job,) = wait_for(queued, 15, "the post-commit hook to queue an audit job")
    assert job["goal"] == f"audit {new[:12]} on main"
    verdicts = wait_for(lambda: swarm_note(repo, new), 15, f"a verdict note on {new[:12]}")
    (verdict,) = verdicts
    assert verdict["head"] == new and verdict["accepted"] is True and verdict["reviewer"] == "checks"
    wait_for(lambda: settled(repo, 1), 15, "the audit job to finish")
    assert [j["status"] for j in jobs(repo)] == ["succeeded"]
    assert rev(repo) == new and git(repo, "status", "--porcelain") == ""


@pytest.mark.parametrize("branches", ["[]", '["release/*"]'])
def test_no_audit_for_a_branch_not_configured(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, branches: str) -> None:
    commit_file(repo, ".gitswarm.toml", f'[audit]\nchecks = ["true"]\n[hooks]\naudit_branches = {branches}\n', "configure")
    install(repo)
    done = traced_gitswarm(tmp_path, monkeypatch)
    git(repo, "commit", "-q", "--allow-empty", "-m", "not audited")
    wait_for(lambda: done_lines(done), 15, "the post-commit hook's background run to end")
    assert done_lines(done) == [f"0 hooks run post-commit {rev(repo)} main"]  # the shim passes what it saw
    assert jobs(repo) == []
    assert swarm_note(repo, rev(repo)) == []


def test_quick_commits_make_one_audit_of_the_newest(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    commit_file(repo, ".gitswarm.toml", '[audit]\nchecks = ["true"]\n', "configure")
    install(repo)
    # the background runs start 1 s late (a busy machine): both commits are made before either looks
    done = traced_gitswarm(tmp_path, monkeypatch, delay=1)
    git(repo, "commit", "-q", "--allow-empty", "-m", "first")
    first = rev(repo)
    git(repo, "commit", "-q", "--allow-empty", "-m", "second")
    second = rev(repo)
    wait_for(lambda: len(done_lines(done)) == 2, 30, "both background runs to end")
    wait_for(lambda: settled(repo, 1), 15, "the audit job to finish")
    assert [j["goal"] for j in jobs(repo)] == [f"audit {second[:12]} on main"]
    assert [n["accepted"] for n in swarm_note(repo, second)] == [True]
    assert swarm_note(repo, first) == []  # the first commit's hook found the branch moved on
    assert cli(repo, "status").out.startswith("no jobs; 1 audit job of the post-commit hook not shown")


def _timed_commit(repo: Path, hooks_path: Path, message: str) -> float:
    start = time.perf_counter()
    subprocess.run(
        ["git", "-c", f"core.hooksPath={hooks_path}", "commit", "-q", "--allow-empty", "-m", message],
        cwd=repo, check=True, capture_output=True,
    )
    return time.perf_counter() - start


def test_the_post_commit_hook_adds_little_to_a_commit(repo: Path, tmp_path: Path) -> None:
    """The commit does not wait for the audit: median wall time of `git commit` with the shims
    installed vs without (no hooks at all), interleaved in the same repository. Between pairs the
    previous background audit is let finish, so each commit is timed as a person makes it (and
    the audits do not race one another)."""
    commit_file(repo, ".gitswarm.toml", '[audit]\nchecks = ["true"]\n', "audit every commit")
    installed = Path(install(repo)["hooks_dir"])
    no_hooks = tmp_path / "no-hooks"
    no_hooks.mkdir()
    audited = 0

    def measure(runs: int = 7) -> tuple[float, float]:
        nonlocal audited
        without, with_hook = [], []
        for i in range(runs):
            order = [(without, no_hooks), (with_hook, installed)]
            for times, hooks_path in order if i % 2 == 0 else reversed(order):
                times.append(_timed_commit(repo, hooks_path, f"timed {i}"))
            audited += 1
            wait_for(lambda n=audited: settled(repo, n), 30, "the background audit to finish", interval=0.05)
        print("without", [round(t * 1000) for t in without], "with", [round(t * 1000) for t in with_hook])
        return statistics.median(without), statistics.median(with_hook)

    base, hooked = measure()
    print(f"\ncommit latency (median of 7): without hook {base * 1000:.1f} ms, with hook {hooked * 1000:.1f} ms, "
          f"added {(hooked - base) * 1000:.1f} ms")
    if hooked - base >= 0.050:  # one retry for a noisy machine
        base, hooked = measure()
        print(f"retry: without hook {base * 1000:.1f} ms, with hook {hooked * 1000:.1f} ms, added {(hooked - base) * 1000:.1f} ms")
    assert hooked - base < 0.050, f"the post-commit hook adds {(hooked - base) * 1000:.1f} ms to a commit"
    assert all(j["status"] == "succeeded" for j in jobs(repo))


# -- pre-push ------------------------------------------------------------------------------


@pytest.fixture
def pushing(quiet: Path, tmp_path: Path) -> Path:
    """`quiet` with a bare remote `origin` (empty), a branch swarm/x one unaudited commit ahead
    of main, main checked out, and the shims installed."""
    repo = quiet
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "checkout", "-qb", "swarm/x")
    commit_file(repo, "WORK.md", "the swarm's work\n", "swarm work")
    git(repo, "checkout", "-q", "main")
    install(repo)
    return repo


def remote_heads(repo: Path) -> dict[str, str]:
    out = git(repo / ".." / "remote.git", "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads")
    return dict(line.split() for line in out.splitlines())


def test_pre_push_refuses_an_unverified_swarm_branch_until_it_is_audited(pushing: Path) -> None:
    repo = pushing
    head = rev(repo, "swarm/x")
    refused = run_git(repo, "push", "origin", "swarm/x")
    assert refused.returncode != 0
    assert "swarm/x" in refused.stderr and "gitswarm audit" in refused.stderr and head[:12] in refused.stderr
    assert remote_heads(repo) == {}, "the refused push reached the remote"

    audited = cli(repo, "audit", "swarm/x")
    assert audited.code == 0, audited.err
    pushed = run_git(repo, "push", "origin", "swarm/x")
    assert pushed.returncode == 0, pushed.stderr
    assert remote_heads(repo) == {"refs/heads/swarm/x": head}

    # a new commit on it has no verdict of its own: refused again
    git(repo, "checkout", "-q", "swarm/x")
    newer = commit_file(repo, "WORK.md", "more work\n", "more swarm work")
    refused = run_git(repo, "push", "origin", "swarm/x")
    assert refused.returncode != 0 and newer[:12] in refused.stderr
    assert remote_heads(repo) == {"refs/heads/swarm/x": head}

    # deleting the remote branch is not a push of unverified work
    deleted = run_git(repo, "push", "origin", ":swarm/x")
    assert deleted.returncode == 0, deleted.stderr
    assert remote_heads(repo) == {}


def test_a_persons_accepted_review_also_lets_the_branch_through(pushing: Path) -> None:
    assert run_git(pushing, "push", "origin", "swarm/x").returncode != 0
    assert cli(pushing, "review", "swarm/x", "--accept", "--note", "read it").code == 0
    pushed = run_git(pushing, "push", "origin", "swarm/x")
    assert pushed.returncode == 0, pushed.stderr


def test_a_rejected_audit_does_not_let_the_branch_through(pushing: Path) -> None:
    assert cli(pushing, "audit", "swarm/x", "--check", "false").code == 1
    refused = run_git(pushing, "push", "origin", "swarm/x")
    assert refused.returncode != 0 and "swarm/x" in refused.stderr
    assert remote_heads(pushing) == {}


def test_no_verify_bypasses_the_pre_push_check(pushing: Path) -> None:
    pushed = run_git(pushing, "push", "--no-verify", "origin", "swarm/x")
    assert pushed.returncode == 0, pushed.stderr
    assert remote_heads(pushing) == {"refs/heads/swarm/x": rev(pushing, "swarm/x")}


def test_other_branches_are_not_checked_by_default(pushing: Path) -> None:
    git(pushing, "branch", "feature")
    pushed = run_git(pushing, "push", "origin", "main", "feature")
    assert pushed.returncode == 0, pushed.stderr
    assert set(remote_heads(pushing)) == {"refs/heads/main", "refs/heads/feature"}


def test_verified_branches_star_checks_every_branch(pushing: Path) -> None:
    repo = pushing
    (repo / ".gitswarm.toml").write_text('[audit]\nchecks = ["true"]\n[hooks]\naudit_branches = []\nverified_branches = ["*"]\n')
    git(repo, "commit", "-qam", "verify every branch")
    refused = run_git(repo, "push", "origin", "main")
    assert refused.returncode != 0 and "main" in refused.stderr and "gitswarm audit" in refused.stderr
    assert remote_heads(repo) == {}
    assert cli(repo, "audit").code == 0
    pushed = run_git(repo, "push", "origin", "main")
    assert pushed.returncode == 0, pushed.stderr
    assert remote_heads(repo) == {"refs/heads/main": rev(repo)}


@pytest.mark.parametrize(
    "config",
    ['[hooks]\nverified_branches = "main"\n', "[hooks\n", '[hooks]\nverified_branches = ["main", 3]\n'],
    ids=["not-a-list", "not-toml", "not-strings"],
)
def test_a_configuration_the_quick_answer_cannot_read_goes_to_the_full_hook(pushing: Path, config: str) -> None:
    """The pre-push hook answers a push of no verified branch before importing anything heavy;
    when it cannot be sure (a configuration it cannot read), the full hook decides and says why."""
    (pushing / ".gitswarm.toml").write_text(config)
    git(pushing, "commit", "-qam", "a configuration that does not load")
    refused = run_git(pushing, "push", "origin", "main")
    assert refused.returncode != 0 and ".gitswarm.toml" in refused.stderr
    assert remote_heads(pushing) == {}


def test_a_push_of_several_branches_is_refused_as_a_whole(pushing: Path) -> None:
    git(pushing, "branch", "swarm/y", "swarm/x")
    git(pushing, "checkout", "-q", "swarm/y")
    commit_file(pushing, "Y.md", "y\n", "y work")
    git(pushing, "checkout", "-q", "main")
    assert cli(pushing, "audit", "swarm/x").code == 0
    refused = run_git(pushing, "push", "origin", "main", "swarm/x", "swarm/y")
    assert refused.returncode != 0
    assert "swarm/y" in refused.stderr and "refusing to push swarm/x" not in refused.stderr
    assert remote_heads(pushing) == {}


def test_an_existing_pre_push_hook_that_refuses_still_blocks_the_push(pushing: Path, tmp_path: Path) -> None:
    repo = pushing
    hooks = repo / ".git" / "hooks"
    uninstall(repo)
    seen = tmp_path / "old-pre-push.stdin"
    write_hook(hooks / "pre-push", f'#!/bin/sh\ncat > "{seen}"\necho "old pre-push says no" >&2\nexit 1\n', 0o755)
    before = snapshot(hooks)
    install(repo)
    assert (hooks / "pre-push.gitswarm-saved").is_file()
    assert cli(repo, "audit", "swarm/x").code == 0  # gitswarm itself would let it through

    refused = run_git(repo, "push", "origin", "swarm/x")
    assert refused.returncode != 0
    assert "old pre-push says no" in refused.stderr
    assert remote_heads(repo) == {}
    head = rev(repo, "swarm/x")
    assert seen.read_text().split() == ["refs/heads/swarm/x", head, "refs/heads/swarm/x", "0" * 40]

    assert run_git(repo, "push", "origin", "main").returncode != 0  # not a swarm branch: still the old hook's call
    assert remote_heads(repo) == {}
    uninstall(repo)
    assert snapshot(hooks) == before


@pytest.mark.parametrize("refspec", ["HEAD", "HEAD:swarm/x", "main:swarm/x"])
def test_an_unverified_commit_cannot_reach_a_remote_swarm_branch_by_another_refspec(pushing: Path, refspec: str) -> None:
    repo = pushing
    if refspec.startswith("HEAD"):
        git(repo, "checkout", "-q", "swarm/x")
    expected = rev(repo, refspec.split(":")[0])
    pushed = run_git(repo, "push", "origin", refspec)
    assert remote_heads(repo).get("refs/heads/swarm/x") != expected, "an unverified commit reached swarm/x on the remote"
    assert pushed.returncode != 0 and "gitswarm audit" in pushed.stderr


# -- the pre-commit framework's manifest ---------------------------------------------------


def test_pre_commit_hooks_manifest() -> None:
    """.pre-commit-hooks.yaml is a list of hooks; read as text (no YAML dependency)."""
    text = (ROOT / ".pre-commit-hooks.yaml").read_text()
    content = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert content[0].startswith("- "), "the manifest is not a top-level list"
    items: list[dict[str, str]] = []
    for line in content:
        match = re.fullmatch(r"(- |  )([a-z_]+):\s*(.*?)\s*", line)
        assert match, f"not a `key: value` line of a list item: {line!r}"
        if match.group(1) == "- ":
            items.append({})
        key, value = match.group(2), match.group(3)
        assert key not in items[-1], f"{key} twice"
        items[-1][key] = value
    (hook,) = [item for item in items if item.get("id") == "gitswarm-audit"]
    assert hook["entry"] == "gitswarm audit"
    assert hook["language"] == "python"
    assert hook["pass_filenames"] == "false"
    assert hook["name"]
    if "stages" in hook:
        stages = [s.strip() for s in hook["stages"].strip("[]").split(",")]
        valid = {"pre-commit", "pre-merge-commit", "pre-push", "prepare-commit-msg", "commit-msg",
                 "post-checkout", "post-commit", "post-merge", "post-rewrite", "manual"}
        assert set(stages) <= valid, stages
    # the entry is a command this gitswarm has
    helped = subprocess.run([str(GITSWARM), *hook["entry"].split()[1:], "--help"], check=False, capture_output=True, text=True)
    assert helped.returncode == 0 and "REV" in helped.stdout
