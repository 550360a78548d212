"""Clean detached checkouts, kept in a small pool: for checks, merge rechecks and read-only analyze tasks.

A fresh `git worktree add` writes every file of the tree: seconds for 10,000
files on a slow disk, and as long again to delete them. A checkout given
back is reused for the next commit instead: `git checkout -f --detach`
rewrites only the files that differ, `git clean -ffdx` drops whatever the
last user left (ignored files and nested repositories too), and it is handed
out only when `git status --ignored --untracked-files=all` then lists
nothing and HEAD is the commit: what a fresh checkout would show. A checkout
that fails any of it (its directory gone, its `.git` re-pointed at another
repository, a file that does not go away) is removed and made afresh.

    <root>/checkouts/<n>          a checkout, n = 0, 1, ...
    <root>/locks/checkout-<n>     its flock, held while in use (the kernel drops it when the holder dies);
                                  the file names the holder's pid until it gives the checkout back

A holder that dies holding a checkout (killed with -9, say) leaves its pid
in the lock file, and may leave what it started running there: a check in a
session of its own, still writing into the tree. The next process to take
the slot finds the pid of a holder that never gave it back and first kills
every process still working in the checkout (on Linux, each whose working
directory is in it, with its process group), then cleans and checks it as
any kept checkout; a check's result depends on the head alone, never on what
ran there before.

At most POOL_SIZE checkouts are kept; one numbered past them is removed when
it is given back. `worktrees gc` removes the idle ones.

A delegation also draws its task worktree from the pool (`adopt`: the
checkout is moved into place and put on the task's branch), and stocks the
pool again while its agent runs (`stock`, in a thread): the fresh checkout
a delegation needs is then made during the agent's minutes, not before or
after them.
"""

from __future__ import annotations

import fcntl
import math
import os
import shutil
import signal
import time
from pathlib import Path

import msgspec

from gitswarm.model.errors import GitswarmError
from gitswarm.store.gitcli import GitCommandError, git

POOL_SIZE = 2  # checkouts kept for reuse; each is a full copy of the tree
MAX_CHECKOUTS = 256  # in use at once; a bound, not a target
STRAYS_GONE_SECONDS = 2.0  # how long the processes a dead holder left in its checkout get to die of SIGKILL
CHECKOUTS_DIR = "checkouts"
LOCKS_DIR = "locks"


class PoolExhausted(GitswarmError):
    """Every slot of the pool is held."""


class Checkout(msgspec.Struct, frozen=True):
    path: Path
    commit: str
    slot: int
    lock: int  # the open, flocked file descriptor of its lock file


# The git common dir of each repository directory, asked of git once per process.
_common_dirs: dict[Path, Path] = {}


