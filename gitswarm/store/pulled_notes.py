"""Pulling the verdict notes: every pulled line checked before it joins the local notes.

A pulled note line is hostile input like any pulled record. The pulled
notes ref must be a commit whose tree holds notes on commit ids (flat, or
fanned out as git does); every line this clone does not have yet must
decode as a verdict on exactly that commit or as a seal, within the caps.
Lines that fail are dropped and named; the rest join the local notes as a
union of lines. Ordering among verdicts never comes from here: only
counted verdicts decide (store/verdicts.py).
"""

from __future__ import annotations

from gitswarm.model import codec
from gitswarm.model.errors import CorruptRecord, NewerFormat
from gitswarm.model.provenance import NoteLine
from gitswarm.model.validate import check_note_record
from gitswarm.store.gitrepo import GitRepo
from gitswarm.store.layout import NOTES_REF
from gitswarm.store.pulled_jobs import Intake

_HEX = frozenset("0123456789abcdef")
_COMMIT_HEX = 40


def note_blobs(repo: GitRepo, tip: str, invalid: dict[str, str]) -> dict[str, str]:
    """Judged commit -> note blob, for every note in the notes commit `tip`; entries that do not
    name a commit (or are not blobs where a note goes) are skipped and named in `invalid`."""
    found: dict[str, str] = {}
    pending = [("", repo.commit_info(tip).tree)]
    while pending:
        prefix, tree = pending.pop()
        for name, oid, is_tree in repo.tree_items(tree):
            path = prefix + name
            if not _HEX.issuperset(name) or len(path) > _COMMIT_HEX:
                invalid[path] = "not a note on a commit"
            elif is_tree and len(path) < _COMMIT_HEX:
                pending.append((path, oid))
            elif not is_tree and len(path) == _COMMIT_HEX:
                found[path] = oid
            else:
                invalid[path] = "not a note on a commit"
    return found


def _checked_lines(repo: GitRepo, commit: str, blob: str, intake: Intake, invalid: dict[str, str]) -> set[bytes]:
    where = f"{NOTES_REF}:{commit}"
    data = repo.read_blob(blob)
    intake.charge(len(data), where)
    kept = set()
    for n, line in enumerate(data.splitlines()):
        if not line.strip():
            continue
        try:
            if len(line) > intake.limits.max_record:
                raise CorruptRecord(f"{where}: line {n + 1} over the record cap")
            check_note_record(codec.decode(line, NoteLine, f"{where}: line {n + 1}"), commit, f"{where}: line {n + 1}")
        except (CorruptRecord, NewerFormat) as exc:  # a line "of a newer format" is hostile input like any other
            invalid.setdefault(commit, str(exc))
            continue
        kept.add(line)
    return kept


def pull_notes(repo: GitRepo, theirs: str | None, intake: Intake, who: tuple[str, str], now: float) -> tuple[str, dict[str, str]]:
    """Bring pulled notes into refs/notes/swarm: ("unchanged"|"updated"|"merged", invalid entries).

    A fast-forward only when every pulled line passed; otherwise a notes commit (parents: the
    local and the pulled tips) whose tree holds the local lines and the pulled lines that passed.
    """
    invalid: dict[str, str] = {}
    if theirs is None:
        return "unchanged", invalid
    ours = repo.read_ref(NOTES_REF)
    try:
        their_blobs = note_blobs(repo, theirs, invalid)
        if ours == theirs or (ours is not None and repo.is_ancestor(theirs, ours)):
            return "unchanged", {}
    except CorruptRecord as exc:
        return "unchanged", {NOTES_REF: f"the pulled notes are not a notes commit ({exc})"}
    our_blobs = note_blobs(repo, ours, {}) if ours is not None else {}
    pulled: dict[str, set[bytes]] = {}
    for commit, blob in their_blobs.items():
        if our_blobs.get(commit) != blob:
            try:
                pulled[commit] = _checked_lines(repo, commit, blob, intake, invalid)
            except CorruptRecord as exc:
                invalid[commit] = str(exc)
    # A fast-forward only when no local line would be lost (a pulled notes commit may delete this clone's verdicts).
    if not invalid and (ours is None or repo.is_ancestor(ours, theirs)) and all(
        their_blobs.get(c) == b or {x for x in repo.read_blob(b).splitlines() if x.strip()} <= pulled.get(c, set()) for c, b in our_blobs.items()
    ):
        repo.cas_ref(NOTES_REF, theirs, ours, "gitswarm: pull notes")
        return "updated", invalid
    union = {commit: set(repo.read_blob(blob).splitlines()) - {b""} for commit, blob in our_blobs.items()}
    for commit, lines in pulled.items():
        union.setdefault(commit, set()).update(lines)
    paths: dict[str, str | None] = {
        commit: repo.write_blob(b"\n".join(sorted(lines)) + b"\n") for commit, lines in sorted(union.items()) if lines
    }
    tree = repo.update_tree(None, paths)
    parents = [ours, theirs] if ours is not None else [theirs]
    merged = repo.commit(tree, parents, "gitswarm: merge notes (pulled lines checked)\n", who, now)
    repo.cas_ref(NOTES_REF, merged, ours, "gitswarm: merge notes")
    return "merged", invalid
