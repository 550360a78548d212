"""One suite for every implementation of the store's git interfaces, as git-bug runs one repository
suite against its real and its mock repository.

`GitRepo`: store/git.py (libgit2, on a repository in a temp dir) and the
in-memory fake (tests/store/memgit.py). `Transport`: store/remote.py (the
git CLI, between a repository and a bare one) and the fake's. Object ids
are checked against fixed values, so both give the ids git gives.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from gitswarm.model.errors import CorruptRecord, RefConflict
from gitswarm.store.git import init_repo, open_repo
from gitswarm.store.gitrepo import GitCommandError, GitRepo, Transport
from gitswarm.store.remote import GitTransport
from tests.store.memgit import MemRepo, MemTransport

WHO = ("Ada", "ada@example.com")
WHEN = 1_700_000_000
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
HELLO_BLOB = "ce013625030ba8dba906f756967f9e9ca394464a"  # git hash-object of b"hello\n"
JOBS = "refs/swarm/jobs/"
SHADOW = "refs/gitswarm/shadow/origin/"
FETCH_SPECS = [f"+{JOBS}*:{SHADOW}jobs/*", f"+refs/notes/swarm*:{SHADOW}notes/swarm*"]


@dataclass
class Side:
    """A repository under test and the one thing the protocol cannot do to it: detach its HEAD."""

    repo: GitRepo
    detach: Callable[[str], None]


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _real(tmp_path: Path) -> Side:
    repo = init_repo(tmp_path / "real")
    return Side(repo, lambda oid: _git(tmp_path / "real", "update-ref", "--no-deref", "HEAD", oid))


def _mem(tmp_path: Path) -> Side:
    repo = MemRepo()

    def detach(oid: str) -> None:
        repo.head = oid

    return Side(repo, detach)


@pytest.fixture(params=["pygit2", "memory"])
def side(request: pytest.FixtureRequest, tmp_path: Path) -> Side:
    return (_real if request.param == "pygit2" else _mem)(tmp_path)


@pytest.fixture
def repo(side: Side) -> GitRepo:
    return side.repo


def files_commit(repo: GitRepo, files: dict[str, bytes | None], parents: Sequence[str] = (), message: str = "m\n", when: int = WHEN) -> str:
    """A commit of `files` (a path set to its content, or removed when None) on top of the first parent's tree."""
    tree = repo.commit_info(parents[0]).tree if parents else None
    changes = {path: None if data is None else repo.write_blob(data) for path, data in files.items()}
    return repo.commit(repo.update_tree(tree, changes), list(parents), message, WHO, when)


def files_of(repo: GitRepo, tree: str, prefix: str = "") -> dict[str, bytes]:
    found = {}
    for name, oid, is_tree in repo.tree_items(tree):
        if is_tree:
            found.update(files_of(repo, oid, f"{prefix}{name}/"))
        else:
            found[f"{prefix}{name}"] = repo.read_blob(oid)
    return found


# blobs


def test_a_blob_has_the_id_git_gives_it_and_reads_back(repo: GitRepo) -> None:
    assert repo.blob_id(b"hello\n") == HELLO_BLOB
    assert not repo.has_object(HELLO_BLOB)  # computing an id writes nothing
    assert repo.write_blob(b"hello\n") == HELLO_BLOB
    assert repo.has_object(HELLO_BLOB)
    assert repo.read_blob(HELLO_BLOB) == b"hello\n"
    assert repo.read_blob(repo.write_blob(b"")) == b""


def test_a_missing_object_or_one_of_another_kind_is_a_corrupt_record(repo: GitRepo) -> None:
    missing = "0" * 40
    with pytest.raises(CorruptRecord, match="missing"):
        repo.read_blob(missing)
    with pytest.raises(CorruptRecord, match="missing"):
        repo.commit_info(missing)
    blob = repo.write_blob(b"x")
    commit = files_commit(repo, {"a": b"1"})
    with pytest.raises(CorruptRecord, match="not a commit"):
        repo.commit_info(blob)
    with pytest.raises(CorruptRecord, match="not a blob"):
        repo.read_blob(commit)


# trees


