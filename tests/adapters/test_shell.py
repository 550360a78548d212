"""The shell adapter: task -> invocation, process result -> check artifact and outcome."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitswarm.adapters.base import RunContext
from gitswarm.adapters.process import ProcessResult, run_process
from gitswarm.adapters.shell import ShellAdapter, tail
from gitswarm.engine.swarm import Swarm
from gitswarm.model.artifacts import BlobRef, Check
from gitswarm.model.errors import BadInput
from gitswarm.model.records import TaskSpec
from tests.conftest import cli, git, spec_text

JOB = "01jobjobjobjobjobjobjobjob"


def ctx(workdir: Path, attempt: int = 1, base_env: dict[str, str] | None = None) -> RunContext:
    return RunContext(job=JOB, task="t", attempt=attempt, workdir=workdir, base_env=base_env or {"PATH": "/usr/bin:/bin", "A": "base"})


def blob_writer(swarm: Swarm):
    """The worker's way of storing output: a real blob in the repository, wrapped as a BlobRef."""

    def store(data: bytes, dropped: int) -> BlobRef:
        return BlobRef(oid=swarm.repo.write_blob(data), size=len(data) + dropped, truncated=dropped)

    return store


def result(code: int | None = 0, out: bytes = b"", err: bytes = b"", **kw: object) -> ProcessResult:
    fields = dict(exit_code=code, stdout=out, stderr=err, stdout_dropped=0, stderr_dropped=0, duration=0.1234567)
    fields.update(kw)
    return ProcessResult(**fields)  # type: ignore[arg-type]


def test_string_command_runs_under_sh_c(tmp_path: Path) -> None:
    spec = TaskSpec(id="t", seq=0, command="echo hi && true", timeout=12.5)
    inv = ShellAdapter().invocation(spec, ctx(tmp_path))
    assert inv.argv == ["sh", "-c", "echo hi && true"]
    assert inv.cwd == tmp_path and inv.timeout == 12.5 and inv.stdin is None


def test_list_command_is_the_argv(tmp_path: Path) -> None:
    spec = TaskSpec(id="t", seq=0, command=["python3", "-c", "print('a b')"])
    inv = ShellAdapter().invocation(spec, ctx(tmp_path))
    assert inv.argv == ["python3", "-c", "print('a b')"]


def test_cwd_is_relative_to_the_workdir_and_env_adds_to_the_base(tmp_path: Path) -> None:
    spec = TaskSpec(id="t", seq=0, command="pwd", cwd="sub/dir", env={"A": "task", "B": "b"})
    inv = ShellAdapter().invocation(spec, ctx(tmp_path))
    assert inv.cwd == tmp_path / "sub" / "dir"
    assert dict(inv.env) == {"PATH": "/usr/bin:/bin", "A": "task", "B": "b"}


def test_missing_command_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="needs a command"):
        ShellAdapter().invocation(TaskSpec(id="t", seq=0, command=None), ctx(tmp_path))


def test_invocation_runs_for_real_in_its_cwd_with_its_env(swarm: Swarm, repo: Path) -> None:
    (repo / "sub").mkdir()
    spec = TaskSpec(id="t", seq=0, command='pwd; echo "$B"', cwd="sub", env={"B": "from-task"})
    adapter = ShellAdapter()
    c = ctx(repo)
    inv = adapter.invocation(spec, c)
    res = run_process(inv.argv, cwd=inv.cwd, env=inv.env, timeout=inv.timeout)
    outcome = adapter.outcome(spec, c, res, blob_writer(swarm), 1000.0)
    assert outcome.ok and outcome.error is None
    (check,) = outcome.artifacts
    assert isinstance(check, Check) and check.passed
    assert check.stdout is not None
    assert swarm.repo.read_blob(check.stdout.oid) == f"{(repo / 'sub').resolve()}\nfrom-task\n".encode()
    assert check.stderr is None and check.cwd == "sub"


def test_success_becomes_a_check_with_blob_refs(swarm: Swarm, tmp_path: Path) -> None:
    spec = TaskSpec(id="t", seq=0, command="make test")
    outcome = ShellAdapter().outcome(spec, ctx(tmp_path, attempt=2), result(0, b"all good\n", b"warn\n"), blob_writer(swarm), 1234.5)
    assert outcome.ok and outcome.error is None
    (check,) = outcome.artifacts
    assert isinstance(check, Check)
    assert (check.job, check.task, check.attempt, check.created, check.producer) == (JOB, "t", 2, 1234.5, "shell")
    assert check.command == "make test" and check.exit_code == 0
    assert check.duration == 0.123457  # rounded to microseconds
    assert check.stdout is not None and check.stderr is not None
    assert swarm.repo.read_blob(check.stdout.oid) == b"all good\n" and check.stdout.size == 9 and check.stdout.truncated == 0
    assert swarm.repo.read_blob(check.stderr.oid) == b"warn\n"
    assert not check.timed_out and check.passed


