"""The operations of a local history, kept per tip and brought forward (store/oplog.py, HistoryOps): whatever
the tip does (advances, merges another line, is set back or moved to a sibling by hand), what `at` gives is
exactly what walking the whole history gives."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitswarm.model.errors import CorruptRecord
from gitswarm.model.ops import ArtifactsRecorded, Op, title
from gitswarm.store.git import open_repo
from gitswarm.store.gitrepo import GitRepo
from gitswarm.store.oplog import HistoryOps, op_message, unique_ops
from tests.conftest import git

WHERE = "refs/swarm/jobs/test"
WHO = ("gitswarm", "test@gitswarm")


def op(n: int, body: str = "a") -> ArtifactsRecorded:
    return ArtifactsRecorded(id=f"op{n:04d}", clock=n, at=float(n), actor="t", artifacts=(body,))


def commit(repo: GitRepo, parents: list[str], ops: list[Op]) -> str:
    tree = repo.update_tree(None, {"state": repo.write_blob(b"{}")})
    if len(parents) > 1:
        return repo.commit(tree, parents, "merge\n", WHO, 0)
    return repo.commit(tree, parents, op_message(ops, title), WHO, float(len(parents)))


def walked(repo: GitRepo, tip: str) -> dict[str, Op]:
    return {o.id: o for o in unique_ops(repo.walk(tip), WHERE, Op)}


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    git(tmp_path, "init", "-q", "repo")
    return open_repo(tmp_path / "repo")


def test_a_tip_moved_forward_is_read_from_the_commits_since(repo: GitRepo) -> None:
    kept = HistoryOps(Op)
    tip = commit(repo, [], [op(1)])
    assert set(kept.at(repo, WHERE, tip)) == {"op0001"}
    for n in range(2, 6):
        tip = commit(repo, [tip], [op(n)])
    assert set(kept.at(repo, WHERE, tip)) == {f"op{n:04d}" for n in range(1, 6)}
    side = commit(repo, [tip], [op(9)])
    tip = commit(repo, [tip, side], [])  # a merge of another line
    assert kept.at(repo, WHERE, tip).keys() == walked(repo, tip).keys()


def test_a_tip_set_back_or_moved_aside_is_walked_anew(repo: GitRepo) -> None:
    kept = HistoryOps(Op)
    root = commit(repo, [], [op(1)])
    a = commit(repo, [root], [op(2)])
    b = commit(repo, [a], [op(3)])
    assert set(kept.at(repo, WHERE, b)) == {"op0001", "op0002", "op0003"}
    assert set(kept.at(repo, WHERE, a)) == {"op0001", "op0002"}  # set back
    sibling = commit(repo, [root], [op(4)])
    assert set(kept.at(repo, WHERE, sibling)) == {"op0001", "op0004"}  # aside: not holding a's


def test_a_kept_tip_pruned_since_is_walked_anew(repo: GitRepo) -> None:
    """The ref was set back and a gc pruned the commit kept: the next tip is read from its whole history."""
    kept = HistoryOps(Op)
    root = commit(repo, [], [op(1)])
    gone = commit(repo, [root], [op(2)])
    assert set(kept.at(repo, WHERE, gone)) == {"op0001", "op0002"}
    sibling = commit(repo, [root], [op(3)])
    (repo.common_dir / "objects" / gone[:2] / gone[2:]).unlink()
    assert set(kept.at(repo, WHERE, sibling)) == {"op0001", "op0003"}


def test_an_op_recorded_twice_with_two_bodies_is_refused_when_brought_forward(repo: GitRepo) -> None:
    kept = HistoryOps(Op)
    tip = commit(repo, [], [op(1)])
    kept.at(repo, WHERE, tip)
    forged = commit(repo, [tip], [op(1, body="b")])  # the same op id, another body
    with pytest.raises(CorruptRecord, match="two different bodies"):
        kept.at(repo, WHERE, forged)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.sampled_from(["advance", "merge", "reset", "read"]), st.integers(0, 10_000)), max_size=25))
def test_at_always_gives_the_walk_of_the_whole_history(steps: list[tuple[str, int]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        git(Path(folder), "init", "-q", "repo")
        repo = open_repo(Path(folder) / "repo")
        kept = HistoryOps(Op, keep=2)
        commits = [commit(repo, [], [op(0)])]
        tip, n = commits[0], 1
        for step, pick in steps:
            if step == "advance":
                tip = commit(repo, [tip], [op(n), op(n + 1)])
                n += 2
            elif step == "merge":
                other = commits[pick % len(commits)]
                if other != tip:
                    tip = commit(repo, [tip, commit(repo, [other], [op(n)])], [])
                    n += 1
            elif step == "reset":
                tip = commits[pick % len(commits)]
            commits.append(tip)
            got = kept.at(repo, (WHERE, WHERE + "-other")[pick % 2], tip)
            assert {k: v for k, (_, v) in got.items()} == walked(repo, tip)
