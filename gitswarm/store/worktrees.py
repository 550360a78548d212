"""Delegation worktrees: one branch and one worktree per implement task, outside the user's tree.

    branch    refs/heads/swarm/<job>/<task>
    worktree  <root>/<job>/<task>      root: $GITSWARM_WORKTREE_ROOT, else <git-common-dir>/gitswarm/worktrees
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gitswarm.model.artifacts import FileChange
from gitswarm.model.paths import quote_path
from gitswarm.store.gitcli import IDENTITY, GitCommandError, git

BRANCH_PREFIX = "swarm/"


def branch_name(job: str, task: str) -> str:
    return f"{BRANCH_PREFIX}{job}/{task}"


@dataclass(frozen=True)
class Worktree:
    path: Path
    branch: str  # short name, e.g. swarm/<job>/<task>
    base: str


@dataclass(frozen=True)
class Capture:
    """What a worker left: the commit gitswarm made of it and the diff from the base."""

    head: str
    diff: bytes
    sha256: str
    files: tuple[FileChange, ...]


class WorktreeViolation(Exception):
    """The worker broke the rules of its worktree (switched branch, rewrote history below the base)."""


ROOT_VARIABLE = "GITSWARM_WORKTREE_ROOT"


def default_root(common_dir: Path) -> Path:
    """Where worktrees go: $GITSWARM_WORKTREE_ROOT (e.g. a fast disk), else inside the git dir."""
    configured = os.environ.get(ROOT_VARIABLE)
    return Path(configured).expanduser().resolve() if configured else common_dir / "gitswarm" / "worktrees"


class Worktrees:
    def __init__(self, repo_dir: Path, common_dir: Path, root: Path | None = None) -> None:
        self.repo_dir = repo_dir
        self.root = root or default_root(common_dir)

    def path_for(self, job: str, task: str) -> Path:
        return self.root / job / task

    def prepare(self, job: str, task: str, base: str, reset: bool) -> Worktree:
        """The task's worktree on its branch; created from `base`, or reset to it when `reset`.

        Without `reset` an existing worktree is reused as it stands (a repair
        round continues from the last commit); never silently either way.
        """
        path = self.path_for(job, task)
        branch = branch_name(job, task)
        if (path / ".git").exists():
            if reset:
                git(["checkout", "-q", "-B", branch, base], path)
                git(["reset", "-q", "--hard", base], path)
                git(["clean", "-q", "-fd"], path)
            return Worktree(path, branch, base)
        path.parent.mkdir(parents=True, exist_ok=True)
        git(["worktree", "add", "-q", "-B", branch, str(path), base], self.repo_dir)
        return Worktree(path, branch, base)

    def copy_includes(self, worktree: Worktree, source: Path) -> list[str]:
        """Copy the files listed in `.gitswarm/worktree-include` (e.g. `.env`) from the user's tree."""
        listing = source / ".gitswarm" / "worktree-include"
        if not listing.is_file():
            return []
        copied = []
        for line in listing.read_text().splitlines():
            name = line.strip()
            if not name or name.startswith("#"):
                continue
            src = (source / name).resolve()
            if not src.is_file() or not src.is_relative_to(source.resolve()):
                continue
            dest = worktree.path / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)
            copied.append(name)
        return copied

    def capture(self, worktree: Worktree, message: str, leave_out: Sequence[str] = ()) -> Capture:
        """Commit whatever the worker left (tracked changes and untracked, not ignored, files).

        `leave_out` are the include files copied in from the user's tree (say
        `.env`): they were never the agent's work and must not reach a branch.
        """
        path = worktree.path
        head_ref = git(["symbolic-ref", "-q", "HEAD"], path, check=False).decode().strip()
        if head_ref != f"refs/heads/{worktree.branch}":
            raise WorktreeViolation(f"the worker switched its worktree to {head_ref or 'a detached HEAD'}")
        if not _is_ancestor(path, worktree.base, "HEAD"):
            raise WorktreeViolation(f"the worker rewrote history below the base {worktree.base[:12]}")
        git(["add", "-A"], path)
        if leave_out:
            git(["reset", "-q", "--", *(f":(literal){name}" for name in leave_out)], path)
        if git(["status", "--porcelain"], path).strip():
            git(["commit", "-q", "--no-verify", "-m", message], path, env=IDENTITY)
        head = git(["rev-parse", "HEAD"], path).decode().strip()
        diff = git(["diff", "--binary", "--full-index", worktree.base, head], path)
        return Capture(head=head, diff=diff, sha256=hashlib.sha256(diff).hexdigest(), files=numstat(path, worktree.base, head))

    def is_clean(self, path: Path) -> bool:
        return not git(["status", "--porcelain"], path).strip()

    def listing(self) -> list[dict[str, str]]:
        """Every gitswarm worktree: path, branch and head (from `git worktree list --porcelain`)."""
        out = git(["worktree", "list", "--porcelain"], self.repo_dir).decode()
        found = []
        for block in out.strip().split("\n\n"):
            fields = dict(line.split(" ", 1) for line in block.splitlines() if " " in line)
            path = Path(fields.get("worktree", ""))
            branch = fields.get("branch", "").removeprefix("refs/heads/")
            if path.is_relative_to(self.root) and branch.startswith(BRANCH_PREFIX):
                found.append({"path": str(path), "branch": branch, "head": fields.get("HEAD", "")})
        return found

    def remove(self, path: Path) -> None:
        """Remove a worktree; refuses (GitCommandError) if it holds changes."""
        git(["worktree", "remove", str(path)], self.repo_dir)


def _is_ancestor(cwd: Path, ancestor: str, descendant: str) -> bool:
    try:
        git(["merge-base", "--is-ancestor", ancestor, descendant], cwd)
    except GitCommandError:
        return False
    return True


def numstat(cwd: Path, base: str, head: str) -> tuple[FileChange, ...]:
    """Files changed base..head with added/deleted line counts (binary files count 0).

    A path is text: a name that is not UTF-8 (or that git would escape) is
    kept in git's quoted form (model/paths.py), never as a lone surrogate
    no JSON encoder accepts.
    """
    out = git(["diff", "--numstat", "-z", "--no-renames", base, head], cwd)
    changes = []
    for record in out.split(b"\0"):
        if not record:
            continue
        added, deleted, path = record.split(b"\t", 2)
        counts = [int(count) if count != b"-" else 0 for count in (added, deleted)]
        changes.append(FileChange(path=quote_path(path), added=counts[0], deleted=counts[1]))
    return tuple(changes)
