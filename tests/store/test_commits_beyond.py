"""The commits of a history beyond what a process knows it holds (store/oplog.py, `commits_beyond`): what a
merge of another machine's claim tip reads instead of a merge base or a hiding walk of the whole history."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pygit2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitswarm.model.errors import CorruptRecord
from gitswarm.store.git import PygitRepo
from gitswarm.store.oplog import commits_beyond


def ancestors(store: PygitRepo, tip: str) -> set[str]:
    return {commit.oid for commit in store.walk(tip)}


def make_dag(store: PygitRepo, parents_of: list[list[int]]) -> list[str]:
    """Commit n has the parents listed (indexes below n); commit 0 is the root."""
    tree = store.update_tree(None, {"f": store.write_blob(b"x")})
    commits: list[str] = []
    for n, parents in enumerate(parents_of):
        commits.append(store.commit(tree, [commits[p] for p in parents], f"c{n}", ("gitswarm", "t@gitswarm"), 1_800_000_000 + n))
    return commits


@st.composite
def dags(draw: st.DrawFn) -> list[list[int]]:
    size = draw(st.integers(2, 24))
    shape: list[list[int]] = [[]]
    for n in range(1, size):
        first = draw(st.integers(0, n - 1))
        second = draw(st.one_of(st.none(), st.integers(0, n - 1)))
        shape.append([first] if second is None or second == first else [first, second])
    return shape


@settings(max_examples=60, deadline=None)
@given(shape=dags(), data=st.data())
def test_it_finds_what_a_hiding_walk_finds_parents_first(shape: list[list[int]], data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as where:
        pygit2.init_repository(where)
        store = PygitRepo(Path(where))
        commits = make_dag(store, shape)
        tip = commits[data.draw(st.integers(0, len(commits) - 1))]
        known = commits[data.draw(st.integers(0, len(commits) - 1))]
        held = ancestors(store, known)
        found, reached = commits_beyond(store, tip, held)
        assert {c.oid for c in found} == {c.oid for c in store.walk(tip, hide=known)}
        assert len(found) == len({c.oid for c in found})
        position = {c.oid: n for n, c in enumerate(found)}
        assert all(position[p] < position[c.oid] for c in found for p in c.parents if p in position)
        # it stops exactly at the held commits a commit it found names as a parent (or at the tip itself)
        assert reached == {p for c in found for p in c.parents if p in held} | ({tip} & held)


def test_a_missing_commit_is_a_corrupt_record(tmp_path: Path) -> None:
    pygit2.init_repository(str(tmp_path))
    store = PygitRepo(tmp_path)
    with pytest.raises(CorruptRecord):
        commits_beyond(store, "1" * 40, set())
