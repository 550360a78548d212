"""What a delegated worker must not touch: a snapshot before its agent runs, compared after.

An agent runs as the user and nothing stops it writing outside its
worktree, so gitswarm looks at everything it could reach:

- the user's working tree: every path `git status` lists (untracked and
  ignored files included: `.env`, `node_modules/`), with its stat;
- the repository's refs and the user's HEAD, except what gitswarm itself
  writes from other workers at the same time: `refs/swarm/*`,
  `refs/notes/swarm`, the shadow refs of a pull, and the task branches
  `refs/heads/swarm/<job>/<task>` of jobs that exist;
- the git dir's config, hooks, info/, shallow file and object alternates;
- gitswarm's own files under `<git-common-dir>/gitswarm/` (trust, actor,
  keys, whatever is added there later), except the index and lock files
  workers write, the worktrees root, the error logs and the cache folder
  (derived data any worker rewrites; nothing read from it is trusted);
- the files beside the task's worktree under the worktree root (sibling
  worktrees are not watched: other tasks write there).

A file's stat stands for its content: mode, size, mtime and ctime. ctime
cannot be set back, so a write shows even when size and mtime are restored.

Shell analyze tasks run in the user's working tree and make outputs there
(`build/`, caches) while an agent runs. A change only such a task could also
have made (to an ignored file, or a file rewritten without a change of its
status) is set aside when the index shows one ran meanwhile; a change of
status (a tracked file edited, an untracked file created), a ref or a file of
the git dir never is.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISREG

from gitswarm.model.ids import GENERATED_ID, TASK_ID
from gitswarm.model.paths import quote_path
from gitswarm.model.records import runs_in_users_tree
from gitswarm.store.errorlogs import repo_log_dir
from gitswarm.store.fetch_gate import FETCH_DIR
from gitswarm.store.index import Index
from gitswarm.store.layout import JOBS_PREFIX, NOTES_REF
from gitswarm.store.memory_cache import cache_path
from gitswarm.store.refs import ref_targets
from gitswarm.store.remote_refusals import REFUSED_DIR
from gitswarm.store.workspace import status_entries
from gitswarm.store.worktrees import BRANCH_PREFIX, legacy_root

Stamp = tuple[int, int, int, int]
ABSENT: Stamp = (-1, -1, -1, -1)

# Refs gitswarm writes from any process at any time: job records and verdict notes
# (validated whenever they are read), the shadow namespace `pull` fetches into (pruned
# and replaced by every fetch). Task branches are allowed separately, by shape.
OWN_REF_PREFIXES = (b"refs/swarm/", b"refs/gitswarm/shadow/")
OWN_REFS = (NOTES_REF.encode(),)

# Files under <common>/gitswarm that workers and concurrent commands write as they go:
# the SQLite index and its side files (store/index/), the flock files of the index and
# of merges (only ever locked, their content means nothing), and the preflight cache
# (engine/routing/adapter_checks.py; a cache of `--version` probes a `run` started elsewhere refreshes).
UNWATCHED_OWN_FILES = (
    "index.sqlite",
    "index.sqlite-wal",
    "index.sqlite-shm",
    "index.sqlite-journal",
    "index.lock",
    "merge.lock",
    "preflight.json",
    "preflight.*.tmp",
)
# Files gitswarm creates the first time it needs them, in whichever worker needs them
# first (store/signing.py: the sealing key, made by the first verdict). Appearing is no
# violation; any change once it exists is. (An agent runs as the user and can read the
# key anyway: letting it appear adds nothing an agent could not already do.)
CREATED_ON_FIRST_USE = ("seal.key", "machine.key")  # machine.key: store/machine_key.py, by the first remote claim
# gitswarm's append-only records of what this clone made (store/trust.py): a submission or a steer by
# the user while an agent runs appends to them. Lines appended are allowed, when each is an id gitswarm
# makes; anything else (a line rewritten or removed, a file replaced) is a violation.
APPEND_ONLY_OWN_FILES = ("local-jobs", "local-ops")
MAX_APPEND_ONLY = 1 << 20  # read at most this much of one; past it, only its stamp is compared

# Files of the git dir that change what git does for the user.
GIT_DIR_FILES = ("config", "config.worktree", "shallow", "objects/info/alternates", "objects/info/http-alternates")
GIT_DIR_LISTED = ("hooks", "info")
# ...but `info/refs`, which `git update-server-info` rewrites for the dumb HTTP transport whenever git repacks
# (the `gc --auto` a user's own `git commit` starts in the background): it changes nothing git does here.
GIT_DIR_UNWATCHED = ("info/refs",)

LISTED_CHANGES = 8
IGNORED = b"!!"  # `git status --porcelain` for an ignored file


@dataclass(frozen=True)
class Watch:
    """Where one task's worker runs and what surrounds it."""

    workdir: Path | None  # the user's working tree (None in a bare repository)
    common_dir: Path
    worktree: Path
    root: Path  # the worktree root: <root>/<job>/<task>