def test_update_tree_sets_and_removes_paths_and_drops_emptied_subtrees(repo: GitRepo) -> None:
    assert repo.update_tree(None, {}) == EMPTY_TREE
    one, two, three = (repo.write_blob(data) for data in (b"1", b"2", b"3"))
    tree = repo.update_tree(None, {"a": one, "d/x": two, "d/e/y": three})
    assert tree == "6d3a924a479f3858dbe853e8ba70aea97fddddaa"
    assert repo.tree_entry(tree, "a") == one
    assert repo.tree_entry(tree, "d/e/y") == three
    assert repo.tree_entry(tree, "d/nope") is None and repo.tree_entry(tree, "nope") is None
    sub = repo.tree_entry(tree, "d")
    assert list(repo.tree_items(tree)) == [("a", one, False), ("d", sub, True)]
    assert [name for name, _, _ in repo.tree_items(tree, "d")] == ["e", "x"]
    assert list(repo.tree_items(tree, "missing")) == []
    assert repo.update_tree(tree, {"a": one}) == tree  # nothing changed: the same tree
    without_y = repo.update_tree(tree, {"d/e/y": None})
    assert repo.tree_entry(without_y, "d/e") is None and repo.tree_entry(without_y, "d/x") == two
    assert repo.update_tree(without_y, {"d/x": None}) == repo.update_tree(None, {"a": one})
    assert repo.update_tree(tree, {"d/x": None, "d/e/y": None, "a": None}) == EMPTY_TREE
    assert repo.update_tree(without_y, {"d/e/y": three}) == tree


def test_tree_items_come_in_gits_order_a_subtree_sorting_as_its_name_and_a_slash(repo: GitRepo) -> None:
    blob = repo.write_blob(b"x")
    tree = repo.update_tree(None, {"a0": blob, "a/in": blob, "a.b": blob, "a-b": blob})
    assert [(name, is_tree) for name, _, is_tree in repo.tree_items(tree)] == [
        ("a-b", False), ("a.b", False), ("a", True), ("a0", False),
    ]
    assert tree == "0c23089fde2419846c3c3ba26996a7ebe1270f72"


# commits


def test_a_commit_records_its_tree_parents_message_and_time(repo: GitRepo) -> None:
    tree = repo.update_tree(None, {"a": repo.write_blob(b"1")})
    first = repo.commit(tree, [], "first\n\nbody\n", WHO, WHEN + 0.75)
    assert first == "3c7825feaab307bcac85b135fecdb3b090e23b01"
    second = repo.commit(tree, [first], "second", WHO, WHEN + 60)
    info = repo.commit_info(second)
    assert (info.oid, info.tree, info.parents, info.message, info.time) == (second, tree, (first,), "second", WHEN + 60)
    assert repo.commit_info(first).parents == () and repo.commit_info(first).time == WHEN
    assert repo.has_object(first)


# refs


def test_refs_are_read_listed_and_moved_only_by_compare_and_swap(repo: GitRepo) -> None:
    one = files_commit(repo, {"a": b"1"})
    two = files_commit(repo, {"a": b"2"}, [one])
    name = f"{JOBS}j1"
    assert repo.read_ref(name) is None
    repo.cas_ref(name, one, None, "create")
    assert repo.read_ref(name) == one
    with pytest.raises(RefConflict):
        repo.cas_ref(name, two, None)  # it exists now
    with pytest.raises(RefConflict):
        repo.cas_ref(name, one, two)  # it is not at `two`
    with pytest.raises(RefConflict):
        repo.cas_ref(f"{JOBS}absent", one, two)
    assert repo.read_ref(name) == one and repo.read_ref(f"{JOBS}absent") is None
    repo.cas_ref(name, two, one, "move")
    assert repo.read_ref(name) == two
    repo.cas_ref(f"{JOBS}j2", one, None)
    repo.cas_ref("refs/heads/main", one, None)
    assert repo.list_refs(JOBS) == {f"{JOBS}j1": two, f"{JOBS}j2": one}
    assert repo.list_refs("refs/nothing/") == {}


def test_head_branch_is_the_checked_out_branch_and_none_when_unborn_or_detached(side: Side) -> None:
    repo = side.repo
    assert repo.head_branch() is None  # unborn
    commit = files_commit(repo, {"a": b"1"})
    repo.cas_ref("refs/heads/main", commit, None)
    assert repo.head_branch() == "refs/heads/main"
    side.detach(commit)
    assert repo.head_branch() is None
    assert repo.resolve("HEAD") == commit


