"""`gitswarm merge JOB`, the merge train, through the real CLI on real repositories: a job's verified patches
stacked on the target, checked once, bisected to the patch that breaks the stack, and landed in one move
of the target; conflicts and culprits left out and named; the user's uncommitted work never touched."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import cli, git, rev
from tests.engine.delegation.test_stack import five_task_dag, implement, records, run_job, shell


def reflog(repo: Path, ref: str = "refs/heads/main") -> list[str]:
    return git(repo, "reflog", "show", "--format=%H %gs", ref).splitlines()


def by_task(data: dict) -> dict[str, tuple[str, str | None]]:
    return {p["task"]: (p["status"], p["why"]) for p in data["patches"]}


def test_merge_job_lands_a_five_task_stacked_dag_in_one_move_of_main(repo: Path, tmp_path: Path) -> None:
    old = rev(repo)
    data = run_job(repo, tmp_path, *five_task_dag())
    assert data["status"] == "succeeded", data
    job = data["id"]
    heads = {t: r["patch"].head for t, r in records(repo, job).items()}
    moves = len(reflog(repo))
    (repo / "notes.txt").write_text("the user's own untracked file\n")
    result = cli(repo, "--json", "merge", job[:10])
    assert result.code == 0, result.err
    train = result.json()
    assert by_task(train) == {t: ("landed", None) for t in "abcde"}
    # e's patch holds all five (it is stacked on d, on c, on a and b): main fast-forwards to it, in one move
    assert train["fast_forward"] is True and train["old"] == old and train["new"] == heads["e"] == rev(repo, "main")
    assert train["check_runs"] == 1
    assert len(reflog(repo)) == moves + 1 and reflog(repo)[0].endswith(f"gitswarm: merge job {job}")
    assert git(repo, "merge-base", "--is-ancestor", old, "main") == ""
    for name in "abcde":
        assert (repo / f"{name}.txt").read_text() == f"{name}\n"
    assert (repo / "notes.txt").read_text() == "the user's own untracked file\n"
    assert git(repo, "status", "--porcelain") == "?? notes.txt\n"
    # each task says it was merged, as `worktrees gc` reads it
    again = cli(repo, "--json", "merge", job)
    assert again.code == 1 and "no verified patch to merge" in again.err and rev(repo, "main") == heads["e"]


def test_a_train_bisects_to_the_patch_that_breaks_the_stack_and_lands_the_others(repo: Path, tmp_path: Path) -> None:
    """Five independent patches, each green alone; the third writes x.txt, which the first's check forbids
    once the first's file is there: together they fail. The culprit is named, the four others land in one merge commit."""
    forbid = "test ! -e one.txt || test ! -e x.txt"
    tasks = [
        implement("one", "echo 1 > one.txt", ["test -f one.txt", forbid]),
        implement("two", "echo 2 > two.txt", ["test -f two.txt"]),
        implement("three", "echo 3 > x.txt", ["test -f x.txt"]),
        implement("four", "echo 4 > four.txt", ["test -f four.txt"]),
        implement("five", "echo 5 > five.txt", ["test -f five.txt"]),
    ]
    data = run_job(repo, tmp_path, *tasks)
    assert data["status"] == "succeeded", data
    heads = {t: r["patch"].head for t, r in records(repo, data["id"]).items()}
    old = rev(repo)
    moves = len(reflog(repo))
    result = cli(repo, "--json", "merge", data["id"])
    assert result.code == 1, result.err
    train = result.json()
    statuses = by_task(train)
    assert statuses["three"][0] == "broke_stack" and forbid in (statuses["three"][1] or "")
    assert {t: s for t, (s, _) in statuses.items() if t != "three"} == dict.fromkeys(["one", "two", "four", "five"], "landed")
    new = rev(repo, "main")
    assert train["new"] == new and train["fast_forward"] is False and len(reflog(repo)) == moves + 1
    parents = git(repo, "rev-list", "--parents", "-1", new).split()[1:]
    assert parents == [old, heads["one"], heads["two"], heads["four"], heads["five"]]
    assert f"Merge job {data['id']}" in git(repo, "log", "-1", "--format=%B", new)
    assert not (repo / "x.txt").exists() and all((repo / f"{n}.txt").exists() for n in ("one", "two", "four", "five"))
    assert 2 <= train["check_runs"] <= 5
    shown = cli(repo, "merge", data["id"])  # the culprit still stands, and says so again; nothing else moves
    assert shown.code == 1 and rev(repo, "main") == new


def test_merge_job_never_touches_the_users_uncommitted_work(repo: Path, tmp_path: Path) -> None:
    data = run_job(repo, tmp_path, implement("a", "echo a > a.txt", ["test -f a.txt"]))
    old = rev(repo)
    (repo / "README.md").write_text("hello\nmy own work, not committed\n")
    before = (git(repo, "for-each-ref"), git(repo, "status", "--porcelain", "--untracked-files=all"))
    refused = cli(repo, "--json", "merge", data["id"])
    assert refused.code == 1 and "uncommitted changes" in refused.err
    assert (repo / "README.md").read_text() == "hello\nmy own work, not committed\n"
    assert (git(repo, "for-each-ref"), git(repo, "status", "--porcelain", "--untracked-files=all")) == before
    assert rev(repo, "main") == old and not (repo / "a.txt").exists()
    # an untracked file in the way refuses the move; nothing moves, the file stays
    git(repo, "checkout", "-q", "README.md")
    (repo / "a.txt").write_text("mine\n")
    refused = cli(repo, "--json", "merge", data["id"])
    assert refused.code == 1 and rev(repo, "main") == old and (repo / "a.txt").read_text() == "mine\n"


def test_a_conflicting_patch_is_left_out_of_the_train_with_what_stacks_on_it(repo: Path, tmp_path: Path) -> None:
    data = run_job(
        repo, tmp_path,
        implement("ok", "echo ok > ok.txt", ["test -f ok.txt"]),
        implement("edit", "echo edited > README.md", ["grep -q edited README.md"]),
        implement("on_edit", "echo more > more.txt", ["test -f more.txt"], ["edit"]),
    )
    git(repo, "commit", "-qam", "x", "--allow-empty")
    (repo / "README.md").write_text("the user's own line\n")
    git(repo, "commit", "-qam", "the user edits README.md meanwhile")
    old = rev(repo)
    result = cli(repo, "--json", "merge", data["id"])
    assert result.code == 1
    statuses = by_task(result.json())
    assert statuses["ok"] == ("landed", None)
    assert statuses["edit"][0] == "conflicted" and "README.md" in (statuses["edit"][1] or "")
    assert statuses["on_edit"][0] == "held_back" and "edit" in (statuses["on_edit"][1] or "")
    new = rev(repo, "main")
    assert git(repo, "rev-list", "--parents", "-1", new).split()[1:] == [old, records(repo, data["id"])["ok"]["patch"].head]
    assert (repo / "README.md").read_text() == "the user's own line\n"


def test_merge_of_an_unknown_id_is_bad_input(repo: Path, tmp_path: Path) -> None:
    run_job(repo, tmp_path, shell("s", "true", []))
    before = git(repo, "for-each-ref")
    result = cli(repo, "merge", "deadbeef")
    assert result.code == 2 and result.err.count("\n") == 1 and "no patch or job matches" in result.err
    assert git(repo, "for-each-ref") == before
