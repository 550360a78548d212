"""Delegation worktrees: one branch and one worktree per implement task, outside the user's tree.

    branch    refs/heads/swarm/<job>/<task>
    worktree  <root>/<job>/<task>
    root      $GITSWARM_WORKTREE_ROOT, else `[worktrees] root` of .gitswarm.toml (engine/config.py),
              else $XDG_STATE_HOME/gitswarm/worktrees/<repo-key> (~/.local/state/... by default)

The default root is outside the git dir: agent CLIs (Claude Code) treat every
path under `.git/` as sensitive and refuse to edit there. Worktrees made under
an earlier root (`<git-common-dir>/gitswarm/worktrees`, or one configured
since) are still found: a task's worktree is known by its branch and its
`<job>/<task>` place, wherever its root is.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import msgspec

from gitswarm.model.artifacts import FileChange
from gitswarm.model.errors import BadInput
from gitswarm.model.paths import quote_path
from gitswarm.store.checkouts import Checkouts
from gitswarm.store.diffs import binary_diff, numstat
from gitswarm.store.gitcli import IDENTITY, GitCommandError, git, git_run, said
from gitswarm.store.workspace import is_clean

BRANCH_PREFIX = "swarm/"
INCLUDE_LISTING = ".gitswarm/worktree-include"
LEGACY_ROOT = ("gitswarm", "worktrees")  # the default root under <git-common-dir> until worktrees moved out of it
GITLINK = b"160000"
AGENT_SUFFIX = "(via gitswarm)"  # an agent's author name: "claude-code (via gitswarm)"
AGENT_EMAIL = "gitswarm@localhost"


def branch_name(job: str, task: str) -> str:
    return f"{BRANCH_PREFIX}{job}/{task}"


class Worktree(msgspec.Struct, frozen=True):
    path: Path
    branch: str  # short name, e.g. swarm/<job>/<task>
    base: str


class Capture(msgspec.Struct, frozen=True):
    """What a worker left: the commit gitswarm made of it and the diff from the base."""

    head: str
    diff: bytes
    sha256: str
    files: tuple[FileChange, ...]


class WorktreeViolation(Exception):
    """The worker broke the rules of its worktree: switched branch, rewrote history below the base,
    re-pointed the worktree at another repository, or left a git repository inside it."""


ROOT_VARIABLE = "GITSWARM_WORKTREE_ROOT"
KEY_NAME_CHARS = 32  # of the repository's name in its key


def default_root(common_dir: Path, configured: str | None = None, relative_to: Path | None = None) -> Path:
    """Where worktrees go: $GITSWARM_WORKTREE_ROOT (e.g. a fast disk), else `configured` (the
    `[worktrees] root` key; a relative path is taken from `relative_to`, the repository's top),
    else the per-user state directory, one root per repository."""
    variable = os.environ.get(ROOT_VARIABLE)
    if variable:
        return Path(variable).expanduser().resolve()
    if configured:
        return ((relative_to or common_dir) / Path(configured).expanduser()).resolve()
    return (state_home() / "gitswarm" / "worktrees" / repo_key(common_dir)).resolve()


def legacy_root(common_dir: Path) -> Path:
    """The default root of earlier versions, inside the git dir: its worktrees are still listed and gc'd."""
    return common_dir.joinpath(*LEGACY_ROOT)


def state_home() -> Path:
    """$XDG_STATE_HOME when it is an absolute path (the XDG spec ignores a relative one), else ~/.local/state."""
    configured = os.environ.get("XDG_STATE_HOME", "")
    return Path(configured) if os.path.isabs(configured) else Path.home() / ".local" / "state"


def repo_key(common_dir: Path) -> str:
    """A readable name unique to the repository: `<name>-<12 hex of sha256 of its common dir's real path>`.

    The common dir, so that every linked worktree of a repository shares one
    root; the name is the directory holding `.git` (or a bare repository's
    own, without `.git`), reduced to characters safe in a path.
    """
    real = Path(os.path.realpath(common_dir))
    name = real.parent.name if real.name == ".git" else real.name.removesuffix(".git")
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in name)[:KEY_NAME_CHARS].lstrip(".")
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:12]
    return f"{safe or 'repo'}-{digest}"


def include_names(repo_dir: Path) -> list[str]:
    """The paths `.gitswarm/worktree-include` lists (one a line; blank lines and `#` comments skipped)."""
    listing = repo_dir / INCLUDE_LISTING
    if not listing.is_file():
        return []
    try:
        text = listing.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"cannot read {INCLUDE_LISTING}: {getattr(exc, 'strerror', None) or exc}") from None
    return [name for name in (line.strip() for line in text.splitlines()) if name and not name.startswith("#")]


