"""The pool of clean checkouts on a real repository: a reused checkout is as a fresh one, or it is replaced."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gitswarm.store.checkouts import POOL_SIZE, Checkouts
from tests.conftest import commit_file, git, rev
from tests.proctools import alive, kill_quietly, wait_for


@pytest.fixture
def pool(repo: Path, tmp_path: Path) -> Checkouts:
    return Checkouts(repo, tmp_path / "root")


def fresh_listing(path: Path) -> tuple[str, str]:
    """What a fresh checkout shows: every file (ignored and untracked included) and HEAD."""
    status = git(path, "status", "--porcelain", "--ignored", "--untracked-files=all")
    files = sorted(str(p.relative_to(path)) for p in path.rglob("*") if ".git" not in p.relative_to(path).parts[:1])
    return status + "\n".join(files), rev(path)


def test_a_checkout_is_detached_at_the_commit_and_clean(repo: Path, pool: Checkouts, tmp_path: Path) -> None:
    first = rev(repo)
    checkout = pool.take(first)
    assert checkout.path == tmp_path / "root" / "checkouts" / "0"
    assert rev(checkout.path) == first and git(checkout.path, "status", "--porcelain", "--ignored") == ""
    assert subprocess.run(["git", "symbolic-ref", "-q", "HEAD"], cwd=checkout.path).returncode == 1  # detached
    pool.give_back(checkout)
    assert checkout.path.is_dir()  # kept for the next one


def test_a_checkout_given_back_is_reused_clean_at_the_next_commit(repo: Path, pool: Checkouts) -> None:
    commit_file(repo, ".gitignore", "build/\n*.log\n")
    old = rev(repo)
    new = commit_file(repo, "src/app.py", "print(1)\n")
    checkout = pool.take(old)
    path = checkout.path
    (path / "README.md").write_text("modified by a check\n")
    (path / "build").mkdir()
    (path / "build" / "out.o").write_bytes(b"\0")  # ignored output
    (path / "debug.log").write_text("ignored\n")
    (path / "stray" / "deep").mkdir(parents=True)
    (path / "stray" / "deep" / "new.txt").write_text("untracked\n")
    git(path, "init", "-q", "stray/nested")  # a repository of its own
    (path / ".gitignore").unlink()
    pool.give_back(checkout)

    again = pool.take(new)
    assert again.path == path  # reused, not made afresh
    fresh = pool.take(new)  # the first is held: another slot, a fresh checkout
    assert fresh.path != path
    assert fresh_listing(again.path) == fresh_listing(fresh.path)
    assert (again.path / "README.md").read_text() == "hello\n" and (again.path / "src" / "app.py").exists()
    pool.give_back(again)
    pool.give_back(fresh)


def test_a_checkout_whose_git_file_was_replaced_is_made_afresh(repo: Path, pool: Checkouts, tmp_path: Path) -> None:
    checkout = pool.take(rev(repo))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    git(elsewhere, "init", "-q")
    (checkout.path / ".git").unlink()
    (checkout.path / ".git").write_text(f"gitdir: {elsewhere / '.git'}\n")  # re-pointed at another repository
    pool.give_back(checkout)
    again = pool.take(rev(repo))
    assert again.path == checkout.path
    assert Path(git(again.path, "rev-parse", "--path-format=absolute", "--git-common-dir").strip()) == (repo / ".git").resolve()
    assert git(elsewhere, "status", "--porcelain") == ""  # the other repository was not touched
    pool.give_back(again)


def test_a_checkout_deleted_by_hand_is_made_again(repo: Path, pool: Checkouts) -> None:
    checkout = pool.take(rev(repo))
    pool.give_back(checkout)
    subprocess.run(["rm", "-rf", str(checkout.path)], check=True)  # git still lists it
    again = pool.take(rev(repo))
    assert again.path == checkout.path and (again.path / "README.md").exists()
    pool.give_back(again)


def test_checkouts_past_the_pool_size_are_removed_when_given_back(repo: Path, pool: Checkouts) -> None:
    taken = [pool.take(rev(repo)) for _ in range(POOL_SIZE + 1)]
    assert len({c.path for c in taken}) == POOL_SIZE + 1
    for checkout in taken:
        pool.give_back(checkout)
    assert [c.path.exists() for c in taken] == [True] * POOL_SIZE + [False]
    assert str(taken[-1].path) not in git(repo, "worktree", "list")


def test_a_checkout_held_by_another_process_is_not_taken_and_clear_keeps_it(repo: Path, pool: Checkouts, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from gitswarm.store.checkouts import Checkouts;"
            f"c = Checkouts(Path({str(repo)!r}), Path({str(tmp_path / 'root')!r})).take({rev(repo)!r});"
            f"Path({str(ready)!r}).write_text(str(c.path)); time.sleep(60)",
        ],
        env=os.environ,
    )
    try:
        for _ in range(200):
            if ready.exists():
                break
            subprocess.run(["sleep", "0.05"])
        held = Path(ready.read_text())
        mine = pool.take(rev(repo))
        assert mine.path != held
        pool.give_back(mine)
        assert pool.clear() == [str(mine.path)]
        assert held.is_dir() and not mine.path.exists()
    finally:
        holder.kill()
        holder.wait()
    # the holder died: its lock died with it, and its checkout can be taken
    assert pool.take(rev(repo)).path == held


def lock_file(tmp_path: Path, slot: int) -> Path:
    return tmp_path / "root" / "locks" / f"checkout-{slot}"


def test_the_lock_file_names_the_holder_until_the_checkout_is_given_back(repo: Path, pool: Checkouts, tmp_path: Path) -> None:
    checkout = pool.take(rev(repo))
    assert lock_file(tmp_path, checkout.slot).read_text() == f"{os.getpid()}\n"
    pool.give_back(checkout)
    assert lock_file(tmp_path, checkout.slot).read_text() == ""


def test_a_checkout_left_dirty_by_a_holder_that_died_is_cleaned_and_what_it_left_running_stopped(
    repo: Path, pool: Checkouts, tmp_path: Path,
) -> None:
    """The holder started a check (a session of its own, as run_process starts one) that goes on writing
    into the checkout, dirtied the tree, and was killed: its lock died with it, its check did not."""
    ready = tmp_path / "ready"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, time; from pathlib import Path; from gitswarm.store.checkouts import Checkouts;"
            f"c = Checkouts(Path({str(repo)!r}), Path({str(tmp_path / 'root')!r})).take({rev(repo)!r});"
            "(c.path / 'README.md').write_text('changed by a check\\n'); (c.path / 'build').mkdir();"
            "(c.path / 'build' / 'out.o').write_bytes(b'x');"
            "subprocess.Popen(['sh', '-c', 'while :; do date > stray.out; sleep 0.02; done'], cwd=c.path, start_new_session=True,"
            f" stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL); Path({str(ready)!r}).write_text(str(c.path)); time.sleep(60)",
        ],
        env=os.environ,
    )
    stray: list[int] = []
    try:
        wait_for(ready.exists, 30, "the holder to take its checkout")
        held = Path(ready.read_text())
        wait_for(lambda: (held / "stray.out").exists(), 10, "the stray to write")
        stray = working_in(held)
        assert stray
        holder.kill()
        holder.wait()

        again = pool.take(rev(repo))
        assert again.path == held  # the slot is reused, and is as a fresh checkout
        assert [pid for pid in stray if alive(pid)] == []
        time.sleep(0.2)  # a stray still running would have written again by now
        fresh = pool.take(rev(repo))
        assert fresh_listing(again.path) == fresh_listing(fresh.path)
        pool.give_back(again)
        pool.give_back(fresh)
    finally:
        holder.kill()
        holder.wait()
        kill_quietly(stray)


def working_in(path: Path) -> list[int]:
    """The pids of the processes whose working directory is `path` (what a pool taking it must stop)."""
    return [pid for pid in map(int, filter(str.isdigit, os.listdir("/proc"))) if _cwd(pid) == str(path.resolve())]


def _cwd(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None
