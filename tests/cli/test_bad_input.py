"""Bad input through the real CLI: exit 2, one line on stderr, no traceback, nothing written."""

from __future__ import annotations

import hashlib
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import takewhile
from pathlib import Path

import pytest

from gitswarm.engine.sharing import hooks
from gitswarm.engine.swarm import Swarm
from tests.conftest import Result, cli, commit_file, git, isolation_env, spec_text, swarm_refs

GOOD = spec_text('id = "lint"\ncommand = "true"', 'id = "test"\ncommand = "true"\ndepends_on = ["lint"]')


# -- helpers --------------------------------------------------------------------------


def all_refs(repo: Path) -> str:
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)")


def write_spec(repo: Path, content: str | bytes, name: str = "job.toml") -> Path:
    path = repo / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def submit(repo: Path, text: str = GOOD, name: str = "job.toml") -> str:
    write_spec(repo, text, name)
    result = cli(repo, "submit", name)
    assert result.code == 0, result.err
    return result.out.strip()


def assert_one_error_line(result: Result, code: int = 2) -> str:
    """The bad-input contract; returns the message after `gitswarm: `."""
    assert result.code == code, (result.code, result.out, result.err)
    assert "Traceback" not in result.err and "Traceback" not in result.out
    assert result.err.startswith("gitswarm: "), result.err
    assert result.err.endswith("\n")
    assert result.err.count("\n") == 1, f"want exactly one line on stderr, got: {result.err!r}"
    assert result.out == ""
    return result.err[len("gitswarm: ") : -1]


def refused(repo: Path, *args: str) -> str:
    """Run a command that must be refused as bad input, proving no ref was written."""
    before = (swarm_refs(repo), all_refs(repo))
    message = assert_one_error_line(cli(repo, *args))
    assert (swarm_refs(repo), all_refs(repo)) == before, "a refused command wrote a ref"
    return message


def git_dir_files(repo: Path) -> dict[str, str]:
    """Every file under .git with a digest of its content: compare before and after to prove nothing was written."""
    root = repo / ".git"
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def refused_in_fresh_repo(repo: Path, *args: str) -> str:
    """Refused as bad input, and .git (no index, no lock, no actor file) exactly as it was."""
    before = git_dir_files(repo)
    message = assert_one_error_line(cli(repo, *args))
    after = git_dir_files(repo)
    assert after == before, f"a refused command wrote under .git: {sorted(set(after) ^ set(before))}"
    assert not (repo / ".git" / "gitswarm").exists()
    return message


def job_ids(repo: Path) -> list[str]:
    result = cli(repo, "--json", "status")
    assert result.code == 0, result.err
    return [j["id"] for j in result.json()["jobs"]]


def hash_object(repo: Path, content: bytes) -> str:
    out = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input=content, capture_output=True, check=True)
    return out.stdout.decode().strip()


