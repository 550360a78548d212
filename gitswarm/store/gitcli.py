"""The git CLI, for what it does better than libgit2 here: worktrees, status, diffs, transport.

Commands run with a pinned environment: no terminal prompts, no pager, no
inherited GIT_DIR/GIT_WORK_TREE, and an identity for the commits gitswarm
makes on an agent's behalf. Only store modules call it; each git operation
the engine needs is a named function of one of them (docs/architecture.md,
The git seam).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from gitswarm.store.diskspace import full
from gitswarm.store.gitrepo import GitCommandError

_DROP = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR", "GIT_PREFIX")
IDENTITY = {
    "GIT_AUTHOR_NAME": "gitswarm",
    "GIT_AUTHOR_EMAIL": "gitswarm@localhost",
    "GIT_COMMITTER_NAME": "gitswarm",
    "GIT_COMMITTER_EMAIL": "gitswarm@localhost",
}

__all__ = ["IDENTITY", "GitCommandError", "git", "git_env", "git_run", "said"]


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROP}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_PAGER="cat", PAGER="cat", LC_ALL="C")
    if extra:
        env.update(extra)
    return env


def git_version() -> str | None:
    """What `git --version` says of the git CLI on PATH; None when there is none."""
    if shutil.which("git") is None:
        return None
    return git_run(["--version"], Path.cwd()).stdout.decode(errors="replace").strip()


def git_run(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """Run `git ARGS` in `cwd` and return it whole (exit code, stdout, stderr), whatever happened."""
    return subprocess.run(["git", *args], cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, env=git_env())


def git(
    args: Sequence[str],
    cwd: Path,
    *,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
) -> bytes:
    """Run `git ARGS` in `cwd`; stdout as bytes. Raises GitCommandError when it fails and `check`."""
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True,
        env=git_env(env),
    )
    if check and done.returncode != 0:
        failure = GitCommandError(f"git {_subcommand(args)} failed: {said(done.stderr) or f'exit {done.returncode}'}")
        raise full(cwd, failure) or failure  # git said "No space left on device": a full disk, said as one
    return done.stdout


def _subcommand(args: Sequence[str]) -> str:
    """The git command `args` run (`fetch` of `-c gc.auto=0 fetch ...`), for messages."""
    rest = list(args)
    while rest and rest[0].startswith("-"):
        rest = rest[2:] if rest[0] in ("-c", "-C") else rest[1:]
    return rest[0] if rest else "git"


def said(stderr: bytes) -> str:
    """What git said went wrong: its first `fatal:` or `error:` line, else its last line
    (git's last line is often advice, such as "and the repository exists.")."""
    lines = [line.strip() for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("fatal:", "error:")):
            return line
    return lines[-1] if lines else ""