@dataclass(frozen=True)
class Snapshot:
    tree: dict[bytes, tuple[bytes, Stamp]]  # the user's tree: path -> (status code, stamp)
    refs: dict[bytes, bytes]  # ref -> target, gitswarm's own refs left out
    jobs: frozenset[bytes]  # the job ids with a ref (their task branches are gitswarm's)
    files: dict[str, Stamp]  # git dir and gitswarm files -> stamp
    first_use: frozenset[str]  # the files of CREATED_ON_FIRST_USE, by path
    taken: float  # when, on the clock task records are stamped with
    appended: dict[str, bytes | None] = field(default_factory=dict)  # APPEND_ONLY_OWN_FILES: path -> content


@dataclass(frozen=True)
class Change:
    what: str  # e.g. "refs/heads/main moved", ".env changed in the working tree"
    tree_output: bool = False  # what a task running in the user's tree could also have made


def snapshot(watch: Watch, now: float) -> Snapshot:
    refs, jobs = _refs(watch.workdir or watch.common_dir)
    first_use = frozenset(str(watch.common_dir / "gitswarm" / name) for name in CREATED_ON_FIRST_USE)
    appended = {str(watch.common_dir / "gitswarm" / name): _read_small(watch.common_dir / "gitswarm" / name) for name in APPEND_ONLY_OWN_FILES}
    return Snapshot(tree=_tree(watch), refs=refs, jobs=jobs, files=_files(watch), first_use=first_use, taken=now, appended=appended)


def violations(watch: Watch, before: Snapshot, after: Snapshot) -> list[Change]:
    """What the worker changed outside its worktree between two snapshots (empty: nothing).

    Tree outputs are set aside only when a task that runs in the user's tree
    ran meanwhile (the index is asked only then).
    """
    found = changes(before, after)
    if any(change.tree_output for change in found) and others_ran_in_tree(watch.common_dir, before.taken):
        found = [change for change in found if not change.tree_output]
    return found


def changes(before: Snapshot, after: Snapshot) -> list[Change]:
    """Everything that differs between two snapshots, one short line each."""
    found = []
    for path in sorted(before.tree.keys() | after.tree.keys()):
        old, new = before.tree.get(path), after.tree.get(path)
        if old != new:
            output = all(side is None or side[0] == IGNORED for side in (old, new)) or (old is not None and new is not None and old[0] == new[0])
            found.append(Change(f"{quote_path(path)} {_tree_verb(old, new)} in the working tree", tree_output=output))
    jobs = before.jobs | after.jobs
    was = {ref: target for ref, target in before.refs.items() if not _task_branch(ref, jobs)}
    now = {ref: target for ref, target in after.refs.items() if not _task_branch(ref, jobs)}
    for ref in sorted(was.keys() | now.keys()):
        if was.get(ref) != now.get(ref):
            found.append(Change(f"{quote_path(ref)} {_verb(ref, was, now, 'moved')}"))
    for name in sorted(before.appended.keys() | after.appended.keys()):
        old_text, new_text = before.appended.get(name), after.appended.get(name)
        if old_text != new_text and not _only_appended_ids(old_text, new_text):
            verb = "created" if old_text is None else "removed" if new_text is None else "changed"
            found.append(Change(f"{name} {verb}"))
    for name in sorted(before.files.keys() | after.files.keys()):
        old_stamp, new_stamp = before.files.get(name, ABSENT), after.files.get(name, ABSENT)
        if old_stamp != new_stamp and not (old_stamp == ABSENT and name in after.first_use):
            verb = "created" if old_stamp == ABSENT else "removed" if new_stamp == ABSENT else "changed"
            found.append(Change(f"{name} {verb}"))
    return found