def mktree(repo: Path, lines: list[str]) -> str:
    out = subprocess.run(["git", "mktree"], cwd=repo, input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    return out.stdout.strip()


def replace_entry(repo: Path, job_id: str, name: str, entry: str) -> None:
    """Point a job's ref at a new commit (child of its tip) whose top-level `name` is `entry` ('<mode> <type> <oid>')."""
    ref = f"refs/swarm/jobs/{job_id}"
    tip = git(repo, "rev-parse", ref).strip()
    lines = git(repo, "ls-tree", tip).splitlines()
    new_lines = [f"{entry}\t{name}" if line.endswith(f"\t{name}") else line for line in lines]
    assert new_lines != lines
    commit = git(repo, "commit-tree", mktree(repo, new_lines), "-p", tip, "-m", "tampered").strip()
    git(repo, "update-ref", ref, commit, tip)


def replace_blob(repo: Path, job_id: str, name: str, content: bytes) -> None:
    replace_entry(repo, job_id, name, f"100644 blob {hash_object(repo, content)}")


# -- a repository shared by the tests whose commands must write nothing ---------------


@dataclass
class Shared:
    repo: Path
    first: str
    second: str


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    """Two jobs in one repository, made once. Every test using it only runs commands that must be refused,
    so at the end the repository must still hold exactly those two jobs, untouched."""
    with pytest.MonkeyPatch.context() as mp:
        home = tmp_path_factory.mktemp("shared-home")
        for key, value in isolation_env(home).items():
            mp.setenv(key, value)
        repo = tmp_path_factory.mktemp("shared") / "repo"
        repo.mkdir()
        git(repo, "init", "-q")
        (repo / "README.md").write_text("hello\n")
        git(repo, "add", "README.md")
        git(repo, "commit", "-qm", "initial")
        first, second = submit(repo), submit(repo)
        refs = all_refs(repo)
    yield Shared(repo, first, second)
    assert all_refs(repo) == refs, "a refused command moved a ref of the shared repository"


@pytest.fixture
def shared_repo(shared: Shared) -> Path:
    return shared.repo


# -- malformed specs ------------------------------------------------------------------

SPECS: dict[str, tuple[str | bytes, str]] = {
    "bad_toml": ('goal = "g"\n[[tasks]\nid = "a"\ncommand = "true"\n', "bad_toml.toml: invalid TOML: "),
    "bad_toml_value": ("goal = \n", "bad_toml_value.toml: invalid TOML: "),
    "not_utf8": (b'goal = "\xff\xfe"\n', "cannot read spec bad_"),
    "unknown_key": (spec_text('id = "a"\ncommand = "true"\ncolour = "red"'), "unknown_key.toml: tasks[0]: unknown field `colour` (known: "),
    "misspelt_key": (spec_text('id = "a"\ncomand = "true"'), "misspelt_key.toml: tasks[0]: unknown field `comand`; did you mean `command`?"),
    "unknown_top_key": ('goal = "g"\nowner = "me"\n[[tasks]]\nid = "a"\ncommand = "x"\n', "unknown_top_key.toml: unknown field `owner`"),
    "wrong_type": (spec_text('id = "a"\ncommand = "true"\npriority = "high"'), "tasks[0].priority: "),
    "cycle": (
        spec_text(
            'id = "a"\ncommand = "true"\ndepends_on = ["c"]',
            'id = "b"\ncommand = "true"\ndepends_on = ["a"]',
            'id = "c"\ncommand = "true"\ndepends_on = ["b"]',
        ),
        "tasks[0].depends_on: dependency cycle a -> c -> b -> a",
    ),
    "self_dependency": (spec_text('id = "a"\ncommand = "true"\ndepends_on = ["a"]'), "tasks[0].depends_on: "),
    "duplicate_id": (
        spec_text('id = "a"\ncommand = "true"', 'id = "a"\ncommand = "false"'),
        "tasks[1].id: duplicate task id 'a' (also tasks[0])",
    ),
    "missing_dep": (
        spec_text('id = "a"\ncommand = "true"', 'id = "b"\ncommand = "true"\ndepends_on = ["lnt"]'),
        'tasks[1].depends_on: unknown task "lnt"',
    ),
    "unknown_adapter": (
        spec_text('id = "a"\nadapter = "claude"\nprompt = "review"'),
        "tasks[0].adapter: unknown adapter 'claude'",
    ),
    "unknown_default_adapter": (
        spec_text('id = "a"\ncommand = "true"', defaults='adapter = "no-such-agent"'),
        "defaults.adapter: unknown adapter 'no-such-agent'",
    ),
    "dotdot_task_id": (spec_text('id = "../../x"\ncommand = "true"'), "tasks[0].id: invalid task id '../../x'"),
    "slash_task_id": (spec_text('id = "a/b"\ncommand = "true"'), "tasks[0].id: invalid task id 'a/b'"),
    "bad_duration": (spec_text('id = "a"\ncommand = "true"\ntimeout = "soon"'), "tasks[0].timeout: invalid duration"),
    "no_command": (spec_text('id = "a"'), "tasks[0].command: the shell adapter needs a command"),
    "zero_attempts": (spec_text('id = "a"\ncommand = "true"\nmax_attempts = 0'), "tasks[0].max_attempts: expected `int` >= 1"),
    "empty_goal": (spec_text('id = "a"\ncommand = "true"', goal=""), "goal: must not be empty"),
    "no_tasks": ('goal = "g"\ntasks = []\n', "tasks: a job needs at least one task"),
    # NUL bytes: no command, path or environment can carry one (TOML writes one as \u0000).
    "nul_command": (spec_text('id = "a"\ncommand = "true\\u0000x"'), "tasks[0].command: contains a NUL byte"),
    "nul_argv": (spec_text('id = "a"\ncommand = ["echo", "x\\u0000"]'), "tasks[0].command[1]: contains a NUL byte"),
    "nul_checks": (spec_text('id = "a"\ncommand = "true"\nchecks = ["ok", "\\u0000"]'), "tasks[0].checks[1]: contains a NUL byte"),
    "nul_setup": (spec_text('id = "a"\ncommand = "true"\nsetup = "npm\\u0000"'), "tasks[0].setup: contains a NUL byte"),
    "nul_default_setup": (spec_text('id = "a"\ncommand = "true"', defaults='setup = "\\u0000"'), "defaults.setup: contains a NUL byte"),
    "nul_env_value": (spec_text('id = "a"\ncommand = "true"\nenv = { A = "\\u0000" }'), "tasks[0].env.A: contains a NUL byte"),
    "nul_env_key": (spec_text('id = "a"\ncommand = "true"\nenv = { "A\\u0000" = "1" }'), "tasks[0].env: a key contains a NUL byte"),
    "nul_cwd": (spec_text('id = "a"\ncommand = "true"\ncwd = "src\\u0000"'), "tasks[0].cwd: contains a NUL byte"),
    "nul_prompt": (spec_text('id = "a"\nadapter = "claude-code"\nprompt = "fix\\u0000it"'), "tasks[0].prompt: contains a NUL byte"),
    "nul_goal": (spec_text('id = "a"\ncommand = "true"', goal="g\\u0000"), "goal: contains a NUL byte"),
    "env_name_with_equals": (spec_text('id = "a"\ncommand = "true"\nenv = { "A=B" = "1" }'), "tasks[0].env: invalid variable name 'A=B'"),
    "env_empty_name": (spec_text('id = "a"\ncommand = "true"\nenv = { "" = "1" }'), "tasks[0].env: invalid variable name ''"),
    # A task runs inside the repository.
    "cwd_absolute": (spec_text('id = "a"\ncommand = "true"\ncwd = "/etc"'), "tasks[0].cwd: must be a path relative to the repository"),
    "cwd_dotdot": (spec_text('id = "a"\ncommand = "true"\ncwd = ".."'), "tasks[0].cwd: '..' leads out of the repository"),
    "cwd_escapes": (spec_text('id = "a"\ncommand = "true"\ncwd = "src/../../x"'), "tasks[0].cwd: 'src/../../x' leads out"),
    # Every number a spec carries is finite and bounded.
    "huge_timeout": (spec_text('id = "a"\ncommand = "true"\ntimeout = 1e308'), "tasks[0].timeout: duration must be at most 7 days"),
    "long_timeout": (spec_text('id = "a"\ncommand = "true"\ntimeout = "169h"'), "tasks[0].timeout: duration must be at most 7 days"),
    "huge_default_timeout": (spec_text('id = "a"\ncommand = "true"', defaults="timeout = 1e308"), "defaults.timeout: duration must be at most"),
    "nan_default_timeout": (spec_text('id = "a"\ncommand = "true"', defaults="timeout = nan"), "defaults.timeout: duration must be finite"),
    "inf_max_wall": ('goal = "g"\n[budget]\nmax_wall = inf\n[[tasks]]\nid = "a"\ncommand = "x"\n', "budget.max_wall: duration must be finite"),
    "huge_max_wall": ('goal = "g"\n[budget]\nmax_wall = 1e308\n[[tasks]]\nid = "a"\ncommand = "x"\n', "budget.max_wall: duration must be at most 365 days"),
    "nan_max_usd": ('goal = "g"\n[budget]\nmax_usd = nan\n[[tasks]]\nid = "a"\ncommand = "x"\n', "budget.max_usd: "),
    "inf_max_usd": ('goal = "g"\n[budget]\nmax_usd = inf\n[[tasks]]\nid = "a"\ncommand = "x"\n', "budget.max_usd: "),
    "float_priority": (spec_text('id = "a"\ncommand = "true"\npriority = nan'), "tasks[0].priority: "),
    "huge_repair_rounds": (spec_text('id = "a"\ncommand = "true"\nrepair_rounds = 1000000'), "tasks[0].repair_rounds: "),
    "huge_budget_tokens": ('goal = "g"\n[budget]\nmax_tokens = 1e400\n[[tasks]]\nid = "a"\ncommand = "x"\n', "budget.max_tokens: "),
}


@pytest.mark.parametrize("case", sorted(SPECS))
def test_malformed_spec_is_refused_and_writes_nothing(shared_repo: Path, case: str) -> None:
    content, expected = SPECS[case]
    name = f"bad_{case}.toml" if case == "not_utf8" else f"{case}.toml"
    write_spec(shared_repo, content, name)
    message = refused(shared_repo, "submit", name)
    assert message.startswith(expected), message


def test_malformed_spec_in_a_fresh_repo_writes_no_ref_at_all(repo: Path) -> None:
    write_spec(repo, SPECS["cycle"][0])
    refused(repo, "submit", "job.toml")
    assert swarm_refs(repo) == ""
    assert job_ids(repo) == []


def test_adapter_defined_by_the_repository_is_known(repo: Path) -> None:
    (repo / ".gitswarm" / "adapters").mkdir(parents=True)
    (repo / ".gitswarm" / "adapters" / "claude.toml").write_text('executable = "claude"\n')
    submit(repo, str(SPECS["unknown_adapter"][0]))


@pytest.mark.parametrize("path", ["missing.toml", "."])
def test_unreadable_spec(shared_repo: Path, path: str) -> None:
    assert refused(shared_repo, "submit", path).startswith("cannot read spec ")


@pytest.mark.parametrize(
    ("field", "value"),
    [("priority", "9223372036854775808"), ("priority", "-9223372036854775809"), ("max_attempts", "9999999999999999999")],
)
def test_out_of_range_integer_is_bad_input_and_writes_nothing(repo: Path, field: str, value: str) -> None:
    # TOML integers reach Python unbounded; the index stores 64-bit integers.
    write_spec(repo, spec_text(f'id = "a"\ncommand = "true"\n{field} = {value}'))
    refused(repo, "submit", "job.toml")
    assert swarm_refs(repo) == ""
    after = cli(repo, "status")
    assert after.code == 0, after.err


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_non_finite_timeout_is_bad_input(repo: Path, value: str) -> None:
    # Accepted, the task record is written with "timeout": null and no longer decodes when re-read from the ref.
    write_spec(repo, spec_text(f'id = "a"\ncommand = "true"\ntimeout = {value}'))
    refused(repo, "submit", "job.toml")
    assert swarm_refs(repo) == ""


# -- worker options: NaN, infinities and absurd sizes ---------------------------------

WORKER_OPTIONS = [
    (("run", "job.toml", "--lease", "nan"), "--lease: must be a finite number of seconds, got nan"),
    (("run", "job.toml", "--lease", "inf"), "--lease: must be a finite number of seconds, got inf"),
    (("run", "job.toml", "--lease", "-inf"), "--lease: must be a finite number of seconds, got -inf"),
    (("run", "job.toml", "--lease", "0.01"), "--lease: must be between 1 and 86400 seconds"),
    (("run", "job.toml", "--lease", "1e9"), "--lease: must be between 1 and 86400 seconds"),
    (("run", "job.toml", "-j", "100000"), "-j: must be at most 256"),
    (("run", "job.toml", "--output-cap", "-1"), "--output-cap: must be between 1024 and 1073741824 bytes"),
    (("run", "job.toml", "--output-cap", "0"), "--output-cap: must be between 1024 and 1073741824 bytes"),
    (("run", "job.toml", "--output-cap", str(10**15)), "--output-cap: must be between 1024 and 1073741824 bytes"),
    (("work", "--until-idle", "--lease", "nan"), "--lease: must be a finite number of seconds, got nan"),
    (("work", "--until-idle", "-j", "100000"), "-j: must be at most 256"),
    (("work", "--job", "zzz", "--output-cap", "-5"), "--output-cap: must be between 1024 and 1073741824 bytes"),
    (("delegate", "fix it", "--adapter", "shell", "--lease", "nan"), "--lease: must be a finite number of seconds, got nan"),
]


@pytest.mark.parametrize(("args", "expected"), WORKER_OPTIONS, ids=[" ".join(a) for a, _ in WORKER_OPTIONS])
def test_worker_option_out_of_bounds_writes_nothing(repo: Path, args: tuple[str, ...], expected: str) -> None:
    write_spec(repo, GOOD)
    assert refused_in_fresh_repo(repo, *args) == expected


# -- the post-commit hook's spec ------------------------------------------------------

BRANCHES = ['we"ird', "back\\slash", "new\nline", 'x"\n[[tasks]]\nid = "evil"\ncommand = "touch pwned"\n#']


@pytest.mark.parametrize("branch", BRANCHES, ids=["quote", "backslash", "newline", "injection"])
def test_post_commit_quotes_the_branch_name(repo: Path, branch: str) -> None:
    """The branch comes from the shim's arguments: whatever it holds, it stays the goal's text."""
    commit = commit_file(repo, ".gitswarm.toml", '[hooks]\naudit_branches = ["*"]\n')
    swarm = Swarm(repo)
    try:
        job = hooks.post_commit(swarm, commit, branch)
    finally:
        swarm.close()
    assert job is not None
    shown = cli(repo, "--json", "status", job).json()
    assert shown["goal"] == f"audit {commit[:12]} on {branch}"
    assert [t["id"] for t in shown["tasks"]] == ["audit"]
    record = cli(repo, "--json", "log", job).json()["events"][0]["record"]
    assert record["tasks"][0]["command"] == ["gitswarm", "audit", commit]
    assert not (repo / "pwned").exists()


# -- ids with / or .. -----------------------------------------------------------------

PATH_LIKE = [
    ("status", "../x"),
    ("status", "a/b"),
    ("status", ".."),
    ("status", "ABC"),
    ("status", ""),
    ("show", "../x"),
    ("log", "a/b"),
    ("artifacts", "../../etc"),
    ("artifact", "../../etc"),
    ("artifact", "a/b"),
    ("retry", "JOB/../x"),
    ("retry", "{job}/../x"),
    ("retry", "{job}/../../x"),
    ("retry", "{job}/.."),
    ("retry", "{job}/a/b"),
    ("retry", "../x"),
    ("cancel", "../x"),
    ("cancel", "{job}/../x"),
    ("cancel", "a/b/c"),
    ("cancel", ".."),
]


@pytest.mark.parametrize(("command", "target"), PATH_LIKE)
def test_path_like_ids_are_refused(shared: Shared, shared_repo: Path, command: str, target: str) -> None:
    message = refused(shared_repo, command, target.format(job=shared.first))
    assert "invalid " in message, message


# -- read commands in a fresh repository: not even the index is created ---------------

READ_COMMANDS = [
    ("status", "a/b"),
    ("status", "../x"),
    ("show", "nosuchjob"),
    ("show", "a/b"),
    ("log", "..x"),
    ("log", "zzzz"),
    ("artifact", "zz"),
    ("artifact", "../../etc"),
    ("artifacts", "x"),
    ("diff", "x"),
    ("diff", "a/b"),
]


@pytest.mark.parametrize(("command", "target"), READ_COMMANDS)
def test_read_command_with_bad_input_leaves_a_fresh_git_dir_as_it_was(repo: Path, command: str, target: str) -> None:
    refused_in_fresh_repo(repo, command, target)


def test_read_commands_without_an_index_read_the_refs_and_write_nothing(repo: Path) -> None:
    job = submit(repo)
    reads = [("--json", "status"), ("--json", "status", job), ("--json", "show", job), ("--json", "log", job), ("artifacts", job)]
    with_index = [cli(repo, *args) for args in reads]
    for index_file in (repo / ".git" / "gitswarm").glob("index.*"):  # the cache only: this clone's own files stay
        index_file.unlink()
    before = git_dir_files(repo)
    without = [cli(repo, *args) for args in reads]
    assert [(r.code, r.out) for r in without] == [(r.code, r.out) for r in with_index]
    assert all(r.code == 0 for r in without)
    assert git_dir_files(repo) == before
    assert not list((repo / ".git" / "gitswarm").glob("index.*"))


# -- usage errors ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("bogus",),
        ("--bogus",),
        ("status", "--nope"),
        ("submit",),
        ("status", "a", "b"),
        ("cancel",),
        ("cancel", "x", "--reason"),
        ("index", "nope"),
        ("-C",),
    ],
)
def test_unknown_command_or_option(shared_repo: Path, args: tuple[str, ...]) -> None:
    refused(shared_repo, *args)


