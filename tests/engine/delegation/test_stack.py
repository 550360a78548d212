"""Stacked tasks, through the real CLI on real repositories: a task that depends on implement tasks starts
from their verified patches (its worktree, or a clean checkout for a shell task), never from the job's base
alone and never in the user's tree; a conflict among its upstreams fails it naming the file; an
unverified upstream skips it."""

from __future__ import annotations

from pathlib import Path

from gitswarm.engine.swarm import Swarm
from gitswarm.model.artifacts import Patch
from tests.conftest import cli, git, rev


def implement(task: str, command: str, checks: list[str] | None = None, depends_on: list[str] | None = None) -> str:
    """A shell implement task (TOML literal strings: no single quotes in COMMAND or CHECKS)."""
    checks = ["true"] if checks is None else checks
    lines = [f'id = "{task}"', 'mode = "implement"', f"command = '{command}'",
             "checks = [" + ", ".join(f"'{c}'" for c in checks) + "]", "max_attempts = 1"]
    if depends_on:
        lines.append("depends_on = [" + ", ".join(f'"{d}"' for d in depends_on) + "]")
    return "[[tasks]]\n" + "\n".join(lines) + "\n"


def shell(task: str, command: str, depends_on: list[str]) -> str:
    deps = ", ".join(f'"{d}"' for d in depends_on)
    return f"[[tasks]]\nid = \"{task}\"\ncommand = '{command}'\ndepends_on = [{deps}]\nmax_attempts = 1\n"


def run_job(repo: Path, tmp_path: Path, *tasks: str, goal: str = "stacked") -> dict:
    spec = tmp_path / f"spec-{len(list(tmp_path.glob('spec-*')))}.toml"  # outside the repo: the user's tree stays as it is
    spec.write_text(f'goal = "{goal}"\n' + "".join(tasks))
    result = cli(repo, "--json", "run", str(spec), "-j", "1", "--allow-overlap")
    assert result.out, result.err
    return result.json()


def records(repo: Path, job: str) -> dict[str, dict]:
    """Each task: its record and its last patch."""
    swarm = Swarm(repo)
    try:
        snapshot = swarm.refs.snapshot(job, swarm.index.job_tip(job))
        out = {}
        for task in snapshot.tasks():
            patches = [p for a in task.artifacts if isinstance(p := snapshot.artifact(a), Patch)]
            out[task.id] = {"task": task, "patch": patches[-1] if patches else None}
        return out
    finally:
        swarm.close()


def tree_files(repo: Path, commit: str) -> set[str]:
    return set(git(repo, "ls-tree", "-r", "--name-only", commit).split())


def five_task_dag() -> tuple[str, ...]:
    """a and b from the base; c on both; d on c; e on c and d. Each command fails unless its upstreams' files are there."""
    return (
        implement("a", "echo a > a.txt", ["test -f a.txt"]),
        implement("b", "echo b > b.txt", ["test -f b.txt"]),
        implement("c", "test -f a.txt && test -f b.txt && echo c > c.txt", ["test -f c.txt"], ["a", "b"]),
        implement("d", "test -f c.txt && echo d > d.txt", ["test -f d.txt"], ["c"]),
        implement("e", "test -f d.txt && test -f a.txt && echo e > e.txt", ["test -f e.txt"], ["c", "d"]),
    )


def test_each_dependent_task_starts_from_its_upstreams_verified_patches(repo: Path, tmp_path: Path) -> None:
    base = rev(repo)
    final = shell("final", "test -f a.txt && test -f b.txt && test -f e.txt && test ! -e README.md.orig", ["e"])
    data = run_job(repo, tmp_path, *five_task_dag(), final)
    assert data["status"] == "succeeded", data
    found = records(repo, data["id"])
    heads = {t: found[t]["patch"].head for t in "abcde"}
    # a and b start from the job's base; c from the merge of a and b (recorded on the task); d on c; e on d (which holds c)
    assert found["a"]["patch"].base == base == found["b"]["patch"].base and found["a"]["task"].base is None
    c_base = found["c"]["patch"].base
    assert found["c"]["task"].base == c_base and git(repo, "rev-list", "--parents", "-1", c_base).split() == [c_base, heads["a"], heads["b"]]
    assert found["d"]["patch"].base == heads["c"] == found["d"]["task"].base
    assert found["e"]["patch"].base == heads["d"] == found["e"]["task"].base
    for task, files in {"c": {"a.txt", "b.txt", "c.txt"}, "d": {"a.txt", "b.txt", "c.txt", "d.txt"}, "e": set("abcde")}.items():
        expected = {f"{f}.txt" for f in files} if task == "e" else files
        assert expected <= tree_files(repo, heads[task]), task
        # each patch is its own change only
        assert [f.path for f in found[task]["patch"].files] == [f"{task}.txt"]
    # the final shell task ran on a clean checkout of e's patch, not in the user's tree (which has none of it)
    assert found["final"]["task"].state == "succeeded" and found["final"]["task"].base == heads["e"]
    assert rev(repo) == base and git(repo, "status", "--porcelain", "--untracked-files=all") == ""


def test_a_conflict_between_two_upstreams_fails_the_dependent_naming_the_file(repo: Path, tmp_path: Path) -> None:
    data = run_job(
        repo, tmp_path,
        implement("left", "echo left > README.md", ["grep -q left README.md"]),
        implement("right", "echo right > README.md", ["grep -q right README.md"]),
        implement("both", "echo both > both.txt", ["true"], ["left", "right"]),
        implement("after", "echo after > after.txt", ["true"], ["both"]),
    )
    found = records(repo, data["id"])
    both = found["both"]["task"]
    assert (found["left"]["task"].state, found["right"]["task"].state) == ("succeeded", "succeeded")
    assert both.state == "failed" and both.attempts == 1
    assert "conflict" in (both.error or "") and "README.md" in (both.error or "") and "left" in both.error and "right" in both.error
    assert found["both"]["patch"] is None
    assert found["after"]["task"].state == "skipped" and found["after"]["task"].skipped_because == "both"


def test_an_unverified_upstream_skips_its_dependents(repo: Path, tmp_path: Path) -> None:
    data = run_job(
        repo, tmp_path,
        implement("unchecked", "echo u > u.txt", []),  # no checks: its patch stands unverified
        implement("on_it", "echo x > x.txt", ["true"], ["unchecked"]),
        shell("report", "true", ["on_it"]),
    )
    found = records(repo, data["id"])
    assert found["unchecked"]["task"].state == "succeeded" and found["unchecked"]["patch"] is not None
    on_it = found["on_it"]["task"]
    assert on_it.state == "skipped" and on_it.skipped_because == "unchecked" and "unverified" in (on_it.error or "")
    assert found["on_it"]["patch"] is None
    assert found["report"]["task"].state == "skipped" and found["report"]["task"].skipped_because == "on_it"


def test_a_shell_task_on_implement_tasks_never_runs_in_the_users_tree(repo: Path, tmp_path: Path) -> None:
    data = run_job(
        repo, tmp_path,
        implement("a", "echo a > a.txt", ["test -f a.txt"]),
        shell("build", "test -f a.txt && echo built > out.txt", ["a"]),
    )
    found = records(repo, data["id"])
    assert found["build"]["task"].state == "succeeded", found["build"]["task"].error
    assert not (repo / "out.txt").exists() and git(repo, "status", "--porcelain", "--untracked-files=all") == ""
