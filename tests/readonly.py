"""A repository that really cannot be written, root included: commands run against it in a child process.

Two ways, each real, each what a user meets:
- "mount": the repository bind-mounted read-only over itself inside a private
  mount namespace (`unshare --mount`; not root, in a user namespace too) in
  which the command runs: a read-only filesystem (EROFS), as a mounted checkout
  or a CI cache is. The test process and the rest of the machine never see it.
- "chmod": `chmod -R a-w` (EACCES), as a checkout without write permission. Root
  ignores permissions, so as root the command runs without the capabilities
  that let it (`setpriv --bounding-set=-dac_override,...`).
Root tries the mount first, anyone else chmod; where neither holds, the test
is skipped and says why.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import Result

# In the namespace: mount the repository read-only over itself, then enter it (a cwd taken before the mount
# would still be the writable directory under it) and run the command.
_MOUNT_AND_RUN = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" "$1" && cd "$1" && shift && exec "$@"'
GITSWARM = [sys.executable, "-m", "gitswarm"]
_NO_OVERRIDE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner"]  # root, held to permissions


class ReadOnly:
    """`path` made read-only for the commands run through `argv`/`gitswarm`; `how` is "mount" or "chmod"."""

    def __init__(self, path: Path, how: str) -> None:
        self.path, self.how = path, how

    def argv(self, *command: str) -> list[str]:
        """COMMAND as a command line that runs in the read-only repository (its cwd)."""
        if self.how == "chmod":
            return [*_NO_OVERRIDE, *command] if os.geteuid() == 0 else list(command)
        user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
        return ["unshare", *user, "--mount", "sh", "-c", _MOUNT_AND_RUN, "sh", os.fspath(self.path), *command]

    def run(self, *command: str, stdin: str = "") -> Result:
        done = subprocess.run(self.argv(*command), cwd=self.path, input=stdin, capture_output=True, text=True, timeout=120)
        return Result(done.returncode, done.stdout, done.stderr)

    def gitswarm(self, *args: str, stdin: str = "") -> Result:
        """The real CLI (`python -m gitswarm ARGS`) in the read-only repository."""
        return self.run(*GITSWARM, *args, stdin=stdin)


def files(path: Path) -> dict[str, tuple[int, int, int]]:
    """Every file and folder under `path` (.git too) with its size, mode and mtime: the same before and
    after a command only if it wrote nothing there."""
    found = {}
    for root, dirs, names in os.walk(path):
        for name in dirs + names:
            full = os.path.join(root, name)
            info = os.lstat(full)
            found[os.path.relpath(full, path)] = (info.st_size, info.st_mode, info.st_mtime_ns)
    return found


@contextmanager
def read_only(path: Path, how: str | None = None) -> Iterator[ReadOnly]:
    """PATH made read-only ("mount" or "chmod"; by default the first that holds here, see the module) for
    the commands run through what this yields; a test with no way to make it so is skipped. Write
    permission is given back on the way out."""
    tried = []
    for way in [how] if how else (["mount", "chmod"] if os.geteuid() == 0 else ["chmod", "mount"]):
        if way == "chmod":
            _chmod(path, writable=False)
        found = ReadOnly(path, way)
        try:
            probe = found.run("sh", "-c", "! touch .git/gitswarm-probe 2>/dev/null")
        except FileNotFoundError as missing:  # no unshare, no setpriv
            probe = Result(127, "", str(missing))
        if probe.code == 0:
            try:
                yield found
            finally:
                if way == "chmod":
                    _chmod(path, writable=True)
            return
        if way == "chmod":
            _chmod(path, writable=True)
        (path / ".git" / "gitswarm-probe").unlink(missing_ok=True)
        tried.append(f"{way}: {probe.err.strip() or 'a write was not refused'}")
    pytest.skip(f"no read-only repository can be made here ({'; '.join(tried)})")


def _chmod(path: Path, writable: bool) -> None:
    """`chmod -R a-w PATH` (or give the owner write permission back)."""
    for root, dirs, names in os.walk(path):
        for name in [*dirs, *names, ""]:
            full = os.path.join(root, name) if name else root
            mode = os.lstat(full).st_mode
            if stat.S_ISLNK(mode):
                continue
            os.chmod(full, (mode | stat.S_IWUSR) if writable else (mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)))