@pytest.mark.parametrize("command", ["pull", "push", "sync"])
@pytest.mark.parametrize("remote", ["nosuch", "../no/such/path", "-x"])
def test_an_unknown_remote_is_bad_input_and_says_so(shared_repo: Path, command: str, remote: str) -> None:
    """It said "git -c failed: and the repository exists." and exited 1."""
    message = refused(shared_repo, command, remote)
    assert "git -c" not in message and "and the repository exists" not in message
    assert remote in message


# -- not a repository -----------------------------------------------------------------


@pytest.mark.parametrize("args", [("status",), ("submit", "job.toml"), ("show", "01abc"), ("init",), ("recover",)])
def test_not_a_repository(tmp_path: Path, shared_repo: Path, args: tuple[str, ...]) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    write_spec(plain, GOOD)
    via_c = refused(shared_repo, "-C", str(plain), *args)
    assert via_c.startswith("not a git repository"), via_c
    from_inside = cli(plain, *args)
    assert assert_one_error_line(from_inside).startswith("not a git repository")
    assert sorted(p.name for p in plain.iterdir()) == ["job.toml"]


def test_dash_c_to_a_missing_directory(tmp_path: Path, shared_repo: Path) -> None:
    assert "nowhere" in refused(shared_repo, "-C", str(tmp_path / "nowhere"), "status")


