"""Shared fixtures: every test runs in real git repositories under tmp_path, with
HOME, the git config and the author/committer identity isolated from the machine."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

from gitswarm.cli.boundary import invoke
from gitswarm.engine.swarm import Swarm


def isolation_env(home: Path) -> dict[str, str]:
    """The variables that keep a test off the real home, git config and identity; writes home/.gitconfig."""
    gitconfig = home / ".gitconfig"
    gitconfig.write_text("[init]\n\tdefaultBranch = main\n")
    return {
        "HOME": str(home),
        "XDG_STATE_HOME": str(home / ".local" / "state"),  # where delegation worktrees go by default
        "GIT_CONFIG_GLOBAL": str(gitconfig),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Test Author",
        "GIT_AUTHOR_EMAIL": "author@example.com",
        "GIT_COMMITTER_NAME": "Test Committer",
        "GIT_COMMITTER_EMAIL": "committer@example.com",
        "GIT_TERMINAL_PROMPT": "0",
    }


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("home")
    for key, value in isolation_env(home).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("GIT_DIR", raising=False)
    monkeypatch.delenv("GIT_WORK_TREE", raising=False)
    monkeypatch.delenv("GITSWARM_WORKTREE_ROOT", raising=False)
    for sized in ("COLUMNS", "LINES"):  # pytest-xdist's workers set them; output width is each test's own choice
        monkeypatch.delenv(sized, raising=False)
    return home


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A fresh git repository with one commit."""
    return repo_at(tmp_path / "repo")


def repo_at(path: Path) -> Path:
    """A git repository made at PATH with one commit (README.md)."""
    path.mkdir()
    git(path, "init", "-q")
    (path / "README.md").write_text("hello\n")
    git(path, "add", "README.md")
    git(path, "commit", "-qm", "initial")
    return path


@pytest.fixture
def swarm(repo: Path) -> Iterator[Swarm]:
    s = Swarm(repo)
    yield s
    s.close()


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> object:
        return json.loads(self.out)


def ok(result: Result) -> Result:
    """RESULT, after asserting that its command exited 0 (saying what it printed if not)."""
    assert result.code == 0, f"exit {result.code}\nstdout: {result.out}\nstderr: {result.err}"
    return result


def cli(cwd: Path, *args: str) -> Result:
    """Run the real CLI (argument parsing, commands, error boundary) in-process."""
    out, err = io.StringIO(), io.StringIO()
    old = Path.cwd()
    os.chdir(cwd)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = invoke(list(args))
            sys.stdout.flush()
    finally:
        os.chdir(old)
    return Result(code, out.getvalue(), err.getvalue())


def swarm_refs(path: Path) -> str:
    """Every ref under refs/swarm with its target: compare before and after to prove nothing was written."""
    return git(path, "for-each-ref", "refs/swarm", "refs/notes")


def spec_text(*tasks: str, goal: str = "test goal", defaults: str = "") -> str:
    """A job spec from task bodies, e.g. spec_text('id = "a"\\ncommand = "true"')."""
    head = f'goal = "{goal}"\n' + (f"[defaults]\n{defaults}\n" if defaults else "")
    return head + "".join(f"[[tasks]]\n{body}\n" for body in tasks)


FAKES = Path(__file__).parent / "fakes" / "bin"


