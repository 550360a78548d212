"""Agents in a sandbox: what an agent may not do is prevented, not only detected (docs/sandbox.md).

A misbehaving agent (tests/fakes/misbehaving_agent) does its task and tries everything else: writes
outside its worktree, moves and makes refs of the repository, rewrites gitswarm's trust file, a hook
and the config, reads a secret under the user's home, connects to a loopback port. Each attempt
fails inside the sandbox; the repository and the user's tree come out byte for byte as they were;
its own edit (one commit of its own, one change left uncommitted) lands as a verified patch.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from gitswarm.engine.swarm import Swarm
from gitswarm.model.artifacts import Patch, Run, Verdict
from tests.conftest import cli, clone_of, commit_file, git, has_bwrap, rev, seeded_remote, spec_text, swarm_refs

AGENT = Path(__file__).parents[2] / "fakes" / "misbehaving_agent"
needs_bwrap = pytest.mark.skipif(not has_bwrap(), reason="no bwrap that makes sandboxes here (install bubblewrap)")


def register(repo: Path, sandbox: str = "") -> None:
    """Adapter `rogue`: the misbehaving agent, with `sandbox` as its spec's [sandbox] table."""
    spec = f'executable = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(AGENT))}, "{{prompt}}"]\n'
    commit_file(repo, ".gitswarm/adapters/rogue.toml", spec + (f"[sandbox]\n{sandbox}" if sandbox else ""), "the rogue agent")


def repository_state(repo: Path) -> dict[str, object]:
    """What the agent must not change: the user's files (bytes), the refs but gitswarm's own, HEAD, the
    git dir's config, hooks and info."""
    common = repo / ".git"
    refs = [line for line in git(repo, "for-each-ref", "--format=%(objectname) %(refname)").splitlines()
            if not line.split()[1].startswith(("refs/swarm/", "refs/notes/swarm", "refs/heads/swarm/"))]
    files = {str(p.relative_to(repo)): p.read_bytes() for p in sorted(repo.rglob("*")) if p.is_file() and ".git" not in p.relative_to(repo).parts}
    kept = {str(p.relative_to(common)): p.read_bytes() for place in ("config", "hooks", "info", "HEAD")
            for p in ([common / place] if (common / place).is_file() else sorted((common / place).rglob("*")))
            if p.is_file()}
    return {"refs": refs, "files": files, "git dir": kept}


def task_records(repo: Path, job: str, task: str = "delegate") -> tuple[dict, list]:
    with closing(Swarm(repo)) as swarm:
        snapshot = swarm.refs.snapshot(job, swarm.index.job_tip(job))
        records = [snapshot.artifact(a) for a in snapshot.task(task).artifacts]
        outputs = {id(r): swarm.repo.read_blob(r.stdout.oid).decode() for r in records if isinstance(r, Run) and r.stdout}
    return outputs, records


@pytest.fixture
def secret(isolated_env: Path) -> Path:
    """A secret under the user's (test's) home, which no agent may read."""
    path = isolated_env / "secret.txt"
    path.write_text("the user's secret\n")
    return path