class Checkouts:
    """The pool of one worktree root."""

    def __init__(self, repo_dir: Path, root: Path) -> None:
        self.repo_dir = repo_dir
        self.directory = root / CHECKOUTS_DIR
        self.locks = root / LOCKS_DIR

    def take(self, commit: str, settle: bool = False) -> Checkout:
        """A clean detached checkout of `commit`, held by this process until given back (or discarded).
        `settle`: one made afresh is made cheap to use (up to a second later; see _settle)."""
        for slot in range(MAX_CHECKOUTS):
            lock = self._lock(slot)
            if lock is None:
                continue
            path = self.directory / str(slot)
            try:
                if not self._reset(path, commit):
                    self._remove(path)
                    self.directory.mkdir(parents=True, exist_ok=True)
                    # --force: a slot whose directory was deleted by hand is still registered with git
                    git(["worktree", "add", "-q", "--force", "--detach", str(path), commit], self.repo_dir)
                    if settle:
                        _settle(path)
            except BaseException:
                _unlock(lock)
                raise
            return Checkout(path, commit, slot, lock)
        raise PoolExhausted(f"all {MAX_CHECKOUTS} clean checkouts under {self.directory} are in use")

    def give_back(self, checkout: Checkout) -> None:
        """Done with it: kept for the next taker (cleaned then), or removed when past the pool's size."""
        try:
            if checkout.slot >= POOL_SIZE:
                self._remove(checkout.path)
        finally:
            _unlock(checkout.lock)

    def stock(self, commit: str) -> None:
        """Make sure an idle checkout is ready (made afresh only when none is), brought to `commit`."""
        self.give_back(self.take(commit, settle=True))

    def adopt(self, dest: Path, branch: str, base: str) -> bool:
        """Move an idle checkout to `dest` as a worktree on `branch`, (re)set to `base` and clean; False (nothing
        moved) when there is no idle one to move, or it will not come clean."""
        for slot in range(POOL_SIZE):
            path = self.directory / str(slot)
            if not (path / ".git").is_file():
                continue
            lock = self._lock(slot)
            if lock is None:
                continue
            try:
                if not self._ours(path):
                    continue
                dest.parent.mkdir(parents=True, exist_ok=True)
                try:
                    git(["worktree", "move", str(path), str(dest)], self.repo_dir)  # refused with submodules in it
                except GitCommandError:
                    continue
                try:
                    git(["checkout", "-q", "-f", "-B", branch, base], dest)
                    git(["clean", "-q", "-ffdx"], dest)
                    clean = not git(["status", "--porcelain", "-z", "--ignored", "--untracked-files=all"], dest)
                except GitCommandError:
                    clean = False
                if clean:
                    return True
                self._remove(dest)
                return False
            finally:
                _unlock(lock)
        return False

    def discard(self, checkout: Checkout) -> None:
        """Done with it, and it is not to be reused: removed."""
        try:
            self._remove(checkout.path)
        finally:
            _unlock(checkout.lock)

    def clear(self) -> list[str]:
        """Remove every checkout no process holds; their paths."""
        removed = []
        for path in sorted(self.directory.iterdir()) if self.directory.is_dir() else []:
            if not path.name.isdigit():
                continue
            lock = self._lock(int(path.name))
            if lock is None:
                continue
            try:
                self._remove(path)
                removed.append(str(path))
            finally:
                _unlock(lock)
        return removed

    def _lock(self, slot: int) -> int | None:
        """The slot's lock, taken without waiting; None when another process holds it. The lock file then
        names this process. When it named another, that holder died holding the slot: what it left
        running in the checkout is killed first (stop_strays)."""
        self.locks.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.locks / f"checkout-{slot}", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        try:
            if os.pread(fd, 32, 0).strip():  # given back, the file is empty: a holder's pid is a dead holder's
                stop_strays(self.directory / str(slot))
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _reset(self, path: Path, commit: str) -> bool:
        """Bring a kept checkout to `commit`, clean; False when it is not one (any more) or will not come clean."""
        if not (path / ".git").is_file() or not self._ours(path):
            return False
        try:
            git(["checkout", "-q", "-f", "--detach", commit], path)
            git(["clean", "-q", "-ffdx"], path)
            status = git(["status", "--porcelain", "-z", "--ignored", "--untracked-files=all"], path)
            head = git(["rev-parse", "HEAD"], path).decode().strip()
        except GitCommandError:
            return False
        return not status and head == commit

    def _ours(self, path: Path) -> bool:
        """Whether `path` is the top of a worktree of this repository (its `.git` not re-pointed elsewhere)."""
        where = git(["rev-parse", "--path-format=absolute", "--git-common-dir", "--show-toplevel"], path, check=False)
        found = [Path(line).resolve() for line in os.fsdecode(where).splitlines()[:2]]
        return found == [self.common_dir(), path.resolve()]

    def common_dir(self) -> Path:
        key = self.repo_dir.resolve()
        if key not in _common_dirs:
            out = git(["rev-parse", "--path-format=absolute", "--git-common-dir"], self.repo_dir)
            _common_dirs[key] = Path(os.fsdecode(out.strip())).resolve()  # a path: its own bytes, UTF-8 or not
        return _common_dirs[key]

    def _remove(self, path: Path) -> None:
        if not os.path.lexists(path):
            return
        git(["worktree", "remove", "--force", "--force", str(path)], self.repo_dir, check=False)
        if os.path.lexists(path):
            if path.is_symlink() or not path.is_dir():
                path.unlink()
            else:
                shutil.rmtree(path, ignore_errors=True)
        git(["worktree", "prune"], self.repo_dir, check=False)


def _unlock(fd: int) -> None:
    """Give a slot's lock back: the file names no holder any more, and the flock is released."""
    try:
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)


def stop_strays(path: Path) -> list[int]:
    """SIGKILL every process working in `path` (its working directory there) with its process group, and
    wait for them to die; their pids. On Linux (read from /proc); elsewhere none are found."""
    top = os.path.realpath(path)
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    found = []
    for name in entries:
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            cwd = os.readlink(f"/proc/{name}/cwd")
        except OSError:  # gone, or not ours to read
            continue
        if cwd == top or cwd.startswith(top + os.sep):
            found.append(int(name))
    own = os.getpgrp()
    for pid in found:
        try:
            group = os.getpgid(pid)
            if group == own:
                os.kill(pid, signal.SIGKILL)
            else:
                os.killpg(group, signal.SIGKILL)  # a check leads its own session: its children go with it
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + STRAYS_GONE_SECONDS
    while any(_running(pid) for pid in found) and time.monotonic() < deadline:
        time.sleep(0.01)
    return found


def _running(pid: int) -> bool:
    """Whether `pid` is a process that still runs (a zombie, dead and not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return False


def _settle(path: Path) -> None:
    """Make a fresh checkout cheap to check out and scan again.

    Git keeps file times in its index to whole seconds: every file written in
    the second the index was written is "racily clean", and each later
    `checkout` or `status` reads them all again (~130 ms per 10,000 files)
    until the index is written in a later second. So: wait for the next
    second, refresh (which writes the index), and `write-tree` (which stores
    the cache tree that lets `checkout -f` skip unchanged directories).
    """
    now = time.time()
    time.sleep(math.floor(now) + 1.01 - now)
    git(["update-index", "-q", "--refresh"], path)
    git(["write-tree"], path)