# -- ambiguity and lookups ------------------------------------------------------------


def test_ambiguous_prefix_lists_both_jobs(shared: Shared, shared_repo: Path) -> None:
    first, second = shared.first, shared.second
    common = "".join(a for a, _ in takewhile(lambda pair: pair[0] == pair[1], zip(first, second)))
    assert 1 <= len(common) < 26
    expected = ", ".join(sorted([first, second]))
    for prefix in sorted({common[:1], common}):
        for command in ("status", "show", "log", "artifacts", "cancel"):
            message = refused(shared_repo, command, prefix)
            assert message == f"job id {prefix!r} is ambiguous: {expected}", (command, message)
        assert refused(shared_repo, "retry", f"{prefix}/lint") == f"job id {prefix!r} is ambiguous: {expected}"
    assert cli(shared_repo, "status", first[: len(common) + 1]).code == 0


def test_unknown_job_and_artifact(shared_repo: Path) -> None:
    assert refused(shared_repo, "status", "zzzz") == "no job matches 'zzzz'"
    assert refused(shared_repo, "artifact", "abcdef") == "no artifact matches 'abcdef'"


def test_unknown_task(shared: Shared, shared_repo: Path) -> None:
    job = shared.first
    assert refused(shared_repo, "retry", f"{job}/nope") == f"job {job} has no task 'nope'"
    assert refused(shared_repo, "cancel", f"{job}/nope") == f"job {job} has no task 'nope'"


