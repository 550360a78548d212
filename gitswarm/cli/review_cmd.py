"""`audit`, `review` and `hooks install|uninstall|run`: verdicts on commits, and the git hooks."""

import sys
from typing import Annotated

import typer

from gitswarm.cli import render
from gitswarm.cli.context import _ctx
from gitswarm.cli.groups import group
from gitswarm.model.errors import EXIT_FAILED, BadInput

# No `from __future__ import annotations`: typer reads these annotations at start-up.

hooks_app = group("Git hooks that trigger audits.")


def audit(
    ctx: typer.Context,
    rev: Annotated[str, typer.Argument(metavar="[REV]", help="The commit to audit.")] = "HEAD",
    check: Annotated[list[str] | None, typer.Option("--check", help="A check command (repeatable); default: [audit] checks of .gitswarm.toml.")] = None,
    adapter: Annotated[str | None, typer.Option("--adapter", help="An auditor adapter; default: [audit] auditor.")] = None,
) -> None:
    """Run the checks (and auditor) on a clean checkout of REV and note the verdict on it; exit 0 iff accepted."""
    from gitswarm.engine.sharing.audit import audit as run_audit  # deferred: see the note in app.py

    c = _ctx(ctx)
    data = run_audit(c.swarm(), rev, check, adapter)
    c.output.result(
        data,
        lambda d: f"{d['commit'][:12]}: {'accepted' if d['accepted'] else 'REJECTED'} ({d['verdict']}, {d['reviewer']})" + render.failed_checks(d["checks"]),
    )
    if not data.accepted:
        raise typer.Exit(EXIT_FAILED)


def review(
    ctx: typer.Context,
    target: Annotated[str, typer.Argument(metavar="PATCH|FINDING|REV", help="A patch, finding or decision artifact id (prefix), or a commit.")],
    accept: Annotated[bool, typer.Option("--accept", help="Accept it.")] = False,
    reject: Annotated[bool, typer.Option("--reject", help="Reject it.")] = False,
    note: Annotated[str | None, typer.Option("--note", help="Why.")] = None,
) -> None:
    """Add your verdict on a patch's head, a finding or decision (noted on its job's base), or a commit."""
    from gitswarm.engine.sharing.audit import review as add_review  # deferred: see the note in app.py

    if accept == reject:
        raise BadInput("review: give exactly one of --accept or --reject")
    c = _ctx(ctx)
    data = add_review(c.swarm(), target, accept, note)
    c.output.result(data, lambda d: f"{d['commit'][:12]}: {'accepted' if d['accepted'] else 'rejected'} by {d['reviewer']}")


@hooks_app.command("install")
def hooks_install(ctx: typer.Context) -> None:
    """Install the post-commit and pre-push shims (existing hooks keep running first)."""
    from gitswarm.engine.sharing import hooks  # deferred: see the note in app.py

    c = _ctx(ctx)
    data = hooks.install(c.swarm())
    for warning in data["warnings"]:
        c.output.info(f"gitswarm: warning: {warning}")
    c.output.result(data, _hooks_text)


@hooks_app.command("uninstall")
def hooks_uninstall(ctx: typer.Context) -> None:
    """Remove the shims and put back the hooks that were there before."""
    from gitswarm.engine.sharing import hooks  # deferred: see the note in app.py

    c = _ctx(ctx)
    c.output.result(hooks.uninstall(c.swarm()), _hooks_text)


@hooks_app.command("run", hidden=True)
def hooks_run(
    ctx: typer.Context,
    hook: Annotated[str, typer.Argument(metavar="HOOK", help="post-commit or pre-push")],
    args: Annotated[list[str] | None, typer.Argument(metavar="[ARGS]...", help="What git passed the hook.")] = None,
) -> None:
    """What the shims call."""
    from gitswarm.engine.sharing import hooks  # deferred: see the note in app.py

    c = _ctx(ctx)
    swarm = c.swarm(create=hook == "post-commit")  # pre-push only reads: a push from a read-only clone is checked too
    if hook == "post-commit":
        from gitswarm.engine.jobs import run as run_engine  # deferred: the pre-push path must not pay for workers
        from gitswarm.engine.jobs.supervisor import WorkOptions

        commit, branch = (list(args or ()) + [None, None])[:2]
        job = hooks.post_commit(swarm, commit, branch or "")
        if job is not None:
            run_engine.work(swarm, WorkOptions(workers=1, job=job), lambda event: None)
        return
    if hook == "pre-push":
        refused = hooks.pre_push(swarm, sys.stdin.read().splitlines())
        for line in refused:
            c.output.info(line)
        if refused:
            raise typer.Exit(EXIT_FAILED)
        return
    raise BadInput(f"unknown hook {hook!r} (post-commit or pre-push)")


def _hooks_text(d: dict) -> str:
    return "\n".join(f"{name}: {what}" for name, what in d["hooks"].items()) + f"\n(in {d['hooks_dir']})"
