"""Review notes: one canonical JSON record per line, on the commit they judge.

Notes live under refs/notes/swarm, in git's own notes layout, so
`git log --notes=swarm` shows them and `git notes merge -s cat_sort_uniq`
merges them. libgit2's note writer overwrites the ref, so the notes commit
is built here and the ref moved by compare-and-swap.
"""

from __future__ import annotations

import random
import time

from gitswarm.model.errors import InternalError, RefConflict
from gitswarm.store.gitrepo import GitRepo
from gitswarm.store.layout import NOTES_REF

GIVE_UP_SECONDS = 10.0  # many writers on one notes ref take turns; each turn is milliseconds


def _note_path(repo: GitRepo, tree: str, commit: str) -> str:
    """Where the note of `commit` is, or would go: flat, unless the tree already fans it out."""
    fanned = f"{commit[:2]}/{commit[2:]}"
    return fanned if repo.tree_entry(tree, fanned) is not None else commit


def read_note(repo: GitRepo, commit: str) -> list[bytes]:
    """The record lines of the note on `commit`."""
    tip = repo.read_ref(NOTES_REF)
    if tip is None:
        return []
    tree = repo.commit_info(tip).tree
    oid = repo.tree_entry(tree, _note_path(repo, tree, commit))
    if oid is None:
        return []
    return [line for line in repo.read_blob(oid).splitlines() if line.strip()]


def add_note_line(repo: GitRepo, commit: str, line: bytes, who: tuple[str, str], now: float) -> None:
    """Add one record line to the note on `commit` (kept sorted and unique), by CAS on the notes ref."""
    add_note_lines(repo, commit, [line], who, now)


def add_note_lines(repo: GitRepo, commit: str, new_lines: list[bytes], who: tuple[str, str], now: float) -> None:
    """Add record lines to the note on `commit` in one notes commit (kept sorted and unique), by CAS."""
    if any(b"\n" in line for line in new_lines):
        raise ValueError("a note record must be one line")
    deadline = time.monotonic() + GIVE_UP_SECONDS
    delay = 0.001
    while time.monotonic() < deadline:
        tip = repo.read_ref(NOTES_REF)
        tree = repo.commit_info(tip).tree if tip else None
        path = _note_path(repo, tree, commit) if tree else commit
        existing = repo.tree_entry(tree, path) if tree else None
        lines = set(repo.read_blob(existing).splitlines()) if existing else set()
        if lines.issuperset(new_lines):
            return  # already there (a retry after a write that did land): adding is idempotent
        lines.discard(b"")
        lines.update(new_lines)
        blob = repo.write_blob(b"\n".join(sorted(lines)) + b"\n")
        new_tree = repo.update_tree(tree, {path: blob})
        new_tip = repo.commit(new_tree, [tip] if tip else [], f"gitswarm: note on {commit}\n", who, now)
        try:
            repo.cas_ref(NOTES_REF, new_tip, tip, "gitswarm: note")
            return
        except RefConflict:
            time.sleep(random.uniform(0, delay))
            delay = min(delay * 2, 0.05)
    raise InternalError(f"{NOTES_REF} kept moving; gave up after {GIVE_UP_SECONDS:.0f} s")
