"""A repository's refs read from its files with the standard library alone.

For the read commands: when the index already holds every job at the tip its
ref points to, `status` and `show` answer from the index and need not load
libgit2 (pygit2 costs ~50 ms of imports, a third of a `status`). Only what can
be read with certainty is read: the loose refs and packed-refs of a
repository found as git finds it. Anything else (a GIT_* variable that
changes where the repository is, a bare repository, reftable, a symbolic
ref, a file system boundary on the way up, a repository another user owns)
gives None, and pygit2 decides as before.
"""

from __future__ import annotations

import os
from pathlib import Path

GIT_VARIABLES = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM",
    "GIT_OBJECT_DIRECTORY", "GIT_NAMESPACE", "GIT_REF_STORAGE",
)
_HEX = frozenset("0123456789abcdef")


def common_dir(start: Path) -> Path | None:
    """The git common dir of the repository whose work tree holds `start`, found as git does
    (the nearest `.git` directory or `gitdir:` file upwards); None when unsure."""
    if any(name in os.environ for name in GIT_VARIABLES):
        return None
    try:
        here = start.resolve()
        device = here.stat().st_dev
    except OSError:
        return None
    for directory in (here, *here.parents):
        try:
            if directory.stat().st_dev != device:
                return None
        except OSError:
            return None
        dotgit = directory / ".git"
        if dotgit.is_dir():
            git_dir: Path | None = dotgit
        elif dotgit.is_file():
            git_dir = _gitdir_of(dotgit)
        elif (directory / "HEAD").is_file() and (directory / "objects").is_dir():
            return None  # a bare repository, or inside a git dir
        else:
            continue
        if git_dir is None or not (git_dir / "HEAD").is_file() or not _owned(directory, git_dir):
            return None
        return _common_of(git_dir)
    return None


def _gitdir_of(dotgit: Path) -> Path | None:
    """The git dir a `.git` file (a linked worktree's, a submodule's) points to."""
    try:
        text = dotgit.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("gitdir:"):
        return None
    return (dotgit.parent / text.removeprefix("gitdir:").strip()).resolve()


def _owned(*paths: Path) -> bool:
    """libgit2, as git, refuses a repository the current user does not own (safe.directory)."""
    try:
        return all(path.stat().st_uid == os.geteuid() for path in paths)
    except OSError:
        return False


def _common_of(git_dir: Path) -> Path | None:
    commondir = git_dir / "commondir"
    try:
        return (git_dir / commondir.read_text().strip()).resolve() if commondir.exists() else git_dir.resolve()
    except (OSError, UnicodeDecodeError):
        return None


def read_refs(common: Path, prefix: str) -> dict[str, str] | None:
    """{ref name: object id} of the refs under `prefix` (e.g. `refs/swarm/jobs/`), loose ones over
    packed ones; None when the refs are not plain files (reftable) or one does not read as an id."""
    if (common / "reftable").exists():
        return None
    found: dict[str, str] = {}
    try:
        packed = (common / "packed-refs").read_text()
    except FileNotFoundError:
        packed = ""
    except (OSError, UnicodeDecodeError):
        return None
    for line in packed.splitlines():
        if not line or line[0] in "#^":
            continue
        oid, _, name = line.partition(" ")
        if name.startswith(prefix):
            found[name] = oid
    loose = _loose(common, common / prefix)
    if loose is None:
        return None
    found.update(loose)
    return found if all(len(oid) in (40, 64) and _HEX.issuperset(oid) for oid in found.values()) else None


def read_ref(common: Path, name: str) -> str | None:
    """The object id of the one ref `name` (e.g. `refs/swarm/jobs/<id>`), loose over packed; None when
    it does not exist or cannot be read as plain files (reftable, a symbolic ref, an unreadable file)."""
    if (common / "reftable").exists():
        return None
    try:
        text = (common / name).read_text().strip()
    except FileNotFoundError:
        found = read_refs(common, name)  # only a packed one, if any (the prefix is the whole name)
        text = found.get(name, "") if found is not None else ""
    except (OSError, UnicodeDecodeError):  # a folder of that name, unreadable, not text
        return None
    return text if len(text) in (40, 64) and _HEX.issuperset(text) else None


def _loose(common: Path, directory: Path) -> dict[str, str] | None:
    found: dict[str, str] = {}
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return found
    except OSError:
        return None
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            below = _loose(common, Path(entry.path))
            if below is None:
                return None
            found.update(below)
        elif not entry.name.endswith(".lock"):  # a ref being written: the name is not a ref
            try:
                text = Path(entry.path).read_text().strip()
            except FileNotFoundError:
                continue  # deleted meanwhile (packed, or the ref removed)
            except (OSError, UnicodeDecodeError):
                return None
            if text.startswith("ref:"):
                return None
            found[Path(entry.path).relative_to(common).as_posix()] = text
    return found