@pytest.fixture
def listener() -> int:
    """A loopback port that is listening, and is not the agent's endpoint."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


@needs_bwrap
def test_a_misbehaving_agent_is_refused_everything_but_its_own_edit(repo: Path, tmp_path: Path, secret: Path, listener: int) -> None:
    register(repo, 'network = "none"\n')
    gitswarm_dir = repo / ".git" / "gitswarm"
    cli(repo, "init")
    outside = tmp_path / "outside.txt"
    before = repository_state(repo)
    trust = (gitswarm_dir / "trust.json").read_bytes() if (gitswarm_dir / "trust.json").exists() else None
    prompt = "\n".join([
        "the task: say hello from the sandbox",
        f"repo: {repo}", f"common: {repo / '.git'}", f"secret: {secret}", f"outside: {outside}", f"port: {listener}",
    ])
    result = cli(repo, "--json", "delegate", prompt, "--adapter", "rogue", "--check", "grep -qx 'hello from the sandbox' README.md",
                 "--check", "test -f notes.txt")
    assert result.code == 0, result.err
    job = result.json()["id"]
    outputs, records = task_records(repo, job)
    [run] = [r for r in records if isinstance(r, Run)]
    said = dict(line.split(": ", 1) for line in outputs[id(run)].splitlines() if ": " in line)
    # Each attempt on the repository, the user's files and the network failed inside the sandbox.
    for name in ("write-user-tree", "write-beside-worktree", "write-outside", "move-main", "delete-main", "create-ref",
                 "trust", "local-jobs", "hook", "config", "read-secret", "connect"):
        assert said[name].startswith("refused"), (name, said[name])
    assert "the user's secret" not in outputs[id(run)]
    # What it did to git in its worktree stayed in its private git dir.
    for name in ("move-main-from-worktree", "note-from-worktree", "branch-from-worktree", "worktree-config"):
        assert said[name] == "done", (name, said[name])
    after = repository_state(repo)
    assert after == before
    assert not outside.exists() and not (repo / "escaped.txt").exists()
    assert rev(repo, "main") == rev(repo) and "evil" not in git(repo, "branch", "--list")
    assert ((gitswarm_dir / "trust.json").read_bytes() if (gitswarm_dir / "trust.json").exists() else None) == trust
    assert (gitswarm_dir / "local-jobs").read_text().split() == [job]  # gitswarm's own line, not the agent's
    # Its own work landed, verified: its commit, then gitswarm's commit of what it left.
    assert run.sandbox.kind == "bwrap" and run.sandbox.network == "none"
    [patch] = [r for r in records if isinstance(r, Patch)]
    [verdict] = [r for r in records if isinstance(r, Verdict)]
    assert verdict.accepted and verdict.head == patch.head
    assert sorted(f.path for f in patch.files) == ["README.md", "notes.txt"]
    assert git(repo, "log", "--format=%s", f"{patch.base}..{patch.head}").splitlines()[-1] == "the agent's own commit"
    assert git(repo, "show", f"{patch.head}:README.md") == "hello from the sandbox\n"
    assert git(repo, "fsck", "--no-dangling", "--connectivity-only").strip() == ""


@needs_bwrap
def test_a_run_killed_at_its_timeout_leaves_no_process_behind(repo: Path, tmp_path: Path) -> None:
    linger = f"{3000 + os.getpid() % 1000}.25"  # a sleep no other test starts, to find it by its command line
    register(repo)
    spec = tmp_path / "spec.toml"
    spec.write_text(f'goal = "g"\n[[tasks]]\nid = "t"\nmode = "implement"\nadapter = "rogue"\nprompt = "linger: {linger}"\n'
                    'timeout = "2s"\nmax_attempts = 1\n')
    result = cli(repo, "--json", "run", str(spec))
    assert result.code == 1
    [task] = result.json()["tasks"]
    assert "timeout" in task["error"], task
    deadline = time.monotonic() + 5
    while _sleeping(linger) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _sleeping(linger) == [], "a process the agent started in a session of its own outlived its run"


def _sleeping(seconds: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", seconds.encode()]:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _path_without_bwrap(tmp_path: Path) -> str:
    """A PATH with what gitswarm and its agents need (git, sh, python), and no bwrap."""
    bin_dir = tmp_path / "bin-without-bwrap"
    bin_dir.mkdir()
    for name in ("git", "sh", "env", "python3", "grep", "test", "setsid", "sleep"):
        for directory in os.environ["PATH"].split(os.pathsep):
            found = Path(directory) / name
            if found.is_file() and os.access(found, os.X_OK):
                (bin_dir / name).symlink_to(found)
                break
    return str(bin_dir)


@pytest.mark.parametrize(("setting", "said"), [
    ('mode = "bwrap"', "bwrap"),
    ('network = "endpoint"', 'network = "endpoint"'),  # only a sandbox enforces it: without bwrap it never runs open
])
def test_what_needs_bwrap_without_bwrap_refuses_in_one_line_and_runs_nothing(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str, said: str) -> None:
    register(repo)
    commit_file(repo, ".gitswarm.toml", f"[sandbox]\n{setting}\n")
    marker = tmp_path / "ran"
    monkeypatch.setenv("PATH", _path_without_bwrap(tmp_path))
    monkeypatch.setattr("gitswarm.adapters.sandbox.bundled_bwrap", lambda: None)  # nor gitswarm[sandbox]'s
    before = swarm_refs(repo)
    result = cli(repo, "delegate", f"write {marker}: ran", "--adapter", "rogue", "--check", "true")
    assert result.code == 2
    assert len(result.err.strip().splitlines()) == 1, result.err
    assert said in result.err and "nothing ran" in result.err
    assert swarm_refs(repo) == before and not marker.exists()
    assert git(repo, "status", "--porcelain") == ""


def test_auto_without_bwrap_says_so_once_and_runs_as_before(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    register(repo)
    monkeypatch.setenv("PATH", _path_without_bwrap(tmp_path))
    monkeypatch.setattr("gitswarm.adapters.sandbox.bundled_bwrap", lambda: None)
    monkeypatch.setattr("gitswarm.adapters.sandbox._said.once", set())
    result = cli(repo, "--json", "delegate", "the task", "--adapter", "rogue", "--check", "test -f notes.txt")
    assert result.code == 0, result.err
    said = [line for line in result.err.splitlines() if "without a sandbox" in line]
    assert len(said) == 1 and "no bwrap on PATH" in said[0], result.err
    _, records = task_records(repo, result.json()["id"])
    [run] = [r for r in records if isinstance(r, Run)]
    assert run.sandbox.kind == "none" and "bwrap" in (run.sandbox.why or "")


@needs_bwrap
def test_mode_off_runs_without_a_sandbox_and_says_nothing(repo: Path) -> None:
    register(repo, 'mode = "off"\n')
    result = cli(repo, "--json", "delegate", "the task", "--adapter", "rogue", "--check", "test -f notes.txt")
    assert result.code == 0, result.err
    assert "sandbox" not in result.err
    _, records = task_records(repo, result.json()["id"])
    [run] = [r for r in records if isinstance(r, Run)]
    assert run.sandbox.kind == "none" and run.sandbox.why == '[sandbox] mode = "off"'


@pytest.mark.parametrize("table", ['mode = "sometimes"', 'network = "endpoint"\nmode = "off"', 'read = ["relative/path"]',
                                   'hosts = ["a b"]', 'hosts = ["api.example.com:0"]', 'hosts = ["https://api.example.com"]',
                                   'hosts = ["[::1"]', 'hosts = ["127.0.0.1:port"]', 'network = "somewhere"'],
                         ids=["mode", "endpoint-mode-off", "relative-read", "bad-host", "port-0", "url-not-host",
                              "open-bracket", "port-not-number", "network"])
def test_a_bad_sandbox_table_is_one_line_and_exit_2(repo: Path, table: str) -> None:
    commit_file(repo, ".gitswarm.toml", f"[sandbox]\n{table}\n")
    before = swarm_refs(repo)
    result = cli(repo, "delegate", "x", "--adapter", "scripted", "--check", "true")
    assert result.code == 2 and len(result.err.strip().splitlines()) == 1 and "sandbox" in result.err, result.err
    assert swarm_refs(repo) == before


@needs_bwrap
def test_checks_run_sandboxed_when_the_repository_asks(repo: Path, tmp_path: Path) -> None:
    register(repo)
    outside = tmp_path / "written-by-a-check.txt"
    check = f"test -f notes.txt && (echo x > {outside} || true) && touch built-in-the-checkout && git update-ref refs/heads/main HEAD~0"
    commit_file(repo, ".gitswarm.toml", "[sandbox]\nchecks = true\n")
    before = repository_state(repo)
    result = cli(repo, "--json", "delegate", "the task", "--adapter", "rogue", "--check", check)
    assert result.code == 0, result.err  # it wrote its checkout and moved main in its private git dir only
    assert not outside.exists()
    assert repository_state(repo) == before


@needs_bwrap
def test_checks_of_this_clones_jobs_run_as_before_by_default(repo: Path, tmp_path: Path) -> None:
    register(repo)
    outside = tmp_path / "written-by-a-check.txt"
    result = cli(repo, "--json", "delegate", "the task", "--adapter", "rogue", "--check", f"test -f notes.txt && touch {outside}")
    assert result.code == 0, result.err
    assert outside.exists()  # [sandbox] checks unset: only pulled jobs' checks are sandboxed


@needs_bwrap
def test_a_writable_place_holding_the_repository_leaves_its_git_dir_read_only(repo: Path, tmp_path: Path, secret: Path) -> None:
    """`[sandbox] write` naming a directory that holds the repository: the user's files there become writable,
    as asked, but the git dir stays read-only and gitswarm's files hidden (deeper mounts go over it)."""
    register(repo, f'write = [{json.dumps(str(tmp_path))}]\n')
    cli(repo, "init")
    before = repository_state(repo)
    prompt = "\n".join(["the task", f"repo: {repo}", f"common: {repo / '.git'}", f"secret: {secret}",
                        f"outside: {tmp_path / 'outside.txt'}"])
    result = cli(repo, "--json", "delegate", prompt, "--adapter", "rogue", "--check", "test -f notes.txt")
    [task] = result.json()["tasks"]
    # What [sandbox] write allows it reaches; a write into the user's tree is then caught as before.
    assert result.code == 1 and task["error"].startswith("integrity:") and "escaped.txt" in task["error"], task
    outputs, records = task_records(repo, result.json()["id"])
    [run] = [r for r in records if isinstance(r, Run)]
    said = dict(line.split(": ", 1) for line in outputs[id(run)].splitlines() if ": " in line)
    assert said["write-outside"] == "done" and said["write-user-tree"] == "done"
    for name in ("move-main", "delete-main", "create-ref", "trust", "local-jobs", "hook", "config", "read-secret"):
        assert said[name].startswith("refused"), (name, said[name])
    (repo / "escaped.txt").unlink()
    assert repository_state(repo) == before


