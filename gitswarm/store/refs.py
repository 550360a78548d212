"""Refs as the git CLI reads and writes them, where libgit2's view is not the one wanted.

`ref_targets` lists every ref as git itself would (loose, packed, symbolic),
for the integrity snapshots; `branches_containing` asks which branches hold a
commit; `delete_ref` removes a ref only if it still points where it was seen.
"""

from __future__ import annotations

from pathlib import Path

from gitswarm.store.gitcli import git


def ref_targets(repo_dir: Path) -> dict[bytes, bytes]:
    """Every ref (`git for-each-ref`) and what it points at: `<oid>\\0<symref target>` (the target empty when
    the ref is not symbolic). Names and targets are bytes, as git wrote them."""
    out = git(["for-each-ref", "--format=%(refname)%00%(objectname)%00%(symref)"], repo_dir)
    found = {}
    for line in out.splitlines():
        name, _, target = line.partition(b"\0")
        found[name] = target
    return found


def branches_containing(repo_dir: Path, commit: str) -> list[str]:
    """The full names of the branches (`refs/heads/*`) whose history contains `commit`."""
    out = git(["for-each-ref", "--contains", commit, "--format=%(refname)", "refs/heads/"], repo_dir)
    return out.decode(errors="replace").split()


def delete_ref(repo_dir: Path, name: str, expected: str) -> None:
    """Delete the ref `name` if it still points at `expected` (`git update-ref -d`); GitCommandError if it moved."""
    git(["update-ref", "-d", name, expected], repo_dir)
