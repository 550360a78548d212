"""A worker whose job ref is lost mid-run keeps its result, never dies with a traceback (store/kept_results.py).

The ref is taken away with git plumbing while the tasks run: deleted, or
pointed at a blob. `run` ends with one line saying where the results are;
once the ref is back, `recover` records them on their tasks.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import cli, git, ok, spec_text
from tests.proctools import wait_for

SLOW = 'id = "a"\ncommand = "sleep 1.5; echo a-done"', 'id = "b"\ncommand = "sleep 1.5; echo b-done"'


def start_run(repo: Path) -> tuple[subprocess.Popen[bytes], str]:
    (repo / "slow.toml").write_text(spec_text(*SLOW))
    run = subprocess.Popen([sys.executable, "-m", "gitswarm", "run", "slow.toml", "-j", "2"], cwd=repo,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    ref = ""

    def both_running() -> bool:
        nonlocal ref
        ref = git(repo, "for-each-ref", "--format=%(refname)", "refs/swarm/jobs").strip()
        if not ref:
            return False
        status = cli(repo, "--json", "status", ref.rsplit("/", 1)[1])
        return status.code == 0 and [t["state"] for t in status.json()["tasks"]] == ["running", "running"]

    wait_for(both_running, 20)
    return run, ref


@pytest.mark.parametrize("how", ["deleted", "a blob"])
def test_a_lost_job_ref_keeps_the_results_and_recover_records_them_once_it_is_back(repo: Path, how: str) -> None:
    run, ref = start_run(repo)
    job = ref.rsplit("/", 1)[1]
    tip = git(repo, "rev-parse", ref).strip()
    if how == "deleted":
        git(repo, "update-ref", "-d", ref)
    else:
        blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input=b"not a commit",
                              capture_output=True, check=True).stdout.decode().strip()
        git(repo, "update-ref", ref, blob)
    _, err = run.communicate(timeout=60)
    said = err.decode()
    assert run.returncode == 1, said
    assert "Traceback" not in said and "kept" in said.splitlines()[-1] and "gitswarm recover" in said.splitlines()[-1]
    kept = sorted(p.name for p in (repo / ".git" / "gitswarm" / "kept-results").iterdir())
    assert kept == [f"{job}.a.1.json", f"{job}.b.1.json"]

    waiting = ok(cli(repo, "--json", "recover")).json()["kept"]
    assert [k["outcome"] for k in waiting] == [f"waiting: job {job} is still gone"] * 2

    git(repo, "update-ref", ref, tip)  # the ref is back (restored by hand, or pulled again)
    recovered = ok(cli(repo, "--json", "recover")).json()
    assert [k["outcome"] for k in recovered["kept"]] == ["recorded 1 artifacts on the task"] * 2
    assert not list((repo / ".git" / "gitswarm" / "kept-results").glob("*.json"))
    shown = ok(cli(repo, "--json", "show", job)).json()
    checks = [a for a in shown["artifacts"] if a["kind"] == "check"]
    assert sorted(a["task"] for a in checks) == ["a", "b"] and all("exit 0" in a["summary"] for a in checks)
    assert ok(cli(repo, "--json", "recover")).json()["kept"] == []  # offered once


def test_a_kept_result_that_does_not_read_is_reported_and_left(repo: Path) -> None:
    kept = repo / ".git" / "gitswarm" / "kept-results"
    kept.mkdir(parents=True)
    (kept / "x.a.1.json").write_text("{not json")
    report = ok(cli(repo, "--json", "recover")).json()["kept"]
    assert report == [{"file": str(kept / "x.a.1.json"), "outcome": "unreadable: not a kept result this gitswarm reads"}]
    assert (kept / "x.a.1.json").exists()