def test_task_without_job_in_several_jobs(shared_repo: Path) -> None:
    message = refused(shared_repo, "retry", "lint")
    assert message == "task 'lint' is in 2 unfinished jobs; name it as JOB/lint"


# -- transitions that do not apply ----------------------------------------------------


def test_retry_of_a_queued_task(shared: Shared, shared_repo: Path) -> None:
    message = refused(shared_repo, "retry", f"{shared.first}/lint")
    assert message == "task lint is queued; only failed, cancelled or skipped tasks can be retried"


def test_retry_of_a_blocked_task(shared: Shared, shared_repo: Path) -> None:
    assert refused(shared_repo, "retry", f"{shared.second}/test").startswith("task test is blocked;")


def test_cancel_of_a_cancelled_job(repo: Path) -> None:
    job = submit(repo)
    assert cli(repo, "cancel", job).code == 0
    assert refused(repo, "cancel", job) == "the job has already finished; nothing to cancel"
    assert refused(repo, "cancel", f"{job}/lint") == "task lint is already cancelled"


def test_cancel_of_a_succeeded_job(repo: Path, swarm: Swarm) -> None:
    job = submit(repo)
    swarm.index.refresh(swarm.refs)
    for _ in range(2):
        lease = swarm.ledger.claim("worker", 60.0, time.time(), job_id=job)
        assert lease is not None
        swarm.ledger.finish(lease, True, time.time())
    assert cli(repo, "--json", "status", job).json()["status"] == "succeeded"
    assert refused(repo, "cancel", job) == "the job has already finished; nothing to cancel"
    assert refused(repo, "cancel", f"{job}/lint") == "task lint is already succeeded"


