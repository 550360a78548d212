"""Loose objects written by gitswarm (store/loose.py) are git's own: the same ids libgit2 gives the same
content, readable by git, and a failed write leaves nothing behind."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pygit2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitswarm.model.errors import CorruptRecord
from gitswarm.store import loose
from gitswarm.store.git import PygitRepo
from gitswarm.store.loose import BLOB_MODE, TREE_MODE, LooseObjects, format_tree, object_id, parse_tree

# Names around '/' in byte order ('-' and '.' sort before it, '0' and '_' after), and prefixes of each
# other: where git's order (a tree compared as if its name ended in '/') differs from plain sorting.
NAMES = st.text(alphabet="a-._0", min_size=1, max_size=4).filter(lambda n: n not in (".", ".."))
OIDS = st.binary(min_size=20, max_size=20).filter(any)  # (libgit2 refuses the null id)
MODES = st.sampled_from([BLOB_MODE, TREE_MODE, 0o100755, 0o120000])


def libgit2_tree(repo: pygit2.Repository, entries: dict[bytes, tuple[int, bytes]]) -> str:
    builder = repo.TreeBuilder()
    for name, (mode, oid) in entries.items():
        builder.insert(name.decode(), pygit2.Oid(raw=oid), mode)
    return str(builder.write())


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(NAMES.map(str.encode), st.tuples(MODES, OIDS), max_size=12))
def test_a_tree_has_the_id_libgit2_gives_it_and_reads_back(tmp_path: Path, entries: dict[bytes, tuple[int, bytes]]) -> None:
    repo = pygit2.Repository(str(tmp_path)) if (tmp_path / ".git").exists() else pygit2.init_repository(str(tmp_path))
    body = format_tree(entries)
    assert object_id(b"tree", body) == libgit2_tree(repo, entries)
    assert parse_tree(body, "t") == entries


PATHS = st.lists(st.sampled_from(["a", "b"]), min_size=1, max_size=3).map("/".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.dictionaries(PATHS, st.one_of(st.none(), st.sampled_from(["x", "y", "z"])), min_size=1, max_size=4),
                min_size=1, max_size=6))
def test_updating_a_tree_gives_the_tree_of_what_it_now_holds(tmp_path: Path, batches: list[dict[str, str | None]]) -> None:
    """Each update, applied to the last tree, gives the tree built from scratch of the paths now held (empty
    directories dropped), whatever blobs and directories the batches swap for each other."""
    store = PygitRepo(pygit2.init_repository(str(tmp_path / f"r{len(os.listdir(tmp_path))}")).path)
    blobs = {content: store.write_blob(content.encode()) for content in "xyz"}
    held: dict[str, str] = {}
    tree: str | None = None
    for batch in batches:
        changes = {path: (blobs[content] if content else None) for path, content in batch.items()}
        if any(p.startswith(q + "/") for p in changes for q in changes):
            continue  # a file and a directory of one name in one batch: not a change gitswarm makes
        for path, oid in changes.items():  # a path that becomes a file drops what was below it, and the other way
            held = {p: o for p, o in held.items() if not (p == path or p.startswith(path + "/") or path.startswith(p + "/"))}
            if oid is not None:
                held[path] = oid
        tree = store.update_tree(tree, changes)
        assert tree == from_scratch(store.repo, held)


def from_scratch(repo: pygit2.Repository, held: dict[str, str]) -> str:
    builder = repo.TreeBuilder()
    below: dict[str, dict[str, str]] = {}
    for path, oid in held.items():
        head, _, rest = path.partition("/")
        if rest:
            below.setdefault(head, {})[rest] = oid
        else:
            builder.insert(head, pygit2.Oid(hex=oid), BLOB_MODE)
    for name, sub in below.items():
        builder.insert(name, pygit2.Oid(hex=from_scratch(repo, sub)), TREE_MODE)
    return str(builder.write())


def test_a_commit_has_the_id_libgit2_gives_it_and_git_reads_it(tmp_path: Path) -> None:
    pygit2.init_repository(str(tmp_path))
    store = PygitRepo(tmp_path)
    tree = store.update_tree(None, {"job": store.write_blob(b"{}"), "tasks.ab/t": store.write_blob(b"[]")})
    first = store.commit(tree, [], "created\n\nop: é\n", ("gitswarm", "me@gitswarm"), 1_800_000_000.5)
    second = store.commit(tree, [first], "again", ("gitswarm", "me@gitswarm"), 1_800_000_001)
    sig = pygit2.Signature("gitswarm", "me@gitswarm", 1_800_000_001, 0)
    expected = store.repo.create_commit(None, sig, sig, "again", pygit2.Oid(hex=tree), [pygit2.Oid(hex=first)])
    assert second == str(expected)
    subprocess.run(["git", "update-ref", "refs/swarm/jobs/x", second], cwd=tmp_path, check=True)
    assert subprocess.run(["git", "cat-file", "-t", second], cwd=tmp_path, capture_output=True, text=True).stdout == "commit\n"
    fsck = subprocess.run(["git", "fsck", "--strict", "--no-dangling"], cwd=tmp_path, capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
    assert not list(tmp_path.glob(".git/objects/*/tmp_obj_*"))


def test_a_failed_write_leaves_no_temporary_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    objects = tmp_path / "objects"
    objects.mkdir()

    def no_room(source: str, target: str) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(loose.os, "rename", no_room)
    with pytest.raises(OSError, match="No space"):
        LooseObjects(objects).write(b"blob", b"data")
    assert [p.name for p in objects.rglob("*") if p.is_file()] == []


def test_an_object_there_already_is_not_written_again(tmp_path: Path) -> None:
    objects = tmp_path / "objects"
    writer = LooseObjects(objects)
    oid = writer.write(b"blob", b"data")
    path = objects / oid[:2] / oid[2:]
    before = path.stat().st_ino
    assert writer.write(b"blob", b"data") == oid and path.stat().st_ino == before
    assert oid == str(pygit2.hash(b"data"))


def test_a_malformed_tree_is_a_corrupt_record() -> None:
    with pytest.raises(CorruptRecord, match="malformed"):
        parse_tree(b"100644 name\0short", "abc")
    with pytest.raises(CorruptRecord, match="malformed"):
        parse_tree(b"10x644 name\0" + b"\1" * 20, "abc")


def test_a_tree_written_with_another_tools_tree_mode_keeps_its_entries(tmp_path: Path) -> None:
    """A tree entry of mode 40755 (git and libgit2 read any 04xxxx as a tree) is a tree here too: a write
    under it keeps what it holds, and it sorts as a tree."""
    pygit2.init_repository(str(tmp_path))
    store = PygitRepo(tmp_path)
    one, two, three = (store.write_blob(data) for data in (b"1", b"2", b"3"))
    inner = store.update_tree(None, {"t1": one, "t2": two})
    crafted = b"40755 tasks.ab\0" + bytes.fromhex(inner) + b"100644 tasks.ab-\0" + bytes.fromhex(one)
    done = subprocess.run(["git", "hash-object", "-t", "tree", "--literally", "-w", "--stdin"], cwd=tmp_path,
                          input=crafted, capture_output=True, check=True)
    base = done.stdout.decode().strip()
    updated = store.update_tree(base, {"tasks.ab/t3": three})
    names = sorted(name for name, _, _ in store.tree_items(dict((n, o) for n, o, _ in store.tree_items(updated))["tasks.ab"]))
    assert names == ["t1", "t2", "t3"]
    entries = parse_tree(store.repo[updated].read_raw(), updated)
    assert list(entries) == [b"tasks.ab-", b"tasks.ab"]  # git's order: "tasks.ab-" < "tasks.ab/"
