"""The commits a process knows a job's local history holds (engine/sharing/tip_intake.py, `held_here`): a claim
tip in the set is never merged again, so the set must never hold a commit the local history does not."""

from __future__ import annotations

from pathlib import Path

import pygit2

from gitswarm.engine.sharing import tip_intake
from gitswarm.store.git import PygitRepo


def chain(store: PygitRepo, count: int) -> list[str]:
    tree = store.update_tree(None, {"f": store.write_blob(b"x")})
    commits: list[str] = []
    for n in range(count):
        commits.append(store.commit(tree, commits[-1:], f"c{n}", ("gitswarm", "t@gitswarm"), 1_800_000_000 + n))
    return commits


def test_the_set_follows_the_local_tip_forward_and_starts_anew_when_it_is_set_back(tmp_path: Path) -> None:
    pygit2.init_repository(str(tmp_path))
    store = PygitRepo(tmp_path)
    a, b, c = chain(store, 3)
    assert tip_intake.held_here(store, "job", b) == {a, b}
    assert tip_intake.held_here(store, "job", c) == {a, b, c}  # only what c added was walked
    assert tip_intake.held_here(store, "job", a) == {a}  # the ref set back by hand: b and c are no longer held
    tip_intake.forget(store, "job")