def check_includes(repo_dir: Path | None, base: str) -> None:
    """Refuse an include listing that names a file tracked at `base`.

    Include files are copied from the user's tree and left out of the
    patch: the agent's changes to a tracked file of that name would be
    dropped without a word.
    """
    names = include_names(repo_dir) if repo_dir is not None else []
    if repo_dir is None or not names:
        return
    tracked = _tracked(repo_dir, base, names)
    if tracked:
        listed = ", ".join(tracked)
        raise BadInput(
            f"{INCLUDE_LISTING} lists {listed}, tracked at {base[:12]}: include files are left out of patches, "
            "so an agent's changes to it would be lost; remove it from the listing"
        )


class Worktrees:
    def __init__(self, repo_dir: Path, common_dir: Path, root: Path | None = None) -> None:
        self.repo_dir = repo_dir
        self.common_dir = common_dir
        self.root = root or default_root(common_dir)

    @property
    def checkouts(self) -> Checkouts:
        """The pool of clean checkouts under this root (store/checkouts.py)."""
        return Checkouts(self.repo_dir, self.root)

    def path_for(self, job: str, task: str) -> Path:
        return self.root / job / task

    def prepare(self, job: str, task: str, base: str, reset: bool, start: str | None = None) -> Worktree:
        """The task's worktree on its branch; created from `start` (by default `base`), or reset to it when `reset`.

        Without `reset` an existing worktree is reused as it stands (a repair
        round continues from the last commit); never silently either way. A
        follow-up starts from the head it continues, a descendant of `base`:
        its patch is still taken from `base`.
        """
        path = self.path_for(job, task)
        branch = branch_name(job, task)
        start = start or base
        if (path / ".git").exists():
            if reset:
                # -f: the index and tracked files become `start`'s, as `reset --hard` would make them (one tree walk, not two)
                git(["checkout", "-q", "-f", "-B", branch, start], path)
                git(["clean", "-q", "-fd"], path)
            return Worktree(path, branch, base)
        if not self.checkouts.adopt(path, branch, start):  # an idle clean checkout moved into place, else a fresh one
            path.parent.mkdir(parents=True, exist_ok=True)
            git(["worktree", "add", "-q", "-B", branch, str(path), start], self.repo_dir)
        return Worktree(path, branch, base)

    def copy_includes(self, worktree: Worktree, source: Path) -> list[str]:
        """Copy the files listed in `.gitswarm/worktree-include` (e.g. `.env`) from the user's tree.

        A name tracked at the base is not copied (submit refuses such a
        listing; this covers one changed since): the base has the file, and
        the agent's changes to it belong in the patch.
        """
        names = include_names(source)
        tracked = set(_tracked(worktree.path, worktree.base, names)) if names else set()
        copied = []
        for name in names:
            if name in tracked:
                continue
            src = (source / name).resolve()
            if not src.is_file() or not src.is_relative_to(source.resolve()):
                continue
            dest = worktree.path / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)
            copied.append(name)
        return copied

    def capture(self, worktree: Worktree, message: str, leave_out: Sequence[str] = (), agent: str = "gitswarm") -> Capture:
        """Commit whatever the worker left (tracked changes and untracked, not ignored, files).

        `leave_out` are the include files copied in from the user's tree (say
        `.env`): they were never the agent's work and must not reach a branch.
        The commit is authored by the agent and committed by the user
        (commit_identity); it is never signed (commit.gpgSign off): the
        user's key does not vouch for an agent's work.
        """
        path = worktree.path
        common = os.fsdecode(git(["rev-parse", "--path-format=absolute", "--git-common-dir"], path, check=False).strip())
        if not common or Path(common).resolve() != self.common_dir.resolve():
            raise WorktreeViolation(f"the worker re-pointed its worktree at another repository ({common or 'none'})")
        head_ref = git(["symbolic-ref", "-q", "HEAD"], path, check=False).decode().strip()
        if head_ref != f"refs/heads/{worktree.branch}":
            raise WorktreeViolation(f"the worker switched its worktree to {head_ref or 'a detached HEAD'}")
        if not _is_ancestor(path, worktree.base, "HEAD"):
            raise WorktreeViolation(f"the worker rewrote history below the base {worktree.base[:12]}")
        nested = _nested_repositories(path)
        if nested:
            raise WorktreeViolation(f"a git repository inside the worktree at {nested} (git init or clone): it cannot be part of a patch")
        git(["add", "-A"], path)
        if leave_out:
            git(["reset", "-q", "--", *(f":(literal){name}" for name in leave_out)], path)
        dangling = _dangling_gitlinks(path, worktree.base)
        if dangling:
            raise WorktreeViolation(f"a gitlink (submodule commit) without a .gitmodules entry at {dangling}: it cannot be part of a patch")
        head = git(["rev-parse", "HEAD"], path).decode().strip()
        if _staged(path):
            head = self._commit(worktree, head, message, agent)
        diff = binary_diff(path, worktree.base, head, full_index=True)
        return Capture(head=head, diff=diff, sha256=hashlib.sha256(diff).hexdigest(), files=numstat(path, worktree.base, head))

    def _commit(self, worktree: Worktree, parent: str, message: str, agent: str) -> str:
        """Commit the index on the task's branch: plumbing (`write-tree`, `commit-tree`, a CAS of the branch),
        which neither refreshes the index again nor runs hooks; never signed. The new head."""
        path = worktree.path
        tree = git(["write-tree"], path).decode().strip()
        text = cleanup_message(message)
        commit = ["-c", "commit.gpgSign=false", "commit-tree", "--no-gpg-sign", tree, "-p", parent, "-F", "-"]
        head = git(commit, path, input=text.encode(), env=commit_identity(path, agent)).decode().strip()
        subject = text.partition("\n")[0]
        git(["update-ref", "-m", f"commit: {subject}", f"refs/heads/{worktree.branch}", head, parent], path)
        return head

    def is_clean(self, path: Path) -> bool:
        """Whether the worktree at `path` holds no uncommitted work (untracked files count)."""
        return is_clean(path)

    def listing(self) -> list[dict[str, str]]:
        """Every task worktree: path, branch and head (from `git worktree list --porcelain`).

        A task's worktree is on its branch `swarm/<job>/<task>` at a path
        ending in `<job>/<task>`, under whichever root it was made (today's,
        the old one inside the git dir, one configured since). The main
        working tree never is, nor a worktree the user made of such a branch
        elsewhere, nor one whose directory is gone (`git worktree prune`
        drops those).
        """
        found = []
        for entry in self.every():
            branch = entry["branch"]
            job, _, task = branch.removeprefix(BRANCH_PREFIX).partition("/")
            path = Path(entry["path"])
            if branch.startswith(BRANCH_PREFIX) and task and (path.parent.name, path.name) == (job, task) and path.is_dir():
                found.append(entry)
        return found

    def every(self, main: bool = False) -> list[dict[str, str]]:
        """Every linked worktree of the repository (and the main working tree first, with `main`): path, branch
        (short, "" when detached) and head."""
        return linked_worktrees(self.repo_dir, main)

    def find(self, job: str, task: str) -> Path | None:
        """The task's worktree: the one on its branch at a `<job>/<task>` place, else the one at
        `<root>/<job>/<task>` under today's root or the old one, whatever it has checked out (a worker that
        switched branch left it there); None when there is none."""
        branch = branch_name(job, task)
        places = {self.path_for(job, task).resolve(), (legacy_root(self.common_dir) / job / task).resolve()}
        for entry in self.every():
            path = Path(entry["path"])
            if (entry["branch"] == branch and (path.parent.name, path.name) == (job, task)) or path.resolve() in places:
                return path
        return None

    def remove(self, path: Path, force: bool = False) -> None:
        """Remove a worktree; refuses (GitCommandError) if it holds changes, unless `force` (they are lost)."""
        git(["worktree", "remove", *(["--force", "--force"] if force else []), str(path)], self.repo_dir)

    def prune(self) -> None:
        """Forget the worktrees whose directory is gone (`git worktree prune`); never fails."""
        git(["worktree", "prune"], self.repo_dir, check=False)


