"""Implement tasks running at the same time each work in their own worktree: no one sees another's edits."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gitswarm.engine.swarm import Swarm
from gitswarm.model.artifacts import Patch, Verdict
from gitswarm.store.checkouts import POOL_SIZE, Checkouts
from tests.conftest import cli, git
from tests.engine.delegation.test_attempt import state_root


def register(repo: Path, name: str, toml: str) -> None:
    adapters = repo / ".gitswarm" / "adapters"
    adapters.mkdir(parents=True, exist_ok=True)
    (adapters / f"{name}.toml").write_text(toml)
    git(repo, "add", ".gitswarm")
    git(repo, "commit", "-qm", f"register {name}")


def by_task(repo: Path, job: str) -> dict[str, list[object]]:
    swarm = Swarm(repo)
    try:
        snapshot = swarm.refs.snapshot(job, swarm.index.job_tip(job))
        return {t.id: [snapshot.artifact(a) for a in t.artifacts] for t in snapshot.tasks()}
    finally:
        swarm.close()


def implement(task: str, adapter: str, prompt: str, checks: list[str], paths: list[str]) -> str:
    """An implement task; its declared paths are disjoint from the other's, or the job would be refused
    as one coupled change (model/coupling.py)."""
    return (
        f'[[tasks]]\nid = "{task}"\nmode = "implement"\nadapter = "{adapter}"\n'
        f"prompt = {json.dumps(prompt)}\nchecks = {json.dumps(checks)}\nmax_attempts = 1\nrepair_rounds = 1\n"
        f"paths = {json.dumps(paths)}\n"
    )


def run(repo: Path, tmp_path: Path, spec: str) -> dict:
    path = tmp_path / "spec.toml"
    path.write_text('goal = "parallel"\n' + spec)
    result = cli(repo, "--json", "run", str(path), "-j", "2")
    assert result.out, result.err
    data = result.json()
    assert result.code == 0, [(t["id"], t["state"], t["error"]) for t in data["tasks"]]
    return data


def test_two_parallel_tasks_never_see_each_others_edits_and_both_verify(repo: Path, tmp_path: Path) -> None:
    register(repo, "scripted", f'executable = {json.dumps(sys.executable)}\nargs = ["-m", "gitswarm.scripted_agent", "{{prompt}}"]\n')
    base = git(repo, "rev-parse", "HEAD").strip()
    data = run(
        repo,
        tmp_path,
        implement("a", "scripted", "write a.txt: from a\nedit README.md: replace hello with hello a", ["test -e a.txt", "test ! -e b.txt"], ["a.txt", "README.md"])
        + implement("b", "scripted", "write b.txt: from b", ["test -e b.txt", "test ! -e a.txt"], ["b.txt"]),
    )
    assert {t["id"]: t["state"] for t in data["tasks"]} == {"a": "succeeded", "b": "succeeded"}
    arts = by_task(repo, data["id"])
    patches = {task: [x for x in found if isinstance(x, Patch)] for task, found in arts.items()}
    verdicts = {task: [x for x in found if isinstance(x, Verdict)] for task, found in arts.items()}
    for task, other in (("a", "b"), ("b", "a")):
        (patch,) = patches[task]
        (verdict,) = verdicts[task]
        assert patch.base == base and verdict.head == patch.head and verdict.accepted
        assert f"{other}.txt" not in {f.path for f in patch.files}
        assert git(repo, "rev-parse", f"refs/heads/swarm/{data['id']}/{task}").strip() == patch.head
        wt = state_root(repo) / data["id"] / task
        assert (wt / f"{task}.txt").exists() and not (wt / f"{other}.txt").exists()
    assert {f.path for f in patches["a"][0].files} == {"a.txt", "README.md"}
    assert {f.path for f in patches["b"][0].files} == {"b.txt"}
    assert git(repo, "status", "--porcelain") == "" and git(repo, "rev-parse", "HEAD").strip() == base

    # both are verified; merging the second re-runs its checks on the merged tree, where a.txt now exists
    ids = {t: a for t, a in ((r["task"], r["id"]) for r in data["summary"]["patches"])}
    assert cli(repo, "--json", "merge", ids["a"]).code == 0
    refused = cli(repo, "--json", "merge", ids["b"])
    assert refused.code == 1 and "test ! -e a.txt" in refused.err
    assert cli(repo, "--json", "merge", ids["b"], "--no-recheck").code == 0
    assert (repo / "a.txt").exists() and (repo / "b.txt").exists() and (repo / "README.md").read_text() == "hello a\n"


# An agent that proves the two ran at the same time: it makes its edit, says it started,
# waits until the other has started (and so has made its own edit), then looks for the
# other's file in its own tree, and records what it saw in its file.
# Its words come from the task's own section of the prompt packet gitswarm sends.
BARRIER_AGENT = """#!/bin/sh
set -- $(printf '%s\\n' "$1" | awk 'f == 1 && NF {{ print; exit }} /^# Your task/ {{ f = 1 }}')
own=$1 other=$2 sync={sync}
echo pending > "$own.txt"
touch "$sync/$own.started"
i=0
while [ ! -e "$sync/$other.started" ]; do
    i=$((i + 1))
    if [ "$i" -gt 400 ]; then echo "never ran beside $other" > "$own.txt"; exit 0; fi
    sleep 0.025
done
if [ -e "$other.txt" ]; then echo "saw $other.txt" > "$own.txt"; else echo alone > "$own.txt"; fi
ls -A > "$sync/$own.seen"
"""


def test_tasks_that_really_overlap_still_see_only_their_own_tree(repo: Path, tmp_path: Path) -> None:
    sync = tmp_path / "sync"
    sync.mkdir()
    script = tmp_path / "barrier.sh"
    script.write_text(BARRIER_AGENT.format(sync=sync))
    register(repo, "barrier", f'executable = "/bin/sh"\nargs = [{json.dumps(str(script))}, "{{prompt}}"]\n'
             f'[sandbox]\nwrite = [{json.dumps(str(sync))}]\n')  # where the two meet, outside both worktrees
    data = run(
        repo,
        tmp_path,
        implement("a", "barrier", "a b", ["grep -qx alone a.txt", "test ! -e b.txt"], ["a.txt"])
        + implement("b", "barrier", "b a", ["grep -qx alone b.txt", "test ! -e a.txt"], ["b.txt"]),
    )
    assert {t["id"]: t["state"] for t in data["tasks"]} == {"a": "succeeded", "b": "succeeded"}
    for task, other in (("a", "b"), ("b", "a")):
        seen = (sync / f"{task}.seen").read_text().split()
        assert f"{task}.txt" in seen and f"{other}.txt" not in seen
        wt = state_root(repo) / data["id"] / task
        assert (wt / f"{task}.txt").read_text() == "alone\n"
    arts = by_task(repo, data["id"])
    for task in ("a", "b"):
        verdicts = [x for x in arts[task] if isinstance(x, Verdict)]
        assert len(verdicts) == 1 and verdicts[0].accepted
    assert not (repo / "a.txt").exists() and not (repo / "b.txt").exists()


@pytest.fixture(autouse=True)
def _no_stray_checkouts(repo: Path):
    yield
    checkouts = state_root(repo) / "checkouts"
    present = sorted(str(p) for p in checkouts.iterdir()) if checkouts.is_dir() else []
    assert len(present) <= POOL_SIZE, "clean checkouts past the pool's size were left behind"
    assert sorted(Checkouts(repo, state_root(repo)).clear()) == present, "a clean checkout is still held"