def test_resolve_names_a_commit_by_ref_branch_head_id_prefix_and_ancestry(repo: GitRepo) -> None:
    one = files_commit(repo, {"a": b"1"})
    two = files_commit(repo, {"a": b"2"}, [one])
    assert repo.resolve("main") is None and repo.resolve("HEAD") is None
    repo.cas_ref("refs/heads/main", two, None)
    for rev in ("main", "refs/heads/main", "HEAD", "heads/main", two, two[:12]):
        assert repo.resolve(rev) == two, rev
    assert repo.resolve("main~1") == one and repo.resolve("main^") == one and repo.resolve("HEAD~2") is None
    assert repo.resolve("nothing") is None and repo.resolve("0" * 40) is None
    assert repo.resolve(repo.commit_info(two).tree) is None  # a tree is no commit
    assert repo.resolve(repo.write_blob(b"just a blob")) is None


# history


def test_walk_is_oldest_first_and_leaves_out_what_hide_reaches(repo: GitRepo) -> None:
    c1 = files_commit(repo, {"a": b"1"})
    c2 = files_commit(repo, {"a": b"2"}, [c1])
    c3 = files_commit(repo, {"a": b"3"}, [c2])
    assert [c.oid for c in repo.walk(c3)] == [c1, c2, c3]
    assert [c.oid for c in repo.walk(c3, hide=c1)] == [c2, c3]
    assert list(repo.walk(c3, hide=c3)) == []
    walked = list(repo.walk(c3))
    assert walked[1] == repo.commit_info(c2)


def test_walk_of_a_merge_puts_every_commit_after_its_parents(repo: GitRepo) -> None:
    base = files_commit(repo, {"a": b"1"})
    x = files_commit(repo, {"x": b"x"}, [base], "x")
    x2 = files_commit(repo, {"x": b"x2"}, [x], "x2")
    y = files_commit(repo, {"y": b"y"}, [base], "y")
    merge = repo.commit(repo.commit_info(x2).tree, [x2, y], "merge", WHO, WHEN)
    order = [c.oid for c in repo.walk(merge)]
    assert sorted(order) == sorted([base, x, x2, y, merge])
    assert order[0] == base and order[-1] == merge
    for commit in repo.walk(merge):
        assert all(order.index(parent) < order.index(commit.oid) for parent in commit.parents)
    assert sorted(c.oid for c in repo.walk(merge, hide=x)) == sorted([x2, y, merge])


def test_merge_base_and_is_ancestor(repo: GitRepo) -> None:
    base = files_commit(repo, {"a": b"1"})
    x = files_commit(repo, {"x": b"x"}, [base], "x")
    y = files_commit(repo, {"y": b"y"}, [base], "y")
    y2 = files_commit(repo, {"y": b"y2"}, [y], "y2")
    other_root = files_commit(repo, {"z": b"z"}, [], "another root")
    assert repo.merge_base(x, y2) == base
    assert repo.merge_base(y2, y) == y and repo.merge_base(y, y2) == y
    assert repo.merge_base(x, other_root) is None
    assert repo.is_ancestor(base, y2) and repo.is_ancestor(y, y2) and repo.is_ancestor(x, x)
    assert not repo.is_ancestor(y2, y) and not repo.is_ancestor(x, y2) and not repo.is_ancestor(other_root, x)


def test_merge_in_memory_takes_each_sides_changes_when_they_touch_different_files(repo: GitRepo) -> None:
    base = files_commit(repo, {"a": b"a\n", "b": b"b\n", "gone": b"g\n", "d/keep": b"k\n"})
    ours = files_commit(repo, {"a": b"ours\n", "gone": None}, [base], "ours")
    theirs = files_commit(repo, {"b": b"theirs\n", "d/new": b"n\n"}, [base], "theirs")
    tree, conflicts = repo.merge_in_memory(ours, theirs)
    assert conflicts == [] and tree is not None
    expected = {"a": b"ours\n", "b": b"theirs\n", "d/keep": b"k\n", "d/new": b"n\n"}
    assert files_of(repo, tree) == expected
    assert tree == repo.update_tree(None, {path: repo.write_blob(data) for path, data in expected.items()})
    same, none = repo.merge_in_memory(ours, ours)
    assert (same, none) == (repo.commit_info(ours).tree, [])


def test_merge_in_memory_lists_conflicting_paths_and_writes_no_tree(repo: GitRepo) -> None:
    base = files_commit(repo, {"a": b"base\n", "b": b"b\n", "c": b"c\n"})
    ours = files_commit(repo, {"a": b"ours\n", "b": None, "new": b"one\n"}, [base], "ours")
    theirs = files_commit(repo, {"a": b"theirs\n", "b": b"changed\n", "new": b"two\n", "c": b"c2\n"}, [base], "theirs")
    assert repo.merge_in_memory(ours, theirs) == (None, ["a", "b", "new"])