def test_retry_of_a_task_behind_a_cancelled_one(repo: Path) -> None:
    job = submit(repo)
    assert cli(repo, "cancel", f"{job}/lint").code == 0
    assert refused(repo, "retry", f"{job}/test") == "task test depends on lint, which is cancelled; retry lint"


# -- corrupt and newer records in a ref -----------------------------------------------

BAD_STATES = {"garbage": b"\x00garbage{", "newer": b'{"v":99}'}


@pytest.fixture
def two_jobs_one_bad(repo: Path, request: pytest.FixtureRequest) -> tuple[Path, str, str]:
    good = submit(repo)
    bad = submit(repo)
    replace_blob(repo, bad, "state", BAD_STATES[request.param])
    return repo, good, bad


@pytest.mark.parametrize("command", ["status", "show"])
@pytest.mark.parametrize("two_jobs_one_bad", sorted(BAD_STATES), indirect=True)
def test_bad_record_in_a_ref_refuses_that_job(
    two_jobs_one_bad: tuple[Path, str, str], command: str, request: pytest.FixtureRequest
) -> None:
    repo, good, bad = two_jobs_one_bad
    message = refused(repo, command, bad)
    if request.node.callspec.params["two_jobs_one_bad"] == "newer":
        assert "newer" in message, message
    ok = cli(repo, command, good)
    assert ok.code == 0, ok.err