def _only_appended_ids(old: bytes | None, new: bytes | None) -> bool:
    """Whether `new` is `old` with whole lines of gitswarm ids appended (an absent file counts as empty)."""
    if new is None:
        return False
    before = old or b""
    if not new.startswith(before) or (before and not before.endswith(b"\n")):
        return False
    added = new[len(before):]
    return added.endswith(b"\n") and all(GENERATED_ID.fullmatch(line.decode("ascii", "replace")) for line in added.splitlines())


def _read_small(path: Path) -> bytes | None:
    """The content of a small regular file (not following a symlink), None when absent; a stand-in that
    never equals an honest content when it is not a regular file or too big."""
    try:
        stat = os.lstat(path)
    except OSError:
        return None
    if not S_ISREG(stat.st_mode) or stat.st_size > MAX_APPEND_ONLY:
        return f"\0not a small file: {stat.st_mode} {stat.st_size} {stat.st_mtime_ns}".encode()
    try:
        return path.read_bytes()
    except OSError:
        return None


def others_ran_in_tree(common_dir: Path, since: float) -> bool:
    """Whether a task that runs in the user's working tree (runs_in_users_tree) ran since `since`.

    Running now (it holds a lease), or claimed or finished since (its record
    was updated): by the index, so across every job and every supervisor.
    """
    index = Index(common_dir, create=False)
    try:
        active = {(job, task) for job, task, *_ in index.leases()}
        active |= {(job, task) for job, task, *_ in index.changed_tasks(since)}
        for job in sorted({job for job, _ in active}):
            if any(runs_in_users_tree(t["mode"], t["adapter"]) and (job, t["id"]) in active for t in index.tasks(job)):
                return True
        return False
    finally:
        index.close()


def describe(found: list[Change]) -> str:
    """The integrity error for a worker that wrote outside its worktree."""
    shown = ", ".join(change.what for change in found[:LISTED_CHANGES])
    more = f" and {len(found) - LISTED_CHANGES} more" if len(found) > LISTED_CHANGES else ""
    return f"integrity: the worker wrote outside its worktree: {shown}{more}"


def _verb(key: bytes, before: dict, after: dict, changed: str) -> str:
    return "created" if key not in before else "removed" if key not in after else changed


def _tree_verb(old: tuple[bytes, Stamp] | None, new: tuple[bytes, Stamp] | None) -> str:
    """A path `git status` does not list is a clean tracked file, or no file at all."""
    untracked = (b"??", IGNORED)
    if new is None:
        return "removed" if old is not None and old[0] in untracked else "changed"
    if new[1] == ABSENT:
        return "removed"
    return "created" if (old is None or old[1] == ABSENT) and new[0] in untracked else "changed"


def _tree(watch: Watch) -> dict[bytes, tuple[bytes, Stamp]]:
    """Every path `git status` lists in the user's tree (ignored ones too), with its status and stamp.

    A path listed before and after with the same status still counts as
    changed when its stamp moved: an already modified or untracked file
    written again.
    """
    workdir = watch.workdir
    if workdir is None or not workdir.is_dir():
        return {}
    # A worktree root inside the user's tree holds every task's worktree: other tasks write there.
    exclude = watch.root.relative_to(workdir) if watch.root.is_relative_to(workdir) else None
    entries = status_entries(workdir, exclude=exclude, refresh_index=False)
    found = {}
    directory = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for code, path in entries:
            found[path] = (code, _stamp(path, directory))
    finally:
        os.close(directory)
    return found