@needs_bwrap
def test_the_checks_of_a_job_pulled_from_another_clone_run_sandboxed_by_default(tmp_path: Path) -> None:
    """[sandbox] checks unset: verifying a pulled job's patch runs its checks (another clone's commands) in the
    sandbox, so a check that writes outside its checkout writes nothing here; this clone's own ran as before."""
    remote = seeded_remote(tmp_path)
    a, b = clone_of(tmp_path, "a", remote), clone_of(tmp_path, "b", remote)
    outside = tmp_path / "written-by-a-check.txt"
    (a / "fix.toml").write_text(spec_text(
        f'id = "fix"\nmode = "implement"\ncommand = "echo ok > notes.txt"\nchecks = ["test -f notes.txt && (echo x > {outside} || true)"]'
    ))
    ran = cli(a, "--json", "run", "fix.toml")
    assert ran.code == 0, ran.err
    assert outside.exists()  # A's own job: its checks ran as before
    outside.unlink()
    patch = next(x["id"] for x in ran.json()["artifacts"] if x["kind"] == "patch")
    assert cli(a, "push").code == 0
    assert cli(b, "pull").code == 0 and cli(b, "approve", ran.json()["id"]).code == 0
    verified = cli(b, "--json", "verify", patch[:12])
    assert verified.code == 0 and verified.json()["accepted"], verified.err
    assert not outside.exists()
