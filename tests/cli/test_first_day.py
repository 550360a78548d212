"""A newcomer's first day: `--json` after the command, -h, `help`, a bare command listing what
there is, shell completion, tables that fit, one command to a task's output, and the quick
path of `status` and `show` answering exactly as the full command line does."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from gitswarm.cli.boundary import guarded
from gitswarm.cli.full import command, run
from gitswarm.cli.quick import plan
from gitswarm.cli.table import fit, table
from tests.conftest import Result, cli, spec_text

GITSWARM = Path(sys.executable).with_name("gitswarm")


def full(cwd: Path, *args: str) -> Result:
    """As conftest.cli, but always through typer (never the quick path)."""
    out, err = io.StringIO(), io.StringIO()
    old = Path.cwd()
    os.chdir(cwd)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = guarded(lambda: run(list(args)))
    finally:
        os.chdir(old)
    return Result(code, out.getvalue(), err.getvalue())


@pytest.fixture
def job(repo: Path) -> str:
    (repo / "job.toml").write_text(spec_text('id = "lint"\ncommand = "true"', 'id = "test"\ncommand = "true"\ndepends_on = ["lint"]'))
    submitted = cli(repo, "--json", "submit", "job.toml")
    assert submitted.code == 0, submitted.err
    return submitted.json()["id"]


# -- --json anywhere, -C before ------------------------------------------------------------


@pytest.mark.parametrize("args", [["status"], ["status", "JOB"], ["show", "JOB"], ["log", "JOB"], ["artifacts", "JOB"], ["index", "rebuild"], ["doctor"]])
def test_json_after_the_command_is_the_same_as_before_it(repo: Path, job: str, args: list[str]) -> None:
    args = [job if a == "JOB" else a for a in args]
    before = cli(repo, "--json", *args)
    after = cli(repo, *args, "--json")
    assert before.code == after.code == 0, before.err + after.err
    if args != ["index", "rebuild"]:
        assert after.out == before.out
    assert after.json() is not None


def test_json_between_a_group_and_its_command(repo: Path) -> None:
    assert cli(repo, "index", "--json", "rebuild").json()["jobs"] == 0


def test_dash_c_stays_before_the_command_as_in_git(repo: Path, tmp_path: Path) -> None:
    result = cli(tmp_path, "status", "-C", str(repo))
    assert result.code == 2 and result.out == ""
    assert result.err.startswith("gitswarm: ") and "-C" in result.err
    assert cli(tmp_path, "-C", str(repo), "status", "--json").json() == {"jobs": [], "awaiting_approval": {}}


# -- help ----------------------------------------------------------------------------------


def test_dash_h_is_help(repo: Path) -> None:
    assert cli(repo, "-h").out == cli(repo, "--help").out
    status = cli(repo, "status", "-h")
    assert status.code == 0 and status.out.startswith("Usage: gitswarm status [OPTIONS] [JOB]")
    assert "--all" in status.out and "--json" in status.out


def test_help_command(repo: Path) -> None:
    assert cli(repo, "help").out == cli(repo, "--help").out
    assert cli(repo, "help", "status").out == cli(repo, "status", "--help").out
    nested = cli(repo, "help", "worktrees", "list")
    assert nested.code == 0 and nested.out.startswith("Usage: gitswarm worktrees list")
    typo = cli(repo, "help", "stauts")
    assert (typo.code, typo.out) == (2, "")
    assert typo.err == "gitswarm: help: gitswarm has no command 'stauts'; did you mean 'status'?\n"
    assert cli(repo, "help", "hooks", "run").code == 2  # hidden: the shims' entry point


def test_run_bare_it_lists_the_commands(repo: Path) -> None:
    bare = cli(repo)
    assert bare.code == 0 and bare.err == ""
    assert bare.out == cli(repo, "--help").out
    listed = bare.out.split("Commands:\n", 1)[1]
    for name in ("init", "run", "status", "show", "output", "delegate", "merge", "help", "completion", "worktrees", "hooks"):
        assert f"\n  {name} " in "\n" + listed, name
    assert "gitswarm help COMMAND" in bare.out
    group = cli(repo, "worktrees")
    assert group.code == 0 and group.out.startswith("Usage: gitswarm worktrees") and "  gc " in group.out
    for name in ("index", "adapters", "hooks"):
        listing = cli(repo, name)
        assert listing.code == 0 and "Commands:" in listing.out, name


# -- the quick path ------------------------------------------------------------------------


QUICK = [
    ["status"], ["--json", "status"], ["status", "--json"], ["status", "--all"], ["status", "JOB"], ["status", "JOB", "--json"],
    ["--json", "status", "--all", "JOB"], ["show", "JOB"], ["show", "--json", "JOB"], ["-C", ".", "status"], ["status", "nosuch"],
    ["show", "zz"], ["status", ""],
]


@pytest.mark.parametrize("args", QUICK, ids=" ".join)
def test_the_quick_path_answers_as_typer_does(repo: Path, job: str, args: list[str]) -> None:
    args = [job[:10] if a == "JOB" else a for a in args]
    assert plan(args) is not None
    quick, slow = cli(repo, *args), full(repo, *args)
    assert (quick.code, quick.out, quick.err) == (slow.code, slow.out, slow.err)


RUNS = [
    ["run", "ok.toml"], ["--json", "run", "ok.toml"], ["run", "ok.toml", "--json", "-j", "2"], ["run", "--jobs", "1", "fails.toml"],
    ["--json", "run", "fails.toml"], ["run", "missing.toml"], ["run", "ok.toml", "-j", "0"], ["-C", ".", "run", "ok.toml", "-j", "999"],
]


@pytest.mark.parametrize("args", RUNS, ids=" ".join)
def test_run_through_the_quick_path_answers_as_typer_does(repo: Path, args: list[str]) -> None:
    """Same exit code, same error line, same outcome: only the job's id and timings differ."""
    (repo / "ok.toml").write_text(spec_text('id = "a"\ncommand = "true"', 'id = "b"\ncommand = "true"\ndepends_on = ["a"]'))
    (repo / "fails.toml").write_text(spec_text('id = "a"\ncommand = "false"'))
    assert plan(args) is not None
    quick, slow = cli(repo, *args), full(repo, *args)
    assert quick.code == slow.code, (quick.err, slow.err)
    if quick.code == 2:
        assert quick.err == slow.err and quick.out == slow.out == ""
    elif "--json" in args:
        views = quick.json(), slow.json()
        assert [v["status"] for v in views] == [views[1]["status"]] * 2
        assert [sorted((t["id"], t["state"]) for t in v["tasks"]) for v in views] == [
            sorted((t["id"], t["state"]) for t in views[1]["tasks"])
        ] * 2