# transport


@dataclass
class Pair:
    local: GitRepo
    remote: GitRepo  # what the remote named "origin" holds
    transport: Transport


def _real_pair(tmp_path: Path) -> Pair:
    local = init_repo(tmp_path / "local")
    _git(tmp_path, "init", "-q", "--bare", "remote.git")
    _git(tmp_path / "local", "remote", "add", "origin", str(tmp_path / "remote.git"))
    return Pair(local, open_repo(tmp_path / "remote.git"), GitTransport(tmp_path / "local"))


def _mem_pair(tmp_path: Path) -> Pair:
    local, remote = MemRepo(), MemRepo()
    return Pair(local, remote, MemTransport(local, {"origin": remote}))


@pytest.fixture(params=["git", "memory"])
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Pair:
    return (_real_pair if request.param == "git" else _mem_pair)(tmp_path)


def test_the_remote_is_known_by_its_name(pair: Pair) -> None:
    assert pair.transport.remote_names() == ["origin"]


def test_a_push_creates_new_refs_then_is_up_to_date(pair: Pair) -> None:
    one = files_commit(pair.local, {"a": b"1"})
    pair.local.cas_ref(f"{JOBS}j1", one, None)
    pair.local.cas_ref(f"{JOBS}j2", one, None)
    pair.local.cas_ref("refs/heads/main", one, None)  # not named by the refspec: stays here
    done = pair.transport.push("origin", [f"{JOBS}*:{JOBS}*"])
    assert done.ok and sorted(done.pushed) == [f"{JOBS}j1", f"{JOBS}j2"] and not done.remote_moved
    assert pair.remote.list_refs("refs/") == {f"{JOBS}j1": one, f"{JOBS}j2": one}
    assert pair.remote.read_blob(pair.remote.tree_entry(pair.remote.commit_info(one).tree, "a") or "") == b"1"
    again = pair.transport.push("origin", [f"{JOBS}*:{JOBS}*"])
    assert again.ok and again.pushed == ()


def test_a_fast_forward_push_is_accepted(pair: Pair) -> None:
    one = files_commit(pair.local, {"a": b"1"})
    pair.local.cas_ref(f"{JOBS}j1", one, None)
    assert pair.transport.push("origin", [f"{JOBS}j1:{JOBS}j1"]).ok
    two = files_commit(pair.local, {"a": b"2"}, [one])
    pair.local.cas_ref(f"{JOBS}j1", two, one)
    done = pair.transport.push("origin", [f"{JOBS}*:{JOBS}*"])
    assert done.ok and done.pushed == (f"{JOBS}j1",)
    assert pair.remote.read_ref(f"{JOBS}j1") == two


def test_a_push_that_is_not_a_fast_forward_is_refused_whole(pair: Pair) -> None:
    """The remote moved on (a commit this side never saw): nothing moves, not even a ref that could have."""
    one = files_commit(pair.local, {"a": b"1"})
    for job in ("j1", "j2"):
        pair.local.cas_ref(f"{JOBS}{job}", one, None)
    assert pair.transport.push("origin", [f"{JOBS}*:{JOBS}*"]).ok
    elsewhere = files_commit(pair.remote, {"a": b"elsewhere"}, [one], "pushed by another clone")
    pair.remote.cas_ref(f"{JOBS}j1", elsewhere, one)
    mine = files_commit(pair.local, {"a": b"mine"}, [one], "mine")
    pair.local.cas_ref(f"{JOBS}j1", mine, one)
    pair.local.cas_ref(f"{JOBS}j2", mine, one)  # a fast-forward on its own
    done = pair.transport.push("origin", [f"{JOBS}*:{JOBS}*"])
    assert not done.ok and done.remote_moved and done.pushed == ()
    assert any(f"{JOBS}j1" in line and "fetch first" in line for line in done.rejected)
    assert pair.remote.read_ref(f"{JOBS}j1") == elsewhere and pair.remote.read_ref(f"{JOBS}j2") == one
    pair.transport.fetch("origin", FETCH_SPECS)  # now this side has the remote's commit, and still does not contain it
    again = pair.transport.push("origin", [f"{JOBS}*:{JOBS}*"])
    assert not again.ok and again.remote_moved
    assert any(f"{JOBS}j1" in line and "non-fast-forward" in line for line in again.rejected)