@pytest.fixture
def fake_clis(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put the fake agent CLIs (tests/fakes/bin: claude, codex, gemini, aider, hermes, omp) first on PATH."""
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ.get('PATH', '')}")
    return FAKES


def rev(path: Path, name: str = "HEAD") -> str:
    return git(path, "rev-parse", name).strip()


def commit_file(repo: Path, name: str, text: str, message: str = "change") -> str:
    """Write, add and commit one file; the new HEAD."""
    path = repo / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    git(repo, "add", name)
    git(repo, "commit", "-qm", message)
    return rev(repo)


def swarm_note_lines(repo: Path, commit: str) -> list[dict]:
    """Every record line of COMMIT's note under refs/notes/swarm, decoded as stored; [] when it has none."""
    out = subprocess.run(["git", "notes", "--ref=swarm", "show", commit], cwd=repo, check=False, capture_output=True, text=True)
    return [json.loads(line) for line in out.stdout.splitlines()] if out.returncode == 0 else []


def swarm_note(repo: Path, commit: str) -> list[dict]:
    """The verdicts of COMMIT's note, oldest first (seals left out); [] when it has none.

    (The note keeps its lines sorted as text, so they are put back in time order here.)"""
    lines = [n for n in swarm_note_lines(repo, commit) if n.get("kind") == "verdict"]
    return sorted(lines, key=lambda n: n["created"])


# -- remotes and clones ----------------------------------------------------------------------------


def bare_remote(root: Path, name: str = "remote.git") -> Path:
    """An empty bare repository under ROOT, to push to and pull from."""
    path = root / name
    git(root, "init", "-q", "--bare", str(path))
    return path


def seeded_remote(root: Path, files: dict[str, str] | None = None, name: str = "remote.git") -> Path:
    """A bare remote whose main has one commit of FILES (by default a README), made in ROOT/seed."""
    seed = root / "seed"
    seed.mkdir()
    git(seed, "init", "-q")
    for rel, text in (files or {"README.md": "hello\n"}).items():
        (seed / rel).write_text(text)
        git(seed, "add", rel)
    git(seed, "commit", "-qm", "initial")
    path = root / name
    git(root, "clone", "-q", "--bare", str(seed), str(path))
    return path


def clone_of(root: Path, name: str, remote: Path) -> Path:
    """`git clone REMOTE ROOT/NAME`: a clone sharing the remote's history, `origin` pointing at it."""
    path = root / name
    git(root, "clone", "-q", str(remote), str(path))
    return path


def clone_with_own_history(root: Path, name: str, remote: Path, readme: str | None = None) -> Path:
    """A repository with one commit of its own (README.md: README, by default NAME) and `origin` at REMOTE."""
    path = root / name
    path.mkdir()
    git(path, "init", "-q")
    (path / "README.md").write_text(readme if readme is not None else f"{name}\n")
    git(path, "add", "README.md")
    git(path, "commit", "-qm", f"initial {name}")
    git(path, "remote", "add", "origin", str(remote))
    return path


def register_scripted(repo: Path) -> Path:
    """Register the scripted agent as adapter `scripted`, committed so the user's tree starts clean."""
    spec = f'executable = {json.dumps(sys.executable)}\nargs = ["-m", "gitswarm.scripted_agent", "{{prompt}}"]\n'
    commit_file(repo, ".gitswarm/adapters/scripted.toml", spec, "register the scripted agent")
    return repo


def dumps_dir(repo: Path, tmp_path: Path) -> Path:
    """A directory outside the repository that sandboxed agents may write (`[sandbox] write` in its
    .gitswarm.toml, committed): for the fakes' `dump-env: PATH`, which reports what an agent saw into a
    file the test reads. Everywhere else the sandbox refuses such a write (docs/sandbox.md)."""
    place = tmp_path / "dumps"
    place.mkdir(exist_ok=True)
    config = repo / ".gitswarm.toml"
    text = config.read_text() if config.is_file() else ""
    commit_file(repo, ".gitswarm.toml", text + f"\n[sandbox]\nwrite = [{json.dumps(str(place))}]\n", "agents may write the dumps")
    return place


def sandbox_off(repo: Path) -> None:
    """`[sandbox] mode = "off"` in the repository's .gitswarm.toml, committed: for the tests of what gitswarm
    detects where agents run without a sandbox (engine/delegation/integrity.py), which need the escape to happen."""
    config = repo / ".gitswarm.toml"
    text = config.read_text() if config.is_file() else ""
    commit_file(repo, ".gitswarm.toml", text + '\n[sandbox]\nmode = "off"\n', "agents run without a sandbox")


def has_bwrap() -> bool:
    """Whether this machine has a bwrap that makes sandboxes (tests that need one skip without it, saying so)."""
    from gitswarm.adapters.sandbox import find_bwrap  # deferred: only the sandbox tests ask

    return find_bwrap(os.environ.get("PATH"))[0] is not None