def test_empty_output_stores_no_blob(swarm: Swarm, tmp_path: Path) -> None:
    def refuse(data: bytes, dropped: int) -> BlobRef:
        raise AssertionError("nothing to store")

    outcome = ShellAdapter().outcome(TaskSpec(id="t", seq=0, command="true"), ctx(tmp_path), result(0), refuse, 1.0)
    (check,) = outcome.artifacts
    assert check.stdout is None and check.stderr is None


def test_truncated_output_keeps_the_dropped_count(swarm: Swarm, tmp_path: Path) -> None:
    res = result(0, b"x" * 10, stdout_dropped=90)
    (check,) = ShellAdapter().outcome(TaskSpec(id="t", seq=0, command="yes"), ctx(tmp_path), res, blob_writer(swarm), 1.0).artifacts
    assert check.stdout is not None
    assert (check.stdout.size, check.stdout.truncated) == (100, 90)
    assert swarm.repo.read_blob(check.stdout.oid) == b"x" * 10


def test_nonzero_exit_fails_naming_the_code_and_last_line(swarm: Swarm, tmp_path: Path) -> None:
    spec = TaskSpec(id="t", seq=0, command="false")
    outcome = ShellAdapter().outcome(spec, ctx(tmp_path), result(3, b"out\n", b"first\nlast words\n"), blob_writer(swarm), 1.0)
    assert not outcome.ok and outcome.retryable
    assert outcome.error == "exit 3: last words"
    (check,) = outcome.artifacts
    assert check.exit_code == 3 and not check.passed


def test_nonzero_exit_without_stderr_uses_stdout_or_nothing(swarm: Swarm, tmp_path: Path) -> None:
    spec = TaskSpec(id="t", seq=0, command="false")
    adapter = ShellAdapter()
    assert adapter.outcome(spec, ctx(tmp_path), result(1, b"said this\n"), blob_writer(swarm), 1.0).error == "exit 1: said this"
    assert adapter.outcome(spec, ctx(tmp_path), result(1), blob_writer(swarm), 1.0).error == "exit 1"


def test_timeout_fails_and_marks_the_check(swarm: Swarm, tmp_path: Path) -> None:
    spec = TaskSpec(id="t", seq=0, command="sleep 9")
    res = result(None, duration=1.04, timed_out=True, stopped="timeout")
    outcome = ShellAdapter().outcome(spec, ctx(tmp_path), res, blob_writer(swarm), 1.0)
    assert not outcome.ok and outcome.error == "timeout after 1.0s"
    (check,) = outcome.artifacts
    assert check.timed_out and check.exit_code is None and not check.passed


def test_start_error_is_the_outcome_error(swarm: Swarm, tmp_path: Path) -> None:
    spec = TaskSpec(id="t", seq=0, command=["/no/such/tool"])
    res = run_process(["/no/such/tool"])
    outcome = ShellAdapter().outcome(spec, ctx(tmp_path), res, blob_writer(swarm), 1.0)
    assert not outcome.ok and outcome.error == res.error and "/no/such/tool" in outcome.error
    (check,) = outcome.artifacts
    assert check.command == ["/no/such/tool"] and check.exit_code is None


def test_tail_keeps_the_last_lines_and_decodes_leniently() -> None:
    data = b"".join(f"line {n}\n".encode() for n in range(30)) + b"\xff end\n"
    assert tail(data, 3) == "line 28\nline 29\n\ufffd end"
    assert tail(b"") == ""


def test_a_cwd_through_a_committed_symlink_that_leads_out_runs_nothing(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / "olink").symlink_to(outside)
    git(repo, "add", "olink")
    git(repo, "commit", "-qm", "a link out")
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text('id = "a"\ncommand = "touch marker"\ncwd = "olink"'))
    result = cli(repo, "--json", "run", str(spec), "-j", "1")
    assert result.code == 1
    (task,) = result.json()["tasks"]
    assert task["state"] == "failed" and "leads outside the repository" in task["error"]
    assert not (outside / "marker").exists()
    inside = tmp_path / "spec2.toml"  # a symlink that stays inside is fine
    (repo / "real").mkdir()
    (repo / "ilink").symlink_to(repo / "real")
    inside.write_text(spec_text('id = "a"\ncommand = "touch marker"\ncwd = "ilink"'))
    assert cli(repo, "--json", "run", str(inside), "-j", "1").code == 0
    assert (repo / "real" / "marker").exists()