def test_a_fetch_mirrors_the_remotes_refs_into_a_namespace_forced_and_pruned(pair: Pair) -> None:
    one = files_commit(pair.remote, {"a": b"1"})
    two = files_commit(pair.remote, {"a": b"2"}, [one])
    pair.remote.cas_ref(f"{JOBS}j1", two, None)
    pair.remote.cas_ref(f"{JOBS}j2", one, None)
    pair.remote.cas_ref("refs/notes/swarm", one, None)
    pair.remote.cas_ref("refs/heads/main", one, None)  # not named by the refspecs
    unrelated = files_commit(pair.local, {"b": b"local"})
    pair.local.cas_ref(f"{SHADOW}jobs/j2", unrelated, None)  # not an ancestor: overwritten (forced)
    pair.local.cas_ref(f"{SHADOW}jobs/stale", unrelated, None)  # the remote has no such job: pruned
    pair.local.cas_ref(f"{JOBS}mine", unrelated, None)  # outside the namespace: untouched
    pair.transport.fetch("origin", FETCH_SPECS)
    assert pair.local.list_refs(SHADOW) == {f"{SHADOW}jobs/j1": two, f"{SHADOW}jobs/j2": one, f"{SHADOW}notes/swarm": one}
    assert pair.local.read_ref(f"{JOBS}mine") == unrelated and pair.local.read_ref("refs/heads/main") is None
    assert [c.oid for c in pair.local.walk(two)] == [one, two]
    assert pair.local.read_blob(pair.local.tree_entry(pair.local.commit_info(two).tree, "a") or "") == b"2"


def test_fetching_from_an_unknown_remote_fails_and_pushing_to_one_is_refused(pair: Pair) -> None:
    with pytest.raises(GitCommandError, match="fetch"):
        pair.transport.fetch("nosuch", FETCH_SPECS)
    pair.local.cas_ref(f"{JOBS}j1", files_commit(pair.local, {"a": b"1"}), None)
    done = pair.transport.push("nosuch", [f"{JOBS}*:{JOBS}*"])
    assert not done.ok and not done.remote_moved and done.said


# offer: commits by id, all or none; a fast-forward, or a compare-and-swap for a ref in `expect`

J1, J2 = f"{JOBS}j1", f"{JOBS}j2"
BRANCH = "refs/swarm/branches/j1/t1"


def _history(pair: Pair) -> tuple[str, str, str]:
    """Commits of the local side only: `one`, `two` on top of it, and `side`, another child of `one`."""
    one = files_commit(pair.local, {"a": b"1"})
    two = files_commit(pair.local, {"a": b"2"}, [one], "two")
    return one, two, files_commit(pair.local, {"a": b"side"}, [one], "side")


def _offered(pair: Pair, updates: dict[str, str], expect: dict[str, str | None] | None = None) -> None:
    done = pair.transport.offer("origin", updates, expect)
    assert done == (True, tuple(updates), (), ""), done


def test_an_offer_creates_refs_by_commit_id_with_their_objects_and_moves_nothing_here(pair: Pair) -> None:
    one, two, _ = _history(pair)
    done = pair.transport.offer("origin", {J1: two, J2: one})
    assert done.ok and done.pushed == (J1, J2) and done.rejected == () and done.said == ""
    assert pair.remote.list_refs("refs/") == {J1: two, J2: one}
    assert [c.oid for c in pair.remote.walk(two)] == [one, two]
    assert pair.remote.read_blob(pair.remote.tree_entry(pair.remote.commit_info(two).tree, "a") or "") == b"2"
    assert pair.local.list_refs("refs/") == {}


def test_an_offer_that_is_a_fast_forward_or_already_there_is_accepted(pair: Pair) -> None:
    one, two, _ = _history(pair)
    _offered(pair, {J1: one})
    _offered(pair, {J1: two})
    assert pair.remote.read_ref(J1) == two
    _offered(pair, {J1: two})  # the remote holds it already: accepted, nothing moves
    assert pair.remote.list_refs("refs/") == {J1: two}


def test_an_offer_that_is_not_a_fast_forward_is_refused_whole(pair: Pair) -> None:
    """One ref would fast-forward, the other would not: neither moves."""
    one, two, side = _history(pair)
    _offered(pair, {J1: two, J2: one})
    done = pair.transport.offer("origin", {J2: two, J1: side})
    assert not done.ok and done.pushed == () and done.remote_moved and J1 in done.said
    assert done.rejected == (
        f"!\t{side}:{J1}\t[rejected] (non-fast-forward)",
        f"!\t{two}:{J2}\t[rejected] (atomic push failed)",
    )
    assert pair.remote.list_refs("refs/") == {J1: two, J2: one}