def linked_worktrees(repo_dir: Path, main: bool = False) -> list[dict[str, str]]:
    """Every linked worktree of the repository (and the main working tree first, with `main`): path, branch
    (short, "" when detached) and head, from `git worktree list --porcelain`."""
    out = git(["worktree", "list", "--porcelain"], repo_dir).decode(errors="surrogateescape")
    found = []
    for block in out.strip().split("\n\n")[0 if main else 1 :]:
        fields = dict(line.split(" ", 1) for line in block.splitlines() if " " in line)
        branch = fields.get("branch", "").removeprefix("refs/heads/")
        found.append({"path": fields.get("worktree", ""), "branch": branch, "head": fields.get("HEAD", "")})
    return found


def worktree_of_branch(repo_dir: Path, ref: str) -> Path | None:
    """The working tree (the main one included) that has the branch `ref` (a full name) checked out, if any."""
    for entry in linked_worktrees(repo_dir, main=True):
        if entry["branch"] and f"refs/heads/{entry['branch']}" == ref:
            return Path(entry["path"])
    return None


def cleanup_message(message: str) -> str:
    """A commit message as `git commit --cleanup=whitespace` leaves it: trailing spaces and leading,
    trailing and repeated blank lines gone, one final newline; `#` lines kept."""
    lines: list[str] = []
    for line in message.splitlines():
        line = line.rstrip()
        if line or (lines and lines[-1]):
            lines.append(line)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"