@pytest.mark.parametrize("two_jobs_one_bad", sorted(BAD_STATES), indirect=True)
def test_plain_status_still_lists_the_other_jobs(
    two_jobs_one_bad: tuple[Path, str, str], request: pytest.FixtureRequest
) -> None:
    repo, good, bad = two_jobs_one_bad
    result = cli(repo, "--json", "status")
    assert result.code == 0, result.err
    assert [j["id"] for j in result.json()["jobs"]] == [good]
    assert "Traceback" not in result.err
    assert bad in result.err
    if request.node.callspec.params["two_jobs_one_bad"] == "newer":
        assert "newer" in result.err
    human = cli(repo, "status")
    assert human.code == 0
    assert good[:12] in human.out and bad[:12] not in human.out


def test_corrupt_task_record_refuses_that_job(repo: Path) -> None:
    good = submit(repo)
    bad = submit(repo)
    root = git(repo, "ls-tree", f"refs/swarm/jobs/{bad}").splitlines()
    fan = next(line.split("\t")[1] for line in root if line.split("\t")[1].startswith("tasks."))
    task_name = git(repo, "ls-tree", f"refs/swarm/jobs/{bad}:{fan}").splitlines()[0].split("\t")[1]
    new_fan = mktree(repo, [f"100644 blob {hash_object(repo, b'{nope')}\t{task_name}"])
    replace_entry(repo, bad, fan, f"040000 tree {new_fan}")
    refused(repo, "show", bad)
    assert job_ids(repo) == [good]


@pytest.mark.parametrize("target", ["blob", "commit_without_records", "state_is_a_tree"])
def test_malformed_job_ref_never_blocks_other_jobs(repo: Path, target: str) -> None:
    good = submit(repo)
    if target == "state_is_a_tree":
        bad = submit(repo)
        root = git(repo, "ls-tree", f"refs/swarm/jobs/{bad}").splitlines()
        fan_tree = next(line.split()[2] for line in root if line.split("\t")[1].startswith("tasks."))
        replace_entry(repo, bad, "state", f"040000 tree {fan_tree}")
    else:
        bad = "01m8vaaaaaaaaaaaaaaaaaaaaa"
        obj = git(repo, "rev-parse", "HEAD:README.md" if target == "blob" else "HEAD").strip()
        git(repo, "update-ref", f"refs/swarm/jobs/{bad}", obj)
    result = cli(repo, "--json", "status")
    assert result.code == 0, result.err
    assert [j["id"] for j in result.json()["jobs"]] == [good]
    refused(repo, "show", bad)


def test_job_ref_with_an_invalid_name_is_ignored(repo: Path) -> None:
    good = submit(repo)
    tip = git(repo, "rev-parse", f"refs/swarm/jobs/{good}").strip()
    git(repo, "update-ref", "refs/swarm/jobs/not-a-job-id", tip)
    assert job_ids(repo) == [good]
    refused(repo, "show", "not-a-job-id")