def test_an_offer_built_on_a_tip_the_remote_moved_past_is_refused(pair: Pair) -> None:
    """Another clone pushed a commit this side never saw: "fetch first", and nothing moves."""
    one, two, _ = _history(pair)
    _offered(pair, {J1: one})
    elsewhere = files_commit(pair.remote, {"a": b"elsewhere"}, [one], "pushed by another clone")
    pair.remote.cas_ref(J1, elsewhere, one)
    done = pair.transport.offer("origin", {J1: two, J2: two})
    assert not done.ok and done.pushed == () and done.remote_moved
    assert done.rejected == (
        f"!\t{two}:{J1}\t[rejected] (fetch first)",
        f"!\t{two}:{J2}\t[rejected] (atomic push failed)",
    )
    assert pair.remote.list_refs("refs/") == {J1: elsewhere}


def test_an_offer_whose_expect_matches_moves_the_ref_even_back_or_aside(pair: Pair) -> None:
    """A branch a new attempt reset: a compare-and-swap, no fast-forward needed; the job's ref beside it
    still moves as a fast-forward."""
    one, two, side = _history(pair)
    _offered(pair, {J1: one, BRANCH: two})
    _offered(pair, {J1: two, BRANCH: side}, {BRANCH: two})  # aside: `side` does not contain `two`
    assert pair.remote.list_refs("refs/") == {J1: two, BRANCH: side}
    _offered(pair, {BRANCH: one}, {BRANCH: side})  # back to an ancestor
    assert pair.remote.list_refs("refs/") == {J1: two, BRANCH: one}


def test_an_offer_whose_expect_does_not_match_is_refused_whole(pair: Pair) -> None:
    one, two, side = _history(pair)
    _offered(pair, {J1: one, BRANCH: two})
    done = pair.transport.offer("origin", {J1: two, BRANCH: side}, {BRANCH: one})  # the remote holds `two` there
    assert not done.ok and done.pushed == () and done.remote_moved
    assert done.rejected == (
        f"!\t{side}:{BRANCH}\t[rejected] (stale info)",
        f"!\t{two}:{J1}\t[rejected] (atomic push failed)",
    )
    absent = pair.transport.offer("origin", {J2: one}, {J2: two})  # an expected commit where the remote has no ref
    assert not absent.ok and absent.rejected == (f"!\t{one}:{J2}\t[rejected] (stale info)",)
    assert pair.remote.list_refs("refs/") == {J1: one, BRANCH: two}


def test_an_offer_expecting_none_creates_a_ref_only_where_the_remote_has_none(pair: Pair) -> None:
    one, two, _ = _history(pair)
    _offered(pair, {BRANCH: one}, {BRANCH: None})
    assert pair.remote.list_refs("refs/") == {BRANCH: one}
    done = pair.transport.offer("origin", {BRANCH: two, J1: two}, {BRANCH: None})  # a fast-forward, but it exists now
    assert not done.ok and done.pushed == () and done.remote_moved
    assert done.rejected == (
        f"!\t{two}:{BRANCH}\t[rejected] (stale info)",
        f"!\t{two}:{J1}\t[rejected] (atomic push failed)",
    )
    assert pair.remote.list_refs("refs/") == {BRANCH: one}


def test_an_offer_of_a_ref_outside_refs_swarm_raises_and_sends_nothing(pair: Pair) -> None:
    one, _, _ = _history(pair)
    with pytest.raises(ValueError, match="refs/swarm/"):
        pair.transport.offer("origin", {J1: one, "refs/heads/main": one})
    assert pair.remote.list_refs("refs/") == {} and not pair.remote.has_object(one)


def test_an_offer_of_a_commit_this_side_lacks_or_to_an_unknown_remote_is_refused(pair: Pair) -> None:
    """Neither is a race: the first names the refs it refused, the second refuses none and says why."""
    one, _, _ = _history(pair)
    lacking = pair.transport.offer("origin", {J1: "1234" * 10, J2: one})
    assert not lacking.ok and lacking.pushed == () and not lacking.remote_moved
    assert [line.split("\t")[1] for line in lacking.rejected] == [f"{'1234' * 10}:{J1}", f"{one}:{J2}"]
    assert pair.remote.list_refs("refs/") == {}
    unknown = pair.transport.offer("nosuch", {J1: one})
    assert not unknown.ok and unknown.rejected == () and unknown.said