def commit_identity(cwd: Path, agent: str) -> dict[str, str]:
    """Who a captured commit is by: `<agent> (via gitswarm) <gitswarm@localhost>` as its author, and as
    its committer the user, as git knows them here (`git var GIT_COMMITTER_IDENT`: user.name and
    user.email, GIT_COMMITTER_*, what git would itself commit with); gitswarm's own identity only
    when git has none."""
    name, email = IDENTITY["GIT_COMMITTER_NAME"], IDENTITY["GIT_COMMITTER_EMAIL"]
    ident = git(["var", "GIT_COMMITTER_IDENT"], cwd, check=False).decode(errors="replace").strip()
    who = ident.rsplit(" ", 2)[0] if ident.count(" ") >= 2 else ""  # "Name <email> <time> <zone>"
    user, _, address = who.partition(" <")
    if user.strip() and address.endswith(">") and len(address) > 1:
        name, email = user.strip(), address[:-1]
    return {
        "GIT_AUTHOR_NAME": f"{agent} {AGENT_SUFFIX}",
        "GIT_AUTHOR_EMAIL": AGENT_EMAIL,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


def _staged(cwd: Path) -> bool:
    """Whether the index differs from HEAD (`diff-index --quiet`: no scan of the working tree)."""
    done = git_run(["diff-index", "--cached", "--quiet", "HEAD", "--"], cwd)
    if done.returncode not in (0, 1):
        raise GitCommandError(f"git diff-index failed: {said(done.stderr) or f'exit {done.returncode}'}")
    return done.returncode == 1


def _is_ancestor(cwd: Path, ancestor: str, descendant: str) -> bool:
    try:
        git(["merge-base", "--is-ancestor", ancestor, descendant], cwd)
    except GitCommandError:
        return False
    return True


def _tracked(cwd: Path, commit: str, names: Sequence[str]) -> list[str]:
    """The names that are files (or symlinks, or gitlinks) in `commit`; names outside the tree are none."""
    inside = [name for name in names if not os.path.isabs(name) and ".." not in Path(name).parts]
    if not inside:
        return []
    out = git(["ls-tree", "-r", "-z", "--name-only", commit, "--", *(f":(literal){name}" for name in inside)], cwd)
    found = set(out.split(b"\0"))
    return [name for name in names if os.fsencode(name) in found]


def _nested_repositories(path: Path) -> str | None:
    """The directories under `path` that git sees as repositories of their own (untracked, not
    ignored), the first three for a message; None when there are none.

    `git ls-files --others` lists each untracked file, and a nested
    repository as its directory with a trailing slash. `git add -A` would
    fail on one with no commit and make a dangling gitlink of the others.
    """
    out = git(["ls-files", "-z", "--others", "--exclude-standard"], path)
    nested = [entry for entry in out.split(b"\0") if entry.endswith(b"/")]
    return ", ".join(quote_path(entry.rstrip(b"/")) for entry in nested[:3]) if nested else None


def _dangling_gitlinks(path: Path, base: str) -> str | None:
    """Gitlinks staged or committed since `base` that `.gitmodules` does not declare (a worker that
    wrote one into the index itself), the first three for a message; None when there are none."""
    out = git(["diff-index", "--cached", "-z", "--no-renames", base], path)
    fields = out.split(b"\0")
    links = [fields[i + 1] for i in range(0, len(fields) - 1, 2) if fields[i].split(b" ")[1:2] == [GITLINK]]
    if not links:
        return None
    declared = git(["config", "-z", "--blob", ":.gitmodules", "--get-regexp", r"^submodule\..*\.path$"], path, check=False)
    paths = {entry.partition(b"\n")[2] for entry in declared.split(b"\0")}
    dangling = [link for link in links if link not in paths]
    return ", ".join(quote_path(link) for link in dangling[:3]) if dangling else None