def _refs(repo_dir: Path) -> tuple[dict[bytes, bytes], frozenset[bytes]]:
    refs, jobs = {}, set()
    for name, target in ref_targets(repo_dir).items():
        if name.startswith(JOBS_PREFIX.encode()):
            jobs.add(name[len(JOBS_PREFIX) :])
        if not (name.startswith(OWN_REF_PREFIXES) or name in OWN_REFS):
            refs[name] = target
    return refs, frozenset(jobs)


def _task_branch(ref: bytes, jobs: frozenset[bytes]) -> bool:
    """refs/heads/swarm/<job>/<task> of a job that exists: gitswarm's, from any worker."""
    prefix = f"refs/heads/{BRANCH_PREFIX}".encode()
    if not ref.startswith(prefix):
        return False
    job, _, task = ref[len(prefix) :].decode("ascii", "replace").partition("/")
    return job.encode() in jobs and bool(GENERATED_ID.fullmatch(job)) and bool(TASK_ID.fullmatch(task))


def _files(watch: Watch) -> dict[str, Stamp]:
    common = watch.common_dir
    paths = [common / name for name in GIT_DIR_FILES]
    unwatched = {common / name for name in GIT_DIR_UNWATCHED}
    paths += [p for listed in GIT_DIR_LISTED for p in _listed(common / listed) if p not in unwatched]
    if watch.workdir is not None:
        paths.append(_user_git_dir(watch.workdir, common) / "HEAD")
    # Skipped too: what `work --remote` writes while agents run, its fetch gate's lock and record and the
    # jobs refused from a remote. An agent outside the sandbox that wrote them could make this clone skip a
    # job or hold its fetches (the gate never trusts a record dated in the future); in the sandbox it cannot.
    skipped = {watch.root, legacy_root(common), repo_log_dir(common), cache_path(common).parent,
               common / "gitswarm" / FETCH_DIR, common / "gitswarm" / REFUSED_DIR}
    paths += _own_files(common / "gitswarm", skipped)
    paths += _listed(watch.worktree.parent) + _listed(watch.root)
    return {str(path): _stamp(path) for path in paths}


def _own_files(directory: Path, skip: set[Path]) -> list[Path]:
    """Every file under gitswarm's directory but the ones workers write and the worktree roots."""
    found = []
    for top, dirs, names in os.walk(directory):
        found += [Path(top, d) for d in dirs if os.path.islink(Path(top, d))]  # a skipped folder swapped for a symlink too
        dirs[:] = [d for d in dirs if Path(top, d) not in skip]
        in_top = Path(top) == directory
        found += [
            Path(top, n) for n in names
            if not (in_top and any(fnmatch.fnmatchcase(n, p) for p in (*UNWATCHED_OWN_FILES, *APPEND_ONLY_OWN_FILES)))
        ]
    return found


def _user_git_dir(workdir: Path, common_dir: Path) -> Path:
    """The git dir of the user's working tree: its `.git`, or where a linked worktree's `.git` file points."""
    dot_git = workdir / ".git"
    if dot_git.is_file():
        text = dot_git.read_text(errors="replace").strip()
        if text.startswith("gitdir:"):
            return (workdir / text.removeprefix("gitdir:").strip()).resolve()
    return common_dir


def _listed(directory: Path) -> list[Path]:
    """The files directly in a directory (symlinks included, directories not)."""
    try:
        return [entry for entry in directory.iterdir() if not entry.is_dir() or entry.is_symlink()]
    except OSError:
        return []


def _stamp(path: str | bytes | Path, directory: int | None = None) -> Stamp:
    try:
        stat = os.lstat(path, dir_fd=directory)
    except OSError:
        return ABSENT
    return (stat.st_mode, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
