"""The coupled-change guard through the real CLI: submit and run refuse, --allow-overlap insists,
and delegate warns when unfinished work on the same base looks like the same change."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import cli, git, register_scripted, swarm_refs

TWO = (
    'goal = "two sides of one change"\n'
    '[[tasks]]\nid = "api"\nmode = "implement"\nadapter = "scripted"\nprompt = "write api.txt: new"\n'
    '[[tasks]]\nid = "client"\nmode = "implement"\nadapter = "scripted"\nprompt = "write client.txt: new"\n'
)


def test_submit_refuses_a_coupled_change_naming_the_tasks_and_writes_nothing(repo: Path, tmp_path: Path) -> None:
    register_scripted(repo)
    spec = tmp_path / "job.toml"
    spec.write_text(TWO)
    before = swarm_refs(repo)
    for command in ("submit", "run"):
        refused = cli(repo, command, str(spec))
        assert refused.code == 2 and refused.out == ""
        (line,) = refused.err.splitlines()
        assert line.startswith("gitswarm: job.toml: implement tasks that can run at the same time")
        assert "api and client" in line and "depends_on" in line and "--allow-overlap" in line
    assert swarm_refs(repo) == before


def test_allow_overlap_submits_it_and_disjoint_paths_need_nothing(repo: Path, tmp_path: Path) -> None:
    register_scripted(repo)
    spec = tmp_path / "job.toml"
    spec.write_text(TWO)
    assert cli(repo, "submit", str(spec), "--allow-overlap").code == 0
    spec.write_text(TWO.replace('prompt = "write api.txt: new"', 'prompt = "write api.txt: new"\npaths = ["api.txt"]')
                    .replace('prompt = "write client.txt: new"', 'prompt = "write client.txt: new"\npaths = ["client.txt"]'))
    result = cli(repo, "--json", "run", str(spec), "-j", "2")
    assert result.code == 0, result.err
    assert {t["id"]: t["state"] for t in result.json()["tasks"]} == {"api": "succeeded", "client": "succeeded"}


def test_delegate_warns_when_active_work_on_the_same_base_looks_the_same(repo: Path, tmp_path: Path) -> None:
    register_scripted(repo)
    spec = tmp_path / "queued.toml"
    spec.write_text('goal = "g"\n[[tasks]]\nid = "fix"\nmode = "implement"\nadapter = "scripted"\n'
                    'prompt = "tidy README.md"\n')
    queued = cli(repo, "submit", str(spec)).out.strip()
    done = cli(repo, "delegate", "edit README.md: replace hello with world", "--adapter", "scripted", "--check", "true")
    assert done.code == 0, done.err
    assert f"task {queued[:12]}/fix (queued) looks like the same change: same base, names README.md" in done.err
    quiet = cli(repo, "delegate", "write other.txt: x", "--adapter", "scripted", "--check", "true")
    assert "looks like the same change" not in quiet.err
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""
