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
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from gitswarm.engine.config import load_config
from gitswarm.engine.delegation.verify import nothing_to_check
from gitswarm.engine.sharing.audit import accepted_on
from gitswarm.engine.sharing.push_gate import gated
from gitswarm.engine.swarm import Swarm
from gitswarm.model.audit_names import branch_of, goal_for, looks_like_audit, source_for
from gitswarm.model.errors import BadInput, InvalidTransition
from gitswarm.model.spec import toml_string
from gitswarm.store.locks import held
from gitswarm.store.repoconfig import git_path

HOOKS = ("post-commit", "pre-push")
MARKER = "# gitswarm hook shim"
SAVED = ".gitswarm-saved"
_PACKAGE = Path(__file__).resolve().parents[2]  # gitswarm/
SHIM_DIRS = (_PACKAGE / "shipped_hooks", _PACKAGE.parent / "hooks")


def hooks_dir(swarm: Swarm) -> Path:
    """Where git runs hooks from here: core.hooksPath if set, else the repository's hooks/."""
    workdir = swarm.repo.workdir or swarm.repo.common_dir
    return git_path(workdir, "hooks")


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
    names; its id, or None when nothing is to be audited. The shim passes the commit and branch
    it saw (it runs this in the background, when HEAD may have moved on); the caller then works
    the job.

    Audits coalesce to the newest commit of each branch: when the branch has moved on past
    COMMIT, its tip is audited instead; nothing is queued when an audit of that commit, or of a
    newer one, is already queued, running or done, or when COMMIT is no longer on the branch
    (amended, reset); audits of the branch that are queued and not started are cancelled as
    superseded. Three quick commits make one test run, not three.
    """
    if commit is None:
        commit, branch = swarm.repo.resolve("HEAD"), (swarm.repo.head_branch() or "").removeprefix("refs/heads/")
    patterns = load_config(swarm.repo.workdir).hooks.audit_branches
    if commit is None or not branch or not any(fnmatch.fnmatchcase(branch, p) for p in patterns):
        return None
    commit = swarm.repo.resolve(commit)
    if commit is None:
        return None
    with _post_commit_lock(swarm.repo.common_dir):  # two hooks at once would both queue the same audit
        swarm.index.refresh(swarm.refs)  # what the hook that held the lock before queued
        target = _newest_on(swarm, commit, branch)
        if target is None:
            return None
        audits = branch_audits(swarm, branch)
        if any(a.status != "cancelled" and swarm.repo.is_ancestor(target, a.commit) for a in audits):
            return None
        for audit in audits:
            if audit.status == "queued" and not audit.started:
                try:
                    swarm.cancel(audit.job, f"superseded by the audit of {target[:12]}")
                except InvalidTransition:  # its worker took it and finished it meanwhile
                    pass
        # The task runs `gitswarm audit`, found next to the Python running this.
        os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        # The branch name came in as an argument: quoted as a TOML string, whatever it holds.
        spec = (
            f"goal = {toml_string(goal_for(target, branch))}\n"
            f'[[tasks]]\nid = "audit"\ncommand = ["gitswarm", "audit", {toml_string(target)}]\nmax_attempts = 1\n'
        )
        return swarm.submit_text(spec, source_for(branch))


@dataclass(frozen=True)
class BranchAudit:
    job: str
    commit: str
    status: str  # the job's
    started: bool  # its task was ever leased


def branch_audits(swarm: Swarm, branch: str) -> list[BranchAudit]:
    """The post-commit audit jobs this clone queued for `branch` whose commit is here."""
    local = swarm.ledger.trust.local_jobs()
    found = []
    for job in swarm.index.jobs():
        if job["id"] not in local or not looks_like_audit(job["goal"]) or not job["goal"].endswith(f" on {branch}"):
            continue
        snapshot = swarm.refs.snapshot(job["id"], swarm.index.job_tip(job["id"]))
        command = snapshot.task("audit").spec.command if branch_of(snapshot.job.source) == branch else None
        if isinstance(command, (list, tuple)) and len(command) == 3 and swarm.repo.has_object(command[2]):
            found.append(BranchAudit(job["id"], command[2], job["status"], snapshot.state.claims > 0))
    return found


def _newest_on(swarm: Swarm, commit: str, branch: str) -> str | None:
    """The commit to audit for a commit made on `branch`: the branch's tip when it has moved on
    past it, None when the commit is no longer on the branch."""
    tip = swarm.repo.resolve(f"refs/heads/{branch}")
    if tip is None or tip == commit:
        return commit
    return tip if swarm.repo.is_ancestor(commit, tip) else None


def _post_commit_lock(common_dir: Path) -> AbstractContextManager[None]:
    """Post-commit hooks of one repository decide what to queue one at a time."""
    return held(common_dir / "gitswarm" / "post-commit.lock")


def pre_push(swarm: Swarm, lines: list[str]) -> list[str]:
    """The refusals for a push: one line per branch that must be verified and is not."""
    patterns = load_config(swarm.repo.workdir).hooks.verified_branches
    return [
        f"gitswarm: refusing to push {branch}: its head {commit[:12]} has no accepted verdict that counts here "
        f"(run `gitswarm audit {commit[:12]}`, or push with --no-verify)"
        for branch, commit in gated(lines, patterns)
        if not accepted_on(swarm, commit)
    ]