@pytest.mark.parametrize(
    "args",
    [[], ["status", "-h"], ["show"], ["status", "a", "b"], ["status", "--"], ["-C"], ["-C", "a", "-C", "b", "status"],
     ["status", "-C", "x"], ["--version"], ["show", "--all", "x"], ["status", "--jso"], ["log", "x"], ["-C", "-x", "status"],
     ["run"], ["run", "a", "b"], ["run", "a", "-j"], ["run", "a", "-j", "x"], ["run", "a", "-j", "-1"], ["run", "a", "-j", "\u0663"],
     ["run", "a", "--lease", "5"], ["run", "-j", "2"], ["run", "--help"], ["run", "a", "--approve"]],
    ids=" ".join,
)
def test_anything_unusual_goes_to_typer(args: list[str]) -> None:
    assert plan(args) is None


# -- completion ----------------------------------------------------------------------------


def every_command() -> list[str]:
    return [name for name, sub in command().commands.items() if not sub.hidden]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_a_script_naming_every_command(repo: Path, shell: str, isolated_env: Path) -> None:
    home_before = sorted(p.name for p in isolated_env.iterdir())
    result = cli(repo, "completion", shell)
    assert result.code == 0 and result.err == ""
    for name in every_command():
        assert name in result.out, name
    assert "hooks run" not in result.out and "'run'" not in result.out.split("hooks")[-1][:0]
    assert sorted(p.name for p in isolated_env.iterdir()) == home_before  # nothing installed
    if shutil.which(shell):
        check = [shell, "-n", "/dev/stdin"] if shell != "fish" else ["fish", "--no-execute"]
        done = subprocess.run(check, input=result.out, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


def test_completion_of_an_unknown_shell_is_bad_input(repo: Path) -> None:
    result = cli(repo, "completion", "tcsh")
    assert result.code == 2 and "tcsh" in result.err


def bash_complete(script: str, words: list[str]) -> list[str]:
    """What the bash function completes for the line `words` (the last one being completed)."""
    line = " ".join(f"'{w}'" for w in words)
    program = f'{script}\nCOMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _gitswarm; printf "%s\\n" "${{COMPREPLY[@]}}"'
    done = subprocess.run(["bash", "--norc", "-c", program], capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_bash_completion_completes_commands_subcommands_options_and_choices(repo: Path) -> None:
    script = cli(repo, "completion", "bash").out
    assert bash_complete(script, ["gitswarm", "st"]) == ["status", "steer"]
    assert set(bash_complete(script, ["gitswarm", ""])) == set(every_command())
    assert bash_complete(script, ["gitswarm", "worktrees", ""]) == ["list", "gc", "discard"]
    assert bash_complete(script, ["gitswarm", "--json", "-C", "x", "worktrees", "l"]) == ["list"]
    assert bash_complete(script, ["gitswarm", "status", "--a"]) == ["--all"]
    assert bash_complete(script, ["gitswarm", "completion", ""]) == ["bash", "zsh", "fish"]
    assert "worktrees" in bash_complete(script, ["gitswarm", "help", "w"])
    assert bash_complete(script, ["gitswarm", "-C", ""]) == []  # a directory: the shell's file names
    assert bash_complete(script, ["gitswarm", "submit", ""]) == []  # a spec file: the same


@pytest.mark.skipif(shutil.which("zsh") is None, reason="no zsh here")
def test_zsh_completion_completes_commands_and_options(repo: Path) -> None:
    script = cli(repo, "completion", "zsh").out

    def complete(*words: str) -> list[str]:
        stub = "compdef() { :; }; compadd() { [[ $1 == -- ]] && shift; print -l -- \"$@\"; }; _files() { print FILES; }"
        array = " ".join(f"'{w}'" for w in words)
        program = f"{stub}\n{script}\nwords=({array}); CURRENT={len(words)}; _gitswarm"
        return subprocess.run(["zsh", "-f", "-c", program], capture_output=True, text=True, check=True).stdout.split()

    assert complete("gitswarm", "st") == every_command()  # compadd filters by the prefix itself
    assert complete("gitswarm", "worktrees", "") == ["list", "gc", "discard"]
    assert "--all" in complete("gitswarm", "status", "--")
    assert complete("gitswarm", "-C", "") == ["FILES"]
    assert complete("gitswarm", "submit", "") == ["FILES"]


@pytest.mark.skipif(shutil.which("fish") is None, reason="no fish here")
def test_fish_completion_completes_commands_and_options(repo: Path, tmp_path: Path) -> None:
    script = tmp_path / "gitswarm.fish"
    script.write_text(cli(repo, "completion", "fish").out)

    def complete(line: str) -> list[str]:
        done = subprocess.run(["fish", "--no-config", "-c", f"source {script}; complete -C '{line}'"], capture_output=True, text=True, check=True)
        return [row.split("\t")[0] for row in done.stdout.splitlines()]

    assert complete("gitswarm st") == ["status"]
    assert complete("gitswarm worktrees ") == ["discard", "gc", "list"]  # fish sorts them
    assert "--all" in complete("gitswarm status --")
    assert complete("gitswarm completion ") == ["bash", "fish", "zsh"]


# -- tables --------------------------------------------------------------------------------


def test_fit_cuts_the_widest_columns_first_down_to_their_floors() -> None:
    assert fit([10, 20, 30], [4, 4, 4], 100) == [10, 20, 30]
    assert fit([10, 20, 30], [4, 4, 4], 44) == [10, 15, 15]  # 40 of cells + 2 gaps of 2
    assert fit([10, 20, 30], [8, 8, 8], 10) == [8, 8, 8]  # never below a floor, even when too wide


def test_a_table_fits_the_width_and_cuts_with_an_ellipsis() -> None:
    rows = [("t1", "queued", ",".join(f"dep{n:02d}" for n in range(29)), "exit 1: " + "x" * 200)]
    text = table(("TASK", "STATE", "NEEDS", "NOTE"), rows, width=60)
    assert all(len(line) <= 60 for line in text.splitlines())
    assert text.splitlines()[1].startswith("t1    queued  dep00,dep01") and "…" in text
    assert table(("A", "B"), [("x", "y")], width=60) == "A  B\nx  y"


def test_status_tables_fit_columns_and_json_stays_whole(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deps = [f"t{n:02d}" for n in range(29)]
    tasks = [f'id = "{d}"\ncommand = "true"' for d in deps] + [f'id = "last"\ncommand = "true"\ndepends_on = {deps!r}'.replace("'", '"')]
    (repo / "wide.toml").write_text(spec_text(*tasks, goal="g" * 300))
    job = cli(repo, "--json", "submit", "wide.toml").json()["id"]
    for width, env in ((80, "80"), (100, None)):  # COLUMNS, else 100 for text to a pipe
        if env is None:
            monkeypatch.delenv("COLUMNS", raising=False)
        else:
            monkeypatch.setenv("COLUMNS", env)
        for args in (["status"], ["status", job]):
            lines = [line for line in cli(repo, *args).out.splitlines() if not line.startswith("goal: ")]  # a line, not a table
            assert max(map(len, lines)) <= width, (args, max(map(len, lines)))
    data = cli(repo, "--json", "status", job).json()
    assert data["goal"] == "g" * 300 and data["tasks"][-1]["depends_on"] == deps


# -- a task's output, work's wording -------------------------------------------------------


def test_output_prints_what_a_task_printed(repo: Path) -> None:
    (repo / "job.toml").write_text(spec_text("id = \"noisy\"\ncommand = 'printf \"out\\\\001\\\\n\"; echo err >&2; exit 3'\nmax_attempts = 2"))
    ran = cli(repo, "--json", "run", "job.toml", "-j", "1")
    assert ran.code == 1, ran.err
    job = ran.json()["id"]
    raw = subprocess.run([str(GITSWARM), "output", f"{job}/noisy"], cwd=repo, capture_output=True, check=True)
    assert raw.stdout == b"out\x01\n"  # raw bytes, as captured
    assert cli(repo, "output", f"{job[:8]}/noisy", "--stderr").out == "err\n"
    as_json = cli(repo, "--json", "output", f"{job}/noisy", "--attempt", "1").json()
    assert (as_json["kind"], as_json["attempt"], as_json["data"], as_json["truncated"]) == ("check", 1, "out\x01\n", 0)
    missing = cli(repo, "output", f"{job}/noisy", "--attempt", "7")
    assert missing.code == 2 and missing.err == f"gitswarm: task {job[:12]}/noisy has no attempt 7\n"


def test_output_of_a_task_that_has_not_run(repo: Path, job: str) -> None:
    result = cli(repo, "output", f"{job}/test")
    assert result.code == 2 and result.err == f"gitswarm: task {job[:12]}/test has no output yet (it is blocked)\n"


def test_work_ends_with_the_jobs_summary_and_says_so_when_none_finished(repo: Path, job: str) -> None:
    done = cli(repo, "work", "--until-idle", "-j", "1")
    assert done.code == 0, done.err
    assert done.out == cli(repo, "--json", "show", job).json()["summary"]["text"]  # tests/cli/test_run_work.py: the next steps
    idle = cli(repo, "work", "--until-idle", "-j", "1")
    assert idle.code == 0 and idle.out == "done; no job finished\n"


def test_json_through_a_pipe_is_escaped_as_in_process(repo: Path) -> None:
    """Plain ASCII JSON goes to stdout's bytes as encoded; anything else through json_safe."""
    for goal, raw in (("plain goal", "plain goal"), ("del \x7f and \u202e", "del \\u007f and \\u202e")):
        (repo / "job.toml").write_text(spec_text('id = "a"\ncommand = "true"', goal=goal.replace("\x7f", "\\u007f")))
        job = cli(repo, "--json", "submit", "job.toml").json()["id"]
        done = subprocess.run([str(GITSWARM), "--json", "status", job], cwd=repo, capture_output=True, check=True)
        assert done.stdout.endswith(b"\n") and done.stdout.count(b"\n") == 1
        assert f'"goal":"{raw}"'.encode() in done.stdout
        assert json.loads(done.stdout)["goal"] == goal


def test_a_cell_of_several_lines_stays_whole_in_its_row() -> None:
    assert table(("A", "NOTE"), [("x", "first\nsecond"), ("y", None)], width=60) == "A  NOTE\nx  first\\nsecond\ny"


def test_a_review_note_of_several_lines_is_kept_and_shown_whole(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    (repo / "fix.toml").write_text(spec_text(
        'id = "fix"\nmode = "implement"\ncommand = "echo good > code.txt"\nchecks = ["grep -qx good code.txt"]\nmax_attempts = 1'
    ))
    ran = cli(repo, "--json", "run", "fix.toml")
    assert ran.code == 0, ran.err
    job = ran.json()["id"]
    patch = next(a["id"] for a in ran.json()["artifacts"] if a["kind"] == "patch")
    reviewed = cli(repo, "--json", "review", patch[:12], "--accept", "--note", "looks right\nsecond reason")
    assert reviewed.code == 0 and reviewed.json()["note"] == "looks right\nsecond reason"
    shown = cli(repo, "status", job)
    assert shown.code == 0 and "looks right\\nsecond reason" in shown.out, shown.out
