"""What git's configuration says for a repository: where its hooks run from, who its author is."""

from __future__ import annotations

import os
from pathlib import Path

from gitswarm.store.gitcli import git
from gitswarm.store.gitrepo import GitCommandError


def git_path(repo_dir: Path, name: str) -> Path:
    """Where git keeps `name` for the working tree at `repo_dir` (`git rev-parse --git-path`): `hooks`
    follows core.hooksPath, say. Always absolute."""
    path = Path(os.fsdecode(git(["rev-parse", "--git-path", name], repo_dir).strip()))  # its own bytes, UTF-8 or not
    return path if path.is_absolute() else (repo_dir / path).resolve()


def author_ident(repo_dir: Path) -> str:
    """Who git would write as a commit's author here (`git var GIT_AUTHOR_IDENT`):
    `Name <email> <time> <zone>`, "" when git says nothing; GitCommandError when it has no identity."""
    return git(["var", "GIT_AUTHOR_IDENT"], repo_dir).decode().strip()


def person(repo_dir: Path) -> str:
    """The person at this clone, as recorded on what they approve: `Name <email>` from git's author
    identity, else the login name."""
    try:
        ident = author_ident(repo_dir)
    except GitCommandError:
        ident = ""
    if ident:
        return ident.rsplit(" ", 2)[0]
    import getpass  # deferred: only a repository with no author identity gets here

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name for this uid (a container)
        return "unknown"
