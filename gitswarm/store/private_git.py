"""A git dir of a sandboxed agent's own, in place of its worktree's, and its head brought back after.

Inside the sandbox the repository's git dir is read-only. So that the agent
can still commit in its worktree, the worktree's own git dir
(`<common>/worktrees/<name>`) is replaced, for the run, by a private one:
a full git dir whose objects directory borrows the repository's objects as
alternates, whose refs are a copy of the repository's branches, tags and
remote-tracking refs, with the worktree's HEAD, index and the repository's
config. Whatever the agent does to it (commit, branch, tag, note, hook,
config) stays there.

After the run gitswarm reads that directory as data, never running git in it
(its config is the agent's to rewrite): HEAD must still name the task's
branch; the branch's new commit and the objects it needs are copied into the
repository (`pack-objects` reading the private objects beside the
repository's, `unpack-objects --strict` writing only well-formed objects
whose links resolve), and the branch is moved by compare-and-swap. Then the
worktree's real index is brought to that commit, so capture sees what is new.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gitswarm.store.gitcli import GitCommandError, git
from gitswarm.store.reffiles import read_ref, read_refs
from gitswarm.store.worktrees import WorktreeViolation

PREFIX = "gitswarm-git-"
COPIED_REFS = ("refs/heads", "refs/tags", "refs/remotes")
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class PrivateGit:
    """The private git dir of one run (`path`), standing in for the worktree's own (`admin`)."""

    path: Path
    admin: Path  # the worktree's git dir, <common>/worktrees/<name>
    common: Path
    dotgit: Path  # the worktree's `.git` file, and what it said before the run
    dotgit_text: bytes
    ref: str | None  # the branch HEAD was on (refs/heads/...), None when detached
    head: str  # the commit HEAD was at
    refs: dict[str, str]  # its refs when made

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def make_private_git(worktree: Path) -> PrivateGit:
    """A private git dir for the linked worktree at `worktree` (a GitCommandError when it is not one).
    One git process; the refs are read from their files (store/reffiles.py)."""
    said = git(["rev-parse", "--absolute-git-dir", "--path-format=absolute", "--git-common-dir", "HEAD",
                "--symbolic-full-name", "HEAD"], worktree).decode(errors="surrogateescape").splitlines()  # a path's own bytes
    if len(said) != 4:
        raise GitCommandError(f"git rev-parse said {said!r} of {worktree}")
    admin, common, head = Path(said[0]), Path(said[1]), said[2]
    ref = said[3] if said[3].startswith("refs/") else None
    dotgit = worktree / ".git"
    if admin.resolve() == common.resolve() or dotgit.is_symlink() or not dotgit.is_file():
        raise GitCommandError(f"{worktree} is not a linked worktree: no private git dir for it")
    listed = {name: oid for prefix in COPIED_REFS for name, oid in (read_refs(common, prefix + "/") or {}).items()}
    path = Path(tempfile.mkdtemp(prefix=PREFIX))
    try:
        # As few directories as will do (git makes the others as it needs them): each costs its rmdir.
        (path / "objects" / "info").mkdir(parents=True)
        (path / "refs").mkdir()
        (path / "objects" / "info" / "alternates").write_text(f"{common / 'objects'}\n", errors="surrogateescape")
        (path / "HEAD").write_text(f"ref: {ref}\n" if ref else f"{head}\n")
        if ref:
            listed[ref] = head
        packed = "".join(f"{oid} {name}\n" for name, oid in sorted(listed.items()))
        (path / "packed-refs").write_text(packed, errors="surrogateescape")
        for source, name in ((admin / "config.worktree", "config.worktree"), (admin / "index", "index"),
                             (common / "shallow", "shallow"), (common / "info" / "exclude", "info/exclude")):
            if source.is_file():
                (path / name).parent.mkdir(exist_ok=True)
                shutil.copyfile(source, path / name)
        # The repository's config, then what makes this a git dir of its own, not a bare one, for this
        # worktree, whose hooks are its own (none: the agent's commits run no hook of the repository's, as
        # gitswarm's own commit of its work runs none). Later values win; paths as the sandbox sees them.
        config = (common / "config").read_bytes() if (common / "config").is_file() else b""
        own = f"\n[core]\n\tbare = false\n\tworktree = {_quoted(worktree)}\n\thooksPath = {_quoted(admin / 'hooks')}\n"
        (path / "config").write_bytes(config + own.encode(errors="surrogateescape"))
        return PrivateGit(path, admin, common, dotgit, dotgit.read_bytes(), ref, head, read_refs(path, "refs/") or {})
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise


def _quoted(path: Path) -> str:
    """A path as a git config value: quoted, its backslashes and quotes escaped."""
    text = os.fsdecode(path).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def bring_back(private: PrivateGit, worktree: Path) -> str:
    """Bring the private branch's head into the repository; the head the task's branch now has.

    WorktreeViolation when the agent re-pointed its worktree or switched its branch (as capture says);
    GitCommandError when its commit cannot be brought in (an object missing or malformed)."""
    if private.dotgit.is_symlink() or not private.dotgit.is_file() or private.dotgit.read_bytes() != private.dotgit_text:
        raise WorktreeViolation("the worker re-pointed its worktree at another repository (its .git file changed)")
    head_ref = _head_ref(private.path)
    if private.ref is None or head_ref != private.ref:
        raise WorktreeViolation(f"the worker switched its worktree to {head_ref or 'a detached HEAD'}")
    head = read_ref(private.path, private.ref)
    if head is None:
        raise WorktreeViolation(f"the worker left its branch {private.ref} without a commit")
    if head == private.head:
        return head
    objects = private.path / "objects"
    _plain_files(objects)
    (objects / "info" / "alternates").unlink(missing_ok=True)  # only its own objects, never others it points at
    pack = git(["pack-objects", "--revs", "--stdout", "-q"], private.common, input=f"{head}\n^{private.head}\n".encode(),
               env={"GIT_ALTERNATE_OBJECT_DIRECTORIES": str(objects)})
    git(["unpack-objects", "-q", "--strict"], private.common, input=pack)
    kind = git(["cat-file", "-t", head], private.common, check=False).decode().strip()
    if kind != "commit":
        raise GitCommandError(f"the agent's head {head[:12]} is not a commit once brought in ({kind or 'missing'})")
    git(["update-ref", "-m", "gitswarm: the agent's commits, from its sandbox", private.ref, head, private.head], private.common)
    git(["read-tree", "--reset", head], worktree)  # the index at the new head, stat data kept for unchanged files
    return head


VERBS = {"A": "added", "D": "removed", "M": "changed", "T": "changed"}


def changes(private: PrivateGit, worktree: Path) -> list[str]:
    """What the agent changed of its private git dir, read as data: HEAD, refs, what it staged."""
    found = []
    head_ref = _head_ref(private.path)
    if head_ref != private.ref:
        found.append(f"HEAD attached to {head_ref}" if head_ref else "HEAD detached")
    head = read_ref(private.path, head_ref) if head_ref else _detached(private.path)
    if head != private.head:
        found.append(f"HEAD moved to {(head or 'nothing')[:12]}")
    now = read_refs(private.path, "refs/")
    if now is None:
        found.append("its refs cannot be read")
    else:
        for name in sorted(set(now) | set(private.refs)):
            if name not in private.refs:
                found.append(f"{name} created")
            elif name not in now:
                found.append(f"{name} deleted")
            elif now[name] != private.refs[name]:
                found.append(f"{name} moved")
    index = private.path / "index"
    if index.is_file() and not index.is_symlink():
        # The agent's index, read by git as data, in the worktree whose config is the repository's.
        staged = git(["diff-index", "--cached", "--no-renames", "--name-status", "-z", private.head], worktree, check=False,
                     env={"GIT_INDEX_FILE": str(index)})
        fields = staged.decode(errors="surrogateescape").split("\0")
        found += [f"{name} {VERBS.get(code[:1], 'changed')}" for code, name in zip(fields[::2], fields[1::2], strict=False) if name]
    return found


def _detached(path: Path) -> str | None:
    try:
        text = (path / "HEAD").read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if len(text) in (40, 64) and _HEX.issuperset(text) else None


def _head_ref(path: Path) -> str | None:
    """The ref a git dir's HEAD names, read as a file; None when detached or unreadable."""
    try:
        text = (path / "HEAD").read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text[5:].strip() if text.startswith("ref: ") else None


def _plain_files(objects: Path) -> None:
    """Refuse an objects directory holding links (which would lead reads elsewhere)."""
    for directory, dirs, files in os.walk(objects):
        for name in (*dirs, *files):
            if os.path.islink(os.path.join(directory, name)):
                raise WorktreeViolation(f"the worker left a symbolic link in its object store ({name})")
