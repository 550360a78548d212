"""Git hooks: install thin shims that call back into gitswarm, and what they do when called.

Install respects `core.hooksPath` (git's own `--git-path hooks`) and keeps a
hook that was already there running: it is moved aside to
`<hook>.gitswarm-saved`, and the shim runs it first. Uninstall removes the
shim and moves the saved hook back, so the hooks directory is exactly as it
was. Shims are recognised by their marker line; nothing else is touched.
"""

from __future__ import annotations

import fnmatch
import os
import stat
import sys
from pathlib import Path

from gitswarm.engine.audit import accepted_on
from gitswarm.engine.config import load_config
from gitswarm.engine.push_gate import gated
from gitswarm.engine.swarm import Swarm
from gitswarm.engine.verify import nothing_to_check
from gitswarm.model.errors import BadInput
from gitswarm.model.spec import toml_string
from gitswarm.store.gitcli import git

HOOKS = ("post-commit", "pre-push")
MARKER = "# gitswarm hook shim"
SAVED = ".gitswarm-saved"
_PACKAGE = Path(__file__).resolve().parent.parent
SHIM_DIRS = (_PACKAGE / "shipped_hooks", _PACKAGE.parent / "hooks")


def hooks_dir(swarm: Swarm) -> Path:
    """Where git runs hooks from here: core.hooksPath if set, else the repository's hooks/."""
    workdir = swarm.repo.workdir or swarm.repo.common_dir
    path = Path(git(["rev-parse", "--git-path", "hooks"], workdir).decode().strip())
    return path if path.is_absolute() else (workdir / path).resolve()


def _shim(name: str) -> str:
    for directory in SHIM_DIRS:
        if (directory / name).is_file():
            text = (directory / name).read_text()
            executable = Path(sys.executable).with_name("gitswarm")
            if executable.is_file():  # the shim calls the gitswarm that installed it
                text = text.replace('GITSWARM="${GITSWARM:-gitswarm}"', f'GITSWARM="${{GITSWARM:-{executable}}}"')
            return text
    raise BadInput(f"the {name} hook shim is missing from this installation")


def is_shim(path: Path) -> bool:
    try:
        return MARKER in path.read_text(errors="replace")
    except OSError:
        return False


def install(swarm: Swarm) -> dict:
    directory = hooks_dir(swarm)
    directory.mkdir(parents=True, exist_ok=True)
    done = {}
    for name in HOOKS:
        target, saved = directory / name, directory / (name + SAVED)
        if is_shim(target):
            done[name] = "already installed"
            continue
        if target.exists() or target.is_symlink():
            if saved.exists() or saved.is_symlink():
                raise BadInput(f"{saved} exists already: move it away before installing")
            target.rename(saved)
            done[name] = f"installed; the existing hook runs first ({saved.name})"
        else:
            done[name] = "installed"
        target.write_text(_shim(name))
        target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    audit = load_config(swarm.repo.workdir).audit
    warnings = [] if audit.checks or audit.auditor else [nothing_to_check("the post-commit audits")]
    return {"hooks_dir": str(directory), "hooks": done, "warnings": warnings}


def uninstall(swarm: Swarm) -> dict:
    directory = hooks_dir(swarm)
    done = {}
    for name in HOOKS:
        target, saved = directory / name, directory / (name + SAVED)
        if not is_shim(target):
            done[name] = "not installed" if not target.exists() else "not ours: left alone"
            continue
        target.unlink()
        if saved.exists() or saved.is_symlink():
            saved.rename(target)
            done[name] = "removed; the previous hook is back"
        else:
            done[name] = "removed"
    return {"hooks_dir": str(directory), "hooks": done}


def post_commit(swarm: Swarm, commit: str | None = None, branch: str | None = None) -> str | None:
    """Queue an audit job for the commit just made when its branch is one the configuration
    names; its id. The shim passes the commit and branch it saw (it runs this in the
    background, when HEAD may have moved on); the caller then works the job.
    """
    if commit is None:
        commit, branch = swarm.repo.resolve("HEAD"), (swarm.repo.head_branch() or "").removeprefix("refs/heads/")
    patterns = load_config(swarm.repo.workdir).hooks.audit_branches
    if commit is None or not branch or not any(fnmatch.fnmatchcase(branch, p) for p in patterns):
        return None
    commit = swarm.repo.resolve(commit)
    if commit is None:
        return None
    # The task runs `gitswarm audit`, found next to the Python running this.
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    # The branch name came in as an argument: quoted as a TOML string, whatever it holds.
    spec = (
        f"goal = {toml_string(f'audit {commit[:12]} on {branch}')}\n"
        f'[[tasks]]\nid = "audit"\ncommand = ["gitswarm", "audit", {toml_string(commit)}]\nmax_attempts = 1\n'
    )
    return swarm.submit_text(spec, "post-commit")


def pre_push(swarm: Swarm, lines: list[str]) -> list[str]:
    """The refusals for a push: one line per branch that must be verified and is not."""
    patterns = load_config(swarm.repo.workdir).hooks.verified_branches
    return [
        f"gitswarm: refusing to push {branch}: its head {commit[:12]} has no accepted verdict that counts here "
        f"(run `gitswarm audit {commit[:12]}`, or push with --no-verify)"
        for branch, commit in gated(lines, patterns)
        if not accepted_on(swarm, commit)
    ]
